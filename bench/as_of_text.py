"""The cost of an as-of search of episodes: the documents benchmark's group, asked as of a
moment after its load.

    .venv/bin/python -m bench.as_of_text --keep /tmp/docs        # a database kept by
                                                                  # bench.documents --keep
    .venv/bin/python -m bench.as_of_text --keep /tmp/docs --claims 100 --rounds 3

Each of the first ``--claims`` claims (SciFact's, ``bench.documents``) is asked through
``search(group, claim, scopes=("episodes",), valid_at=None, limit=20, as_of=T)``, T a
moment after the group was written (now, taken once before the timing); the claims are
asked once untimed, then ``--rounds`` times timed. p50/p95 over every timed search, with
the CPU pace before and after (``_common.cpu_pace_ms``). The database is opened by the
package on the path (its SQL functions are the ones applied at the open). Written to
``bench/results/as_of_text.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import timestone

from ._common import cpu_pace_ms, percentiles, ready_to_time, write_result
from .documents import DEFAULT_DATA, GROUP


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keep", type=Path, required=True, help="a database bench.documents kept")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the SciFact file")
    parser.add_argument("--claims", type=int, default=100, help="the first N claims (100)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (3)")
    parser.add_argument("--name", default="as_of_text", help="the result file's name")
    args = parser.parse_args(argv)
    data: dict[str, Any] = json.loads(args.data.read_text())
    claims = [str(q["text"]) for q in data["queries"] if q.get("relevant")][: args.claims]
    with timestone.Memory.open(data_dir=args.keep, llm=None) as mem:
        chunks = mem.stats(GROUP).get("episodes", {}).get("current", 0)
        if not chunks:
            raise SystemExit(f"{args.keep} holds no group {GROUP!r}: run bench.documents --keep")
        settle = ready_to_time(mem.dsn)
        at = datetime.now(UTC)

        def ask(text: str) -> list[tuple[str, float]]:
            found = mem.search(GROUP, text, scopes=("episodes",), valid_at=None, limit=20, as_of=at)
            return [(str(e.id), round(e.score or 0.0, 6)) for e in found.episodes]

        first = [ask(c) for c in claims]  # untimed: plans and caches
        pace = [cpu_pace_ms()]
        took: list[float] = []
        for _ in range(args.rounds):
            for c in claims:
                start = time.perf_counter()
                ask(c)
                took.append((time.perf_counter() - start) * 1000)
        pace.append(cpu_pace_ms())
    lat = percentiles(took)
    result: dict[str, Any] = {
        "chunks": chunks,
        "claims": len(claims),
        "rounds": args.rounds,
        "as_of_search_latency": lat,
        "cpu_pace_ms_before_after": pace,
        "settled_s": settle,
        "first_hits": [hits[:3] for hits in first[:5]],
    }
    out = write_result(args.name, result)
    print(
        f"{len(claims)} claims x {args.rounds} as of {at.isoformat()} over {chunks} chunks:"
        f" p50 {lat['p50_ms']:.1f} ms, p95 {lat['p95_ms']:.1f} ms (CPU pace {pace} ms)"
    )
    print(f"written to {out}")


if __name__ == "__main__":
    main()
