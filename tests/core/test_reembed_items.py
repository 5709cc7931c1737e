"""``reembed`` moves every vector to the new embedder as a fresh write would make it: the
items' (``put_item(index=...)``, the LangGraph store's ``batch_items``) from the texts
their puts embedded, and an ``add_facts`` episode's from its facts' sentences."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

import timestone
from timestone import EntityInput, FactInput, Item, ItemPut, ItemSearch
from timestone.embedders import HashEmbedder
from timestone.errors import DatabaseError, EmbedderMismatch

REF = datetime(2020, 1, 1, tzinfo=UTC)
NOTES = ("notes",)
QUERIES = ("peanut allergy", "hiking in the alps", "coffee", "paris trip in june")

# each item with the index it is put with: every form ``index`` takes
ITEMS: list[tuple[str, dict[str, Any], bool | str | list[str]]] = [
    ("json", {"text": "allergic to peanuts", "n": 1.5, "big": 1e20, "zero": -0.0}, True),
    ("unicode", {"text": "café ☕ in the alps", "tags": {"b": 1, "a": [2, 1]}}, True),
    ("one", {"a": "x"}, "hiking in the alps"),
    ("fields", {"a": "y"}, ["peanut butter", "coffee beans", "alps"]),
    ("none", {"text": "coffee every morning"}, False),
]
BATCH: list[tuple[str, dict[str, Any], bool | str | list[str]]] = [
    ("b-fields", {"trip": "paris", "when": "june"}, ["paris", "june trip"]),
    ("b-json", {"trip": "rome in june"}, True),
]


def _put_all(mem: timestone.Memory, group: str) -> None:
    for key, value, index in ITEMS:
        mem.put_item(group, NOTES, key, value, index=index)
    mem.batch_items(group, [ItemPut(NOTES, key, value, index=index) for key, value, index in BATCH])


def _ranked(mem: timestone.Memory, group: str) -> list[list[tuple[str, float | None]]]:
    return [
        [(i.key, i.score) for i in mem.search_items(group, NOTES, query=q, limit=20)]
        for q in QUERIES
    ]


def _batch_ranked(mem: timestone.Memory, group: str) -> list[list[tuple[str, float | None]]]:
    answers = mem.batch_items(group, [ItemSearch(NOTES, query=q, limit=20) for q in QUERIES])
    out: list[list[tuple[str, float | None]]] = []
    for answer in answers:
        assert isinstance(answer, list)
        out.append([(i.key, i.score) for i in answer if isinstance(i, Item)])
    return out


def _same(
    moved: list[list[tuple[str, float | None]]], fresh: list[list[tuple[str, float | None]]]
) -> None:
    """The same items with the same scores, each ranking best first (items of equal scores
    are ordered by when they were put, which differs between the two groups)."""
    for m, f in zip(moved, fresh, strict=True):
        assert [s for _, s in m] == sorted((s for _, s in m), key=lambda s: 2 if s is None else -s)
        assert dict(m).keys() == dict(f).keys()
        for key, score in f:
            if score is None:
                assert dict(m)[key] is None
            else:
                assert dict(m)[key] == pytest.approx(score, abs=1e-6)


def test_reembed_moves_item_vectors_as_a_fresh_put_makes_them(fresh_dsn: str) -> None:
    moved, fresh = "moved", "fresh"
    with timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16)) as mem:
        _put_all(mem, moved)
        between = datetime.now(UTC)
        mem.put_item(moved, NOTES, "one", {"a": "x"}, index="hiking in the alps")  # history
        mem.reembed(HashEmbedder(48))
        _put_all(mem, fresh)  # the same puts, made by the new embedder
        after = _ranked(mem, moved)
        assert all(
            score is not None for ranking in after for key, score in ranking if key != "none"
        )
        _same(after, _ranked(mem, fresh))
        _same(_batch_ranked(mem, moved), _batch_ranked(mem, fresh))
        # the versions of the past too
        past = [
            [(i.key, i.score) for i in mem.search_items(moved, NOTES, query=q, as_of=between)]
            for q in QUERIES
        ]
        _same(past, _ranked(mem, fresh))
    with psycopg.connect(fresh_dsn) as conn:
        dims = conn.execute(
            "SELECT DISTINCT coalesce(vector_dims(embedding), vector_dims(field_embeddings[1]))"
            " FROM timestone.items WHERE embedding IS NOT NULL OR field_embeddings IS NOT NULL"
        ).fetchall()
    assert dims == [(48,)]


def _set_texts_unknown(dsn: str, group: str, current: bool) -> None:
    """Make item rows of ``group`` look written before puts kept their texts."""
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "UPDATE timestone.items SET index_texts = NULL WHERE group_id = %s"
            " AND (expired_at IS NULL) = %s",
            (group, current),
        )


def test_reembed_refuses_items_whose_texts_are_not_known(fresh_dsn: str, group: str) -> None:
    with timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16)) as mem:
        mem.put_item(group, NOTES, "k", {"text": "allergic to peanuts"}, index="peanuts")
        mem.put_item(group, NOTES, "plain", {"text": "no vector"}, index=False)
        mem.add_facts(group, [FactInput("Ada", "KNOWS", "Grace")], reference_time=REF)
        _set_texts_unknown(fresh_dsn, group, current=True)
        with pytest.raises(DatabaseError, match="Put each again") as info:
            mem.reembed(HashEmbedder(32))
        assert "1 current item holds" in str(info.value)
        assert repr(group) in str(info.value)
        assert "'k'" in str(info.value)
        # nothing moved: the memory still reads and writes with its embedder
        assert mem.search_items(group, NOTES, query="peanuts")[0].score == pytest.approx(1.0)
        # putting it again keeps its texts; the unknown version of the past loses its vector
        mem.put_item(group, NOTES, "k", {"text": "allergic to peanuts"}, index="peanuts")
        _set_texts_unknown(fresh_dsn, group, current=False)
        mem.reembed(HashEmbedder(32))
        [hit, plain] = mem.search_items(group, NOTES, query="peanuts")
        assert (hit.key, hit.score) == ("k", pytest.approx(1.0))
        assert (plain.key, plain.score) == ("plain", None)
    with psycopg.connect(fresh_dsn) as conn:
        kept = conn.execute(
            "SELECT expired_at IS NULL, vector_dims(embedding) FROM timestone.items"
            " WHERE key = 'k' ORDER BY created_at"
        ).fetchall()
    assert kept == [(False, None), (True, 32)]


def test_reembed_leaves_the_graphs_given_vectors(fresh_dsn: str, group: str) -> None:
    given = [0.5, -1.0, 2.0]
    with timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16)) as mem:
        mem.graph_upsert(group, entities=[EntityInput("Ada")], vectors={"Ada": given})
        mem.reembed(HashEmbedder(32))
    with psycopg.connect(fresh_dsn) as conn:
        row = conn.execute(
            "SELECT embedding::text FROM timestone.items WHERE namespace[1:2] = '{graph,vectors}'"
        ).fetchone()
    assert row is not None
    assert [float(x) for x in row[0].strip("[]").split(",")] == given


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def _episode_vector(dsn: str, episode_id: object) -> list[float]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT embedding::text FROM timestone.episodes WHERE id = %s", (episode_id,)
        ).fetchone()
    assert row is not None
    return [float(x) for x in row[0].strip("[]").split(",")]


def test_reembed_embeds_a_facts_episode_as_add_facts_does(fresh_dsn: str) -> None:
    facts = [
        FactInput("Ada", "WROTE_NOTES_ON", "Analytical Engine"),
        FactInput(EntityInput("Ada", labels=("Person",)), "KNOWS", "Babbage", fact="Ada met him."),
        FactInput("Ada", "LIVED_IN", "London", valid_at=datetime(1840, 1, 1, tzinfo=UTC)),
    ]
    with timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16)) as mem:
        moved = mem.add_facts("moved", facts, reference_time=REF)
        mem.reembed(HashEmbedder(64))
        fresh = mem.add_facts("fresh", facts, reference_time=REF)
    after = _episode_vector(fresh_dsn, moved.episode.id)
    assert _cos(after, _episode_vector(fresh_dsn, fresh.episode.id)) == pytest.approx(1.0)


def test_a_memory_left_on_the_old_embedder_is_told_why(fresh_dsn: str) -> None:
    """Another memory re-embedded the database: this one's vectors are of the old
    dimension, and its writes and searches say so instead of a raw database error."""
    with (
        timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(64)) as mover,
        timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(64)) as stale,
    ):
        mover.add_facts("g", [FactInput("Ada", "KNOWS", "Bo")], reference_time=REF)
        mover.reembed(HashEmbedder(32))
        with pytest.raises(EmbedderMismatch, match="open the memory again with the embedder"):
            stale.add_facts("g", [FactInput("Cy", "KNOWS", "Bo")], reference_time=REF)
        with pytest.raises(EmbedderMismatch, match="differ in dimension"):
            stale.search("g", "Who knows Bo?")
        assert [f.source for f in mover.facts("g")] == ["Ada"]
