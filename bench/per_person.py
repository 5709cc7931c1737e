"""Writes as an application makes them: one ``add_facts`` call per person, side by side
with another commit.

    .venv/bin/python -m bench.per_person [--people 1500] [--rounds 2] [--against REV]

``bench.ingest``'s career graph (``corpus``: each person's facts together), 9 facts a
person, written one person a call into a fresh embedded database after 50 untimed
calls: the writes of an agent that records what it learned about someone, each call
its own transaction of one episode, a few entities and their facts. With ``--against
REV``, the same run with the library of commit REV (a temporary git worktree, this
checkout's environment) in turn with this checkout's, ``--rounds`` times each, so
that both see the same machine. Printed and written to ``bench/results/per_person.json``:
each run's facts/s and milliseconds a call, and the machine's pace before and after.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FACTS_A_PERSON = 9
WARM_CALLS = 50


def run_once(corpus_file: Path) -> dict[str, Any]:
    """One run with the library this process imports, on the facts of ``corpus_file``
    (``_write_corpus``): facts/s and ms a call. Public names only, so that an earlier
    commit's library runs it too."""
    import timestone

    given: dict[str, Any] = json.loads(corpus_file.read_text())
    ontology = timestone.Ontology(
        edge_types=[timestone.EdgeType(name, cardinality=c) for name, c in given["edges"]]
    )
    t0 = datetime.fromisoformat(given["t0"])
    facts = [
        timestone.FactInput(s, r, t, valid_at=datetime.fromisoformat(v))
        for s, r, t, v in given["facts"]
    ]
    calls = [list(g) for _, g in itertools.groupby(facts, key=lambda f: str(f.source))]
    with tempfile.TemporaryDirectory() as data_dir:
        mem = timestone.Memory.open(data_dir=data_dir, ontology=ontology)
        try:
            for batch in calls[:WARM_CALLS]:
                mem.add_facts("people", batch, reference_time=t0)
            timed = calls[WARM_CALLS:]
            start = time.perf_counter()
            for batch in timed:
                mem.add_facts("people", batch, reference_time=t0)
            took = time.perf_counter() - start
        finally:
            mem.close()
    written = sum(len(b) for b in timed)
    return {
        "calls": len(timed),
        "facts": written,
        "facts_per_second": round(written / took),
        "ms_per_call": round(took / len(timed) * 1000, 2),
    }


def _write_corpus(people: int, path: Path) -> None:
    """``bench.ingest``'s corpus, each person's facts together, as JSON for ``run_once``."""
    from .ingest import ONTOLOGY, T0, corpus

    facts = corpus(people, FACTS_A_PERSON, order="by person")
    edges = [[e.name, e.cardinality] for e in ONTOLOGY.edge_types]
    rows = [
        [str(f.source), f.relation, str(f.target), f.valid_at.isoformat()]
        for f in facts
        if f.valid_at
    ]
    path.write_text(json.dumps({"edges": edges, "t0": T0.isoformat(), "facts": rows}))


def _run_with(source: Path | None, corpus_file: Path) -> dict[str, Any]:
    """``run_once`` in a process of its own, importing the library from ``source``
    (a worktree's ``packages/core/src``) or, with None, this checkout's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    paths = [str(ROOT)] if source is None else [str(source), str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    out = subprocess.run(
        [sys.executable, "-m", "bench.per_person", "--one", str(corpus_file)],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--people", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--against", help="a commit to run side by side with this checkout")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # one run, as JSON
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(run_once(args.one)))
        return
    if args.people <= WARM_CALLS or args.rounds < 1:
        parser.error(f"--people must be more than {WARM_CALLS} and --rounds at least 1")
    from ._common import cpu_pace_ms, write_result

    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.json"
        _write_corpus(args.people, corpus_file)
        ways: dict[str, Path | None] = {"this checkout": None}
        if args.against:
            tree = Path(tmp) / "against"
            added = subprocess.run(
                ["git", "worktree", "add", "--detach", str(tree), args.against],
                cwd=ROOT,
                check=False,
                capture_output=True,
                text=True,
            )
            if added.returncode != 0:
                parser.error(f"--against {args.against}: {added.stderr.strip().splitlines()[-1]}")
            ways = {args.against: tree / "packages" / "core" / "src", **ways}
        try:
            pace = [cpu_pace_ms()]
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in ways}
            for r in range(args.rounds):
                for name, source in ways.items():
                    row = _run_with(source, corpus_file)
                    runs[name].append(row)
                    print(
                        f"round {r + 1}, {name}: {row['facts_per_second']} facts/s,"
                        f" {row['ms_per_call']} ms a call of {FACTS_A_PERSON} facts",
                        flush=True,
                    )
            pace.append(cpu_pace_ms())
        finally:
            if args.against:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(Path(tmp) / "against")],
                    cwd=ROOT,
                    check=False,
                    capture_output=True,
                )
    print(f"pace {pace[0]} to {pace[1]} ms")
    write_result(
        "per_person",
        {
            "people": args.people,
            "facts_a_person": FACTS_A_PERSON,
            "against": args.against,
            "cpu_pace_ms_before_after": pace,
            "runs": runs,
        },
    )


def per_person_section(r: dict[str, Any]) -> list[str]:
    """The table of ``bench/results/per_person.json`` for docs/benchmarks.md."""
    from ._report_tables import count, pace, table

    rows = [
        [
            name if name == "this checkout" else f"`{name}`",
            ", ".join(count(x["facts_per_second"]) for x in runs),
            ", ".join(f"{x['ms_per_call']:.2f}" for x in runs),
            pace(r),
        ]
        for name, runs in r["runs"].items()
    ]
    return table(
        ["library", "facts/s, each round", "ms a call, each round", "pace (ms)"],
        rows,
        [False, True, True, False],
    )


if __name__ == "__main__":
    main()
