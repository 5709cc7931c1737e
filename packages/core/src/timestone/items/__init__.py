"""Items: JSON documents under a namespace and a key, versioned in system time.

Private: the public API is ``timestone``."""
