"""Standard input that a signal can end: how ``serve mcp`` over stdio stops cleanly.

The MCP SDK reads stdin in a worker thread, and a thread blocked in ``read``
cannot be interrupted: on Ctrl-C or SIGTERM the server waited for the
client's next line, or its hang-up, before it could stop (and the embedded
Postgres with it). Here fd 0 becomes one end of a socket pair that a daemon
thread feeds from the real stdin; ending it (``shutdown``, which frees no file
descriptor another thread might still use) gives the SDK's reader the end of
its input, and the server stops as it does when a client hangs up.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Generator

__all__ = ["stdin_until_stopped"]


@contextlib.contextmanager
def stdin_until_stopped() -> Generator[Callable[[], None]]:
    """Within the block fd 0 reads the real stdin through a relay; the function given ends
    that input at once (safe to call from a signal handler, and more than once)."""
    try:
        real = os.dup(0)
    except OSError:  # no stdin at all: nothing to relay, nothing to end
        yield lambda: None
        return
    ours, theirs = socket.socketpair()
    os.dup2(theirs.fileno(), 0)
    theirs.close()

    def end() -> None:
        with contextlib.suppress(OSError):
            ours.shutdown(socket.SHUT_WR)

    def relay() -> None:
        try:
            while chunk := os.read(real, 1 << 16):
                ours.sendall(chunk)
        except OSError:
            pass  # ended: the reader is gone
        finally:
            end()

    # Neither ``real`` nor ``ours`` is ever closed: the relay may still be blocked reading
    # or writing them, and a closed number reused by another file would be read instead.
    threading.Thread(target=relay, name="timestone-stdin", daemon=True).start()
    try:
        yield end
    finally:
        end()
        os.dup2(real, 0)
