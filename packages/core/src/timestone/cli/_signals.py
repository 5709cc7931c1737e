"""Stop signals: SIGTERM and SIGHUP end the command as Ctrl-C (SIGINT) does.

Python's default for SIGTERM and SIGHUP is to die on the spot: no ``finally``
block, no exit handler runs, so the embedded Postgres the process started (an
exit handler stops it when its last user leaves) kept running. Here each of
them is turned into a SIGINT: whatever takes Ctrl-C takes it too, with the
same graceful stop (asyncio cancels the running task and lets its threads
finish, uvicorn shuts its server down), then ``KeyboardInterrupt`` unwinds the
stack, the store closes and the exit handlers run. A signal the process was
started ignoring (``nohup`` ignores SIGHUP) stays ignored.

A server that has a gentler way to stop takes the signals over with
``stop_by``: the first stop signal, Ctrl-C included, calls its stop function
(``serve mcp`` over stdio ends its input, as a client that hangs up does), and
a second one interrupts.

A server (``serve mcp``, ``ui``) that a signal stops has done what it was asked,
and exits 0; any other command a signal interrupts exits 128 + the signal's
number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP), as shells report it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Generator
from types import FrameType
from typing import Any

__all__ = ["STOP_SIGNALS", "exit_code", "serving", "stop_by", "stop_on_signals"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []
_serving: list[bool] = []
_stoppers: list[Callable[[], None]] = []


def _stop(signum: int, frame: FrameType | None) -> None:
    del frame
    _received.append(signum)
    if _stoppers and len(_received) == 1:
        for stop in _stoppers:
            stop()
        return
    if signum != signal.SIGINT and callable(signal.getsignal(signal.SIGINT)):
        signal.raise_signal(signal.SIGINT)  # its handler runs as soon as this one returns
    else:  # SIGINT ignored: interrupt here
        raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def stop_on_signals() -> Generator[None]:
    """SIGTERM and SIGHUP act as SIGINT in the main thread while the block runs."""
    _received.clear()
    _serving.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {
        sig: signal.signal(sig, _stop)
        for sig in STOP_SIGNALS
        if signal.getsignal(sig) == signal.SIG_DFL
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def stop_by(stop: Callable[[], None]) -> Generator[None]:
    """While the block runs, the first SIGINT, SIGTERM or SIGHUP calls ``stop`` (from the
    signal handler: it must be quick and must not block); a second one interrupts."""
    _stoppers.append(stop)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _stop) if main else None
    try:
        yield
    finally:
        _stoppers.remove(stop)
        if main:
            signal.signal(signal.SIGINT, previous)


def serving() -> None:
    """Mark the command as a server: a stop signal ends it with exit code 0."""
    _serving.append(True)


def exit_code(code: int) -> int:
    """The command's exit code, given the one it ended with (130: a KeyboardInterrupt)."""
    signum = _received[0] if _received else (signal.SIGINT if code == 130 else None)
    if signum is None:
        return code
    return 0 if _serving else 128 + int(signum)
