"""A large write pauses the cyclic garbage collector, and always gives it back."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

import timestone
from timestone import FactInput
from timestone.errors import InvalidPeriod
from timestone.write import _ingest as sync_ingest
from timestone.write import _ingest_async as aio_ingest
from timestone.write._collector import paused

REF = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    assert gc.isenabled()
    yield
    gc.enable()  # whatever a failing case left


def test_a_pause_turns_collection_off_and_back_on() -> None:
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_nested_pauses_resume_with_the_outermost() -> None:
    with paused():
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_pause_not_asked_for_changes_nothing() -> None:
    with paused(False):
        assert gc.isenabled()
    gc.disable()
    with paused(False):
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_collector_the_process_turned_off_stays_off() -> None:
    gc.disable()
    with paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_inside_resumes_collection() -> None:
    with pytest.raises(ZeroDivisionError), paused():
        _ = 1 / 0
    assert gc.isenabled()


def test_overlapping_pauses_of_two_threads_resume_when_both_end() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with paused():
            first_in.set()
            second_in.wait(5)
        seen["after first"] = gc.isenabled()
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with paused():
            second_in.set()
            first_out.wait(5)
            seen["second, first gone"] = gc.isenabled()
        seen["after both"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"after first": False, "second, first gone": False, "after both": True}


def _facts(n: int, prefix: str) -> list[FactInput]:
    return [FactInput(f"{prefix} {i}", "KNOWS", f"{prefix} {i + 1}") for i in range(n)]


def _watch(monkeypatch: pytest.MonkeyPatch, module: Any, seen: list[bool]) -> None:
    """Record whether collection was on while each episode was written."""
    original = module.Ingest._write_episode

    def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(module.Ingest, "_write_episode", write)


def test_a_large_add_facts_writes_with_collection_paused(
    memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    _watch(monkeypatch, sync_ingest, seen)
    big = memory.add_facts(
        group, _facts(aio_ingest.PAUSE_COLLECTOR_FACTS, "Big"), reference_time=REF
    )
    assert gc.isenabled()
    small = memory.add_facts(
        group, _facts(aio_ingest.PAUSE_COLLECTOR_FACTS - 1, "Small"), reference_time=REF
    )
    assert seen == [False, True]
    assert len(big.facts) == aio_ingest.PAUSE_COLLECTOR_FACTS
    assert len(small.facts) == aio_ingest.PAUSE_COLLECTOR_FACTS - 1
    assert gc.isenabled()


def test_a_refused_large_add_facts_resumes_collection(memory: timestone.Memory, group: str) -> None:
    facts: list[FactInput | dict[str, Any]] = [*_facts(aio_ingest.PAUSE_COLLECTOR_FACTS, "Bad")]
    facts.append(
        {"source": "A", "relation": "KNOWS", "target": "B", "valid_at": REF, "invalid_at": REF}
    )
    with pytest.raises(InvalidPeriod):
        memory.add_facts(group, facts, reference_time=REF)
    assert gc.isenabled()
    assert memory.facts(group, valid_at=None) == []


async def test_a_large_async_add_facts_writes_with_collection_paused(
    amemory: timestone.AsyncMemory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    original = aio_ingest.Ingest._write_episode  # pyright: ignore[reportPrivateUsage]

    async def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(aio_ingest.Ingest, "_write_episode", write)
    result = await amemory.add_facts(
        group, _facts(aio_ingest.PAUSE_COLLECTOR_FACTS, "Async"), reference_time=REF
    )
    assert seen == [False]
    assert len(result.facts) == aio_ingest.PAUSE_COLLECTOR_FACTS
    assert gc.isenabled()
