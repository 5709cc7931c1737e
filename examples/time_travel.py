"""Time travel through the adapters: the world's clock and the graph's own.

Mira directed Château Nord from 2015 and Château Sud from 2023; an interview
from 2019 is recorded last (a backfill). Every adapter reads at two points:
``valid_at`` (when was it true in the world) and ``as_of`` (what did the graph
hold at that moment of its own history).

    .venv/bin/python examples/time_travel.py
"""

from __future__ import annotations

from datetime import UTC, datetime

import timestone
from langchain_timestone import TimestoneRetriever, TimestoneStore
from timestone import EdgeType, Ontology

GROUP = "example-time-travel"
ONTOLOGY = Ontology(edge_types=[EdgeType("DIRECTS", cardinality="one")])


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def main() -> None:
    with timestone.Memory.open(ontology=ONTOLOGY) as memory:
        recorded: list[datetime] = []
        for when, target in (("2015-01-01", "Château Nord"), ("2023-06-01", "Château Sud")):
            result = memory.add_facts(
                GROUP,
                [{"source": "Mira", "relation": "DIRECTS", "target": target}],
                reference_time=day(when),
            )
            recorded.append(result.recorded_at)
        backfill = memory.add_facts(
            GROUP,
            [{"source": "Mira", "relation": "STUDIED_AT", "target": "Dijon Wine School"}],
            reference_time=day("2019-04-10"),
        )

        def ask(label: str, **when: object) -> None:
            retriever = TimestoneRetriever(memory=memory, group_id=GROUP, k=3, **when)  # type: ignore[arg-type]
            found = [d.page_content for d in retriever.invoke("What does Mira direct or study?")]
            print(f"{label:<38} {found}")

        ask("today:")
        ask("true in 2019:", valid_at=day("2019-06-01"))
        ask("held before the 2023 news arrived:", as_of=recorded[0])
        ask("held before the backfill, 2019:", valid_at=day("2019-06-01"), as_of=recorded[1])
        ask("every period, as held now:", valid_at=None)
        print("backfill recorded at", backfill.recorded_at.isoformat(timespec="seconds"))

        print("timeline of Mira:")
        for fact in memory.timeline(GROUP, "Mira"):
            until = fact.invalid_at.date().isoformat() if fact.invalid_at else "present"
            print(f"  {fact.valid_at.date()} to {until}: {fact.fact}")

        store = TimestoneStore(memory)
        ns = (GROUP, "profile")
        store.put(ns, "employer", {"name": "Château Nord"})
        first = store.get(ns, "employer")
        assert first is not None
        store.put(ns, "employer", {"name": "Château Sud"})
        now = store.get(ns, "employer")
        then = TimestoneStore(memory, as_of=first.updated_at).get(ns, "employer")
        assert now is not None
        assert then is not None
        print(f"store now: {now.value['name']}; store as of the first put: {then.value['name']}")


if __name__ == "__main__":
    main()
