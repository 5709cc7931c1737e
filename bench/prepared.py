"""What a search costs without prepared statements (``prepared_statements=False``).

    .venv/bin/python -m bench.prepared /tmp/bench-keep/100000

Each argument is a database kept by ``bench.search --keep DIR`` (``DIR/<size>``).

Behind a pooler in transaction mode that does not carry prepared statements
between server connections (PgBouncer before 1.21), a memory is opened with
``prepared_statements=False``: its connections prepare nothing, and each search
statement is planned on every call instead of once per connection. Each round
opens the database both ways in turn, warms each with ``WARM_UP`` searches, and
times the same questions; the answers must be the same both ways (the run fails
otherwise).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import timestone

from ._common import cpu_pace_ms, kept_databases, percentiles, write_result
from .search import ONTOLOGY

WARM_UP = 20
ROUNDS = 2


def _times(
    data_dir: Path, prepared: bool, group: str, questions: list[str]
) -> tuple[list[float], list[list[str]]]:
    with timestone.Memory.open(
        data_dir=data_dir, ontology=ONTOLOGY, prepared_statements=prepared
    ) as mem:
        for q in questions[:WARM_UP]:
            mem.search(group, q, limit=10)
        times: list[float] = []
        answers: list[list[str]] = []
        for q in questions:
            start = time.perf_counter()
            found = mem.search(group, q, limit=10)
            times.append((time.perf_counter() - start) * 1000)
            answers.append([str(f.version_id) for f in found.facts])
    return times, answers


def measure(data_dir: Path, n_questions: int) -> dict[str, Any]:
    corpus = json.loads((data_dir / "corpus.json").read_text())
    group = corpus["group"]
    questions = random.Random(5).sample([q for q, _ in corpus["questions"]], n_questions)
    pace = cpu_pace_ms()
    samples: dict[bool, list[float]] = {True: [], False: []}
    answers: dict[bool, list[list[str]]] = {}
    for _ in range(ROUNDS):
        for prepared in (True, False):
            times, found = _times(data_dir, prepared, group, questions)
            samples[prepared] += times
            if answers.setdefault(prepared, found) != found:
                raise SystemExit(f"{data_dir}: the answers changed between rounds")
    if answers[True] != answers[False]:
        raise SystemExit(f"{data_dir}: the answers differ without prepared statements")
    return {
        "data_dir": str(data_dir),
        "facts_written": corpus["written"],
        "questions": n_questions,
        "rounds": ROUNDS,
        "prepared": percentiles(samples[True]),
        "unprepared": percentiles(samples[False]),
        "same_answers": True,
        "cpu_pace_ms_before_after": [pace, cpu_pace_ms()],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data_dirs", type=Path, nargs="+", help="databases kept by bench.search")
    parser.add_argument("--questions", type=int, default=150)
    args = parser.parse_args(argv)
    kept_databases(parser, args.data_dirs)
    for data_dir in args.data_dirs:
        asked = len(json.loads((data_dir / "corpus.json").read_text())["questions"])
        if not WARM_UP <= args.questions <= asked:
            parser.error(
                f"--questions must be from {WARM_UP} to the {asked:,} questions of {data_dir},"
                f" got {args.questions}"
            )
    runs = [measure(d, args.questions) for d in args.data_dirs]
    print("| facts | prepared p50 / p95 (ms) | unprepared p50 / p95 (ms) | same answers |")
    print("|---:|---:|---:|---|")
    for r in runs:
        p, u = r["prepared"], r["unprepared"]
        print(
            f"| {r['facts_written']:,} | {p['p50_ms']} / {p['p95_ms']}"
            f" | {u['p50_ms']} / {u['p95_ms']} | {'yes' if r['same_answers'] else 'no'} |"
        )
    print(f"written to {write_result('prepared', {'runs': runs})}")


if __name__ == "__main__":
    main()
