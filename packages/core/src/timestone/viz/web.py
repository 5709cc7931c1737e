"""``timestone ui``: a small local web view of one group.

The page draws the graph of the facts in effect (entities as nodes, facts as
labelled edges, laid out by a small force simulation in the page itself) and
has an as-of slider over the graph's system time: move it and the graph shows
what it held at that moment. A click on an entity opens its timeline picture.
Everything is served from this process, on the loopback address by default;
the page loads nothing from anywhere else.
"""

from __future__ import annotations

import errno
import json
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .._memory import Memory
from .._time import NOW
from ..errors import InvalidInput, TimestoneError
from .timeline import timeline_html

__all__ = ["graph_json", "make_server", "serve"]

MAX_FACTS = 1000


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
        "as_of": as_of.isoformat() if as_of else None,
        "nodes": list(nodes.values()),
        "edges": edges,
    }


def _range(mem: Memory, group_id: str) -> dict[str, str]:
    episodes = mem.episodes(group_id, limit=1000)
    now = datetime.now(UTC)
    first = min((e.created_at for e in episodes), default=now)
    return {"first": first.isoformat(), "now": now.isoformat()}


def make_server(
    mem: Memory, group_id: str, *, host: str = "127.0.0.1", port: int = 8766
) -> ThreadingHTTPServer:
    """The HTTP server of the view, bound (``AddressInUse`` if the port is taken)."""
    from .._ports import check_port_number
    from ..errors import AddressInUse

    check_port_number(port)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, body: str, kind: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", f"{kind}; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            try:
                if url.path == "/":
                    self._send(200, _PAGE.replace("__GROUP__", json.dumps(group_id)), "text/html")
                elif url.path == "/api/graph":
                    when = query.get("as_of")
                    as_of = _parse(when) if when else None
                    self._send(
                        200, json.dumps(graph_json(mem, group_id, as_of)), "application/json"
                    )
                elif url.path == "/api/range":
                    self._send(200, json.dumps(_range(mem, group_id)), "application/json")
                elif url.path == "/timeline":
                    entity = query.get("entity", "")
                    if mem.get_entity(group_id, entity) is None:
                        self._send(404, f"unknown entity {entity!r}", "text/plain")
                        return
                    history = mem.fact_history(group_id, entity)
                    self._send(200, timeline_html(entity, history), "text/html")
                else:
                    self._send(404, "not found", "text/plain")
            except TimestoneError as exc:
                self._send(400, json.dumps({"error": str(exc)}), "application/json")

    try:
        return ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUse(
                f"port {port} on {host} is already in use; pass another --port"
            ) from exc
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror}") from exc


def _parse(text: str) -> datetime:
    from .._time import parse_when

    return parse_when(text, "as_of")


def serve(
    mem: Memory,
    group_id: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    announce: Callable[[str], object] = print,
) -> None:
    """Serve the view until interrupted."""
    server = make_server(mem, group_id, host=host, port=port)
    announce(f"Timestone view of group {group_id!r} on http://{host}:{server.server_port}/")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Timestone</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; }
header { padding: 12px 20px; border-bottom: 1px solid #ddd; display: flex; gap: 18px;
  align-items: center; }
