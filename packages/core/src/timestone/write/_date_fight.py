"""The date fight: a slot's world timeline as a pure function of its assertions.

A slot is (source, relation) for a cardinality-one relation, and
(source, relation, target) for a cardinality-many one. Given the assertions
the graph holds about a slot:

1. At one ``valid_at``, the latest recording wins (a correction): it sets the
   target and the end. Earlier recordings of the same target at that date
   join its provenance; earlier recordings of another target were never true.
2. Sorted by ``valid_at``, each winner holds from its ``valid_at`` until the
   next winner starts, or until its own ``invalid_at``, whichever comes first.
   A later assertion of the same target continues the period, so an
   open-ended assertion is bounded only by what the slot says later in world
   time: the newer world date wins.
3. Neighbouring periods of the same target are one fact; its provenance lists
   every assertion that supports it, in recording order, the first being the
   author. The fact's stable id is the author assertion's id.

For assertions with distinct ``valid_at`` the result does not depend on the
order in which they were recorded.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

__all__ = ["Assertion", "Period", "attributes_key", "compute_slot", "supporting"]


def attributes_key(attributes: Mapping[str, Any]) -> str:
    """A comparable form of a fact's attributes: canonical JSON (values may be lists or
    objects, which a tuple of items could not hash)."""
    if not attributes:
        return "{}"
    return json.dumps(attributes, sort_keys=True, separators=(",", ":"), default=str)


@dataclasses.dataclass(slots=True)  # made per fact: not frozen, whose __init__ costs 2.6x
class Assertion:
    id: uuid.UUID
    episode_id: uuid.UUID
    recorded_at: datetime
    position: int
    target_id: uuid.UUID
    valid_at: datetime
    invalid_at: datetime | None
    fact: str
    attributes: Mapping[str, Any]

    @property
    def order(self) -> tuple[datetime, int]:
        return (self.recorded_at, self.position)


@dataclasses.dataclass(slots=True)  # made per fact: not frozen, whose __init__ costs 2.6x
class Period:
    """One fact of the slot's timeline."""

    id: uuid.UUID
    target_id: uuid.UUID
    valid_at: datetime
    invalid_at: datetime | None
    fact: str
    attributes: Mapping[str, Any]
    episodes: tuple[uuid.UUID, ...]

    def key(self) -> tuple[object, ...]:
        """What makes two versions of a fact the same version."""
        return (
            self.id,
            self.target_id,
            self.valid_at,
            self.invalid_at,
            self.fact,
            attributes_key(self.attributes),
            self.episodes,
        )


def compute_slot(assertions: Iterable[Assertion]) -> list[Period]:
    """The slot's facts, by ``valid_at``."""
    if isinstance(assertions, Sequence) and len(assertions) == 1:
        # the commonest slot, said once: what the steps below give for it, directly
        a = assertions[0]
        return [
            Period(
                id=a.id,
                target_id=a.target_id,
                valid_at=a.valid_at,
                invalid_at=a.invalid_at,
                fact=a.fact,
                attributes=dict(a.attributes),
                episodes=(a.episode_id,),
            )
        ]
    return [
        _period(target, start, end, support) for target, start, end, support in _merged(assertions)
    ]


def supporting(assertions: Iterable[Assertion]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Each fact of the slot (by its id) and the assertions that support it: the ones a
    retraction of that fact alone expires."""
    out: dict[uuid.UUID, list[uuid.UUID]] = {}
    for _, _, _, support in _merged(assertions):
        ordered = sorted(support, key=lambda a: a.order)
        out[ordered[0].id] = [a.id for a in ordered]
    return out


_Span = tuple[uuid.UUID, datetime, "datetime | None", list[Assertion]]


def _merged(assertions: Iterable[Assertion]) -> list[_Span]:
    """Steps 1 to 3: the slot's facts as (target, start, end, supporting assertions)."""
    by_date: dict[datetime, list[Assertion]] = {}
    for a in assertions:
        by_date.setdefault(a.valid_at, []).append(a)

    # 1. one winner per date, with the same-target recordings that support it
    winners: list[tuple[Assertion, list[Assertion]]] = []
    for valid_at in sorted(by_date):
        group = sorted(by_date[valid_at], key=lambda a: a.order)
        winner = group[-1]
        winners.append((winner, [a for a in group if a.target_id == winner.target_id]))

    # 2. each winner holds until the next starts or its own end
    spans: list[tuple[uuid.UUID, datetime, datetime | None, list[Assertion]]] = []
    for i, (winner, support) in enumerate(winners):
        end = winner.invalid_at
        if i + 1 < len(winners):
            next_start = winners[i + 1][0].valid_at
            end = next_start if end is None else min(end, next_start)
        spans.append((winner.target_id, winner.valid_at, end, support))

    # 3. neighbouring spans of one target are one fact
    merged: list[_Span] = []
    for target, start, end, support in spans:
        if merged and merged[-1][0] == target and merged[-1][2] == start:
            prev = merged[-1]
            merged[-1] = (target, prev[1], end, prev[3] + support)
        else:
            merged.append((target, start, end, list(support)))
    return merged


def _period(
    target: uuid.UUID, start: datetime, end: datetime | None, support: Sequence[Assertion]
) -> Period:
    ordered = sorted(support, key=lambda a: a.order)
    author = ordered[0]
    attributes: dict[str, Any] = {}
    episodes: list[uuid.UUID] = []
    for a in ordered:
        attributes.update(a.attributes)
        if a.episode_id not in episodes:
            episodes.append(a.episode_id)
    return Period(
        id=author.id,
        target_id=target,
        valid_at=start,
        invalid_at=end,
        fact=author.fact,
        attributes=attributes,
        episodes=tuple(episodes),
    )
