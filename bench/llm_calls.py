"""LLM calls per episode: 22 scripted episodes of one group, replayed through the real client.

Run: ``.venv/bin/python -m bench.llm_calls`` (``--quick``: the first 8 episodes).

The episodes (tests/fixtures/llm/bench_episodes.json) grow one graph: new
entities, known ones, an ambiguous short name, preferences that change,
moves, a promotion, JSON and message episodes, one with 10 facts. Each carries
scripted answers (written by hand, not recorded from a model) of exactly the
calls the mechanism asks for, under the ontology the file names; the run fails if an
episode asks for a call that was not scripted or leaves one unplayed
(``tests/core/test_bench_episodes.py`` replays them in the suite), so
the counts below are what ingestion really costs. The Graphiti column is the
rough cost the issue quotes for it: 3 calls plus 1 to 2 per fact.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import timestone
from timestone.db._embedded import embedded_dsn
from timestone.llm import ReplayTransport, replay_llm

from ._common import scratch_data_dir, write_result

EPISODES = Path(__file__).parents[1] / "tests" / "fixtures" / "llm" / "bench_episodes.json"


def run(quick: bool) -> dict[str, Any]:
    script: dict[str, Any] = json.loads(EPISODES.read_text())
    episodes: list[dict[str, Any]] = script["episodes"]
    ontology = timestone.Ontology(
        edge_types=[
            timestone.EdgeType(name, cardinality=cardinality)
            for name, cardinality in script["ontology"].items()
        ]
    )
    if quick:
        episodes = episodes[:8]
    transport = ReplayTransport()
    rows: list[dict[str, Any]] = []
    with scratch_data_dir() as data_dir:
        dsn = embedded_dsn(data_dir)
        mem = timestone.Memory.open(dsn, ontology=ontology, llm=replay_llm(transport, backoff=0))
        try:
            for i, ep in enumerate(episodes, 1):
                transport.extend(ep["responses"])
                before = len(transport.requests)
                res = mem.add_episode(
                    "bench",
                    ep["content"],
                    reference_time=datetime.fromisoformat(ep["reference_time"]),
                    source=ep["source"],
                )
                try:
                    transport.check()
                except AssertionError as exc:
                    raise SystemExit(f"episode {i}: the replay diverged: {exc}") from exc
                steps = [
                    r["response_format"].get("json_schema", {}).get("name", "json")
                    for r in transport.requests[before:]
                ]
                extracted = json.loads(
                    ep["responses"][0]["body"]["choices"][0]["message"]["content"]
                )
                n = len(extracted["facts"])
                rows.append(
                    {
                        "episode": i,
                        "source": ep["source"],
                        "chars": len(ep["content"]),
                        "facts": n,
                        "calls": res.llm_calls,
                        "tokens": res.llm_tokens,
                        "steps": steps,
                        "graphiti_estimate": [3 + n, 3 + 2 * n],
                    }
                )
        finally:
            mem.close()
    calls = [r["calls"] for r in rows]
    small = [r["calls"] for r in rows if r["facts"] <= 10]
    graphiti_low = sum(r["graphiti_estimate"][0] for r in rows)
    graphiti_high = sum(r["graphiti_estimate"][1] for r in rows)
    return {
        "episodes": rows,
        "summary": {
            "episodes": len(rows),
            "facts": sum(r["facts"] for r in rows),
            "calls": sum(calls),
            "mean_calls": round(sum(calls) / len(calls), 2),
            "max_calls_up_to_10_facts": max(small) if small else None,
            "target_max_calls": 3,
            "graphiti_estimate_calls": [graphiti_low, graphiti_high],
            "tokens": sum(r["tokens"] for r in rows),
        },
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        "| # | source | chars | facts | calls | steps | Graphiti (est.) |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    for r in result["episodes"]:
        low, high = r["graphiti_estimate"]
        steps = ", ".join(s.replace("_", " ") for s in r["steps"])
        lines.append(
            f"| {r['episode']} | {r['source']} | {r['chars']} | {r['facts']} | {r['calls']} "
            f"| {steps} | {low}–{high} |"
        )
    s = result["summary"]
    low, high = s["graphiti_estimate_calls"]
    lines.append(
        f"| **all** | | | **{s['facts']}** | **{s['calls']}** "
        f"| mean {s['mean_calls']}, max {s['max_calls_up_to_10_facts']} (target ≤ 3) "
        f"| **{low}–{high}** |"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the first 8 episodes only")
    args = parser.parse_args()
    result = run(args.quick)
    path = write_result("llm_calls", {"quick": args.quick, **result})
    print(table(result))
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
