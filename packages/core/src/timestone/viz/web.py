"""``timestone ui``: a small local web view of one group.

The page draws the graph of the facts in effect (entities as nodes, facts as
labelled edges, laid out by a small force simulation in the page itself, each
label placed clear of the nodes' names) and has an as-of slider that steps
through the recorded moments: the distinct system times at which a write
changed the group's facts. Move it and the graph shows what it held then; the
address bar follows (``?as_of=``), so an as-of view can be shared by its URL.
A click on an entity opens its timeline picture. Everything is served from
this process, on the loopback address by default; the page loads nothing from
anywhere else.

Every request passes the guard of ``timestone._local_server`` first: its Host
must name this server (421 otherwise), its Origin, if any, be this server
(403). With a token, each request carries it as ``Authorization: Bearer``, or
a browser brings it once as ``?token=``: the answer sets it in a cookie
(HttpOnly, SameSite=Strict) and redirects to the same address without it.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import http.cookies
import json
import socket
import socketserver
import urllib.parse
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from psycopg import sql

from .._groups import check_group
from .._local_server import HostGuard, tokens_match, url_host
from .._memory import Memory
from .._time import NOW
from ..errors import InvalidInput, TimestoneError
from ._page import PAGE
from .timeline import timeline_html

__all__ = ["graph_json", "make_server", "moments_json", "serve"]

MAX_FACTS = 1000
MAX_MOMENTS = 2000
"""The slider's steps: the latest recorded moments, at most this many."""

_MOMENTS = sql.SQL(
    "SELECT t FROM (SELECT created_at AS t FROM timestone.facts WHERE group_id = %(g)s"
    " UNION SELECT expired_at FROM timestone.facts"
    " WHERE group_id = %(g)s AND expired_at IS NOT NULL) AS m"
    " ORDER BY t DESC LIMIT %(n)s"
)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def graph_json(mem: Memory, group_id: str, as_of: datetime | None) -> dict[str, Any]:
    """Nodes and edges of the facts in effect, as the graph held them at ``as_of``."""
    facts = mem.facts(group_id, valid_at=NOW, as_of=as_of, limit=MAX_FACTS)
    nodes: dict[str, dict[str, Any]] = {}
    edges: list[dict[str, Any]] = []
    for f in facts:
        for ident, name in ((f.source_id, f.source), (f.target_id, f.target)):
            nodes.setdefault(str(ident), {"id": str(ident), "name": name})
        edges.append(
            {
                "id": str(f.id),
                "source": str(f.source_id),
                "target": str(f.target_id),
                "relation": f.relation,
                "fact": f.fact,
                "valid_at": f.valid_at.isoformat(),
            }
        )
    return {
        "as_of": _iso(as_of) if as_of else None,
        "nodes": list(nodes.values()),
        "edges": edges,
    }


def moments_json(mem: Memory, group_id: str, as_of: datetime | None = None) -> dict[str, Any]:
    """The recorded moments of the group, oldest first: each distinct system time at which a
    write created or superseded facts (the latest ``MAX_MOMENTS``; ``truncated`` says when
    earlier ones were left out). ``index``: the last moment at or before ``as_of`` (-1: none;
    ``None`` without ``as_of``)."""
    with mem.connection(group_id) as conn:
        rows = conn.execute(_MOMENTS, {"g": group_id, "n": MAX_MOMENTS + 1}).fetchall()
    times: list[datetime] = sorted(row["t"] for row in rows[:MAX_MOMENTS])
    index = None if as_of is None else sum(1 for t in times if t <= as_of) - 1
    return {
        "moments": [_iso(t) for t in times],
        "index": index,
        "truncated": len(rows) > MAX_MOMENTS,
    }


def _cookie_value(token: str) -> str:
    """What the cookie holds: a digest of the token, not the token itself."""
    return hmac.new(token.encode(), b"timestone web view", hashlib.sha256).hexdigest()


def _bind_class(host: str) -> type[ThreadingHTTPServer]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True

        def server_bind(self) -> None:
            # HTTPServer.server_bind looks the host's name up (getfqdn); the view needs none
            socketserver.TCPServer.server_bind(self)
            self.server_name, self.server_port = host, int(self.server_address[1])

    return Server


