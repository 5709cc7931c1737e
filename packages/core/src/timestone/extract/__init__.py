"""Extraction by a model: the calls and their ledger, prompts, answers, cardinality.

Private: the public API is ``timestone``."""
