"""``add_fact_batches``: an import as a series of ``add_facts`` calls, the next batch checked
and embedded while the database stores the one before.

Its contract is the loop it replaces: the same graph, the same results, committed batch
by batch in order, and a bad batch raises before anything of it is written while the
batches before it stay written.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import timestone
from timestone import EdgeType, FactInput, Ontology
from timestone.errors import InvalidInput, InvalidPeriod, NaiveDatetime

REF = datetime(2025, 1, 1, tzinfo=UTC)
ONTOLOGY = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one"), EdgeType("KNOWS")])


@pytest.fixture(scope="module")
def mem(module_dsn: str) -> Iterator[timestone.Memory]:
    m = timestone.Memory.open(module_dsn, ontology=ONTOLOGY)
    yield m
    m.close()


def _group(name: str) -> str:
    return f"{name}-{random.randrange(10**9)}"


def _batches(n_batches: int = 6, size: int = 40, seed: int = 3) -> list[dict[str, Any]]:
    """Career facts in shuffled order, so that later batches close periods opened by
    earlier ones and open periods earlier in world time than ones already stored."""
    rng = random.Random(seed)
    facts: list[FactInput] = []
    for p in range(n_batches * size // 4):
        person = f"Person {p}"
        for k in range(3):
            start = datetime(2000 + 4 * k, 1, 1, tzinfo=UTC) + timedelta(days=rng.randrange(300))
            company = f"Company {rng.randrange(12)}"
            facts.append(FactInput(person, "WORKS_AT", company, valid_at=start))
        facts.append(FactInput(person, "KNOWS", f"Person {rng.randrange(p + 1)}"))
    rng.shuffle(facts)
    return [
        {"facts": facts[i : i + size], "reference_time": REF, "name": f"batch {i // size}"}
        for i in range(0, len(facts), size)
    ]


def _graph(mem: timestone.Memory, group: str) -> list[tuple[Any, ...]]:
    """Every period of every fact, by names and dates (ids differ between groups)."""
    facts = mem.facts(group, valid_at=None, limit=1000)
    assert len(facts) < 1000  # all of them
    return sorted((f.source, f.relation, f.target, f.fact, f.valid_at, f.invalid_at) for f in facts)


def _episodes(dsn: str, group: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT name FROM timestone.episodes WHERE group_id = %s ORDER BY created_at",
            (group,),
        ).fetchall()
    return [r[0] for r in rows]


def test_batches_write_what_a_loop_of_add_facts_writes(
    mem: timestone.Memory, module_dsn: str
) -> None:
    batches = _batches()
    looped, batched = _group("loop"), _group("batches")
    expected = [mem.add_facts(looped, **b) for b in batches]
    seen: list[tuple[int, int | None, str]] = []
    results = mem.add_fact_batches(
        batched,
        batches,
        on_progress=lambda done, total, r: seen.append((done, total, r.episode.name)),
    )
    graph = _graph(mem, batched)
    assert any(p[5] is not None for p in graph)  # the corpus does close periods
    assert graph == _graph(mem, looped)
    assert [r.episode.name for r in results] == [b["name"] for b in batches]
    assert _episodes(module_dsn, batched) == [b["name"] for b in batches]  # committed in order
    assert [(len(r.facts), len(r.invalidated), r.created) for r in results] == [
        (len(r.facts), len(r.invalidated), r.created) for r in expected
    ]
    assert seen == [(i + 1, len(batches), b["name"]) for i, b in enumerate(batches)]
    # idempotent: the same import again writes nothing and says so for every batch
    again = mem.add_fact_batches(batched, iter(batches))
    assert [r.created for r in again] == [False] * len(batches)
    assert [r.episode.id for r in again] == [r.episode.id for r in results]
    assert _graph(mem, batched) == graph


def test_results_need_not_be_kept(mem: timestone.Memory) -> None:
    """An import of millions keeps no results: ``on_progress`` still sees each one."""
    batches = _batches(n_batches=3)
    looped, batched = _group("kept"), _group("unkept")
    for b in batches:
        mem.add_facts(looped, **b)
    seen: list[str] = []
    kept = mem.add_fact_batches(
        batched,
        batches,
        on_progress=lambda _done, _total, r: seen.append(r.episode.name),
        keep_results=False,
    )
    assert kept == []
    assert seen == [b["name"] for b in batches]
    assert _graph(mem, batched) == _graph(mem, looped)


def test_results_nobody_sees_are_not_built_and_the_writes_are_the_same(
    mem: timestone.Memory,
) -> None:
    """Neither kept nor followed, no result is built (its facts, entities and the facts
    it closed): the writes are the loop's, and a second run finds every batch written."""
    batches = _batches(n_batches=4)
    looped, batched = _group("looped"), _group("unseen")
    results = [mem.add_facts(looped, **b) for b in batches]
    assert any(r.invalidated for r in results)  # later batches close earlier periods
    assert mem.add_fact_batches(batched, batches, keep_results=False) == []
    assert _graph(mem, batched) == _graph(mem, looped)
    assert [e.name for e in mem.episodes(batched, limit=10)] == [
        e.name for e in mem.episodes(looped, limit=10)
    ]
    before = mem.stats(batched)
    assert mem.add_fact_batches(batched, batches, keep_results=False) == []
    assert mem.stats(batched) == before
    again = mem.add_fact_batches(batched, batches)  # the existing results, read back
    assert [r.created for r in again] == [False] * len(batches)
    assert [r.episode.name for r in again] == [b["name"] for b in batches]


