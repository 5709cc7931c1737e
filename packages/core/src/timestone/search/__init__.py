"""Search: the request, what a question says, the SQL of each scope, fusion, the run, context.

Private: the public API is ``timestone``."""
