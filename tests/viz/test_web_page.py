"""The web view in a real headless Chromium: labels clear of names, the as-of URL."""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from datetime import datetime
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from _cdp import Page

import timestone
from timestone.viz.browser import dump_dom
from timestone.viz.web import make_server


@pytest.fixture
def view(memory: timestone.Memory, group: str, chromium: str) -> Iterator[str]:
    del chromium
    server: ThreadingHTTPServer = make_server(memory, group, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def _layout(url: str) -> dict[str, Any]:
    dom = dump_dom(url, budget_ms=10_000)
    found = re.search(r'<pre id="layout"[^>]*>(.*?)</pre>', dom, re.S)
    assert found is not None, dom[-2000:]
    assert found.group(1), dom[-2000:]
    return json.loads(found.group(1).replace("&amp;", "&").replace("&quot;", '"'))


def _overlap(a: dict[str, float], b: dict[str, float]) -> float:
    w = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
    h = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
    return w * h if w > 0 and h > 0 else 0.0


def test_edge_labels_sit_clear_of_node_names_and_of_each_other(
    memory: timestone.Memory, group: str, view: str
) -> None:
    when = datetime.fromisoformat("2022-03-01T00:00:00+00:00")
    facts = [
        ("Mira Delacroix-Fontaine", "WORKS_AT", "Domaine des Trois Chênes"),
        ("Mira Delacroix-Fontaine", "LIVES_IN", "Saint-Émilion-de-Bordeaux"),
        ("Mira Delacroix-Fontaine", "KNOWS", "Jonas Albrecht-Weber"),
        ("Jonas Albrecht-Weber", "WORKS_AT", "Domaine des Trois Chênes"),
        ("Jonas Albrecht-Weber", "LIVES_IN", "Saint-Émilion-de-Bordeaux"),
        ("Domaine des Trois Chênes", "LOCATED_IN", "Saint-Émilion-de-Bordeaux"),
        ("Mira Delacroix-Fontaine", "MENTORS", "Ana Lucía Ferreira"),
        ("Ana Lucía Ferreira", "WORKS_AT", "Domaine des Trois Chênes"),
    ]
    memory.add_facts(
        group,
        [{"source": s, "relation": r, "target": t} for s, r, t in facts],
        reference_time=when,
    )
    drawn = _layout(view + "/")
    assert len(drawn["labels"]) == len(facts)
    names = [b for n in drawn["nodes"] for b in n["boxes"]]
    assert len(names) == 2 * 5
    labels = [label["box"] for label in drawn["labels"]]
    for i, label in enumerate(labels):
        assert all(_overlap(label, name) == 0 for name in names), drawn["labels"][i]
        assert all(_overlap(label, other) == 0 for other in labels[i + 1 :]), drawn["labels"][i]


def test_an_as_of_address_shows_that_moment(
    memory: timestone.Memory, group: str, view: str
) -> None:
    first = memory.add_facts(
        group,
        [{"source": "Mira", "relation": "VISITS", "target": "Lyon"}],
        reference_time=datetime.fromisoformat("2020-01-01T00:00:00+00:00"),
    )
    memory.add_facts(
        group,
        [{"source": "Mira", "relation": "VISITS", "target": "Porto"}],
        reference_time=datetime.fromisoformat("2021-01-01T00:00:00+00:00"),
    )
    now = dump_dom(view + "/", budget_ms=10_000)
    assert 'data-edges="2"' in now
    moment = first.recorded_at.isoformat()
    then = dump_dom(view + "/?as_of=" + urllib.parse.quote(moment), budget_ms=10_000)
    assert 'data-edges="1"' in then
    assert re.search(r'id="slider"[^>]*', then) is not None
    assert "(write 1 of 2)" in then


def test_the_slider_steps_through_writes_and_the_address_follows(
    memory: timestone.Memory, group: str, view: str
) -> None:
    writes = [
        memory.add_facts(
            group,
            [{"source": "Mira", "relation": "VISITS", "target": city}],
            reference_time=datetime.fromisoformat(f"202{i}-01-01T00:00:00+00:00"),
        )
        for i, city in enumerate(("Lyon", "Porto", "Turin"))
    ]
    page = Page(view + "/")
    try:
        page.wait_for("document.getElementById('layout')?.textContent")
        assert page.evaluate("document.getElementById('slider').max") == "2"
        assert page.evaluate("location.search") == ""
        page.evaluate(
            "const s = document.getElementById('slider');"
            "s.value = 0; s.dispatchEvent(new Event('input'))"
        )
        page.wait_for("document.getElementById('graph').dataset.edges === '1'")
        shared = urllib.parse.parse_qs(page.evaluate("location.search")[1:])["as_of"][0]
        assert datetime.fromisoformat(shared.replace("Z", "+00:00")) == writes[0].recorded_at
        assert "(write 1 of 3)" in page.evaluate("document.getElementById('when').textContent")
        page.evaluate(
            "const t = document.getElementById('slider');"
            "t.value = 1; t.dispatchEvent(new Event('input'))"
        )
        page.wait_for("document.getElementById('graph').dataset.edges === '2'")
        shared = urllib.parse.parse_qs(page.evaluate("location.search")[1:])["as_of"][0]
        assert datetime.fromisoformat(shared.replace("Z", "+00:00")) == writes[1].recorded_at
        page.evaluate(
            "const u = document.getElementById('slider');"
            "u.value = 2; u.dispatchEvent(new Event('input'))"
        )
        page.wait_for("document.getElementById('graph').dataset.asOf === 'now'")
        assert page.evaluate("location.search") == ""
    finally:
        page.close()
