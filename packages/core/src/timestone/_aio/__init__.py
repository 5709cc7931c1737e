"""The implementation, written once, async; ``_sync`` is its generated blocking twin."""
