"""Timestone for PydanticAI."""
