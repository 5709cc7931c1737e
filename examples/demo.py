"""Placeholder demo: replaced by the Mira demo."""
