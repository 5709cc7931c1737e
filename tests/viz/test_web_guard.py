"""The web view's guard: Host and Origin on every route, the token by header or cookie."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

import timestone
from timestone.errors import InvalidGroup, InvalidInput
from timestone.viz.web import make_server

TOKEN = "view-token-for-the-test-0123456789"
ROUTES = ("/", "/api/graph", "/api/moments", "/timeline?entity=Mira", "/nowhere")


def _request(
    address: str, port: int, path: str, headers: list[tuple[str, str]], method: str = "GET"
) -> tuple[int, dict[str, str], str]:
    """A request (GET) with exactly ``headers`` (Host included: none is added)."""
    conn = http.client.HTTPConnection(address, port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers:
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        conn.close()


def _serve(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def guarded(memory: timestone.Memory, group: str) -> Iterator[ThreadingHTTPServer]:
    memory.add_facts(
        group,
        [{"source": "Mira", "relation": "VISITS", "target": "Lyon"}],
        reference_time=datetime.fromisoformat("2020-01-01T00:00:00+00:00"),
    )
    yield from _serve(make_server(memory, group, port=0, token=TOKEN))


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
def test_a_foreign_host_is_refused_on_every_route(
    memory: timestone.Memory, group: str, bind: str, address: str, own: str
) -> None:
    for server in _serve(make_server(memory, group, host=bind, port=0)):
        port = server.server_port
        for path in ROUTES:
            for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.nip.io"):
                status, _, body = _request(address, port, path, [("Host", host)])
                assert status == 421, (path, host, status, body)
                assert "not a name of this server" in body
            status, _, _ = _request(address, port, path, [])
            assert status == 421, (path, "no Host")
            status, _, _ = _request(
                address, port, path, [("Host", f"{own}:{port}"), ("Host", "attacker.example")]
            )
            assert status == 421, (path, "two Hosts")
            foreign = [("Host", f"{own}:{port}"), ("Origin", "http://attacker.example")]
            status, _, _ = _request(address, port, path, foreign)
            assert status == 403, (path, "foreign Origin")
        ok = [("Host", f"{own}:{port}"), ("Origin", f"http://{own}:{port}")]
        status, _, body = _request(address, port, "/api/graph", ok)
        assert status == 200, body
        for name in ("localhost", f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
            assert _request(address, port, "/api/moments", [("Host", name)])[0] == 200, name


def test_allowed_hosts_are_answered(memory: timestone.Memory, group: str) -> None:
    server = make_server(memory, group, port=0, allow_hosts=["Memory.Example.org"])
    for served in _serve(server):
        port = served.server_port
        proxied = [("Host", "memory.example.org"), ("Origin", "https://memory.example.org")]
        assert _request("127.0.0.1", port, "/api/graph", proxied)[0] == 200
        assert _request("127.0.0.1", port, "/api/graph", [("Host", "example.org")])[0] == 421
    with pytest.raises(InvalidInput, match="--allow-host takes a host name"):
        make_server(memory, group, port=0, allow_hosts=["https://memory.example.org/"])


def test_the_token_is_asked_of_every_request(guarded: ThreadingHTTPServer) -> None:
    port, host = guarded.server_port, ("Host", f"127.0.0.1:{guarded.server_port}")
    for path in ROUTES:
        status, headers, body = _request("127.0.0.1", port, path, [host])
        assert status == 401, path
        assert headers["WWW-Authenticate"].startswith("Bearer")
        assert "?token=" in body
    for wrong in ("Bearer wrong", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", TOKEN):
        assert _request("127.0.0.1", port, "/api/graph", [host, ("Authorization", wrong)])[0] == 401
    bearer = ("Authorization", f"Bearer {TOKEN}")
    status, _, body = _request("127.0.0.1", port, "/api/graph", [host, bearer])
    assert status == 200
    assert [e["relation"] for e in json.loads(body)["edges"]] == ["VISITS"]
    # the token does not open the door to a foreign Host
    assert (
        _request("127.0.0.1", port, "/api/graph", [("Host", "attacker.example"), bearer])[0] == 421
    )


def test_a_browser_brings_the_token_once_then_a_cookie(guarded: ThreadingHTTPServer) -> None:
    port, host = guarded.server_port, ("Host", f"127.0.0.1:{guarded.server_port}")
    assert _request("127.0.0.1", port, "/?token=wrong-token-0123456789", [host])[0] == 401

    status, headers, _ = _request("127.0.0.1", port, f"/?token={TOKEN}&as_of=2024-05-01", [host])
    assert status == 303
    assert headers["Location"] == "/?as_of=2024-05-01"  # the token is dropped from the address
    cookie = headers["Set-Cookie"]
    attributes = [a.strip() for a in cookie.split(";")]
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attributes)
    assert TOKEN not in cookie
    pair = attributes[0]

    status, _, page = _request("127.0.0.1", port, "/?as_of=2024-05-01", [host, ("Cookie", pair)])
    assert status == 200
    assert 'type="range"' in page
    assert _request("127.0.0.1", port, "/api/graph", [host, ("Cookie", pair)])[0] == 200
    name, _, value = pair.partition("=")
    forged = f"{name}={value[:-1]}0" if not value.endswith("0") else f"{name}={value[:-1]}1"
    assert _request("127.0.0.1", port, "/api/graph", [host, ("Cookie", forged)])[0] == 401
    assert (
        _request("127.0.0.1", port, "/api/graph", [host, ("Cookie", f"{name}={TOKEN}")])[0] == 401
    )


def test_off_loopback_without_a_token_is_refused_before_binding(
    memory: timestone.Memory, group: str
) -> None:
    for host in ("0.0.0.0", "::", "192.168.1.20"):
        with pytest.raises(InvalidInput, match=f"refusing to serve the web view on {host}"):
            make_server(memory, group, host=host, port=0)


def test_the_command_refuses_a_bind_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    env["TIMESTONE_DATA_DIR"] = str(tmp_path)
    command = str(Path(sys.executable).parent / "timestone")
    proc = subprocess.run(
        [command, "ui", "--host", "0.0.0.0", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert "refusing to serve the web view on 0.0.0.0 without a token" in proc.stderr
    assert "TIMESTONE_UI_TOKEN" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "pg").exists()  # it stopped before starting anything
    proc = subprocess.run(
        [command, "ui", "--allow-host", "memory.example.org:443"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert "--allow-host takes a host name or address" in proc.stderr
    assert not (tmp_path / "pg").exists()


def test_every_method_meets_the_guard_and_only_get_reads(guarded: ThreadingHTTPServer) -> None:
    port, host = guarded.server_port, ("Host", f"127.0.0.1:{guarded.server_port}")
    bearer = ("Authorization", f"Bearer {TOKEN}")
    for method in ("HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
        assert _request("127.0.0.1", port, "/", [("Host", "attacker.example")], method)[0] == 421
        foreign = [host, ("Origin", "http://attacker.example"), bearer]
        assert _request("127.0.0.1", port, "/api/graph", foreign, method)[0] == 403
        assert _request("127.0.0.1", port, "/api/graph", [host], method)[0] == 401
        status, headers, _ = _request("127.0.0.1", port, "/api/graph", [host, bearer], method)
        assert (status, headers["Allow"]) == (405, "GET"), method


@pytest.mark.parametrize("path", ["//attacker.example", "/\\attacker.example", "//x/y"])
def test_signing_in_sends_the_browser_back_to_this_site(
    guarded: ThreadingHTTPServer, path: str
) -> None:
    port, host = guarded.server_port, ("Host", f"127.0.0.1:{guarded.server_port}")
    status, headers, _ = _request("127.0.0.1", port, f"{path}?token={TOKEN}", [host])
    assert status == 303
    back = headers["Location"]  # a path of this site: not //host, nor /\host
    assert back.startswith("/"), back
    assert not back.startswith(("//", "/\\")), back


def test_the_group_of_the_page_is_checked(memory: timestone.Memory) -> None:
    for group in ("</script><script>alert(1)</script>", "", "a b"):
        with pytest.raises(InvalidGroup):
            make_server(memory, group, port=0)
