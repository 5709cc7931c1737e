"""context() latency on the corpora that ``bench.search --keep`` kept.

    .venv/bin/python -m bench.context /tmp/bench-keep/100000 /tmp/bench-keep/1000000

For each corpus, ``context(group, question)`` (the default token budget) for the big
group's first questions, after three to warm up: p50 and p95 end to end, and the
machine's pace around it, on a warm server (its tables and indexes loaded into the
buffer cache first, as ``bench.search`` does). The corpus's episodes are the ones
``bulk_load`` wrote, one per batch of 1,000 facts (about 145 kB of text each), so a
context that read each episode it considered whole read megabytes a call; they are
records of facts, which a context does not search.

Then the same, on the same warm server, for a group of told episodes written beside the
big group on the first run (``--told``, 5,000 by default: more than are ranked exactly,
so their HNSW index is read): the chunks of a shift log, one line each, and a question
about one line, for which the share of contexts holding that line is counted too.
Printed and written to ``bench/results/context.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

import timestone

from ._common import cpu_pace_ms, percentiles, prewarm, write_result
from .search import ONTOLOGY

QUESTIONS = 50
TOLD = 5_000
TOLD_GROUP = "shift-log"
_CREWS = ("Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir", "Gorse", "Hazel", "Ivy")
_WEATHER = ("rain", "fog", "hail", "frost", "wind", "sun", "snow", "sleet")


def _line(i: int) -> str:
    return (
        f"Shift {i}: crew {_CREWS[i % len(_CREWS)]} logged {_WEATHER[i % len(_WEATHER)]}"
        f" at gate {i % 97}, and their lead was Warden {i}."
    )


def told_group(mem: timestone.Memory, n: int) -> None:
    """Write ``n`` told episodes (the lines of a shift log, a chunk each) into
    ``TOLD_GROUP``, unless the group already holds them."""
    held = mem.stats(TOLD_GROUP).get("episodes", {}).get("current", 0)
    if held >= n:
        return
    if held:
        raise SystemExit(f"{TOLD_GROUP} holds {held} episodes, not {n}: use another --told")
    at = datetime(2024, 1, 1, tzinfo=UTC)
    for start in range(0, n, 1_000):
        lines = [_line(i) for i in range(start, min(n, start + 1_000))]
        mem.add_document(
            TOLD_GROUP,
            f"file:///shift-log-{start // 1_000}.md",
            "\n\n".join(lines),
            reference_time=at,
            max_chunk_chars=120,
        )


def timed(
    mem: timestone.Memory, group: str, questions: Sequence[str]
) -> tuple[list[float], list[timestone.Context], list[float]]:
    """``context(group, question)`` for each question, after three to warm up: each
    call's milliseconds end to end, the contexts, and the machine's pace around them."""
    for q in questions[:3]:
        mem.context(group, q)
    pace = [cpu_pace_ms()]
    took: list[float] = []
    contexts: list[timestone.Context] = []
    for q in questions:
        t0 = time.perf_counter()
        contexts.append(mem.context(group, q))
        took.append((time.perf_counter() - t0) * 1000)
    pace.append(cpu_pace_ms())
    return took, contexts, pace


def measure(data_dir: Path, n: int, told: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The corpus's big group, then (``told`` > 0) the told group, on one warm server:
    the told group is written first, then every table and index is loaded into the
    buffer cache."""
    corpus = json.loads((data_dir / "corpus.json").read_text())
    group: str = corpus["group"]
    questions = [q for q, _ in corpus["questions"][:n]]
    with timestone.Memory.open(data_dir=data_dir, ontology=ONTOLOGY) as mem:
        if told:
            told_group(mem, told)
        with psycopg.connect(mem.dsn, autocommit=True) as conn:
            prewarm(conn)  # a warm server, as bench.search measures
        took, contexts, pace = timed(mem, group, questions)
        items = [len(ctx.items) for ctx in contexts]
        row = {
            "data_dir": str(data_dir),
            "questions": len(questions),
            **percentiles(took),
            "items_per_context_min_max": [min(items), max(items)],
            "cpu_pace_ms_before_after": pace,
        }
        if not told:
            return row, None
        # a question about one line of the shift log, for n lines spread over it
        asked = [i * (told // n) for i in range(n)]
        took, contexts, pace = timed(
            mem, TOLD_GROUP, [f"Who was the lead of shift {i}?" for i in asked]
        )
        found = sum(
            any(f"Warden {i}." in item.text for item in ctx.items)
            for i, ctx in zip(asked, contexts, strict=True)
        )
    return row, {
        "data_dir": str(data_dir),
        "told_episodes": told,
        "questions": len(asked),
        **percentiles(took),
        "line_in_context": round(found / len(asked), 3),
        "cpu_pace_ms_before_after": pace,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data_dirs", type=Path, nargs="+")
    parser.add_argument("--questions", type=int, default=QUESTIONS)
    parser.add_argument("--told", type=int, default=TOLD, help="told episodes (0: none)")
    args = parser.parse_args(argv)
    measured = [measure(d, args.questions, args.told) for d in args.data_dirs]
    rows = [row for row, _ in measured]
    told = [row for _, row in measured if row is not None]
    path = write_result("context", {"corpora": rows, "told": told})
    print("| corpus | questions | p50 ms | p95 ms | pace ms |")
    print("|---|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['data_dir']} | {r['questions']} | {r['p50_ms']} | {r['p95_ms']} | "
            f"{r['cpu_pace_ms_before_after']} |"
        )
    print("\n| corpus | told episodes | p50 ms | p95 ms | line in the context | pace ms |")
    print("|---|---:|---:|---:|---:|---|")
    for r in told:
        print(
            f"| {r['data_dir']} | {r['told_episodes']} | {r['p50_ms']} | {r['p95_ms']} | "
            f"{r['line_in_context']} | {r['cpu_pace_ms_before_after']} |"
        )
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
