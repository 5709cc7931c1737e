"""The MCP HTTP transport's bearer token: demanded off loopback, checked on every request."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from _mcp_ports import free_port, wait_for_port
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import timestone
from timestone.errors import InvalidInput
from timestone.mcp_server import build_server, check_exposure, http_app, is_loopback

COMMAND = str(Path(sys.executable).parent / "timestone")
TOKEN = "s3cret-token-for-the-test-0123456789"
HELLO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "auth-test", "version": "1"},
    },
}


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    env.update(TIMESTONE_DATA_DIR=str(data_dir), **extra)
    return env


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LocalHost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("memory.example.org", False),
    ],
)
def test_only_loopback_addresses_count_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    if loopback:
        assert check_exposure(host, None) is None
    else:
        with pytest.raises(InvalidInput, match=f"on {host} without a token"):
            check_exposure(host, None)
        assert check_exposure(host, TOKEN) == TOKEN


@pytest.mark.parametrize("token", ["short", "sixteen chars ok", "x" * 15, "tökén-tökén-tökén"])
def test_weak_or_unsendable_tokens_are_refused(token: str) -> None:
    with pytest.raises(InvalidInput, match="at least 16 printable ASCII characters"):
        check_exposure("0.0.0.0", token)


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_serving_beyond_loopback_without_a_token_refuses_to_start(
    tmp_path: Path, host: str
) -> None:
    port = free_port()
    serve = [COMMAND, "serve", "mcp", "--transport", "http", "--any-group"]
    proc = subprocess.run(
        [*serve, "--host", host, "--port", str(port)],
        env=_env(tmp_path, TIMESTONE_MCP_TOKEN=""),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert f"refusing to serve MCP over HTTP on {host} without a token" in proc.stderr
    assert "TIMESTONE_MCP_TOKEN" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "pg").exists()  # it stopped before starting anything


async def test_a_token_is_demanded_of_every_request(data_dir: Path, dsn: str, group: str) -> None:
    del dsn  # keeps the embedded server up for the subprocess
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        *(COMMAND, "serve", "mcp", "--transport", "http", "--port", str(port)),
        env=_env(data_dir, TIMESTONE_GROUP=group, TIMESTONE_MCP_TOKEN=TOKEN),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        await wait_for_port(port, proc)
        headers = {"Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(timeout=30) as http:
            for given in (None, "Bearer wrong", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", TOKEN):
                sent = headers if given is None else {**headers, "Authorization": given}
                refused = await http.post(url, json=HELLO, headers=sent)
                assert refused.status_code == 401, (given, refused.text)
                assert refused.headers["www-authenticate"].startswith("Bearer ")

        authorized = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with (
            authorized,
            Client(streamable_http_client(url, http_client=authorized)) as client,
        ):
            status = await client.call_tool("status", {})
            assert not status.is_error, status.content
            assert status.structured_content is not None
            assert status.structured_content["group_id"] == group
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), timeout=60)
    assert proc.stderr is not None
    said = (await proc.stderr.read()).decode()
    assert "bearer token required" in said
    assert TOKEN not in said


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20"])
def test_the_http_app_beyond_loopback_needs_a_token_in_python_too(host: str) -> None:
    """``http_app`` and ``run_http`` apply the rule the command line applies: a server
    built without a token serves loopback only."""

    async def never() -> timestone.AsyncMemory:
        raise AssertionError("no memory is opened to build the app")

    open_server = build_server(never, group_id=None)
    with pytest.raises(InvalidInput, match=f"refusing to serve MCP over HTTP on {host}"):
        http_app(open_server, host=host)
    assert http_app(open_server, host="127.0.0.1") is not None
    assert http_app(build_server(never, group_id=None, token=TOKEN), host=host) is not None
