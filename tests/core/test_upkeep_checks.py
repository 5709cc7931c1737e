"""Upkeep on input it must refuse or read right: the index health's sample, and
``reembed`` given an embedder class."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import psycopg
import pytest

import timestone
from timestone.db import _health
from timestone.errors import InvalidInput

REF = datetime(2020, 1, 1, tzinfo=UTC)


def test_a_health_sample_that_draws_nothing_is_drawn_again(
    fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """None is for an index with no rows: when the Bernoulli draw comes back empty (here
    always, at a rate of 0), the sample is drawn from every row the index holds."""
    monkeypatch.setattr(_health, "_OVERSAMPLE", 0.0)
    facts = [timestone.FactInput(f"Person {i}", "KNOWS", f"Person {i + 1}") for i in range(20)]
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts("health", facts, reference_time=REF)
        with psycopg.connect(fresh_dsn, autocommit=True) as conn:
            # the row estimates the rate is drawn from, as autovacuum leaves them
            conn.execute("ANALYZE timestone.entities, timestone.facts")
        names = ["entities_name_embedding_hnsw", "facts_embedding_hnsw"]
        for sample in (1, 5):
            health = mem.vector_index_health(indexes=names, sample=sample)
            assert all(isinstance(health[name], float) for name in names), (sample, health)
        # an index with no rows still has no figure
        empty = "communities_name_embedding_hnsw"
        assert mem.vector_index_health(indexes=[empty], sample=1) == {empty: None}


class ClassEmbedder:
    """An embedder whose name and dimension are class attributes: the class itself
    looks like one."""

    name = "class-embedder"
    dimension = 8

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[0.1] * 8 for _ in texts]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)


def test_reembed_refuses_an_embedder_class(fresh_dsn: str) -> None:
    message = (
        "embedder must be an Embedder instance, got the class ClassEmbedder; "
        "pass an instance: ClassEmbedder()"
    )
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts("reembed", [timestone.FactInput("A", "KNOWS", "B")], reference_time=REF)
        before = mem.embedder
        with psycopg.connect(fresh_dsn) as conn:
            stored = conn.execute(
                "SELECT value FROM timestone.meta WHERE key = 'embedder'"
            ).fetchone()
        with pytest.raises(InvalidInput) as err:
            mem.reembed(ClassEmbedder)  # pyright: ignore[reportArgumentType]
        assert str(err.value) == message
        assert mem.embedder is before
        with psycopg.connect(fresh_dsn) as conn:
            after = conn.execute(
                "SELECT value FROM timestone.meta WHERE key = 'embedder'"
            ).fetchone()
        assert after == stored
    with pytest.raises(InvalidInput) as err:
        timestone.Memory.open(fresh_dsn, embedder=ClassEmbedder)  # pyright: ignore[reportArgumentType]
    assert str(err.value) == message
