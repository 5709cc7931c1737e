"""One write-with-retry helper: a write that lost a race runs again, at most three times."""

from __future__ import annotations

import pytest

from timestone.errors import ConflictError, InvalidInput
from timestone.write import _transaction as sync_tx
from timestone.write import _transaction_async as async_tx


def test_a_conflict_runs_the_write_again_and_the_third_one_is_raised() -> None:
    calls: list[int] = []

    def twice_lost() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConflictError("a concurrent writer took the name")
        return "written"

    assert sync_tx.write_with_retry(twice_lost) == "written"
    assert len(calls) == 3

    def always_lost() -> str:
        calls.append(1)
        raise ConflictError(f"lost {len(calls)}")

    calls.clear()
    with pytest.raises(ConflictError, match="lost 3"):
        sync_tx.write_with_retry(always_lost)
    assert len(calls) == sync_tx.RETRIES == 3


def test_other_errors_are_not_retried() -> None:
    calls: list[int] = []

    def refused() -> None:
        calls.append(1)
        raise InvalidInput("bad input")

    with pytest.raises(InvalidInput):
        sync_tx.write_with_retry(refused)
    assert calls == [1]


async def test_the_async_twin_retries_the_same_way() -> None:
    calls: list[int] = []

    async def once_lost() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise ConflictError("a concurrent writer took the key")
        return len(calls)

    assert await async_tx.write_with_retry(once_lost) == 2
