"""The picture of an entity's time: its facts as bars on a world-time axis.

One lane per relation (and direction). Each fact the graph holds now is a
solid bar from ``valid_at`` to ``invalid_at`` (an open end runs to the right
edge, "now"). Periods of one lane that overlap in world time (two wineries
directed at once, both still open) get rows of their own within the lane, so
no bar hides another. Beliefs the graph held once and superseded (versions with an
``expired_at``) are drawn faintly beneath, so a correction or a backfill is
visible as what the graph used to think. The page is one self-contained HTML
file (inline SVG, no scripts or fonts from anywhere), and carries a small
script that measures where the browser drew each bar, for checks.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from .._records import Fact

__all__ = ["WIDTH", "page_height", "timeline_html", "timeline_svg"]

WIDTH = 1100
LABEL_W = 230
RIGHT_PAD = 30
TOP = 56
BAR_H = 22
GHOST_H = 9
ROW_GAP = 4
LANE_GAP = 16

_PALETTE = ("#2f6fb1", "#c2572b", "#3d8f5a", "#8a5cb8", "#b5892b", "#2b9a9a", "#b83d6b")


@dataclasses.dataclass(frozen=True, slots=True)
class _Lane:
    key: tuple[str, bool]
    label: str
    current: list[list[Fact]]
    ghosts: list[list[Fact]]

    @property
    def height(self) -> int:
        rows = max(len(self.current), 1)
        return rows * BAR_H + (rows - 1) * ROW_GAP + len(self.ghosts) * (GHOST_H + 3)


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _pack(facts: Sequence[Fact], end: datetime) -> list[list[Fact]]:
    """Stack intervals in rows so that no two in a row overlap."""
    rows: list[list[Fact]] = []
    for f in sorted(facts, key=lambda f: (f.valid_at, f.created_at)):
        for row in rows:
            last = row[-1]
            if (last.invalid_at or end) <= f.valid_at:
                row.append(f)
                break
        else:
            rows.append([f])
    return rows


def _lanes(entity: str, facts: Sequence[Fact], end: datetime) -> list[_Lane]:
    by_key: dict[tuple[str, bool], list[Fact]] = {}
    wanted = entity.casefold()
    for f in facts:
        outgoing = f.source.casefold() == wanted or f.target.casefold() != wanted
        by_key.setdefault((f.relation, outgoing), []).append(f)
    lanes: list[_Lane] = []
    for key in sorted(by_key, key=lambda k: (not k[1], k[0])):
        relation, outgoing = key
        items = by_key[key]
        label = f"{relation} →" if outgoing else f"← {relation}"
        lanes.append(
            _Lane(
                key=key,
                label=label,
                current=_pack([f for f in items if f.expired_at is None], end),
                ghosts=_pack([f for f in items if f.expired_at is not None], end),
            )
        )
    return lanes


def _ticks(start: datetime, end: datetime) -> list[datetime]:
    years = end.year - start.year
    step = 1 if years <= 12 else 2 if years <= 24 else 5 if years <= 60 else 10
    ticks: list[datetime] = []
    if years < 2:
        month = datetime(start.year, start.month, 1, tzinfo=UTC)
        while month <= end:
            if month >= start:
                ticks.append(month)
            month = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)
        return ticks
    year = start.year - start.year % step
    while year <= end.year:
        t = datetime(year, 1, 1, tzinfo=UTC)
        if start <= t <= end:
            ticks.append(t)
        year += step
    return ticks


def _span(facts: Sequence[Fact], now: datetime) -> tuple[datetime, datetime]:
    if not facts:
        return now - timedelta(days=365), now + timedelta(days=30)
    first = min(f.valid_at for f in facts)
    last = max([now, *(f.invalid_at for f in facts if f.invalid_at is not None)])
    pad = max((last - first) * 0.04, timedelta(days=20))
    return first - pad, last + pad


def _svg_height(lanes: Sequence[_Lane]) -> int:
    return max(TOP + sum(lane.height + LANE_GAP for lane in lanes) + 40, TOP + 80)


# the page's heading, subtitle and legend above the drawing, and its margins
_PAGE_CHROME = 180


def page_height(entity: str, facts: Sequence[Fact], *, now: datetime | None = None) -> int:
    """The height of the whole ``timeline_html`` page in pixels, for a screenshot of it."""
    return _svg_height(_lanes(entity, facts, now or datetime.now(UTC))) + _PAGE_CHROME


def timeline_svg(entity: str, facts: Sequence[Fact], *, now: datetime | None = None) -> str:
    """The SVG drawing: ``facts`` are every version (``Memory.fact_history``)."""
    now = now or datetime.now(UTC)
    start, end = _span(facts, now)
    plot_w = WIDTH - LABEL_W - RIGHT_PAD
    total = (end - start).total_seconds()

    def x(when: datetime) -> float:
        return round(LABEL_W + plot_w * (when - start).total_seconds() / total, 2)

    lanes = _lanes(entity, facts, now)
    parts: list[str] = []
    y = TOP
    colors: dict[str, str] = {}
    for lane in lanes:
        lane_h = lane.height
        ghost_top = y + lane_h - len(lane.ghosts) * (GHOST_H + 3)
        parts.append(
            f'<g class="lane" data-relation="{_esc(lane.key[0])}">'
            f'<rect class="lane-bg" x="0" y="{y - 6}" width="{WIDTH}" height="{lane_h + 12}"/>'
            f'<text class="lane-label" x="{LABEL_W - 12}" y="{y + BAR_H / 2 + 5}" '
            f'text-anchor="end">{_esc(lane.label)}</text>'
        )
        for i, row in enumerate(lane.current):
            for f in row:
                other = f.target if lane.key[1] else f.source
                color = colors.setdefault(other.casefold(), _PALETTE[len(colors) % len(_PALETTE)])
                parts.append(
                    _bar(f, other, x, y + i * (BAR_H + ROW_GAP), BAR_H, color, "current", now)
                )
        for i, row in enumerate(lane.ghosts):
            gy = ghost_top + 3 + i * (GHOST_H + 3)
            for f in row:
                other = f.target if lane.key[1] else f.source
                color = colors.setdefault(other.casefold(), _PALETTE[len(colors) % len(_PALETTE)])
                parts.append(_bar(f, other, x, gy, GHOST_H, color, "superseded", now))
        parts.append("</g>")
        y += lane_h + LANE_GAP
    height = _svg_height(lanes)
    axis: list[str] = [
        f'<line class="axis" x1="{LABEL_W}" y1="{TOP - 14}" x2="{WIDTH - RIGHT_PAD}" '
        f'y2="{TOP - 14}"/>'
    ]
    for t in _ticks(start, end):
        label = str(t.year) if t.month == 1 else t.strftime("%Y-%m")
        axis.append(
            f'<line class="tick" data-date="{t.isoformat()}" x1="{x(t)}" y1="{TOP - 20}" '
            f'x2="{x(t)}" y2="{height - 30}"/>'
            f'<text class="tick-label" x="{x(t)}" y="{TOP - 26}" text-anchor="middle">'
            f"{label}</text>"
        )
    axis.append(
        f'<line class="now" data-date="{now.isoformat()}" x1="{x(now)}" y1="{TOP - 20}" '
        f'x2="{x(now)}" y2="{height - 30}"/>'
        f'<text class="now-label" x="{x(now)}" y="{height - 16}" text-anchor="middle">now</text>'
    )
    if not lanes:
        axis.append(
            f'<text class="empty" x="{WIDTH / 2}" y="{TOP + 40}" text-anchor="middle">'
            "no facts about this entity</text>"
        )
    return (
        f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'data-start="{start.isoformat()}" data-end="{end.isoformat()}">'
        + "".join(axis)
        + "".join(parts)
        + "</svg>"
    )


def _bar(
    f: Fact,
    other: str,
    x: Callable[[datetime], float],
    y: float,
    h: float,
    color: str,
    kind: str,
    now: datetime,
) -> str:
    x0 = x(f.valid_at)
    x1 = x(f.invalid_at or now)
    w = max(x1 - x0, 2.0)
    until = f.invalid_at.isoformat() if f.invalid_at else "now"
    held = f"held {f.created_at.isoformat()} – " + (
        f.expired_at.isoformat() if f.expired_at else "now"
    )
    tip = f"{f.fact}\nvalid {f.valid_at.isoformat()} – {until}\n{held}"
    label = (
        f'<text class="bar-label" x="{x0 + 6:.2f}" y="{y + h / 2 + 4.5:.2f}">{_esc(other)}</text>'
        if kind == "current"
        else ""
    )
    return (
        f'<g class="fact {kind}"><rect class="bar {kind}" x="{x0:.2f}" y="{y:.2f}" '
        f'width="{w:.2f}" height="{h}" rx="3" fill="{color}" '
        f'data-fact-id="{f.id}" data-version-id="{f.version_id}" '
        f'data-valid-at="{f.valid_at.isoformat()}" '
        f'data-invalid-at="{f.invalid_at.isoformat() if f.invalid_at else ""}" '
        f'data-target="{_esc(other)}" data-open="{str(f.invalid_at is None).lower()}">'
        f"<title>{_esc(tip)}</title></rect>{label}</g>"
    )


_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; }
p.sub { color: #666; margin: 0 0 16px; }
svg text { font: 12px system-ui, sans-serif; fill: #333; }
.lane-bg { fill: #f3f3f0; fill-opacity: 0.7; }
.lane-label { font-weight: 600; }
.axis { stroke: #888; }
.tick { stroke: #ddd; stroke-dasharray: 2 3; }
.now { stroke: #d33; stroke-dasharray: 4 3; }
.now-label { fill: #d33; }
.bar.current { opacity: 0.92; }
.bar.superseded { opacity: 0.28; }
.bar-label { fill: #fff; font-weight: 600; pointer-events: none; }
.legend span { display: inline-block; margin-right: 18px; color: #555; }
.legend i { display: inline-block; width: 26px; height: 10px; margin-right: 6px;
  vertical-align: middle; background: #2f6fb1; border-radius: 2px; }
.legend i.faint { opacity: 0.28; height: 6px; }
"""

