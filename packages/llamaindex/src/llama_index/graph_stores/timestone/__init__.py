"""Timestone for LlamaIndex."""
