"""Correcting and forgetting on the running example: removal, rollback, purge, documents."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from test_write_pipeline import _counts  # pyright: ignore[reportPrivateUsage]

import timestone
from timestone import EdgeType, Ontology

DATA = Path(__file__).resolve().parents[2] / "examples" / "data" / "mira.jsonl"
TODAY = datetime(2026, 1, 1, tzinfo=UTC)
IN_2019 = datetime(2019, 6, 1, tzinfo=UTC)


def _episodes() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def mira(dsn: str) -> timestone.Memory:
    onto = Ontology(
        edge_types=[
            EdgeType("DIRECTS", cardinality="one"),
            EdgeType("WORKS_AT", cardinality="one"),
            EdgeType("WORKS_WITH_GRAPE", cardinality="one"),
        ]
    )
    return timestone.Memory.open(dsn, ontology=onto)


def _ingest(mem: timestone.Memory, group: str) -> list[timestone.IngestResult]:
    return [
        mem.add_facts(
            group,
            ep["facts"],
            reference_time=datetime.fromisoformat(ep["reference_time"]),
            name=ep["name"],
        )
        for ep in _episodes()
    ]


def _now(mem: timestone.Memory, group: str, **kw: Any) -> dict[str, str]:
    return {f.relation: f.target for f in mem.facts(group, source="Mira", **kw)}


def test_the_running_example(mira: timestone.Memory, group: str) -> None:
    r2015, r2023, r2019 = _ingest(mira, group)
    assert _now(mira, group, valid_at=TODAY) == {
        "DIRECTS": "Château Sud",
        "WORKS_AT": "Château Sud",
        "WORKS_WITH_GRAPE": "Cabernet Franc",
    }
    assert _now(mira, group, valid_at=IN_2019)["DIRECTS"] == "Château Nord"
    before_2023 = r2023.recorded_at - (r2023.recorded_at - r2015.recorded_at) / 2
    assert _now(mira, group, as_of=before_2023)["DIRECTS"] == "Château Nord"
    # the 2023 episode closed the 2015 facts in world time, it did not delete them
    assert {f.fact for f in r2023.invalidated} == {
        "Mira directs Château Nord.",
        "Mira works at Château Nord.",
        "Mira works with Gamay.",
    }
    # the late 2019 interview joins the provenance of the Nord period
    [nord] = [
        f
        for f in mira.timeline(group, "Mira")
        if f.relation == "DIRECTS" and f.target == "Château Nord"
    ]
    assert nord.episodes == (r2015.episode.id, r2019.episode.id)
    assert nord.invalid_at == datetime(2023, 6, 1, tzinfo=UTC)


def test_remove_reopens_what_the_episode_closed(mira: timestone.Memory, group: str) -> None:
    r2015, r2023, _ = _ingest(mira, group)
    report = mira.remove_episode(group, r2023.episode.id)
    assert report.facts_expired > 0
    assert _now(mira, group, valid_at=TODAY)["DIRECTS"] == "Château Nord"
    assert mira.get_entity(group, "Château Sud") is None
    assert mira.get_entity(group, "Cabernet Franc") is None
    # history stays readable
    held_then = _now(mira, group, valid_at=TODAY, as_of=r2023.recorded_at)
    assert held_then["DIRECTS"] == "Château Sud"
    # the summary was repaired: it speaks of Nord again
    entity = mira.get_entity(group, "Mira")
    assert entity is not None
    assert "Château Nord" in entity.summary
    assert "Château Sud" not in entity.summary
    del r2015


def test_remove_equals_never_ingesting(mira: timestone.Memory, group: str) -> None:
    results = _ingest(mira, group)
    mira.remove_episode(group, results[2].episode.id)
    other = group + "-b"
    for ep in _episodes()[:2]:
        mira.add_facts(
            other,
            ep["facts"],
            reference_time=datetime.fromisoformat(ep["reference_time"]),
            name=ep["name"],
        )

    def shape(g: str) -> set[tuple[Any, ...]]:
        return {
            (f.source, f.relation, f.target, f.valid_at, f.invalid_at, f.fact, len(f.episodes))
            for f in mira.facts(g, valid_at=None)
        }

    assert shape(group) == shape(other)
    summaries = [mira.get_entity(g, "Mira") for g in (group, other)]
    assert summaries[0] is not None
    assert summaries[1] is not None
    assert summaries[0].summary == summaries[1].summary


def test_rollback_and_roll_forward_again(mira: timestone.Memory, group: str) -> None:
    r2015, r2023, r2019 = _ingest(mira, group)
    everything = {(f.id, f.target, f.invalid_at) for f in mira.facts(group, valid_at=None)}
    back = mira.rollback(group, to=r2015.recorded_at)
    assert _now(mira, group, valid_at=TODAY)["DIRECTS"] == "Château Nord"
    assert mira.get_entity(group, "Château Sud") is None
    assert back.expired["facts"] > 0
    # as_of any earlier moment reads as before
    held = _now(mira, group, valid_at=TODAY, as_of=r2019.recorded_at)
    assert held["DIRECTS"] == "Château Sud"
    # the rollback can itself be rolled back: everything returns with the same fact ids
    mira.rollback(group, to=r2019.recorded_at)
    assert {(f.id, f.target, f.invalid_at) for f in mira.facts(group, valid_at=None)} == everything
    del r2023


def test_purge_erases_from_history(mira: timestone.Memory, dsn: str, group: str) -> None:
    _, r2023, _ = _ingest(mira, group)
    erased = mira.purge_episode(group, r2023.episode.id)
    assert erased > 0
    with psycopg.connect(dsn) as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM timestone.episodes WHERE group_id = %(g)s AND id = %(e)s),"
            " (SELECT count(*) FROM timestone.facts WHERE group_id = %(g)s AND fact LIKE '%%Sud%%'),"
            " (SELECT count(*) FROM timestone.entities WHERE group_id = %(g)s AND name = 'Château Sud'),"
            " (SELECT count(*) FROM timestone.purges WHERE group_id = %(g)s AND episode_id = %(e)s)",
            {"g": group, "e": r2023.episode.id},
        ).fetchone()
    assert counts == (0, 0, 0, 1)
    # as-of reads of the moment it was held no longer show it
    assert "Château Sud" not in _now(mira, group, valid_at=TODAY, as_of=r2023.recorded_at).values()


def test_documents_are_chunked_versioned_and_idempotent(
    memory: timestone.Memory, group: str
) -> None:
    text = "\n\n".join(
        f"Paragraph {i}. " + "Vines grow slowly on the hill. " * 20 for i in range(6)
    )
    first = memory.add_document(
        group, "doc://handbook", text, title="Handbook", reference_time=TODAY
    )
    assert first.created
    assert first.version == 1
    assert len(first.episodes) > 1
    for ep in first.episodes:
        assert ep.document_uri == "doc://handbook"
        assert ep.char_start is not None
        assert ep.char_end is not None
        assert text[ep.char_start : ep.char_end] == ep.content
    again = memory.add_document(
        group, "doc://handbook", text, title="Handbook", reference_time=TODAY
    )
    assert not again.created
    assert [e.id for e in again.episodes] == [e.id for e in first.episodes]
    second = memory.add_document(
        group, "doc://handbook", text + "\n\nA new rule.", reference_time=TODAY
    )
    assert second.created
    assert second.version == 2
    assert set(second.retracted) == {e.id for e in first.episodes}


def test_a_documents_new_title_or_metadata_is_a_new_version(
    memory: timestone.Memory, group: str
) -> None:
    """The same content under a corrected title or new metadata is not dropped as a
    repeat: the title is every chunk's context."""
    text = "The cellar opens at nine. Tastings need a booking."
    meta = {"lang": "en", "tags": ["visits"]}
    kw: dict[str, Any] = {"reference_time": TODAY}
    first = memory.add_document(group, "doc://h", text, title="Draft", metadata=meta, **kw)
    same = memory.add_document(
        group, "doc://h", text, title="Draft", metadata={"tags": ("visits",), "lang": "en"}, **kw
    )
    assert (same.created, same.version) == (False, 1)  # equal as JSON: a repeat
    titled = memory.add_document(group, "doc://h", text, title="Visits", metadata=meta, **kw)
    assert (titled.created, titled.version) == (True, 2)
    assert set(titled.retracted) == {e.id for e in first.episodes}
    tagged = memory.add_document(
        group, "doc://h", text, title="Visits", metadata={"lang": "fr"}, **kw
    )
    assert (tagged.created, tagged.version) == (True, 3)
    [chunk] = memory.episodes(group)
    assert (chunk.source_description, chunk.name) == ("Visits", "Visits [1/1]")
    with psycopg.connect(memory.dsn) as conn:
        row = conn.execute(
            "SELECT metadata - 'document_sha256' FROM timestone.episodes"
            " WHERE group_id = %s AND expired_at IS NULL",
            (group,),
        ).fetchone()
    assert row == ({"lang": "fr", "title": "Visits"},)


def test_a_rollback_to_the_moment_the_graph_already_holds_writes_nothing(
    mira: timestone.Memory, dsn: str, group: str
) -> None:
    """A rollback copies only the rows that differ from what the moment held: repeated,
    or aimed at a moment whose graph is the current one, it leaves every table as it is."""
    r2015, _, r2019 = _ingest(mira, group)

    first = mira.rollback(group, to=r2015.recorded_at)
    assert first.expired["facts"] > 0
    assert first.restored["facts"] > 0
    written = _counts(dsn, group)
    again = mira.rollback(group, to=r2015.recorded_at)
    assert again.expired == dict.fromkeys(again.expired, 0)
    assert again.restored == dict.fromkeys(again.restored, 0)
    assert _counts(dsn, group) == written
    assert _now(mira, group, valid_at=TODAY)["DIRECTS"] == "Château Nord"
    # back to the end: only what the first rollback changed changes again
    forward = mira.rollback(group, to=r2019.recorded_at)
    assert forward.restored["facts"] == first.expired["facts"]
    assert _now(mira, group, valid_at=TODAY)["DIRECTS"] == "Château Sud"