def test_a_generator_is_read_one_batch_ahead_and_has_no_total(mem: timestone.Memory) -> None:
    batches = _batches(n_batches=3)
    read: list[int] = []
    done: list[int] = []

    def source() -> Iterator[dict[str, Any]]:
        for i, b in enumerate(batches):
            # never more than one batch beyond the last one committed
            assert i <= len(done) + 1
            read.append(i)
            yield b

    totals: list[int | None] = []

    def progress(count: int, total: int | None, _: object) -> None:
        done.append(count)
        totals.append(total)

    results = mem.add_fact_batches(_group("gen"), source(), on_progress=progress)
    assert read == [0, 1, 2]
    assert len(results) == 3
    assert totals == [None, None, None]


@pytest.mark.parametrize(
    ("bad", "error", "words"),
    [
        ({"valid_at": datetime(2020, 1, 1)}, NaiveDatetime, "valid_at"),
        (
            {
                "valid_at": datetime(2020, 1, 1, tzinfo=UTC),
                "invalid_at": datetime(2019, 1, 1, tzinfo=UTC),
            },
            InvalidPeriod,
            "invalid_at",
        ),
        ({"relation": "WORKS AT"}, InvalidInput, "relation"),
    ],
)
def test_a_bad_batch_writes_nothing_and_the_ones_before_stay(
    mem: timestone.Memory,
    module_dsn: str,
    bad: dict[str, Any],
    error: type[Exception],
    words: str,
) -> None:
    group = _group("bad")
    batches = _batches(n_batches=4)
    # a mapping, checked when the batch is: a FactInput checks itself when it is made
    fact = {"source": "A", "relation": "KNOWS", "target": "B", **bad}
    batches[2] = {**batches[2], "facts": [*batches[2]["facts"], fact]}
    with pytest.raises(error, match=words) as caught:
        mem.add_fact_batches(group, batches)
    assert "batches[2]" in str(caught.value)
    assert "the 2 batches before it were written" in str(caught.value)
    assert _episodes(module_dsn, group) == ["batch 0", "batch 1"]


