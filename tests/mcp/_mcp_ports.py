"""Ports for the MCP HTTP servers the tests start as subprocesses."""

from __future__ import annotations

import asyncio
import socket


def free_port() -> int:
    """A localhost port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def wait_for_port(
    port: int, proc: asyncio.subprocess.Process, tries: int = 600, address: str = "127.0.0.1"
) -> None:
    """Return once something listens on ``port`` of ``address`` (a loopback address); fail
    if ``proc`` exits first or nothing listens after ``tries`` tenths of a second."""
    for _ in range(tries):
        assert proc.returncode is None, "the server exited"
        try:
            _, writer = await asyncio.open_connection(address, port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise AssertionError(f"nothing listens on port {port}")
