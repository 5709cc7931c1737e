"""Rebuilding the vector indexes of a kept database in place, with searches going on.

    .venv/bin/python -m bench.reindex /tmp/bench-keep/100000

Each argument is a database kept by ``bench.search --keep DIR`` (``DIR/<size>``).
For each: ``QUESTIONS`` of its questions are asked (after one untimed round of the
same, which brings the server's cache up to a warm one), then
``Memory.rebuild_vector_indexes()`` rebuilds every HNSW index by ``REINDEX INDEX
CONCURRENTLY`` while another thread keeps asking the same questions (the reads that go
on meanwhile: how many, and their p50 / p95), then the questions are asked once more.
Reported: the seconds each index took, the searches before, during and after, the
recall@10 of each question's answer (the current fact it asks for) before and after,
the share of questions whose ten facts after the rebuild are the ones before (the
index is approximate, and a graph built anew may choose other neighbours), and
``Memory.vector_index_health()`` before and after: the share of 200 of each index's
rows that it finds by their own vector.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import timestone

from ._common import cpu_pace_ms, kept_databases, percentiles, write_result
from .search import ONTOLOGY, ask, people

QUESTIONS = 200


def _recall(answers: list[str], found: list[list[str]]) -> float:
    return round(sum(a in f for a, f in zip(answers, found, strict=True)) / len(answers), 3)


def measure(data_dir: Path) -> dict[str, Any]:
    corpus = json.loads((data_dir / "corpus.json").read_text())
    group = corpus["group"]
    asked = [pair for _, pairs in people(int(data_dir.name)) for pair in pairs]
    chosen = random.Random(13).sample(asked, min(QUESTIONS, len(asked)))
    questions, answers = [q for q, _ in chosen], [a for _, a in chosen]
    with timestone.Memory.open(data_dir=data_dir, ontology=ONTOLOGY) as mem:
        pace_before = cpu_pace_ms()
        ask(mem, group, questions)
        before, found_before = ask(mem, group, questions)
        health_before = mem.vector_index_health()
        during: list[float] = []
        stop = threading.Event()

        def keep_asking() -> None:
            while not stop.is_set():
                for question in questions:
                    if stop.is_set():
                        break
                    start = time.perf_counter()
                    mem.search(group, question, limit=10)
                    during.append((time.perf_counter() - start) * 1000)

        reader = threading.Thread(target=keep_asking)
        reader.start()
        try:
            seconds = mem.rebuild_vector_indexes()
        finally:
            stop.set()
            reader.join()
        after, found_after = ask(mem, group, questions)
        health_after = mem.vector_index_health()
        facts = mem.stats(group)["facts"]["current"]
        pace_after = cpu_pace_ms()
    same = sum(a == b for a, b in zip(found_before, found_after, strict=True)) / len(questions)
    return {
        "data_dir": str(data_dir),
        "facts_current": facts,
        "cpu_pace_ms_before_after": [pace_before, pace_after],
        "seconds": {name: round(s, 2) for name, s in seconds.items()},
        "total_seconds": round(sum(seconds.values()), 2),
        "before": percentiles(before),
        "during": percentiles(during) if during else {"n": 0},
        "after": percentiles(after),
        "recall_at_10_before_after": [
            _recall(answers, found_before),
            _recall(answers, found_after),
        ],
        "same_top_10": round(same, 3),
        "index_health_before_after": {
            name: [health_before[name], health_after[name]] for name in health_before
        },
    }


def _health(shares: dict[str, list[float | None]]) -> str:
    def both(name: str) -> str:
        before, after = shares[name]
        return f"{before} / {after}"

    return ", ".join(
        both(n)
        for n in (
            "facts_embedding_hnsw",
            "facts_embedding_closed_hnsw",
            "entities_name_embedding_hnsw",
        )
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data_dirs", type=Path, nargs="+", help="databases kept by bench.search")
    args = parser.parse_args(argv)
    kept_databases(parser, args.data_dirs)
    runs = [measure(d) for d in args.data_dirs]
    print(
        "| current facts | rebuild s (open facts, closed facts, entity names) | searches during"
        " it | p50 / p95 ms before | during | after | recall@10 before, after | same top 10"
        " | rows each index finds, before / after (open facts, closed facts, entity names)"
        " | pace |"
    )
    print("|---:|---|---:|---|---|---|---|---:|---|---|")
    for run in runs:
        s = run["seconds"]
        parts = ", ".join(
            str(s[n])
            for n in (
                "facts_embedding_hnsw",
                "facts_embedding_closed_hnsw",
                "entities_name_embedding_hnsw",
            )
        )
        during = run["during"]
        pace = run["cpu_pace_ms_before_after"]
        print(
            f"| {run['facts_current']:,} | {run['total_seconds']} ({parts}) | {during['n']:,} |"
            f" {run['before']['p50_ms']} / {run['before']['p95_ms']} |"
            f" {during.get('p50_ms', '-')} / {during.get('p95_ms', '-')} |"
            f" {run['after']['p50_ms']} / {run['after']['p95_ms']} |"
            f" {', '.join(map(str, run['recall_at_10_before_after']))} | {run['same_top_10']} |"
            f" {_health(run['index_health_before_after'])} |"
            f" {pace[0]} to {pace[1]} |"
        )
    path = write_result("reindex", {"runs": runs})
    print(f"written to {path}")


if __name__ == "__main__":
    main()
