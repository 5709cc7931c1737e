"""The records retrieval gives back: search results, communities, and prompt context."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime

from ._records import Entity, Episode, Fact

__all__ = [
    "Community",
    "CommunityReport",
    "Context",
    "ContextItem",
    "SearchResults",
    "citation_of",
]


def citation_of(kind: str, ident: uuid.UUID) -> str:
    """The stable citation id of a fact (``kind="fact"``: ``F-``) or an episode or document
    chunk (``E-``), then 10 hex digits of its id: the last 10 of a time-ordered (version 7)
    id, whose first digits are the millisecond it was minted and alike for every row of
    a write (``_ids``); the first 10 of a random one, as ids were minted before, so that
    such a fact keeps its citation."""
    digits = ident.hex[-10:] if ident.version == 7 else ident.hex[:10]
    return ("F-" if kind == "fact" else "E-") + digits


def _minute(when: datetime) -> str:
    return f"{when.date().isoformat()} {when:%H:%M} UTC"  # the year in four digits


@dataclasses.dataclass(frozen=True, slots=True)
class Community:
    """A group of closely linked entities, with a name and a summary (at the read's ``as_of``)."""

    id: uuid.UUID
    version_id: uuid.UUID
    group_id: str
    name: str
    summary: str
    members: tuple[uuid.UUID, ...]
    fact_count: int
    created_at: datetime
    expired_at: datetime | None
    score: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class CommunityReport:
    """What a community build or update did."""

    built_at: datetime
    communities: int  # current communities of the group afterwards
    created: int  # new community versions written
    expired: int  # community versions expired
    entities: int  # entities that belong to a community


@dataclasses.dataclass(frozen=True, slots=True)
class SearchResults:
    """What ``search`` found, per scope, best first; every item carries its ``score``."""

    query: str
    facts: Sequence[Fact] = ()
    entities: Sequence[Entity] = ()
    episodes: Sequence[Episode] = ()
    communities: Sequence[Community] = ()

    def __len__(self) -> int:
        return len(self.facts) + len(self.entities) + len(self.episodes) + len(self.communities)


@dataclasses.dataclass(frozen=True, slots=True)
class ContextItem:
    """One piece of evidence in a ``Context``.

    ``citation`` is stable: the same fact (or episode) gets the same citation id in
    every context: ``F-`` then 10 hex digits of the fact id (``E-`` for an episode or
    document chunk; ``citation_of``). ``fact_id``/``episode_ids``/``document_uri`` and the
    character offsets map it back to its source.
    """

    citation: str
    kind: str  # "fact" or "episode"
    text: str
    score: float
    tokens: int
    fact_id: uuid.UUID | None = None
    version_id: uuid.UUID | None = None
    episode_ids: tuple[uuid.UUID, ...] = ()
    document_uri: str | None = None
    char_start: int | None = None
    char_end: int | None = None
    valid_at: datetime | None = None
    invalid_at: datetime | None = None
    reference_time: datetime | None = None

    def render(self) -> str:
        """The line this item takes in the prompt: citation, dates, text, source."""
        if self.kind == "fact":
            assert self.valid_at is not None
            until = self.invalid_at.date().isoformat() if self.invalid_at else "present"
            when = f"{self.valid_at.date().isoformat()} to {until}"
        else:
            when = (
                f"recorded {self.reference_time.date().isoformat()}"
                if self.reference_time
                else "undated"
            )
        source = ""
        if self.document_uri is not None:
            source = f" (source: {self.document_uri}"
            if self.char_start is not None and self.char_end is not None:
                source += f", chars {self.char_start}-{self.char_end}"
            source += ")"
        # one line, whatever the text holds: a line break in a sentence would start a line
        # that reads as an item of its own
        return " ".join(f"[{self.citation}] ({when}) {self.text}{source}".split())


@dataclasses.dataclass(frozen=True, slots=True)
class Context:
    """Evidence for a question, chosen under a token budget, strongest items at the edges."""

    query: str
    items: Sequence[ContextItem]
    token_budget: int
    tokens: int
    valid_at: datetime | None
    as_of: datetime | None

    def __iter__(self) -> Iterator[ContextItem]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def cite(self, citation: str) -> ContextItem:
        """The item with this citation id; ``KeyError`` if the context holds none."""
        for item in self.items:
            if item.citation == citation:
                return item
        raise KeyError(citation)

    def as_prompt(self) -> str:
        """The evidence as prompt text: a header with the time it speaks of, one line per item."""
        when = _minute(self.valid_at) if self.valid_at is not None else "any time (history)"
        header = f"Evidence true at {when}; cite items by [id]:"
        if self.as_of is not None:
            header += f"\n(as recorded by {_minute(self.as_of)})"
        return "\n".join([header, *(item.render() for item in self.items)])
