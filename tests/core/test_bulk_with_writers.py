"""Writers keep writing while bulk loads start and end: they wait for the load's index
work, and neither side fails with a deadlock."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import timestone
from timestone import EdgeType, FactInput, Ontology

ONTOLOGY = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
LOADS = 4


def test_writers_and_bulk_loads_wait_for_each_other(fresh_dsn: str) -> None:
    start = datetime(2020, 1, 1, tzinfo=UTC)
    stop = threading.Event()
    errors: list[BaseException] = []
    writing = threading.Semaphore(0)  # released once by each writer, at its first write

    def writer(k: int) -> None:
        with timestone.Memory.open(fresh_dsn, ontology=ONTOLOGY, warm=False) as mem:
            i = 0
            while not stop.is_set():
                i += 1
                facts = [
                    FactInput(f"W{k} P{j}", "WORKS_AT", f"Co{(i + j) % 5}", valid_at=start)
                    for j in range(40)
                ]
                try:
                    mem.add_facts("g", facts, reference_time=start + timedelta(seconds=i))
                except BaseException as exc:
                    errors.append(exc)
                    writing.release()
                    return
                if i == 1:
                    writing.release()

    with timestone.Memory.open(fresh_dsn, ontology=ONTOLOGY, warm=False) as loader:
        threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        try:
            for _ in threads:  # every writer under way before the first load
                assert writing.acquire(timeout=60)
            for n in range(LOADS):
                with loader.bulk_load(workers=0):
                    loader.add_facts(
                        "g",
                        [FactInput(f"L{n} P{j}", "LIVES_IN", f"City{j % 4}") for j in range(30)],
                        reference_time=start + timedelta(days=n),
                    )
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a writer is stuck"
        assert errors == []
        assert len(loader.facts("g", relation="LIVES_IN", limit=1000)) == LOADS * 30
