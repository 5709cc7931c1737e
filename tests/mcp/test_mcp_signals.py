"""`timestone serve mcp` stopped by SIGTERM or SIGHUP, as a service manager or a closed
terminal stops it: the process exits 0, and the embedded Postgres it started stops with it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _mcp_ports import free_port, wait_for_port
from mcp import Client

COMMAND = str(Path(sys.executable).parent / "timestone")


@pytest.fixture(scope="module")
def own_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir no other process uses: the server started in it is the command's alone."""
    return tmp_path_factory.mktemp("signals-data")


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    env["TIMESTONE_DATA_DIR"] = str(data_dir)
    return env


def _postmaster(data_dir: Path) -> int:
    """The pid of the embedded server running in ``data_dir`` (first line of postmaster.pid)."""
    pid_file = data_dir / "pg" / "postmaster.pid"
    assert pid_file.exists(), "the command did not start the embedded server"
    return int(pid_file.read_text().split()[0])


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():  # a zombie waiting for its parent to reap it has stopped
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


async def _gone(pid: int) -> bool:
    for _ in range(100):
        if not _running(pid):
            return True
        await asyncio.sleep(0.1)
    return False


async def _line(stream: asyncio.StreamReader | None) -> dict[str, Any]:
    assert stream is not None
    raw = await asyncio.wait_for(stream.readline(), timeout=120)
    assert raw, "the server closed its output"
    return json.loads(raw)


async def _send(proc: asyncio.subprocess.Process, message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
    await proc.stdin.drain()


async def _stdio_serving(proc: asyncio.subprocess.Process) -> None:
    """The MCP handshake, then one tool call: the store is open when it answers."""
    hello: dict[str, Any] = {"protocolVersion": "2025-06-18", "capabilities": {}}
    hello["clientInfo"] = {"name": "signal-test", "version": "1"}
    await _send(proc, {"id": 1, "method": "initialize", "params": hello})
    assert "result" in await _line(proc.stdout)
    await _send(proc, {"method": "notifications/initialized"})
    await _status(proc, 2)


async def _status(proc: asyncio.subprocess.Process, call: int) -> None:
    await _send(proc, {"id": call, "method": "tools/call", "params": {"name": "status"}})
    answer = await _line(proc.stdout)
    assert answer["result"]["isError"] is False, answer


def _from_a_terminal() -> None:
    """In the child, before it runs: the stop signals at their defaults, as a server
    started from a terminal or a service manager has them, whatever this test run
    inherited (under ``nohup`` SIGHUP is ignored, in a shell's background job SIGINT)."""
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, signal.SIG_DFL)


async def _start(data_dir: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *(COMMAND, "serve", "mcp", *args),
        env=_env(data_dir),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=_from_a_terminal,
    )


async def _stop(proc: asyncio.subprocess.Process, stop: signal.Signals) -> None:
    """Send ``stop`` with stdin still open: the server must stop on the signal, not because
    its client hung up; it exits 0 without a traceback."""
    proc.send_signal(stop)
    code = await asyncio.wait_for(proc.wait(), timeout=60)
    assert proc.stderr is not None
    err = (await proc.stderr.read()).decode()
    assert code == 0, err
    assert "Traceback" not in err


async def _http_serving(proc: asyncio.subprocess.Process, port: int) -> None:
    await wait_for_port(port, proc)
    async with Client(f"http://127.0.0.1:{port}/mcp") as client:
        status = await client.call_tool("status", {})
        assert not status.is_error, status.content


@pytest.fixture
async def stopped_cleanly(own_data_dir: Path) -> AsyncIterator[list[int]]:
    """Kills, after the test, whatever the test could not stop with its signal."""
    started: list[int] = []
    yield started
    for pid in started:
        if _running(pid):
            os.kill(pid, signal.SIGKILL)
    if (own_data_dir / "pg" / "postmaster.pid").exists():
        leftover = _postmaster(own_data_dir)
        if _running(leftover):
            os.kill(leftover, signal.SIGQUIT)


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize(
    "stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["SIGTERM", "SIGHUP", "SIGINT"]
)
async def test_a_stop_signal_ends_the_server_and_its_embedded_postgres(
    own_data_dir: Path, stopped_cleanly: list[int], transport: str, stop: signal.Signals
) -> None:
    port = free_port()
    args = ["--transport", "http", "--port", str(port)] if transport == "http" else []
    proc = await _start(own_data_dir, *args)
    stopped_cleanly.append(proc.pid)
    if transport == "http":
        await _http_serving(proc, port)
    else:
        await _stdio_serving(proc)
    postmaster = _postmaster(own_data_dir)
    assert _running(postmaster)

    await _stop(proc, stop)
    assert await _gone(postmaster), f"the embedded server {postmaster} outlived the command"
    assert not (own_data_dir / "pg" / "postmaster.pid").exists()


async def test_the_embedded_server_stops_when_its_last_user_leaves(
    own_data_dir: Path, stopped_cleanly: list[int]
) -> None:
    first, second = await _start(own_data_dir), await _start(own_data_dir)
    stopped_cleanly.extend([first.pid, second.pid])
    await _stdio_serving(first)
    await _stdio_serving(second)
    postmaster = _postmaster(own_data_dir)

    await _stop(first, signal.SIGTERM)
    assert _running(postmaster), "the server stopped under a process still using it"
    await _status(second, 3)  # and it still serves

    await _stop(second, signal.SIGTERM)
    assert await _gone(postmaster), f"the embedded server {postmaster} outlived its last user"
