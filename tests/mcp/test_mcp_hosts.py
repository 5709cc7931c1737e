"""The MCP HTTP server's Host and Origin check, on every route and every loopback spelling
(a web page that rebinds its domain name to 127.0.0.1 must not reach the memory)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
import uvicorn
from _mcp_ports import free_port, wait_for_port

from timestone import AsyncMemory
from timestone._local_server import check_allowed_host
from timestone.errors import InvalidInput
from timestone.mcp_server import build_server, check_exposure, http_app, is_loopback

COMMAND = str(Path(sys.executable).parent / "timestone")
TOKEN = "s3cret-token-for-the-host-test-0123456789"
HELLO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "host-test", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    env.update(TIMESTONE_DATA_DIR=str(data_dir), **extra)
    return env


@asynccontextmanager
async def _in_process(bind: str, port: int) -> AsyncGenerator[None]:
    """The HTTP app ``serve mcp`` runs (``http_app``), served by uvicorn in this process on
    ``bind``; no call reaches the memory."""

    async def no_memory() -> AsyncMemory:
        raise AssertionError("the test reached the memory")

    app = http_app(build_server(no_memory, group_id="g"), host=bind)
    server = uvicorn.Server(uvicorn.Config(app, host=bind, port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(600):
            if server.started or task.done():
                break
            await asyncio.sleep(0.1)
        assert server.started, "the server did not start"
        yield
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=60)


@asynccontextmanager
async def _server(
    data_dir: Path, bind: str, address: str, *extra: str, token: str = ""
) -> AsyncGenerator[int]:
    """``serve mcp --transport http`` on ``bind`` over the tests' data dir (its embedded
    server already runs); yields the port once it listens."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        *(COMMAND, "serve", "mcp", "--transport", "http", "--any-group"),
        *("--host", bind, "--port", str(port), *extra),
        env=_env(data_dir, TIMESTONE_MCP_TOKEN=token),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_for_port(port, proc, tries=3000, address=address)
        yield port
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), timeout=60)


@pytest.mark.parametrize(
    "host",
    ["127.0.0.2", "LOCALHOST", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "127.1", "[::1]"],
)
def test_every_spelling_of_loopback_is_loopback(host: str) -> None:
    assert is_loopback(host)
    assert check_exposure(host, None) is None


@pytest.mark.parametrize(
    ("bind", "address", "own"),
    [
        ("127.0.0.1", "127.0.0.1", "127.0.0.1"),
        ("127.0.0.2", "127.0.0.2", "127.0.0.2"),
        ("LOCALHOST", "127.0.0.1", "localhost"),
        ("::1", "::1", "[::1]"),
        ("0:0:0:0:0:0:0:1", "::1", "[::1]"),
    ],
)
async def test_a_foreign_host_is_refused_on_every_route(bind: str, address: str, own: str) -> None:
    base = f"http://{address if ':' not in address else f'[{address}]'}"
    port = free_port()
    async with _in_process(bind, port), httpx2.AsyncClient(timeout=30) as http:
        url = f"{base}:{port}"
        for host in ("attacker.example", f"attacker.example:{port}"):
            refused = await http.post(url + "/mcp", json=HELLO, headers={**ACCEPT, "Host": host})
            assert refused.status_code == 421, (host, refused.text)
            for path in ("/", "/mcp", "/.well-known/oauth-protected-resource", "/nowhere"):
                got = await http.get(url + path, headers={**ACCEPT, "Host": host})
                assert got.status_code == 421, (path, host, got.status_code)
        own_host = {**ACCEPT, "Host": f"{own}:{port}"}
        foreign = {**own_host, "Origin": "http://attacker.example"}
        assert (await http.post(url + "/mcp", json=HELLO, headers=foreign)).status_code == 403
        same = {**own_host, "Origin": f"http://{own}:{port}"}
        answered = await http.post(url + "/mcp", json=HELLO, headers=same)
        assert answered.status_code == 200, answered.text
        assert "timestone" in answered.text


async def test_the_command_checks_the_token_and_the_allowed_hosts(data_dir: Path, dsn: str) -> None:
    del dsn  # keeps the embedded server up for the subprocess
    allow = ("--allow-host", "memory.example.org", "--allow-host", "mcp.example.net")
    async with (
        _server(data_dir, "127.0.0.2", "127.0.0.2", *allow, token=TOKEN) as port,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        url = f"http://127.0.0.2:{port}/mcp"
        bearer = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
        forged = await http.post(url, json=HELLO, headers={**bearer, "Host": "attacker.example"})
        assert forged.status_code == 421  # the token does not make a foreign Host welcome
        proxied = {"Host": "memory.example.org", "Origin": "https://memory.example.org"}
        without = await http.post(url, json=HELLO, headers={**ACCEPT, **proxied})
        assert without.status_code == 401
        for name in ("memory.example.org", "MCP.example.net", f"127.0.0.2:{port}"):
            answered = await http.post(url, json=HELLO, headers={**bearer, "Host": name})
            assert answered.status_code == 200, (name, answered.text)


def test_a_malformed_allowed_host_is_refused(tmp_path: Path) -> None:
    for bad in ("https://memory.example.org", "memory.example.org:443", "a b", "x/y"):
        with pytest.raises(InvalidInput, match="--allow-host takes a host name or address"):
            check_allowed_host(bad)
    assert check_allowed_host("Memory.Example.org.") == "memory.example.org"
    assert check_allowed_host("[0:0:0:0:0:0:0:1]") == "::1"
    for bad in ("https://memory.example.org",):
        proc = subprocess.run(
            [COMMAND, "serve", "mcp", "--transport", "http", "--allow-host", bad],
            env=_env(tmp_path, TIMESTONE_GROUP="g"),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 3, proc.stderr
        assert "--allow-host takes a host name or address" in proc.stderr
        assert "Traceback" not in proc.stderr
    with pytest.raises(InvalidInput, match=r"on ::ffff:10\.0\.0\.1 without a token"):
        check_exposure("::ffff:10.0.0.1", None)
