"""The page of ``timestone ui``: one self-contained HTML file (``__GROUP__`` is replaced).

The slider steps through the recorded moments (``/api/moments``); its last step is
"now". The address bar carries the moment shown (``?as_of=``). Edge labels are placed
along their edge where they cover no node, no node name and no other label; the page
writes what it drew, with the boxes of names and labels, into ``<pre id="layout">``.
"""

from __future__ import annotations

__all__ = ["PAGE"]

PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Timestone</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; }
header { padding: 12px 20px; border-bottom: 1px solid #ddd; display: flex; gap: 18px;
  align-items: center; }
header h1 { font-size: 18px; margin: 0; }
#slider { flex: 1; }
#when { font-variant-numeric: tabular-nums; min-width: 330px; }
svg { display: block; width: 100vw; height: calc(100vh - 60px); }
.edge { stroke: #999; stroke-width: 1.4; }
.edge-label { font-size: 10px; fill: #666; paint-order: stroke; stroke: #fff;
  stroke-width: 3px; stroke-linejoin: round; }
.node circle { fill: #2f6fb1; stroke: #fff; stroke-width: 2; cursor: pointer; }
.node text { font-size: 12px; fill: #222; pointer-events: none; paint-order: stroke;
  stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
#layout { display: none; }
</style></head><body>
<header><h1>Timestone</h1><span id="group"></span>
<input id="slider" type="range" min="0" max="0" value="0" aria-label="as of">
<span id="when">now</span></header>
<svg id="graph"></svg>
<pre id="layout"></pre>
<script>
const GROUP = __GROUP__;
document.getElementById('group').textContent = 'group ' + GROUP;
const svg = document.getElementById('graph');
const slider = document.getElementById('slider');
const when = document.getElementById('when');
let moments = [], asOf = new URLSearchParams(location.search).get('as_of'), timer = null;
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
      const f = (d - 160) * 0.02; a.fx += dx / d * f * d; a.fy += dy / d * f * d;
      b.fx -= dx / d * f * d; b.fy -= dy / d * f * d;
    });
    nodes.forEach(n => {
      n.fx += (w / 2 - n.x) * 0.01; n.fy += (h / 2 - n.y) * 0.01;
      n.x += Math.max(-10, Math.min(10, n.fx * 0.1));
      n.y += Math.max(-10, Math.min(10, n.fy * 0.1));
      n.x = Math.max(40, Math.min(w - 160, n.x)); n.y = Math.max(30, Math.min(h - 30, n.y));
    });
  }
  return byId;
}
function box(b, pad) {
  return {x: b.x - pad, y: b.y - pad, w: b.width + 2 * pad, h: b.height + 2 * pad};
}
function overlap(a, b) {
  const w = Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x);
  const h = Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y);
  return w > 0 && h > 0 ? w * h : 0;
}
// Where the label of the edge a-b goes: the first spot along the edge (middle first, then
// towards either end, on the line or beside it) that covers no node, name or label.
function place(label, a, b, taken, w, h) {
  const size = label.getBBox(), dx = b.x - a.x, dy = b.y - a.y;
  const len = Math.sqrt(dx * dx + dy * dy) || 1, nx = -dy / len, ny = dx / len;
  let best = null;
  for (const t of [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8]) {
    for (const s of [0, -1, 1, -2, 2, -3, 3]) {
      const cx = a.x + dx * t + nx * s * 12, cy = a.y + dy * t + ny * s * 12;
      const spot = {x: cx - size.width / 2 - 2, y: cy - size.height / 2 - 1,
        w: size.width + 4, h: size.height + 2};
      let cost = taken.reduce((sum, o) => sum + overlap(spot, o), 0);
      if (spot.x < 0 || spot.y < 0 || spot.x + spot.w > w || spot.y + spot.h > h) cost += 1e6;
      if (best === null || cost < best.cost) best = {cost, cx, cy, spot};
      if (cost === 0) break;
    }
    if (best.cost === 0) break;
  }
  label.setAttribute('x', best.cx);
  label.setAttribute('y', best.cy - size.y - size.height / 2);
  return best.spot;
}
function draw(g) {
  const w = svg.clientWidth || 1000, h = svg.clientHeight || 700;
  svg.replaceChildren();
  const edgeLayer = el('g', {}), nodeLayer = el('g', {}), labelLayer = el('g', {});
  svg.append(edgeLayer, nodeLayer, labelLayer);
  const byId = layout(g.nodes, g.edges, w, h);
  const taken = [], report = {as_of: g.as_of, nodes: [], labels: []};
  g.nodes.forEach(n => {
    const grp = el('g', {class: 'node', 'data-name': n.name});
    const c = el('circle', {cx: n.x, cy: n.y, r: 9});
    const t = el('text', {x: n.x + 12, y: n.y + 4}); t.textContent = n.name;
    grp.append(c, t);
    grp.addEventListener('click', () => window.open('/timeline?entity=' +
      encodeURIComponent(n.name), '_blank'));
    nodeLayer.appendChild(grp);
    const boxes = [box(c.getBBox(), 2), box(t.getBBox(), 1)];
    taken.push(...boxes); report.nodes.push({name: n.name, boxes});
  });
  g.edges.forEach(e => {
    const a = byId[e.source], b = byId[e.target];
    const line = el('line', {class: 'edge', x1: a.x, y1: a.y, x2: b.x, y2: b.y});
    const t = el('title', {}); t.textContent = e.fact + ' (since ' + e.valid_at.slice(0, 10) + ')';
    line.appendChild(t); edgeLayer.appendChild(line);
    const label = el('text', {class: 'edge-label', 'text-anchor': 'middle', x: 0, y: 0});
    label.textContent = e.relation; labelLayer.appendChild(label);
    const spot = place(label, a, b, taken, w, h);
    taken.push(spot); report.labels.push({relation: e.relation, box: spot});
  });
  svg.dataset.nodes = g.nodes.length; svg.dataset.edges = g.edges.length;
  document.getElementById('layout').textContent = JSON.stringify(report);
}
function show(text) {
  const i = Number(slider.value);
  const step = moments.length ? ' (write ' + (i + 1) + ' of ' + moments.length + ')' : '';
  when.textContent = asOf ? 'as of ' + text + step : 'now' + step;
}
async function refresh() {
  const r = await fetch('/api/graph' + (asOf ? '?as_of=' + encodeURIComponent(asOf) : ''));
  const g = await r.json();
  if (!r.ok) { when.textContent = g.error; return; }
  show(g.as_of ? g.as_of.replace('T', ' ').replace('Z', ' UTC') : '');
  draw(g);
  svg.dataset.asOf = g.as_of || 'now';
}
slider.addEventListener('input', () => {
  const i = Number(slider.value);
  asOf = i < Number(slider.max) ? moments[i] : null;
  history.replaceState(null, '', asOf ? '?as_of=' + encodeURIComponent(asOf) : location.pathname);
  clearTimeout(timer); timer = setTimeout(refresh, 120);
});
fetch('/api/moments' + (asOf ? '?as_of=' + encodeURIComponent(asOf) : ''))
  .then(r => r.json()).then(m => {
    moments = m.moments || [];
    slider.max = Math.max(moments.length - 1, 0);
    slider.disabled = moments.length < 2;
    slider.value = asOf && m.index !== null && m.index !== undefined ?
      Math.max(m.index, 0) : slider.max;
    return refresh();
  });
</script></body></html>
"""
