"""Row ids drawn many at a time are version-4 UUIDs like ``uuid.uuid4()``'s."""

from __future__ import annotations

import pickle
import uuid

import pytest

from timestone._ids import new_ids


def test_ids_drawn_together_are_random_version_4_uuids() -> None:
    ids = new_ids(10_000)
    assert len(ids) == 10_000
    assert len(set(ids)) == 10_000
    assert {u.version for u in ids} == {4}
    assert {u.variant for u in ids} == {uuid.RFC_4122}
    assert all(uuid.UUID(str(u)) == u and uuid.UUID(bytes=u.bytes) == u for u in ids[:100])
    # the other 122 bits are random: each one is set in about half of the ids
    fixed = (0xF000 << 64) | (0xC000 << 48)
    for bit in range(128):
        if fixed >> bit & 1:
            continue
        share = sum(u.int >> bit & 1 for u in ids) / len(ids)
        assert 0.45 < share < 0.55, f"bit {bit} set in {share:.1%} of the ids"
    assert new_ids(0) == []


def test_an_id_drawn_together_is_a_whole_uuid() -> None:
    # made without UUID's constructor: it must still hash, compare, pickle, refuse
    # assignment and carry is_safe like one made by it
    made = new_ids(1)[0]
    same = uuid.UUID(int=made.int)
    assert made == same
    assert hash(made) == hash(same)
    assert made.is_safe is same.is_safe
    assert pickle.loads(pickle.dumps(made)) == made
    assert {made: 1}[same] == 1
    assert sorted([same, made, uuid.UUID(int=0)])[0] == uuid.UUID(int=0)
    with pytest.raises(TypeError):
        made.int = 0  # pyright: ignore[reportAttributeAccessIssue]
