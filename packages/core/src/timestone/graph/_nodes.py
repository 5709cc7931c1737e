"""The property graph view of a group: records and validation (no I/O).

A group's graph, as a property graph store (LlamaIndex's, for one) sees it:

- **entities** are Timestone entities: written through episodes and mentions,
  resolved by name like every other write, seen by ``facts``, ``search`` and
  ``timeline``;
- **relations between entities** are Timestone facts, settled by the date fight;
- **chunks** are passages of text kept verbatim under a key (a LlamaIndex
  ``ChunkNode``), as versioned items of the namespace ``GRAPH_CHUNKS``;
- **links** are relations with a chunk (or an outside key) at one end, as
  versioned items of the namespace ``GRAPH_LINKS``.

A **node id** names a node: a chunk key of the group, else an entity id (its
UUID as text), else an entity name (resolved as ingestion resolves names). The
database work is in ``graph/_property_graph_async.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import uuid
from array import array
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from .._names import normalize
from .._records import MAX_NAME_CHARS, Entity, EntityInput, Fact, check_relation, check_text
from ..errors import InvalidInput
from ..items._item import GRAPH_NAMESPACES

__all__ = [
    "GRAPH_CHUNKS",
    "GRAPH_LINKS",
    "GRAPH_VECTORS",
    "GraphChunk",
    "GraphEdge",
    "GraphNodes",
    "GraphRelation",
    "GraphWrite",
    "check_chunk",
    "check_node_ids",
    "check_vector",
    "join_by_name",
    "link_key",
]

GRAPH_CHUNKS, GRAPH_LINKS, GRAPH_VECTORS = GRAPH_NAMESPACES
MAX_DEPTH = 10
MAX_CHUNK_CHARS = 1_000_000
MAX_VECTOR_DIMENSION = 16_000
_SPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")


def link_key(source: str, relation: str, target: str) -> str:
    """The item key of a link: the SHA-256 of its two node keys and its relation, in hex."""
    return hashlib.sha256("\x1f".join((source, relation, target)).encode()).hexdigest()


@dataclasses.dataclass(frozen=True, slots=True)
class GraphChunk:
    """A passage of text kept verbatim under ``key``; ``attributes`` round-trip as JSON.

    On reads, ``created_at`` is when this version was written."""

    key: str
    text: str
    label: str = "chunk"
    attributes: Mapping[str, Any] = dataclasses.field(default_factory=dict[str, Any])
    created_at: datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GraphRelation:
    """``source -relation-> target`` between two node ids (see the module docstring).

    Between two entities it is a fact, true from the write's ``valid_at``; with a chunk at
    either end it is a link."""

    source: str
    relation: str
    target: str
    attributes: Mapping[str, Any] = dataclasses.field(default_factory=dict[str, Any])


@dataclasses.dataclass(frozen=True, slots=True)
class GraphEdge:
    """One edge of the graph as a read found it.

    ``id``: the fact's stable id (a fact) or the link's key (a link). Each end is an
    ``Entity``, a ``GraphChunk``, or the bare key a link names when no node holds it.
    ``depth``: the hop at which a walk first reached it (1: it touches a start node).
    ``fact``: the fact, with both clocks, when the edge is one."""

    id: uuid.UUID | str
    source: Entity | GraphChunk | str
    relation: str
    target: Entity | GraphChunk | str
    attributes: Mapping[str, Any]
    depth: int
    fact: Fact | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GraphNodes:
    """The nodes a read found: entities and chunks."""

    entities: Sequence[Entity]
    chunks: Sequence[GraphChunk]


@dataclasses.dataclass(frozen=True, slots=True)
class GraphWrite:
    """What one ``graph_upsert`` wrote: the episode that carries its entities and facts
    (``None`` when it wrote only chunks and links), the entities and facts it touched."""

    episode_id: uuid.UUID | None
    entities: Sequence[Entity]
    facts: Sequence[Fact]
    chunks: int
    links: int
    vectors: int
    recorded_at: datetime


def check_chunk(value: object) -> GraphChunk:
    if not isinstance(value, GraphChunk):
        raise InvalidInput(f"chunks must be GraphChunk records, got {type(value).__name__}")
    check_text(value.key, "chunk key", max_chars=1024)
    check_text(value.text, "chunk text", max_chars=MAX_CHUNK_CHARS, allow_empty=True)
    check_text(value.label, "chunk label", max_chars=128)
    if not isinstance(cast(object, value.attributes), Mapping):
        raise InvalidInput(f"attributes of chunk {value.key!r} must be a dict")
    return value


def check_node_ids(values: object, what: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidInput(f"{what} must be a list of node ids, got {type(values).__name__}")
    out: list[str] = []
    for v in cast(Sequence[object], values):
        out.append(check_text(v, f"a node id in {what}", max_chars=MAX_NAME_CHARS))
    return list(dict.fromkeys(out))


def check_space(value: object) -> str:
    if not isinstance(value, str) or not _SPACE.fullmatch(value):
        raise InvalidInput(
            f"vector_space must be 1 to 64 letters, digits and _ . : -, got {value!r:.80}"
        )
    return value


_FLOAT32_MAX = 3.4028234663852886e38  # the largest 4-byte float: pgvector's vector holds those


def check_vector(value: object, what: str) -> list[float]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidInput(f"{what} must be a list of numbers, got {type(value).__name__}")
    numbers = cast(Sequence[object], value)
    if not 1 <= len(numbers) <= MAX_VECTOR_DIMENSION:
        raise InvalidInput(
            f"{what} has {len(numbers)} dimensions; from 1 to {MAX_VECTOR_DIMENSION}"
        )
    out: list[float] = []
    for x in numbers:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x:
            raise InvalidInput(f"{what} holds {x!r:.80}, not a number")
        try:
            number = float(x)
        except OverflowError:  # an int past what a float holds
            raise InvalidInput(
                f"{what} holds an integer of {cast(int, x).bit_length():,} bits, beyond what a "
                "vector's 4-byte floats hold"
            ) from None
        if not abs(number) <= _FLOAT32_MAX:  # infinity, or past a 4-byte float
            raise InvalidInput(f"{what} holds {x!r:.40}, beyond what a vector's 4-byte floats hold")
        out.append(number)
    if not any(array("f", out)):  # as stored, in 4-byte floats (1e-46 is 0 there)
        raise InvalidInput(f"{what} is all zeros: it has no direction to compare")
    return out


def check_depth(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_DEPTH:
        raise InvalidInput(f"depth must be an integer from 1 to {MAX_DEPTH}, got {value!r:.80}")
    return value


def check_relations(values: object, what: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidInput(f"{what} must be a list of relation names, got {type(values).__name__}")
    return [check_relation(v) for v in cast(Sequence[object], values)]


def join_by_name(entities: Sequence[EntityInput]) -> list[EntityInput]:
    """The entity inputs of one write, one per name (its normalized form): what upserting
    them one after another would give. The first spelling names it; labels accumulate in
    order, each once (the first is the entity's type); attributes merge, later values
    winning; a later summary replaces an earlier one."""
    joined: dict[str, EntityInput] = {}
    for e in entities:
        key = normalize(e.name)
        held = joined.get(key)
        if held is None:
            joined[key] = e
            continue
        joined[key] = dataclasses.replace(
            held,
            labels=tuple(dict.fromkeys((*held.labels, *e.labels))),
            summary=held.summary if e.summary is None else e.summary,
            attributes={**held.attributes, **e.attributes},
        )
    return list(joined.values())