header h1 { font-size: 18px; margin: 0; }
#slider { flex: 1; }
#when { font-variant-numeric: tabular-nums; min-width: 250px; }
svg { display: block; width: 100vw; height: calc(100vh - 60px); }
.edge { stroke: #999; stroke-width: 1.4; }
.edge-label { font-size: 10px; fill: #777; }
.node circle { fill: #2f6fb1; stroke: #fff; stroke-width: 2; cursor: pointer; }
.node text { font-size: 12px; fill: #222; pointer-events: none; }
</style></head><body>
<header><h1>Timestone</h1><span id="group"></span>
<input id="slider" type="range" min="0" max="1000" value="1000" aria-label="as of">
<span id="when">now</span></header>
<svg id="graph"></svg>
<script>
const GROUP = __GROUP__;
document.getElementById('group').textContent = 'group ' + GROUP;
const svg = document.getElementById('graph');
const slider = document.getElementById('slider');
const when = document.getElementById('when');
let range = null, timer = null;
function el(name, attrs) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}
function layout(nodes, edges, w, h) {
  const byId = {};
  nodes.forEach((n, i) => {
    const a = 2 * Math.PI * i / Math.max(nodes.length, 1);
    n.x = w / 2 + Math.cos(a) * w / 4; n.y = h / 2 + Math.sin(a) * h / 4;
    byId[n.id] = n;
  });
  for (let step = 0; step < 300; step++) {
    nodes.forEach(n => { n.fx = 0; n.fy = 0; });
    for (let i = 0; i < nodes.length; i++) for (let j = i + 1; j < nodes.length; j++) {
      const a = nodes[i], b = nodes[j];
      let dx = a.x - b.x, dy = a.y - b.y, d2 = dx * dx + dy * dy + 0.01;
      const f = 6000 / d2; a.fx += dx * f; a.fy += dy * f; b.fx -= dx * f; b.fy -= dy * f;
    }
    edges.forEach(e => {
      const a = byId[e.source], b = byId[e.target];
      const dx = b.x - a.x, dy = b.y - a.y, d = Math.sqrt(dx * dx + dy * dy) + 0.01;
      const f = (d - 140) * 0.02; a.fx += dx / d * f * d; a.fy += dy / d * f * d;
      b.fx -= dx / d * f * d; b.fy -= dy / d * f * d;
    });
    nodes.forEach(n => {
      n.fx += (w / 2 - n.x) * 0.01; n.fy += (h / 2 - n.y) * 0.01;
      n.x += Math.max(-10, Math.min(10, n.fx * 0.1));
      n.y += Math.max(-10, Math.min(10, n.fy * 0.1));
      n.x = Math.max(40, Math.min(w - 40, n.x)); n.y = Math.max(30, Math.min(h - 30, n.y));
    });
  }
  return byId;
}
function draw(g) {
  const w = svg.clientWidth || 1000, h = svg.clientHeight || 700;
  svg.replaceChildren();
  const byId = layout(g.nodes, g.edges, w, h);
  const seen = {};
  g.edges.forEach(e => {
    const a = byId[e.source], b = byId[e.target];
    const pair = [e.source, e.target].sort().join('|');
    const k = seen[pair] = (seen[pair] || 0) + 1;
    const line = el('line', {class: 'edge', x1: a.x, y1: a.y, x2: b.x, y2: b.y});
    const t = el('title', {}); t.textContent = e.fact + ' (since ' + e.valid_at.slice(0, 10) + ')';
    line.appendChild(t); svg.appendChild(line);
    const label = el('text', {class: 'edge-label', x: (a.x + b.x) / 2,
      y: (a.y + b.y) / 2 - 3 + (k - 1) * 12, 'text-anchor': 'middle'});
    label.textContent = e.relation; svg.appendChild(label);
  });
  g.nodes.forEach(n => {
    const grp = el('g', {class: 'node', 'data-name': n.name});
    grp.appendChild(el('circle', {cx: n.x, cy: n.y, r: 9}));
    const t = el('text', {x: n.x + 12, y: n.y + 4}); t.textContent = n.name;
    grp.appendChild(t);
    grp.addEventListener('click', () => window.open('/timeline?entity=' +
      encodeURIComponent(n.name), '_blank'));
    svg.appendChild(grp);
  });
  svg.dataset.nodes = g.nodes.length; svg.dataset.edges = g.edges.length;
}
function pointInTime() {
  if (!range || slider.value === slider.max) return null;
  const a = Date.parse(range.first), b = Date.parse(range.now);
  return new Date(a + (b - a) * slider.value / slider.max).toISOString();
}
async function refresh() {
  const t = pointInTime();
  when.textContent = t ? 'as of ' + t.replace('T', ' ').slice(0, 19) + ' UTC' : 'now';
  const r = await fetch('/api/graph' + (t ? '?as_of=' + encodeURIComponent(t) : ''));
  draw(await r.json());
}
slider.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(refresh, 120); });
fetch('/api/range').then(r => r.json()).then(r => { range = r; refresh(); });
</script></body></html>
"""
