"""The running example: a winemaker's career, told out of order, answered in time.

Ingests the three episodes of mira.jsonl into the embedded Postgres (the last
one arrives late: a 2019 interview recorded after the 2023 news) and shows
today's answers, the 2019 answers, what the graph believed before the 2023
episode was recorded, and Mira's timeline.

    make demo                       # or: .venv/bin/python examples/demo.py
    TIMESTONE_DSN=postgresql://...  # to use your own Postgres instead
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import timestone
from timestone import EdgeType, EntityType, Ontology

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "data" / "mira.jsonl"
BUNDLED = HERE / "data" / "mira.jsonl"
GROUP = "demo-mira"
ONTOLOGY = Ontology(
    entity_types=[EntityType("Person"), EntityType("Winery"), EntityType("Grape")],
    edge_types=[
        EdgeType("DIRECTS", cardinality="one", description="runs a winery"),
        EdgeType("WORKS_AT", cardinality="one", description="employer"),
        EdgeType("WORKS_WITH_GRAPE", cardinality="one", description="main grape variety"),
    ],
)


def load_episodes() -> list[dict[str, Any]]:
    path = SHARED if SHARED.exists() else BUNDLED
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def when(value: datetime | None) -> str:
    return value.date().isoformat() if value is not None else "(open)"


def table(title: str, rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "─" * (sum(widths) + 3 * (len(widths) - 1))
    print(f"\n{title}\n{line}")
    print(" │ ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print(line)
    for r in rows:
        print(" │ ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


def answers(mem: timestone.Memory, title: str, **read: Any) -> None:
    facts = mem.facts(GROUP, source="Mira", **read)
    rows = [(f.relation, f.target, when(f.valid_at), when(f.invalid_at)) for f in facts]
    table(title, sorted(rows), ("relation", "target", "from", "until"))


def main(llm: timestone.LLM | None = None) -> int:
    """Run the demo; ``llm`` overrides the model taken from the environment."""
    data_dir = Path(os.environ.get("TIMESTONE_DATA_DIR", HERE.parent / ".timestone"))
    print("Timestone demo: a knowledge graph that tells time.")
    with timestone.Memory.open(data_dir=data_dir, ontology=ONTOLOGY, llm=llm) as mem:
        print(f"database: {mem.dsn}")
        use_model = mem.llm is not None
        how = "the episodes' text, through the model" if use_model else "structured facts, no LLM"
        print(f"\nIngesting ({how}):")
        recorded: list[datetime] = []
        for ep in load_episodes():
            when_ = datetime.fromisoformat(ep["reference_time"])
            if use_model:
                res = mem.add_episode(GROUP, ep["content"], reference_time=when_, name=ep["name"])
            else:
                res = mem.add_facts(GROUP, ep["facts"], reference_time=when_, name=ep["name"])
            recorded.append(res.recorded_at)
            state = "written" if res.created else "already there (idempotent, nothing written)"
            closed = f", closed {len(res.invalidated)} older fact(s)" if res.invalidated else ""
            calls = f", {res.llm_calls} model call(s)" if use_model else ""
            print(f"  • {ep['name']}: {len(res.facts)} fact(s) {state}{closed}{calls}")
        if not use_model:
            print(
                "  (to ingest the episodes' text through a model instead, set OPENAI_API_KEY,"
                " or OPENAI_BASE_URL for a local server such as Ollama)"
            )

        today = datetime.now(UTC)
        answers(mem, "Where is Mira today?", valid_at=today)
        answers(mem, "And in 2019?", valid_at=datetime(2019, 6, 1, tzinfo=UTC))
        before_2023 = recorded[1] - timedelta(microseconds=1)
        answers(
            mem,
            "What did the graph believe just before the 2023 news was recorded? (as_of)",
            valid_at=today,
            as_of=before_2023,
        )
        timeline = mem.timeline(GROUP, "Mira")
        table(
            "Mira's timeline (every period; provenance = episodes that support it)",
            [
                (f.relation, f.target, when(f.valid_at), when(f.invalid_at), str(len(f.episodes)))
                for f in timeline
            ],
            ("relation", "target", "from", "until", "episodes"),
        )
        mira = mem.get_entity(GROUP, "Mira")
        if mira is not None:
            print(f"\nMira's summary: {mira.summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
