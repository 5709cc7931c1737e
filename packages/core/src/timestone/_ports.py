"""The TCP port a server of Timestone listens on (MCP over HTTP, the web view)."""

from __future__ import annotations

from .errors import InvalidInput

__all__ = ["check_port_number"]


def check_port_number(port: object) -> int:
    """A TCP port, 0 (any free one) to 65535; anything else is refused by name (the socket
    module would raise a bare ``OverflowError``)."""
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65_535:
        raise InvalidInput(f"port must be an integer from 0 to 65535, got {port!r:.80}")
    return port