def make_server(
    mem: Memory,
    group_id: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    token: str | None = None,
    allow_hosts: Iterable[str] = (),
) -> ThreadingHTTPServer:
    """The HTTP server of the view, bound (``AddressInUse`` if the port is taken). With
    ``token`` (checked by the caller: ``check_exposure``) every request must carry it."""
    from .._local_server import check_exposure
    from .._ports import check_port_number
    from ..errors import AddressInUse

    check_port_number(port)
    group_id = check_group(group_id)  # every read refuses another; the page shows this one
    bind = host.strip().removeprefix("[").removesuffix("]")
    token = check_exposure(
        bind, token, server="the web view", variable="TIMESTONE_UI_TOKEN", access="read"
    )
    guard = HostGuard.of(bind, allow_hosts)
    handler = _handler(mem, group_id, guard, token)
    try:
        server = _bind_class(bind)((bind, port), handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUse(
                f"port {port} on {host} is already in use; pass another --port"
            ) from exc
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return server


class _Handler(BaseHTTPRequestHandler):
    """A request to the view; ``_handler`` gives it its memory, group, guard and token."""

    mem: Memory
    group_id: str
    guard: HostGuard
    token: str | None = None
    cookie_name = "timestone_view"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(
        self, status: int, body: str, kind: str, headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "frame-ancestors 'none'")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _cookie(self) -> str:
        # cookies are not kept apart by port: one name per port keeps two views apart
        return f"{self.cookie_name}_{getattr(self.server, 'server_port', 0)}"

    def _has_token(self, expected: str) -> bool:
        scheme, _, value = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and tokens_match(value.strip(), expected):
            return True
        jar = http.cookies.SimpleCookie()
        try:
            jar.load(self.headers.get("Cookie", ""))
        except http.cookies.CookieError:
            return False
        held = jar.get(self._cookie())
        return held is not None and tokens_match(held.value, _cookie_value(expected))

    def _token_gate(self, url: urllib.parse.SplitResult) -> bool:
        """Whether the request may go on; when not, the answer has been sent."""
        token = self.token
        if token is None:
            return True
        pairs = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        given = [v for k, v in pairs if k == "token"]
        if given and all(tokens_match(v, token) for v in given):
            rest = urllib.parse.urlencode([(k, v) for k, v in pairs if k != "token"])
            cookie = f"{self._cookie()}={_cookie_value(token)}"
            self._send(
                303,
                "signed in\n",
                "text/plain",
                [
                    ("Location", _same_site(url.path) + ("?" + rest if rest else "")),
                    ("Set-Cookie", f"{cookie}; Path=/; HttpOnly; SameSite=Strict"),
                ],
            )
            return False
        if not given and self._has_token(token):
            return True
        self._send(
            401,
            "this view needs its token: open this address once with ?token=<token> "
            "(a cookie then keeps it), or send 'Authorization: Bearer <token>'\n",
            "text/plain",
            [("WWW-Authenticate", 'Bearer realm="timestone"')],
        )
        return False

    def _admitted(self) -> urllib.parse.SplitResult | None:
        """The request's address when its Host, Origin and token let it in; else None,
        the refusal sent."""
        refused = self.guard.refusal(self.headers.items())
        if refused is not None:
            self._send(refused[0], refused[1] + "\n", "text/plain")
            return None
        url = urllib.parse.urlsplit(self.path)
        return url if self._token_gate(url) else None

    def _reads_only(self) -> None:
        """Any method but GET: refused as any request is (Host, Origin, token), then 405."""
        if self._admitted() is not None:
            self._send(405, "this view only reads: GET\n", "text/plain", [("Allow", "GET")])

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _reads_only

    def do_GET(self) -> None:
        url = self._admitted()
        if url is None:
            return
        query = dict(urllib.parse.parse_qsl(url.query))
        try:
            self._route(url.path, query)
        except TimestoneError as exc:
            self._send(400, json.dumps({"error": str(exc)}), "application/json")

    def _route(self, path: str, query: dict[str, str]) -> None:
        mem, group_id = self.mem, self.group_id
        when = query.get("as_of")
        as_of = _parse(when) if when and path.startswith("/api/") else None
        if path == "/":
            self._send(200, PAGE.replace("__GROUP__", _script_json(group_id)), "text/html")
        elif path == "/api/graph":
            self._send(200, json.dumps(graph_json(mem, group_id, as_of)), "application/json")
        elif path == "/api/moments":
            self._send(200, json.dumps(moments_json(mem, group_id, as_of)), "application/json")
        elif path == "/timeline":
            entity = query.get("entity", "")
            found = mem.get_entity(group_id, entity)
            if found is None:
                self._send(404, f"unknown entity {entity!r}", "text/plain")
                return
            # the entity found may be a near-identical spelling of what was typed (Zoe for
            # Zoë): its history is read by its id, and the page is titled with its name
            history = mem.fact_history(group_id, found.id)
            self._send(200, timeline_html(found.name, history), "text/html")
        else:
            self._send(404, "not found", "text/plain")


def _handler(
    mem: Memory, group_id: str, guard: HostGuard, token: str | None
) -> type[BaseHTTPRequestHandler]:
    attributes = {"mem": mem, "group_id": group_id, "guard": guard, "token": token}
    return type("Handler", (_Handler,), attributes)


def _parse(text: str) -> datetime:
    from .._time import parse_when

    return parse_when(text, "as_of")


def serve(
    mem: Memory,
    group_id: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    token: str | None = None,
    allow_hosts: Iterable[str] = (),
    announce: Callable[[str], object] = print,
) -> None:
    """Serve the view until interrupted."""
    server = make_server(mem, group_id, host=host, port=port, token=token, allow_hosts=allow_hosts)
    where = f"http://{url_host(host.strip())}:{server.server_port}/"
    how = " (token required: open it once with ?token=<token>)" if token else ""
    announce(f"Timestone view of group {group_id!r} on {where}{how}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _script_json(value: str) -> str:
    """``value`` as a JSON string a ``<script>`` holds as data: its ``<``, ``>`` and ``&``
    escaped, so no ``</script>`` in it ends the script."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _same_site(path: str) -> str:
    """A path to send a browser back to on this site: ``//host`` and ``/\\host`` name
    another site (a browser reads both as one), so they go to the root."""
    return path if path.startswith("/") and not path.startswith(("//", "/\\")) else "/"
