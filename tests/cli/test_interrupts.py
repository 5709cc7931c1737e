"""A command that is not a server, stopped by a signal: no traceback, the shell's exit code."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

COMMAND = str(Path(sys.executable).parent / "timestone")


def _wait_reading_stdin(proc: subprocess.Popen[str]) -> None:
    """Until the command blocks in read(0, ...): past its start-up, where it handles signals."""
    syscall = Path(f"/proc/{proc.pid}/syscall")
    read = {"x86_64": "0", "aarch64": "63"}.get(platform.machine())
    if read is None or not syscall.exists():
        time.sleep(10)  # no way to see it here: a start-up's worth of time
        return
    for _ in range(1200):
        if syscall.read_text().startswith(f"{read} 0x0 "):  # read(0, ...)
            return
        time.sleep(0.05)
    raise AssertionError("the command never waited on its stdin")


def _from_a_terminal() -> None:
    """In the child, before it runs: the stop signals at their defaults, as a command
    started from a terminal has them, whatever this test run inherited (under ``nohup``
    SIGHUP is ignored, in a shell's background job SIGINT; the command keeps an ignored
    signal ignored, as ``test_an_ignored_hangup_stays_ignored`` pins)."""
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, signal.SIG_DFL)


def _ignoring_hangups() -> None:
    _from_a_terminal()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


@pytest.mark.parametrize(
    ("stop", "code"),
    [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)],
    ids=["SIGTERM", "SIGHUP", "SIGINT"],
)
def test_a_signal_interrupts_a_command_cleanly(
    tmp_path: Path, stop: signal.Signals, code: int
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    env["TIMESTONE_DATA_DIR"] = str(tmp_path / "data")
    # `import -` waits for its export on stdin, which stays open
    proc = subprocess.Popen(
        [COMMAND, "import", "-"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_from_a_terminal,
    )
    try:
        _wait_reading_stdin(proc)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(stop)
        assert proc.wait(timeout=30) == code
        assert proc.stderr is not None
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_an_ignored_hangup_stays_ignored(tmp_path: Path) -> None:
    """A command started under ``nohup`` (SIGHUP ignored) outlives a hangup, still
    waiting on its stdin, and stops on SIGTERM as ever."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    env["TIMESTONE_DATA_DIR"] = str(tmp_path / "data")
    proc = subprocess.Popen(
        [COMMAND, "import", "-"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignoring_hangups,
    )
    try:
        _wait_reading_stdin(proc)
        proc.send_signal(signal.SIGHUP)
        time.sleep(1)
        assert proc.poll() is None, proc.communicate()
        _wait_reading_stdin(proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
