"""The graph: the property graph view, its walk and writes, communities.

Private: the public API is ``timestone``."""
