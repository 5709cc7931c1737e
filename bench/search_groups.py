"""Search among many tenants: the corpus of ``bench.search`` spread over groups.

    .venv/bin/python -m bench.search_groups                         # 1M facts, 1,000 groups
    .venv/bin/python -m bench.search_groups --facts 100000 --groups 100
    .venv/bin/python -m bench.search_groups --keep /tmp/groups      # keep (and reuse) it

Each group gets ``bench.search``'s corpus of ``facts / groups`` facts (people with dated,
changing jobs and homes, friends and skills; a seed of its own, so that every tenant
has the same names with other answers), all written inside one ``Memory.bulk_load``
(the vector indexes built once at the end; the rate reported includes that build).
The database is then vacuumed, analysed, checkpointed and prewarmed as in
``bench.search`` (``ready_to_time``). Questions are drawn from every group at random;
each is asked as ``search(group, question, limit=10)`` of its own group, three passes
of different questions, and the answer must be among the ten facts returned (recall@10). The ANN
recall@10 compares the search's vector list with the exact nearest facts of the group
(``bench.search``'s method). A group of fewer than 1,000 current facts is ranked
exactly (decision 002), so with 1,000 facts a group or fewer, this measures the
shared indexes' filters, not the HNSW graph. Written to
``bench/results/search_groups.json``.
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

from ._common import cpu_pace_ms, percentiles, ready_to_time, write_result
from .search import BUILD_MEMORY, ONTOLOGY, _exact_and_ann, _ingest  # pyright: ignore[reportPrivateUsage]

PASSES = 3
ANN_QUESTIONS = 100


def group_name(n: int) -> str:
    return f"tenant-{n:04d}"


def build(
    mem: timestone.Memory, facts: int, groups: int
) -> tuple[list[tuple[str, str, str]], float, int]:
    """Every group's corpus inside one bulk load: (group, question, answer) triples, the
    rate in facts per second (index build included) and the facts written."""
    started = time.perf_counter()
    asked: list[tuple[str, str, str]] = []
    written = 0
    with mem.bulk_load(maintenance_work_mem=BUILD_MEMORY):
        for n in range(groups):
            group = group_name(n)
            questions, count = _ingest(mem, group, facts // groups, n, started)
            asked.extend((group, q, a) for q, a in questions)
            written += count
            if (n + 1) % max(1, groups // 10) == 0:
                rate = written / (time.perf_counter() - started)
                print(f"  {n + 1:,} groups, {written:,} facts ({rate:,.0f}/s)", flush=True)
        print(f"  {written:,} facts written; building the vector indexes ...", flush=True)
    return asked, written / (time.perf_counter() - started), written


def ask(mem: timestone.Memory, sample: Sequence[tuple[str, str, str]]) -> tuple[list[float], int]:
    """Each question asked of its group: latencies in ms, and how many found the answer."""
    took: list[float] = []
    found = 0
    for group, question, answer in sample:
        start = time.perf_counter()
        result = mem.search(group, question, limit=10)
        took.append((time.perf_counter() - start) * 1000)
        found += answer in [f.fact for f in result.facts]
    return took, found


def run(facts: int, groups: int, questions: int, keep: Path) -> dict[str, Any]:
    keep.mkdir(parents=True, exist_ok=True)
    built = keep / "corpus.json"
    with timestone.Memory.open(data_dir=keep, ontology=ONTOLOGY) as mem:
        corpus: dict[str, Any]
        if built.exists():
            corpus = json.loads(built.read_text())
            if (corpus["facts"], corpus["groups"]) != (facts, groups):
                raise SystemExit(f"{built} holds another corpus; remove {keep}")
            print(f"measuring the corpus kept in {keep}", flush=True)
        else:
            print(f"building {facts:,} facts in {groups:,} groups ...", flush=True)
            triples, rate, written = build(mem, facts, groups)
            corpus = {
                "facts": facts,
                "groups": groups,
                "rate": rate,
                "written": written,
                "asked": triples,
            }
            built.write_text(json.dumps(corpus))
        asked = [(str(g), str(q), str(a)) for g, q, a in corpus["asked"]]
        needed = questions * (PASSES + 1)
        if len(asked) < needed:
            raise SystemExit(
                f"the corpus asks {len(asked):,} questions and --questions {questions} needs"
                f" {needed:,} (a warm-up and {PASSES} passes): lower --questions"
            )
        waited = ready_to_time(mem.dsn)
        rng = random.Random(11)
        drawn = rng.sample(asked, needed)
        for group, question, _ in drawn[:20]:  # warm caches
            mem.search(group, question)
        passes: list[dict[str, Any]] = []
        took: list[float] = []
        found = 0
        for p in range(PASSES):
            sample = drawn[(p + 1) * questions : (p + 2) * questions]
            before = cpu_pace_ms()
            latencies, hits = ask(mem, sample)
            passes.append(
                {**percentiles(latencies), "cpu_pace_ms_before_after": [before, cpu_pace_ms()]}
            )
            took += latencies
            found += hits
        ann: list[float] = []
        for group, question, _ in drawn[:ANN_QUESTIONS]:
            ann += _exact_and_ann(mem.dsn, group, mem, [question])[1]
    return {
        "facts_written": corpus["written"],
        "groups": groups,
        "ingest_facts_per_s": round(corpus["rate"]),
        "questions": len(took),
        **percentiles(took),
        "latency_passes": passes,
        "recall_at_10": round(found / max(1, len(took)), 4),
        "ann_recall_at_10": round(sum(ann) / max(1, len(ann)), 4),
        "ann_questions": len(ann),
        "settled_after_s": waited,
    }


def search_groups_section(r: dict[str, Any]) -> list[str]:
    """The table of ``bench/results/search_groups.json`` for docs/benchmarks.md."""
    from ._report_tables import count, pace, ratio, table

    each = ", ".join(f"{p['p50_ms']:.1f}" for p in r["latency_passes"])
    row = [
        count(r["facts_written"]),
        count(r["groups"]),
        f"{r['p50_ms']:.1f}",
        f"{r['p95_ms']:.1f}",
        each,
        ratio(r["recall_at_10"]),
        ratio(r["ann_recall_at_10"], 3),
        count(r["ingest_facts_per_s"]),
        pace(
            {"cpu_pace_ms": [v for p in r["latency_passes"] for v in p["cpu_pace_ms_before_after"]]}
        ),
    ]
    return table(
        [
            "facts",
            "groups",
            "p50 (ms)",
            "p95 (ms)",
            "p50 of each pass",
            "recall@10 of the answer",
            "ANN recall@10 vs exact",
            "built at (facts/s)",
            "pace (ms)",
        ],
        [row],
        [True, True, True, True, True, True, True, True, False],
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--questions", type=int, default=500, help="a pass's questions")
    parser.add_argument("--keep", type=Path, help="keep the database in this directory (reused)")
    args = parser.parse_args(argv)
    if args.groups < 1 or args.facts < 10 * args.groups or args.questions < 10:
        parser.error("--groups at least 1, --facts at least 10 a group, --questions at least 10")
    # two questions a person, a person for every ten facts of a group (``bench.search``)
    asked = 2 * args.groups * max(10, args.facts // args.groups // 10)
    if asked < args.questions * (PASSES + 1):
        parser.error(
            f"{args.facts:,} facts in {args.groups:,} groups ask about {asked:,} questions;"
            f" --questions {args.questions} needs {args.questions * (PASSES + 1):,}"
            f" (a warm-up and {PASSES} passes)"
        )
    if args.keep is not None:
        result = run(args.facts, args.groups, args.questions, args.keep)
    else:
        from ._common import scratch_data_dir

        with scratch_data_dir() as data_dir:
            result = run(args.facts, args.groups, args.questions, data_dir)
    path = write_result("search_groups", result)
    passes = ", ".join(f"{p['p50_ms']}" for p in result["latency_passes"])
    print(
        f"{result['facts_written']:,} facts in {result['groups']:,} groups:"
        f" search p50 {result['p50_ms']} ms, p95 {result['p95_ms']} (passes {passes}),"
        f" recall@10 {result['recall_at_10']}, ANN recall@10 {result['ann_recall_at_10']}"
    )
    print(f"written to {path}")


if __name__ == "__main__":
    main()
