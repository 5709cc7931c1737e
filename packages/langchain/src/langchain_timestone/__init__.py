"""Timestone for LangChain."""
