"""TimestoneRetriever: the langchain-tests standard suite, metadata, time, bad input."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import ValidationError

import timestone
from langchain_timestone import TimestoneRetriever
from timestone.errors import InvalidInput


class TestTimestoneRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _seeded(self, memory: timestone.Memory, mira: str) -> None:
        self._params = {"memory": memory, "group_id": mira}

    @property
    def retriever_constructor(self) -> type[TimestoneRetriever]:
        return TimestoneRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return self._params

    @property
    def retriever_query_example(self) -> str:
        return "Where does Mira work?"


def test_documents_carry_both_clocks_and_provenance(memory: timestone.Memory, mira: str) -> None:
    docs = TimestoneRetriever(memory=memory, group_id=mira, k=2).invoke("Who directs Château Sud?")
    assert len(docs) == 2
    top = docs[0]
    assert top.page_content == "Mira directs Château Sud."
    meta = top.metadata
    assert meta["kind"] == "fact"
    assert top.id == meta["id"]
    assert uuid.UUID(meta["version_id"])
    assert (meta["source"], meta["relation"], meta["target"]) == ("Mira", "DIRECTS", "Château Sud")
    assert meta["valid_at"].startswith("2023-06-15")
    assert meta["invalid_at"] is None
    assert meta["expired_at"] is None
    assert datetime.fromisoformat(meta["created_at"]).tzinfo is not None
    assert len(meta["episodes"]) == 1
    assert meta["score"] > 0


def test_time_parameters(memory: timestone.Memory, mira: str) -> None:
    before = datetime(2020, 1, 1, tzinfo=UTC)
    then = TimestoneRetriever(memory=memory, group_id=mira, k=10, valid_at=before)
    assert all(
        datetime.fromisoformat(d.metadata["valid_at"]) <= before for d in then.invoke("Mira")
    )
    assert "Mira works with grape Gamay." in [d.page_content for d in then.invoke("grape")]
    every = memory.facts(mira, valid_at=None, limit=1000)
    stamps = sorted({f.created_at for f in every})
    assert len(stamps) == 3  # one write per episode
    nothing = TimestoneRetriever(memory=memory, group_id=mira, as_of=stamps[0] - timedelta(1))
    assert nothing.invoke("Mira") == []
    before_backfill = TimestoneRetriever(
        memory=memory, group_id=mira, k=10, valid_at=None, as_of=stamps[1]
    )
    held = before_backfill.invoke("Where is Château Nord located?")
    assert held
    assert all(d.metadata["relation"] != "LOCATED_IN" for d in held)


def test_scopes_mix_entities_and_episodes(memory: timestone.Memory, mira: str) -> None:
    retriever = TimestoneRetriever(
        memory=memory, group_id=mira, k=6, scopes=("facts", "entities", "episodes")
    )
    docs = retriever.invoke("Château Sud")
    assert {d.metadata["kind"] for d in docs} >= {"fact", "entity"}
    # each scope best first; the scopes stand side by side by rank (their scores have
    # scales of their own: tests/test_retrievers_agree.py)
    for kind in ("fact", "entity", "episode"):
        scores = [d.metadata["score"] for d in docs if d.metadata["kind"] == kind]
        assert scores == sorted(scores, reverse=True)
    kinds = [d.metadata["kind"] for d in docs]
    assert kinds[:2] == ["fact", "entity"]
    assert all(isinstance(d, Document) for d in docs)


async def test_async_memory(
    amemory: timestone.AsyncMemory, memory: timestone.Memory, mira: str
) -> None:
    retriever = TimestoneRetriever(memory=amemory, group_id=mira, k=1)
    docs = await retriever.ainvoke("Where does Mira work?")
    assert len(docs) == 1
    with pytest.raises(TypeError, match="call ainvoke"):
        retriever.invoke("Where does Mira work?")


def test_bad_input(memory: timestone.Memory) -> None:
    with pytest.raises(ValidationError, match="group_id"):
        TimestoneRetriever(memory=memory)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="group_id is empty"):
        TimestoneRetriever(memory=memory, group_id="")
    with pytest.raises(ValidationError, match="unknown scope"):
        TimestoneRetriever(memory=memory, group_id="g", scopes=("facts", "nope"))
    with pytest.raises(ValidationError, match=r"unknown scope\(s\) '\\ud800'"):
        TimestoneRetriever(memory=memory, group_id="g", scopes=("\ud800",))
    with pytest.raises(ValidationError, match="k must be an integer from 1 to 1000, got 0"):
        TimestoneRetriever(memory=memory, group_id="g", k=0)
    with pytest.raises(ValidationError, match="naive datetime"):
        TimestoneRetriever(memory=memory, group_id="g", as_of=datetime(2020, 1, 1))
    # a number is not seconds since 1970, and a misspelt setting is not ignored
    with pytest.raises(ValidationError, match="as_of must be a timezone-aware datetime, got int"):
        TimestoneRetriever(memory=memory, group_id="g", as_of=2019)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="valid_at must be a timezone-aware datetime, got fl"):
        TimestoneRetriever(memory=memory, group_id="g", valid_at=1.7e9)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"top_k\n  Extra inputs are not permitted"):
        TimestoneRetriever(memory=memory, group_id="g", top_k=10)  # type: ignore[call-arg]
    given = TimestoneRetriever(memory=memory, group_id="g", as_of="2020-01-01T00:00:00Z")  # type: ignore[arg-type]
    assert given.as_of == datetime(2020, 1, 1, tzinfo=UTC)


def test_k_past_what_a_search_returns_is_refused_naming_k(
    memory: timestone.Memory, mira: str
) -> None:
    """``k`` from 1 to the most one search returns, checked when the retriever is made and
    on each call that passes its own, naming ``k`` (the search calls it ``limit``)."""
    for k in (5000, 1001, True, "4"):
        with pytest.raises(ValidationError) as made:
            TimestoneRetriever(memory=memory, group_id=mira, k=k)  # type: ignore[arg-type]
        assert made.value.errors()[0]["msg"] == (
            f"Value error, k must be an integer from 1 to 1000, got {k!r}"
        )
    retriever = TimestoneRetriever(memory=memory, group_id=mira, k=1000)
    for k in (0, 1001):
        with pytest.raises(InvalidInput) as called:
            retriever.invoke("Where does Mira work?", k=k)
        assert str(called.value) == f"k must be an integer from 1 to 1000, got {k}"
    assert len(retriever.invoke("Where does Mira work?", k=1)) == 1