# Records where the browser drew each bar and tick, for automated checks.
_MEASURE = """
(function () {
  var svg = document.getElementById('timeline');
  var box = svg.getBoundingClientRect();
  var out = {bars: [], ticks: []};
  svg.querySelectorAll('rect.bar').forEach(function (r) {
    var b = r.getBoundingClientRect();
    out.bars.push({fact_id: r.dataset.factId, version_id: r.dataset.versionId,
      kind: r.classList.contains('current') ? 'current' : 'superseded',
      relation: r.closest('g.lane').dataset.relation,
      valid_at: r.dataset.validAt, invalid_at: r.dataset.invalidAt || null,
      left: b.left - box.left, right: b.right - box.left, top: b.top - box.top,
      height: b.height});
  });
  svg.querySelectorAll('line.tick, line.now').forEach(function (l) {
    var b = l.getBoundingClientRect();
    out.ticks.push({date: l.dataset.date, x: b.left - box.left,
      now: l.classList.contains('now')});
  });
  document.getElementById('layout').textContent = JSON.stringify(out);
})();
"""


def timeline_html(
    entity: str,
    facts: Sequence[Fact],
    *,
    now: datetime | None = None,
    title: str | None = None,
    as_of: datetime | None = None,
) -> str:
    """A self-contained HTML page of the entity's timeline."""
    now = now or datetime.now(UTC)
    current = sum(1 for f in facts if f.expired_at is None)
    superseded = len(facts) - current
    held = "held now" if as_of is None else f"held at {as_of.isoformat()}"
    sub = f"{current} fact(s) {held}, {superseded} superseded belief(s) shown faintly"
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_esc(title or entity)} · Timestone timeline</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>{_esc(title or entity)}</h1><p class='sub'>{_esc(sub)}</p>"
        "<p class='legend'><span><i></i>held now</span>"
        "<span><i class='faint'></i>superseded belief</span>"
        "<span style='color:#d33'>┆ now</span></p>"
        + timeline_svg(entity, facts, now=now)
        + "<pre id='layout' hidden></pre>"
        + f"<script>{_MEASURE}</script></body></html>"
    )
