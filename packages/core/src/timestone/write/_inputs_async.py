"""The inputs of a write, checked, with their defaults resolved (no I/O): facts, episode
specs, idempotency keys."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from .._records import (
    MAX_NAME_CHARS,
    EntityInput,
    FactInput,
    check_text,
)
from .._time import aware
from ..errors import InvalidInput
from ..extract._extraction_async import check_episode_content, check_max_chars
from ..extract._resolution_async import Plan
from ._episodes_async import (
    EpisodeInsert,
    idempotency_key,
)

if TYPE_CHECKING:
    from .._vectors import Row

__all__ = [
    "END",
    "EPISODE_KEYS",
    "FACTS_KEYS",
    "FactBatch",
    "Prepared",
    "as_given",
    "check_concurrency",
    "check_on_progress",
    "default_sentence",
    "episode_row",
    "episode_rows",
    "episode_spec",
    "fact_end",
    "fact_json",
    "key_of",
    "merge",
    "named",
    "named_entity",
    "optional_text",
]


def default_sentence(source: str, relation: str, target: str) -> str:
    return f"{source} {relation.lower().replace('_', ' ')} {target}."


@dataclasses.dataclass(slots=True)  # made per fact: not frozen, whose __init__ costs 2.6x
class Prepared:
    """A validated fact with its defaults resolved."""

    source: EntityInput
    relation: str
    target: EntityInput
    sentence: str
    valid_at: datetime
    invalid_at: datetime | None
    attributes: Mapping[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class FactBatch:
    """An ``add_facts`` call checked and embedded, its database work still to do."""

    group_id: str
    episode: EpisodeInsert
    prepared: list[Prepared]
    episode_text: str
    vectors: dict[str, Row]


END = object()  # the end of the batches of ``add_fact_batches``


FACTS_KEYS = frozenset(
    {"facts", "reference_time", "name", "saga", "idempotency_key", "source_description"}
)


def fact_end(value: str | EntityInput) -> EntityInput:
    """A fact's end as an entity; one shared object per plain name (never mutated)."""
    return value if isinstance(value, EntityInput) else named_entity(value)


@functools.lru_cache(maxsize=1 << 16)
def named_entity(name: str) -> EntityInput:
    return EntityInput(name)


def fact_json(f: FactInput) -> dict[str, Any]:
    def end(e: str | EntityInput) -> Any:
        if isinstance(e, str):
            return e
        out: dict[str, Any] = {"name": e.name}
        if e.labels:
            out["labels"] = list(e.labels)
        if e.summary is not None:
            out["summary"] = e.summary
        if e.attributes:
            out["attributes"] = e.attributes
        return out

    out: dict[str, Any] = {"source": end(f.source), "relation": f.relation, "target": end(f.target)}
    if f.fact is not None:
        out["fact"] = f.fact
    if f.valid_at is not None:
        out["valid_at"] = f.valid_at.isoformat()
    if f.invalid_at is not None:
        out["invalid_at"] = f.invalid_at.isoformat()
    if f.attributes:
        out["attributes"] = f.attributes
    return out


def as_given(value: object) -> str:
    """An attribute value JSON has no form for, in the episode's record of the call: the
    ontology's model accepted it (a ``datetime`` field) and stores what it made of it."""
    isoformat = getattr(value, "isoformat", None)
    return str(isoformat()) if callable(isoformat) else str(value)


def key_of(given: object, group_id: str, content: str, reference_time: datetime) -> str:
    """The idempotency key given (an empty one is refused, not taken for none), or the
    default: a hash of the group, the content and the reference time."""
    if given is None:
        return idempotency_key(group_id, content, reference_time)
    return check_text(given, "idempotency_key", max_chars=512)


def optional_text(value: object, what: str, max_chars: int) -> str | None:
    return None if value is None else check_text(value, what, max_chars=max_chars)


