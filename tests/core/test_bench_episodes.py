"""The scripted episodes ``bench.llm_calls`` counts calls on replay exactly: every call
the mechanism makes is scripted, every scripted answer is played, in order. A change of
what ingestion asks (or of what it accepts) shows here, not first in ``make bench``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import timestone
from timestone.llm import ReplayTransport, replay_llm

SCRIPT = Path(__file__).parents[1] / "fixtures" / "llm" / "bench_episodes.json"


def test_the_benchmarks_scripted_episodes_replay_exactly(dsn: str, group: str) -> None:
    script: dict[str, Any] = json.loads(SCRIPT.read_text())
    ontology = timestone.Ontology(
        edge_types=[
            timestone.EdgeType(name, cardinality=cardinality)
            for name, cardinality in script["ontology"].items()
        ]
    )
    transport = ReplayTransport()
    mem = timestone.Memory.open(dsn, ontology=ontology, llm=replay_llm(transport, backoff=0))
    calls: list[int] = []
    try:
        for ep in script["episodes"]:
            transport.extend(ep["responses"])
            res = mem.add_episode(
                group,
                ep["content"],
                reference_time=datetime.fromisoformat(ep["reference_time"]),
                source=ep["source"],
            )
            transport.check()
            calls.append(res.llm_calls)
    finally:
        mem.close()
    assert calls == [len(ep["responses"]) for ep in script["episodes"]]
    assert len(calls) == 22
