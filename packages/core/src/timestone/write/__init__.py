"""Writing: ingest, episodes, entities, facts and the date fight, correction, bulk loads.

Private: the public API is ``timestone``."""