def merge(a: EntityInput, b: EntityInput) -> EntityInput:
    labels = tuple(dict.fromkeys((*a.labels, *b.labels)))
    if labels == a.labels and b.summary is None and not b.attributes:
        return a  # ``b`` adds nothing
    return EntityInput(
        name=a.name,
        labels=labels,
        summary=b.summary if b.summary is not None else a.summary,
        attributes={**a.attributes, **b.attributes},
    )


EPISODE_KEYS = {
    "content",
    "reference_time",
    "name",
    "source",
    "source_description",
    "saga",
    "idempotency_key",
}


def episode_row(
    group_id: str,
    content: object,
    *,
    reference_time: object,
    name: object,
    source: object,
    source_description: object,
    saga: object,
    idempotency_key_: object,
    max_chars: int,
) -> EpisodeInsert:
    """An ``add_episode`` call's episode, every argument checked: what is refused before
    any model call. The extraction's counts are filled in later."""
    ref = aware(reference_time, "reference_time")
    text = check_episode_content(content, source, max_chars)
    kind = cast(str, source)  # one of SOURCES, checked with the content
    return EpisodeInsert(
        name=check_text(name, "episode name", max_chars=MAX_NAME_CHARS)
        if name is not None
        else f"{kind} at {ref.isoformat()}",
        content=text,
        source=kind,
        source_description=check_text(
            source_description, "source_description", max_chars=10_000, allow_empty=True
        ),
        reference_time=ref,
        saga=optional_text(saga, "saga", MAX_NAME_CHARS),
        idempotency_key=key_of(idempotency_key_, group_id, text, ref),
    )


def episode_rows(group_id: str, episodes: object, max_chars: int) -> list[EpisodeInsert]:
    """The items of ``add_episodes``, all checked before the first runs."""
    if isinstance(episodes, (str, bytes, Mapping)) or not isinstance(episodes, Sequence):
        raise InvalidInput("episodes must be a list of mappings with add_episode's arguments")
    limit = check_max_chars(max_chars)
    items = cast(Sequence[object], episodes)
    return [episode_spec(i, e, group_id, limit) for i, e in enumerate(items)]


def episode_spec(index: int, value: object, group_id: str, max_chars: int) -> EpisodeInsert:
    """Item ``index`` of ``add_episodes`` checked as ``add_episode`` checks its arguments;
    an error names the item."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f"episodes[{index}] must be a mapping, got {type(value).__name__}")
    item = cast(Mapping[str, Any], value)
    unknown = set(item) - EPISODE_KEYS
    if unknown:
        raise InvalidInput(f"episodes[{index}] has unknown keys {sorted(map(str, unknown))}")
    for required in ("content", "reference_time"):
        if required not in item:
            raise InvalidInput(f"episodes[{index}] has no {required!r}")
    try:
        return episode_row(
            group_id,
            item["content"],
            reference_time=item["reference_time"],
            name=item.get("name"),
            source=item.get("source", "text"),
            source_description=item.get("source_description", ""),
            saga=item.get("saga"),
            idempotency_key_=item.get("idempotency_key"),
            max_chars=max_chars,
        )
    except InvalidInput as exc:
        raise type(exc)(f"episodes[{index}]: {exc}") from exc


def check_concurrency(concurrency: object) -> int:
    """How many episodes ``add_episodes`` runs at once: 1 to 64."""
    if not isinstance(concurrency, int) or isinstance(concurrency, bool):
        raise InvalidInput(f"concurrency must be an integer, got {concurrency!r:.80}")
    if not 1 <= concurrency <= 64:
        raise InvalidInput(f"concurrency must be an integer from 1 to 64, got {concurrency!r:.80}")
    return concurrency


def check_on_progress(on_progress: object) -> None:
    """A bulk write's ``on_progress``: a function, or None."""
    if on_progress is not None and not callable(on_progress):
        raise InvalidInput(
            f"on_progress must be a function or None, got {type(on_progress).__name__}"
        )


def named(p: Plan, prepared: Sequence[Prepared]) -> list[EntityInput]:
    return [*p.entities, *(e for x in prepared for e in (x.source, x.target))]
