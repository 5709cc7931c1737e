"""The local web view: the graph of current facts, and the as-of slider's reads."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta
from typing import Any

import pytest

import timestone
from timestone.viz.web import make_server


def _get(base: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(base + path, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_slider_steps_through_each_recorded_moment(
    memory: timestone.Memory, group: str
) -> None:
    # three writes in one go, seconds apart at most: one step each, whatever the clock says
    reference = datetime.fromisoformat("2020-01-01T00:00:00+00:00")
    writes = [
        memory.add_facts(
            group,
            [{"source": "Mira", "relation": "VISITS", "target": city}],
            reference_time=reference + timedelta(days=400 * i),
        )
        for i, city in enumerate(("Lyon", "Porto", "Turin"))
    ]
    server = make_server(memory, group, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        _, body = _get(base, "/api/moments")
        moments = [_when(m) for m in json.loads(body)["moments"]]
        assert moments == [w.recorded_at for w in writes]
        for i, moment in enumerate(json.loads(body)["moments"]):
            _, graph = _get(base, "/api/graph?as_of=" + urllib.parse.quote(moment))
            held = json.loads(graph)
            assert _when(held["as_of"]) == writes[i].recorded_at
            cities = ("Lyon", "Porto", "Turin")[: i + 1]
            assert sorted(n["name"] for n in held["nodes"]) == sorted(["Mira", *cities])
        between = writes[1].recorded_at + (writes[2].recorded_at - writes[1].recorded_at) / 2
        _, body = _get(base, "/api/moments?as_of=" + urllib.parse.quote(between.isoformat()))
        assert json.loads(body)["index"] == 1
        _, body = _get(base, "/api/moments?as_of=2000-01-01")
        assert json.loads(body)["index"] == -1
    finally:
        server.shutdown()
        server.server_close()


def test_the_view_serves_the_graph_as_of_any_moment(memory: timestone.Memory, group: str) -> None:
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
    server = make_server(memory, group, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        status, page = _get(base, "/")
        assert status == 200
        assert json.dumps(group) in page
        assert 'type="range"' in page

        _, body = _get(base, "/api/graph")
        now: dict[str, Any] = json.loads(body)
        assert sorted(n["name"] for n in now["nodes"]) == ["Lyon", "Mira", "Porto"]
        assert len(now["edges"]) == 2

        moment = (first.recorded_at + timedelta(microseconds=1)).isoformat()
        _, body = _get(base, "/api/graph?as_of=" + urllib.parse.quote(moment))
        then: dict[str, Any] = json.loads(body)
        assert [e["fact"] for e in then["edges"]] == ["Mira visits Lyon."]

        _, body = _get(base, "/api/moments")
        moments: dict[str, Any] = json.loads(body)
        assert len(moments["moments"]) == 2
        assert _when(moments["moments"][0]) == first.recorded_at
        assert moments["index"] is None
        assert moments["truncated"] is False

        status, timeline = _get(base, "/timeline?entity=Mira")
        assert status == 200
        assert timeline.count('class="bar current"') == 2
        assert _get(base, "/timeline?entity=Nobody")[0] == 404
        status, body = _get(base, "/api/graph?as_of=someday")
        assert status == 400
        assert "'someday' is not a date" in body
    finally:
        server.shutdown()
        server.server_close()


def test_a_busy_port_is_refused_clearly(memory: timestone.Memory, group: str) -> None:
    from timestone.errors import AddressInUse

    first = make_server(memory, group, port=0)
    try:
        with pytest.raises(AddressInUse, match="already in use"):
            make_server(memory, group, port=first.server_port)
    finally:
        first.server_close()
