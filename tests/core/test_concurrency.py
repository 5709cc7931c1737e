"""Concurrent writers and a writer killed mid-transaction."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import psycopg

import timestone
from timestone import EntityInput, FactInput

REF = datetime(2020, 1, 1, tzinfo=UTC)
NAMES = ["Mira", "mira ", "MIRA", "Château Nord", "Chateau Nord", "Gamay", "Ada", "Grace"]


def _duplicates(dsn: str, group: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT entity_type, norm_name, count(*) FROM timestone.entities"
            " WHERE group_id = %s AND expired_at IS NULL GROUP BY 1, 2 HAVING count(*) > 1",
            (group,),
        ).fetchall()


def test_eight_writers_on_overlapping_names(memory: timestone.Memory, dsn: str, group: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def writer(n: int) -> None:
        try:
            barrier.wait()
            for round_ in range(5):
                facts = [
                    FactInput(
                        EntityInput(NAMES[(n + i) % len(NAMES)], labels=("Person",)),
                        "KNOWS",
                        NAMES[(n + i + round_ + 1) % len(NAMES)],
                        valid_at=datetime(2000 + round_, 1, 1, tzinfo=UTC),
                    )
                    for i in range(3)
                ]
                memory.add_facts(
                    group, facts, reference_time=REF, name=f"writer {n} round {round_}"
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a writer is stuck (deadlock?)"
    assert errors == []
    assert _duplicates(dsn, group) == []
    # case and accent variants met on one entity each
    assert memory.get_entity(group, "MIRA") == memory.get_entity(group, "mira")
    nord = memory.get_entity(group, "Chateau Nord")
    assert nord is not None
    assert nord.name in ("Château Nord", "Chateau Nord")


def test_one_idempotency_key_from_many_writers(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    results: list[timestone.IngestResult] = []
    barrier = threading.Barrier(8)

    def writer() -> None:
        barrier.wait()
        results.append(
            memory.add_facts(
                group,
                [FactInput("Ada", "KNOWS", "Grace")],
                reference_time=REF,
                idempotency_key="once",
            )
        )

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(r.created for r in results) == [False] * 7 + [True]
    assert len({r.episode.id for r in results}) == 1
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM timestone.episodes WHERE group_id = %s", (group,)
        ).fetchone()
    assert row == (1,)


CRASHING_WRITER = """
import sys, time, datetime as d
import timestone
from timestone.write import _ingest

def stall(w, *args, **kwargs):
    # the episode, its mentions, assertions and fact versions are in (a read waits for the
    # statements sent before it), the entities not yet
    row = w.conn.execute(
        "SELECT (SELECT count(*) FROM timestone.episodes WHERE group_id = %(g)s) AS episodes,"
        " (SELECT count(*) FROM timestone.facts WHERE group_id = %(g)s) AS facts",
        {"g": w.group_id},
    ).fetchone()
    print("inside the transaction", row["episodes"], row["facts"], flush=True)
    time.sleep(600)

_ingest.write_entities = stall
# the embedder of the memory under test: a HashEmbedder's dimension, or the default
embedder = timestone.HashEmbedder(int(sys.argv[3])) if len(sys.argv) > 3 else None
mem = timestone.Memory.open(sys.argv[1], embedder=embedder)
facts = [timestone.FactInput(f"Person {i}", "KNOWS", "Mira") for i in range(50)]
mem.add_facts(sys.argv[2], facts, reference_time=d.datetime(2020, 1, 1, tzinfo=d.UTC), name="doomed")
"""


def test_writer_killed_mid_transaction_leaves_nothing(
    memory: timestone.Memory, dsn: str, group: str, tmp_path: Path
) -> None:
    memory.add_facts(group, [FactInput("Ada", "KNOWS", "Mira")], reference_time=REF)
    with psycopg.connect(dsn) as conn:
        before = conn.execute(
            "SELECT (SELECT count(*) FROM timestone.episodes WHERE group_id = %(g)s),"
            " (SELECT count(*) FROM timestone.facts WHERE group_id = %(g)s)",
            {"g": group},
        ).fetchone()
    script = tmp_path / "writer.py"
    script.write_text(CRASHING_WRITER)
    embedder = memory.embedder
    hashed = [str(embedder.dimension)] if isinstance(embedder, timestone.HashEmbedder) else []
    with subprocess.Popen(
        [sys.executable, str(script), dsn, group, *hashed], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        inside = proc.stdout.readline().split()
        assert before is not None
        assert inside == ["inside", "the", "transaction", str(before[0] + 1), str(before[1] + 50)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    with psycopg.connect(dsn) as conn:
        after = conn.execute(
            "SELECT (SELECT count(*) FROM timestone.episodes WHERE group_id = %(g)s),"
            " (SELECT count(*) FROM timestone.facts WHERE group_id = %(g)s)",
            {"g": group},
        ).fetchone()
    assert after == before
    # the locks died with the session: the same write now goes through, whole
    res = memory.add_facts(
        group,
        [FactInput(f"Person {i}", "KNOWS", "Mira") for i in range(50)],
        reference_time=REF,
        name="doomed",
    )
    assert res.created
    assert len(res.facts) == 50
    assert _duplicates(dsn, group) == []