BAD_BATCHES: list[tuple[object, str]] = [
    ("not batches", "batches must be an iterable of mappings"),
    ({"facts": []}, "batches must be an iterable of mappings"),
    (42, "batches must be an iterable of mappings"),
    ([["a list"]], r"batches\[0\] must be a mapping"),
    ([{"facts": [FactInput("A", "KNOWS", "B")]}], r"batches\[0\] has no 'reference_time'"),
    ([{"reference_time": REF}], r"batches\[0\] has no 'facts'"),
    (
        [{"facts": [FactInput("A", "KNOWS", "B")], "reference_time": REF, "when": REF}],
        r"batches\[0\] has unknown keys \['when'\]",
    ),
    ([{"facts": [], "reference_time": REF}], r"batches\[0\]: facts is empty"),
    (
        [{"facts": [FactInput("A", "KNOWS", "B")], "reference_time": datetime(2025, 1, 1)}],
        r"batches\[0\]: .*reference_time",
    ),
]


@pytest.mark.parametrize(("batches", "words"), BAD_BATCHES)
def test_bad_input_names_the_batch_and_writes_nothing(
    mem: timestone.Memory, module_dsn: str, batches: Any, words: str
) -> None:
    group = _group("input")
    with pytest.raises(InvalidInput, match=words):
        mem.add_fact_batches(group, batches)
    assert _episodes(module_dsn, group) == []


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"on_progress": 42}, "on_progress must be a function or None"),
        ({"keep_results": "no"}, "keep_results must be True or False"),
    ],
)
def test_bad_options_are_refused_before_any_batch_is_written(
    mem: timestone.Memory, module_dsn: str, options: dict[str, Any], words: str
) -> None:
    group = _group("options")
    with pytest.raises(InvalidInput, match=words):
        mem.add_fact_batches(group, _batches(n_batches=2), **options)
    assert _episodes(module_dsn, group) == []


def test_a_group_id_is_checked_before_any_batch_is_read(mem: timestone.Memory) -> None:
    read: list[int] = []

    def source() -> Iterator[dict[str, Any]]:
        read.append(0)
        yield from _batches(n_batches=1)

    with pytest.raises(InvalidInput, match="group"):
        mem.add_fact_batches("", source())
    assert read == []


def test_a_batch_the_database_refuses_stops_the_import_there(
    mem: timestone.Memory, module_dsn: str
) -> None:
    """An error of the write itself (here a check constraint on episodes) ends the import
    after the batches before it; the batch read ahead is not written."""
    group = _group("refused")
    batches = _batches(n_batches=4)
    with psycopg.connect(module_dsn, autocommit=True) as conn:
        conn.execute(
            "ALTER TABLE timestone.episodes ADD CONSTRAINT refuse_batch_1"
            " CHECK (name <> 'batch 1') NOT VALID"
        )
    try:
        with pytest.raises(timestone.TimestoneError):
            mem.add_fact_batches(group, batches)
    finally:
        with psycopg.connect(module_dsn, autocommit=True) as conn:
            conn.execute("ALTER TABLE timestone.episodes DROP CONSTRAINT refuse_batch_1")
    assert _episodes(module_dsn, group) == ["batch 0"]
    # the rest of the import goes in when it is run again; batch 0 is not written twice
    results = mem.add_fact_batches(group, batches)
    assert [r.created for r in results] == [False, True, True, True]
    assert _episodes(module_dsn, group) == [b["name"] for b in batches]


async def test_the_async_twin_writes_the_same(module_dsn: str, mem: timestone.Memory) -> None:
    batches = _batches(n_batches=3)
    looped, batched = _group("aloop"), _group("abatches")
    for b in batches:
        mem.add_facts(looped, **b)
    amem = await timestone.AsyncMemory.open(module_dsn, ontology=ONTOLOGY)
    try:
        results = await amem.add_fact_batches(batched, batches)
    finally:
        await amem.close()
    assert [r.created for r in results] == [True] * 3
    assert _graph(mem, batched) == _graph(mem, looped)
