"""The timeline picture, rendered by a real headless Chromium: bars sit where the dates say."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import timestone
from timestone.viz.browser import dump_dom

MIRA = Path(__file__).parents[1] / "cli" / "mira.jsonl"
ONE = ("DIRECTS", "WORKS_AT", "WORKS_WITH_GRAPE")


def _mira(memory: timestone.Memory, group: str) -> None:
    for line in MIRA.read_text().splitlines():
        episode = json.loads(line)
        memory.add_facts(
            group,
            episode["facts"],
            reference_time=datetime.fromisoformat(episode["reference_time"]),
            name=episode["name"],
        )


def _x_of(when: datetime, ticks: list[tuple[datetime, float]]) -> float:
    """Where the browser's own axis puts ``when``: between its two nearest drawn ticks."""
    (t0, x0), (t1, x1) = ticks[0], ticks[-1]
    return x0 + (x1 - x0) * (when - t0).total_seconds() / (t1 - t0).total_seconds()


def _render(data_dir: Path, group: str, tmp_path: Path) -> tuple[bytes, dict[str, Any]]:
    """``timestone timeline Mira --html --png``: the PNG, and where Chromium drew each bar."""
    page, png = tmp_path / "mira.html", tmp_path / "mira.png"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    env.update(TIMESTONE_DATA_DIR=str(data_dir), TIMESTONE_GROUP=group)
    command = str(Path(sys.executable).parent / "timestone")
    proc = subprocess.run(
        [command, "timeline", "Mira", "--html", str(page), "--png", str(png)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    dom = dump_dom(page)
    found = re.search(r'<pre id="layout"[^>]*>(.*?)</pre>', dom, re.S)
    assert found is not None, "the page's script did not run"
    return png.read_bytes(), json.loads(found.group(1))


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_the_timeline_renders_with_bars_at_their_dates(
    chromium: str, data_dir: Path, dsn: str, group: str, tmp_path: Path
) -> None:
    del chromium
    onto = timestone.Ontology(edge_types=[timestone.EdgeType(n, cardinality="one") for n in ONE])
    with timestone.Memory.open(dsn, ontology=onto) as memory:
        _mira(memory, group)
    data, layout = _render(data_dir, group, tmp_path)

    # a screenshot was taken: a real PNG of a real size
    width, height = _png_size(data)
    assert (width, height) >= (1000, 400)
    assert len(data) > 10_000

    ticks = sorted((datetime.fromisoformat(t["date"]), float(t["x"])) for t in layout["ticks"])
    assert len(ticks) >= 5
    bars = layout["bars"]
    current = [b for b in bars if b["kind"] == "current"]
    superseded = [b for b in bars if b["kind"] == "superseded"]
    assert len(current) == 6  # three slots, each Nord/Gamay then Sud/Cabernet Franc
    assert superseded, "superseded beliefs are drawn beneath"

    for bar in bars:
        start = _x_of(datetime.fromisoformat(bar["valid_at"]), ticks)
        assert abs(bar["left"] - start) < 1.5, bar
        if bar["invalid_at"]:
            end = _x_of(datetime.fromisoformat(bar["invalid_at"]), ticks)
            assert abs(bar["right"] - end) < 1.5, bar
    # 2015-01-01 .. 2023-06-01 spans what the ticks say eight and a half years span
    nord = next(b for b in current if b["valid_at"].startswith("2015") and b["invalid_at"])
    year = (ticks[-2][1] - ticks[0][1]) / (ticks[-2][0].year - ticks[0][0].year)
    assert abs((nord["right"] - nord["left"]) - year * 8.41) < year * 0.05
    # superseded beliefs sit beneath the current bar of their lane, thinner
    for ghost in superseded:
        assert ghost["height"] < 22
        lane = [b["top"] for b in current if b["relation"] == ghost["relation"]]
        assert lane
        assert ghost["top"] >= max(lane) + 22


def test_overlapping_open_periods_of_one_relation_get_rows_of_their_own(
    chromium: str, data_dir: Path, dsn: str, group: str, tmp_path: Path
) -> None:
    """No ontology: Mira directs Nord from 2015 and Sud from 2023, both still open. Both bars
    run to now, one above the other, and the screenshot is tall enough to show them."""
    del chromium
    with timestone.Memory.open(dsn) as memory:
        _mira(memory, group)
        held = memory.timeline(group, "Mira", relation="DIRECTS")
    assert sorted((f.target, f.invalid_at) for f in held) == [
        ("Château Nord", None),
        ("Château Sud", None),
    ]
    data, layout = _render(data_dir, group, tmp_path)
    directs = sorted(
        (b for b in layout["bars"] if b["kind"] == "current" and b["relation"] == "DIRECTS"),
        key=lambda b: b["valid_at"],
    )
    assert [b["valid_at"][:4] for b in directs] == ["2015", "2023"]
    nord, sud = directs
    # rows of their own: the later bar does not cover any part of the earlier one
    assert sud["top"] >= nord["top"] + nord["height"] or nord["top"] >= sud["top"] + sud["height"]
    now_x = next(float(t["x"]) for t in layout["ticks"] if t["now"])
    for bar in directs:
        assert bar["invalid_at"] is None
        assert abs(bar["right"] - now_x) < 1.5, bar  # open: drawn to now, not cut at 2023
    # every bar lies inside the screenshot
    _, height = _png_size(data)
    assert max(b["top"] + b["height"] for b in layout["bars"]) < height
