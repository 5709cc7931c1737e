"""context() latency on the corpora that ``bench.search --keep`` kept.

    .venv/bin/python -m bench.context /tmp/bench-keep/100000 /tmp/bench-keep/1000000

For each corpus, ``context(group, question)`` (the default token budget) for the big
group's first questions, after three to warm up: p50 and p95 end to end, and the
machine's pace around it. The corpus's episodes are the ones ``bulk_load`` wrote, one
per batch of 1,000 facts (about 145 kB of text each), so a context that read each
episode it considered whole read megabytes a call. Printed and written to
``bench/results/context.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import timestone

from ._common import cpu_pace_ms, percentiles, write_result
from .search import ONTOLOGY

QUESTIONS = 50


def measure(data_dir: Path, n: int) -> dict[str, Any]:
    corpus = json.loads((data_dir / "corpus.json").read_text())
    group: str = corpus["group"]
    questions = [q for q, _ in corpus["questions"][:n]]
    with timestone.Memory.open(data_dir=data_dir, ontology=ONTOLOGY) as mem:
        for q in questions[:3]:
            mem.context(group, q)
        pace = [cpu_pace_ms()]
        took: list[float] = []
        items: list[int] = []
        for q in questions:
            t0 = time.perf_counter()
            ctx = mem.context(group, q)
            took.append((time.perf_counter() - t0) * 1000)
            items.append(len(ctx.items))
        pace.append(cpu_pace_ms())
    return {
        "data_dir": str(data_dir),
        "questions": len(questions),
        **percentiles(took),
        "items_per_context_min_max": [min(items), max(items)],
        "cpu_pace_ms_before_after": pace,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data_dirs", type=Path, nargs="+")
    parser.add_argument("--questions", type=int, default=QUESTIONS)
    args = parser.parse_args(argv)
    rows = [measure(d, args.questions) for d in args.data_dirs]
    path = write_result("context", {"corpora": rows})
    print("| corpus | questions | p50 ms | p95 ms | pace ms |")
    print("|---|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['data_dir']} | {r['questions']} | {r['p50_ms']} | {r['p95_ms']} | "
            f"{r['cpu_pace_ms_before_after']} |"
        )
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
