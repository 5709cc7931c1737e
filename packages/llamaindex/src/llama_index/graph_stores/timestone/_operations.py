"""The graph store's operations, written once for ``Memory`` and ``AsyncMemory``.

Each operation is a generator: it yields the ``Call`` it needs from the memory (a method
of the same name and arguments on both classes) and is sent the answer back; an error
the call raised is thrown into it. ``TimestonePropertyGraphStore`` runs it with blocking
calls for its LlamaIndex methods and with awaited calls for their ``a*`` twins, so what
each method does is written here once.

Where a node came from: LlamaIndex marks each entity and relation it extracts with the
chunk it was read from (``triplet_source_id``). Those of one chunk are written as one
Timestone episode, and the episode is noted under the chunk (an item of
``SOURCES``); deleting the chunk removes its episodes as ``Memory.remove_episode`` does,
so what only that chunk (and so only its document) supported goes, and what another
chunk also supports stays.

When it was told: LlamaIndex copies a document's metadata into what it extracts from it,
so a document with a ``reference_time`` (``Document(metadata={"reference_time":
"2023-06-01"})``, or a ``date`` or an aware ``datetime``) dates its triplets: their facts
hold from that time and their episode was told then. Without one, the store's
``valid_at`` (a datetime) or the write's time.

Names as written: LlamaIndex's default triplet parser capitalises each name ("Château
Sud" becomes "Château sud"); a name read from a chunk takes the spelling the chunk's text
has, when the text holds it only in another case.

Reads and deletes are whole: the core's reads return a page at a time, and every page is
read."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import re
import uuid
from collections.abc import Generator, Sequence
from datetime import date, datetime
from typing import Any, TypeVar, cast

from llama_index.core.graph_stores.types import (
    TRIPLET_SOURCE_KEY,
    ChunkNode,
    EntityNode,
    LabelledNode,
    Relation,
    Triplet,
)
from llama_index.core.vector_stores.types import VectorStoreQuery

import timestone
from timestone import (
    EntityInput,
    GraphChunk,
    GraphEdge,
    GraphNodes,
    GraphRelation,
    GraphWrite,
    toolkit,
)
from timestone.errors import AlreadyRemoved, InvalidInput, NotFound
from timestone.toolkit import check_aware, check_text, parse_when

__all__ = [
    "SOURCES",
    "TIME_KEY",
    "UNTYPED",
    "Call",
    "Operation",
    "Settings",
    "delete",
    "get",
    "get_rel_map",
    "get_triplets",
    "relation_name",
    "upsert_nodes",
    "upsert_relations",
    "vector_query",
]

T = TypeVar("T")

UNTYPED = "entity"
TIME_KEY = "reference_time"  # the metadata key of a document's time
SOURCES = ("llama_index", "sources")
_PAGE = 1000  # the most a memory read returns at once
_MAX_DEPTH = 10
_MAX_ID_CHARS = 512  # of a relation end, as Memory.graph_upsert takes it
_MAX_PROPERTIES_CHARS = 100_000  # the JSON of one node's or relation's properties
_MAX_DIMENSIONS = 16_000  # pgvector's
_MAX_JSON_DEPTH = 64
_MAX_CHUNK_CHARS = 1_000_000  # of a chunk's text, as Memory.graph_upsert takes it
_MAX_LABEL_CHARS = 128  # of a chunk's label


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """One call of a memory method (``Memory`` and ``AsyncMemory`` share the names), on the
    store's group: ``getattr(memory, method)(group_id, **kwargs)``."""

    method: str
    kwargs: dict[str, Any]


Operation = Generator[Call, Any, T]
_Told = tuple[str | None, datetime | None]  # the chunk a write was read from, its document's time


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """What a store reads and writes at (see ``TimestonePropertyGraphStore``)."""

    valid_at: object  # a datetime, timestone.NOW or None
    as_of: datetime | None
    vector_space: str

    def writable(self) -> None:
        if self.as_of is not None:
            raise TypeError("this graph store reads as_of a past moment and is read-only")

    def valid_from(self) -> datetime | None:
        return self.valid_at if isinstance(self.valid_at, datetime) else None


# -- checks ----------------------------------------------------------------------------


def whole(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput(f"{what} must be an integer, got {value!r:.80}")
    return value


def _storable(text: str, what: str) -> None:
    if "\x00" in text:
        raise InvalidInput(f"{what} contains a NUL byte, which Postgres cannot store")
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} is not text UTF-8 can encode ({exc.reason})") from None


def _node_id(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}")
    _storable(value, what)
    if not value.strip():
        raise InvalidInput(f"{what} is empty")
    if len(value) > _MAX_ID_CHARS:
        raise InvalidInput(f"{what} has {len(value):,} characters; the limit is {_MAX_ID_CHARS}")
    return value


def _check_json(value: object, what: str, depth: int = 0) -> None:
    """Mappings with string keys, to at most ``_MAX_JSON_DEPTH`` levels; strings Postgres
    can store (the other values ``json.dumps`` checks)."""
    if depth > _MAX_JSON_DEPTH:
        raise InvalidInput(f"{what} are nested deeper than {_MAX_JSON_DEPTH} levels")
    if isinstance(value, str):
        _storable(value, what)
    elif isinstance(value, dict):
        for key, item in cast(dict[object, object], value).items():
            if not isinstance(key, str):
                raise InvalidInput(f"{what} have a key that is not a string: {key!r:.80}")
            _storable(key, what)
            _check_json(item, what, depth + 1)
    elif isinstance(value, list | tuple):
        for item in cast(Sequence[object], value):
            _check_json(item, what, depth + 1)


def _dates_as_text(value: object) -> object:
    """``value`` with each ``datetime`` and ``date`` in it as its ISO 8601 text (LlamaIndex
    copies a document's metadata, which may hold them, into what it extracts)."""
    if isinstance(value, date):  # a datetime is a date too
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _dates_as_text(v) for k, v in cast(dict[object, object], value).items()}
    if isinstance(value, list | tuple):
        return [_dates_as_text(v) for v in cast(Sequence[object], value)]
    return value


def _properties(value: object, what: str) -> dict[str, Any]:
    """Properties as JSON can hold them (dates and times as ISO 8601 text), checked before
    anything is written (a store call may make several writes)."""
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a dict, got {type(value).__name__}")
    told = cast(dict[str, object], value).get(TIME_KEY)
    if isinstance(told, datetime):  # a naive one is refused, not read as UTC
        check_aware(told, f"{TIME_KEY} of {what}")
    _check_json(cast(object, value), what)
    value = _dates_as_text(cast(object, value))
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} cannot be stored as JSON: {exc}") from None
    if len(text) > _MAX_PROPERTIES_CHARS:
        raise InvalidInput(
            f"{what} are {len(text):,} characters of JSON; the limit is {_MAX_PROPERTIES_CHARS:,}"
        )
    return cast(dict[str, Any], value)


def _filter(value: object) -> dict[str, Any] | None:
    """The ``properties`` a read or a delete matches (every one equal; dates and times as
    the ISO 8601 text they are stored as), checked as JSON; empty: no filter."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInput(f"properties must be a dict, got {type(value).__name__}")
    _check_json(cast(object, value), "properties")
    wanted = cast(dict[str, Any], _dates_as_text(cast(object, value)))
    try:
        json.dumps(wanted, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"properties hold a value no property can have: {exc}") from None
    return wanted or None


def _embedding(value: Sequence[object], what: str) -> list[float]:
    """Finite numbers, not all zero, at most ``_MAX_DIMENSIONS`` of them."""
    if not 1 <= len(value) <= _MAX_DIMENSIONS:
        raise InvalidInput(f"{what} has {len(value)} dimensions; from 1 to {_MAX_DIMENSIONS:,}")
    out: list[float] = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise InvalidInput(f"{what} holds {x!r:.80}, not a finite number")
        out.append(float(x))
    if not any(out):
        raise InvalidInput(f"{what} is all zeros: it has no direction to compare")
    return out


def relation_name(label: str) -> str:
    """The Timestone relation name of a LlamaIndex relation label, in the core's one normal
    form (``timestone.toolkit.relation_name``: ``Directs`` and ``works for`` become
    ``DIRECTS`` and ``WORKS_FOR``); a label that starts with a digit gets ``R_`` before it."""
    name = toolkit.relation_name(label)
    if name is None and label.strip()[:1].isdigit():
        name = toolkit.relation_name("R_" + label.strip())
    if name is None:
        raise InvalidInput(
            f"relation label {label!r:.80} names no relation (letters and digits, at most 128)"
        )
    return name


def _nodes_list(value: object, what: str, of: str) -> list[object]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        got = type(cast(object, value)).__name__
        raise InvalidInput(f"{what} must be a list of {of}, got {got}")
    return list(cast(Sequence[object], value))


def _ids(value: object, what: str, of: str, each: str) -> list[str]:
    """A list argument of ids, names or labels (``None``: none), each checked."""
    if value is None:
        return []
    return [_node_id(v, each) for v in _nodes_list(value, what, of)]


# -- mapping ---------------------------------------------------------------------------


def node(end: timestone.Entity | GraphChunk | str) -> LabelledNode:
    if isinstance(end, timestone.Entity):
        return EntityNode(
            name=end.name,
            # the entity keeps every label it was given, each once, in the order first
            # given (the first is its type): the last is the latest a write gave it
            label=end.labels[-1] if end.labels else UNTYPED,
            properties=dict(end.attributes),
        )
    if isinstance(end, GraphChunk):
        return ChunkNode(
            text=end.text, id_=end.key, label=end.label, properties=dict(end.attributes)
        )
    return EntityNode(name=end)  # a link end that no node holds, as SimplePropertyGraphStore has


def triplet(edge: GraphEdge) -> Triplet:
    source, target = node(edge.source), node(edge.target)
    relation = Relation(
        label=edge.relation,
        source_id=source.id,
        target_id=target.id,
        properties=dict(edge.attributes),
    )
    return (source, relation, target)


def _matches(found: Triplet, properties: dict[str, Any]) -> bool:
    return any(part.properties.get(k) == v for k, v in properties.items() for part in found)


def _source_of(properties: dict[str, Any]) -> str | None:
    source = properties.get(TRIPLET_SOURCE_KEY)
    return source if isinstance(source, str) and source else None


def _document_time(properties: dict[str, Any], what: str) -> datetime | None:
    """The time of the document a node or relation was read from (``TIME_KEY`` in the
    metadata LlamaIndex copied into its properties), if it has one."""
    value = properties.get(TIME_KEY)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(
            f"{TIME_KEY} of {what} must be an ISO 8601 date or time, got {value!r:.80}"
        )
    return parse_when(value, f"{TIME_KEY} of {what}")


def as_written(name: str, text: str) -> str:
    """``name`` as ``text`` spells it, when the text holds it only in another case (a text
    that holds the name as given keeps it: "Apple" stays "Apple" beside "an apple")."""
    if not name.strip():
        return name
    word = rf"(?<!\w){re.escape(name)}(?!\w)"
    if re.search(word, text) is not None:
        return name
    found = re.search(word, text, re.IGNORECASE)
    return name if found is None else found.group(0)


def _chunk_text(source: str | None, given: dict[str, str] | None = None) -> Operation[str]:
    """The text of the chunk ``source`` names: one ``given`` in the same call, else the one
    the group holds (empty if none)."""
    if source is None:
        return ""
    if given is not None and source in given:
        return given[source]
    page: GraphNodes = yield Call(
        "graph_nodes", {"ids": [source], "as_of": None, "limit": 1, "offset": 0}
    )
    return next((c.text for c in page.chunks if c.key == source), "")


def _sources_namespace(source: str) -> tuple[str, ...]:
    """Where the episodes read from ``source`` are noted (hashed: ids may be long)."""
    return (*SOURCES, hashlib.sha256(source.encode()).hexdigest())


# -- reading ---------------------------------------------------------------------------


def get(
    s: Settings, properties: dict[str, Any] | None, ids: list[str] | None
) -> Operation[list[LabelledNode]]:
    wanted = _filter(properties)
    out: list[LabelledNode] = []
    offset = 0
    while True:
        page: GraphNodes = yield Call(
            "graph_nodes",
            {
                "ids": ids or None,
                "attributes": wanted,
                "as_of": s.as_of,
                "limit": _PAGE,
                "offset": offset,
            },
        )
        out.extend(node(e) for e in page.entities)
        out.extend(node(c) for c in page.chunks)
        if len(page.entities) < _PAGE and len(page.chunks) < _PAGE:
            return out
        offset += _PAGE


def _edges(
    s: Settings,
    around: list[str] | None,
    *,
    depth: int = 1,
    relations: list[str] | None = None,
    limit: int = _PAGE,
    offset: int = 0,
) -> Call:
    return Call(
        "graph_edges",
        {
            "around": around,
            "depth": depth,
            "relations": None if relations is None else [relation_name(r) for r in relations],
            "valid_at": s.valid_at,
            "as_of": s.as_of,
            "limit": limit,
            "offset": offset,
        },
    )


def _every_edge(
    s: Settings, around: list[str] | None, relations: list[str] | None
) -> Operation[list[GraphEdge]]:
    """Every edge at ``around`` (``None``: in the group), page after page."""
    out: list[GraphEdge] = []
    while True:
        page: list[GraphEdge] = yield _edges(s, around, relations=relations, offset=len(out))
        out.extend(page)
        if len(page) < _PAGE:
            return out


def _matching(
    s: Settings,
    entity_names: list[str] | None,
    relation_names: list[str] | None,
    properties: dict[str, Any] | None,
    ids: list[str] | None,
) -> Operation[list[tuple[GraphEdge, Triplet]]]:
    names = _ids(entity_names, "entity_names", "names", "a name in entity_names")
    held = _ids(ids, "ids", "node ids", "a node id in ids")
    relations = _ids(
        relation_names, "relation_names", "relation labels", "a relation in relation_names"
    )
    properties = _filter(properties)
    if not held and not properties and not names and not relations:
        return []
    around = names or held
    edges = yield from _every_edge(s, around or None, relations or None)
    found = [(e, triplet(e)) for e in edges]
    if names and held:  # both filters, as SimplePropertyGraphStore applies them
        found = [(e, t) for e, t in found if t[0].id in held or t[2].id in held]
    if properties:
        found = [(e, t) for e, t in found if _matches(t, properties)]
    return found


def get_triplets(
    s: Settings,
    entity_names: list[str] | None,
    relation_names: list[str] | None,
    properties: dict[str, Any] | None,
    ids: list[str] | None,
) -> Operation[list[Triplet]]:
    found = yield from _matching(s, entity_names, relation_names, properties, ids)
    return [t for _, t in found]


def get_rel_map(
    s: Settings,
    graph_nodes: list[LabelledNode],
    depth: int,
    limit: int,
    ignore_rels: list[str] | None,
) -> Operation[list[Triplet]]:
    """Triplets within ``depth`` hops of the nodes, nearest first. As in
    ``SimplePropertyGraphStore``, relations in ``ignore_rels`` are walked through but not
    returned; the walk is asked for more edges until ``limit`` others are found or it has
    no more to give."""
    nodes = _nodes_list(graph_nodes, "graph_nodes", "LabelledNode records")
    for n in nodes:
        if not isinstance(n, LabelledNode):
            raise InvalidInput(
                f"graph_nodes must hold LabelledNode records, got {type(n).__name__}"
            )
    depth, limit = whole(depth, "depth"), whole(limit, "limit")
    ignored = {
        relation_name(_node_id(r, "a relation in ignore_rels"))
        for r in _nodes_list(ignore_rels or [], "ignore_rels", "relation labels")
    }
    if not nodes or depth < 1 or limit < 1:
        return []
    around = list(dict.fromkeys(cast(LabelledNode, n).id for n in nodes))
    kept: list[GraphEdge] = []
    asked, offset = min(limit, _PAGE), 0
    while True:
        edges: list[GraphEdge] = yield _edges(
            s, around, depth=min(depth, _MAX_DEPTH), limit=asked, offset=offset
        )
        kept += [e for e in edges if e.relation not in ignored]
        if len(kept) >= limit or len(edges) < asked:
            return [triplet(e) for e in kept[:limit]]
        offset += asked
        asked = min(asked * 4, _PAGE)


def vector_query(
    s: Settings, query: VectorStoreQuery
) -> Operation[tuple[list[LabelledNode], list[float]]]:
    if query.filters is not None:
        raise NotImplementedError(
            "TimestonePropertyGraphStore.vector_query takes no metadata filters"
        )
    k = whole(query.similarity_top_k, "similarity_top_k")
    if k < 1:
        raise InvalidInput(f"similarity_top_k must be at least 1, got {k}")
    k = min(k, _PAGE)
    if query.query_embedding is not None:
        found: list[timestone.Entity] = yield Call(
            "graph_nearest",
            {
                "vector": query.query_embedding,
                "vector_space": s.vector_space,
                "limit": k,
                "as_of": s.as_of,
            },
        )
    elif query.query_str:
        found = yield Call(
            "graph_nearest", {"query": query.query_str, "limit": k, "as_of": s.as_of}
        )
    else:
        raise ValueError("vector_query needs a query_embedding or a query_str")
    return [node(e) for e in found], [float(e.score or 0.0) for e in found]


# -- writing ---------------------------------------------------------------------------


def _noted(source: str | None, write: GraphWrite) -> Operation[None]:
    """Note the write's episode under the chunk it was read from."""
    if source is not None and write.episode_id is not None:
        yield Call(
            "put_item",
            {
                "namespace": _sources_namespace(source),
                "key": str(write.episode_id),
                "value": {"source": source},
                "index": False,
            },
        )


def _chunk(n: ChunkNode) -> GraphChunk:
    key = _node_id(n.id, "a chunk id")
    check_text(
        n.text, f"the text of chunk {key!r:.80}", max_chars=_MAX_CHUNK_CHARS, allow_empty=True
    )
    check_text(n.label, f"the label of chunk {key!r:.80}", max_chars=_MAX_LABEL_CHARS)
    return GraphChunk(
        key=key,
        text=n.text,
        label=n.label,
        attributes=_properties(n.properties, f"properties of chunk {n.id!r:.80}"),
    )


def upsert_nodes(s: Settings, nodes: Sequence[LabelledNode]) -> Operation[None]:
    """Chunks in one write, the entities of each chunk (``triplet_source_id``) in one more.
    Every node is checked before the first write; the write that carries the call's node
    embeddings goes first, so an embedding of a dimension the store does not hold is
    refused before anything is written."""
    s.writable()
    chunks: list[GraphChunk] = []
    # the entities read from each chunk (None: from none) at its document's time, with
    # their vectors
    by_source: dict[_Told, tuple[list[EntityInput], dict[str, list[float]]]] = {}
    dimensions: set[int] = set()
    for n in _nodes_list(nodes, "nodes", "EntityNode and ChunkNode records"):
        if isinstance(n, ChunkNode):
            chunks.append(_chunk(n))
        elif isinstance(n, EntityNode):
            props = _properties(n.properties, f"properties of node {n.name!r:.80}")
            labels = () if n.label == UNTYPED else (n.label,)
            key = (_source_of(props), _document_time(props, f"node {n.name!r:.80}"))
            entities, vectors = by_source.setdefault(key, ([], {}))
            entities.append(EntityInput(n.name, labels, attributes=dict(props)))
            if n.embedding is not None:
                vectors[n.name] = _embedding(n.embedding, f"the embedding of node {n.name!r:.80}")
                dimensions.add(len(n.embedding))
        else:
            raise TypeError(
                f"TimestonePropertyGraphStore stores EntityNode and ChunkNode, got {n!r:.80}"
            )
    if len(dimensions) > 1:
        raise InvalidInput(
            f"the node embeddings have {', '.join(map(str, sorted(dimensions)))} dimensions: "
            "one store keeps the vectors of one embedding model"
        )
    texts = {c.key: c.text for c in chunks}
    # the entity writes that carry vectors first (the core checks their dimension against
    # the store's vectors), then the chunks, then the other entity writes
    groups = [g for g in by_source.items() if g[1][1]] + [
        g for g in by_source.items() if not g[1][1]
    ]
    for (source, told), (entities, vectors) in groups:
        if chunks and not vectors:
            yield Call("graph_upsert", {"chunks": chunks, "valid_at": s.valid_from()})
            chunks = []
        text = yield from _chunk_text(source, texts)
        names = {e.name: as_written(e.name, text) for e in entities}
        write: GraphWrite = yield Call(
            "graph_upsert",
            {
                "entities": [dataclasses.replace(e, name=names[e.name]) for e in entities],
                "vectors": {names.get(k, k): v for k, v in vectors.items()},
                "vector_space": s.vector_space,
                "reference_time": told,
                "valid_at": told or s.valid_from(),
            },
        )
        yield from _noted(source, write)
    if chunks:
        yield Call("graph_upsert", {"chunks": chunks, "valid_at": s.valid_from()})


def _check_ends(given: list[tuple[Relation, GraphRelation]]) -> Operation[None]:
    """Every relation end names a chunk the group holds or is a name an entity may have
    (``timestone.EntityInput`` checks it), before the first write of a call."""
    refused: dict[str, tuple[str, InvalidInput]] = {}
    for r, g in given:
        for end, field in ((g.source, "source_id"), (g.target, "target_id")):
            if end in refused:
                continue
            try:
                EntityInput(end)
            except InvalidInput as exc:
                refused[end] = (f"the {field} of relation {r.label!r:.80}", exc)
    ends = list(refused)
    for start in range(0, len(ends), _PAGE):
        page: GraphNodes = yield Call(
            "graph_nodes",
            {"ids": ends[start : start + _PAGE], "as_of": None, "limit": _PAGE, "offset": 0},
        )
        for c in page.chunks:
            refused.pop(c.key, None)
    for what, exc in refused.values():
        raise InvalidInput(f"{what} names no chunk and cannot name an entity: {exc}") from None


def upsert_relations(s: Settings, relations: list[Relation]) -> Operation[None]:
    """The relations of each chunk (``triplet_source_id``) in one write; every relation is
    checked before the first."""
    s.writable()
    by_source: dict[_Told, list[GraphRelation]] = {}
    given: list[tuple[Relation, GraphRelation]] = []
    for r in _nodes_list(relations, "relations", "Relation records"):
        if not isinstance(r, Relation):
            raise TypeError(f"TimestonePropertyGraphStore stores Relation records, got {r!r:.80}")
        what = f"relation {r.label!r:.80}"
        props = _properties(r.properties, f"properties of {what}")
        relation = GraphRelation(
            source=_node_id(r.source_id, "a relation's source_id"),
            relation=relation_name(r.label),
            target=_node_id(r.target_id, "a relation's target_id"),
            attributes=dict(props),
        )
        given.append((r, relation))
        by_source.setdefault((_source_of(props), _document_time(props, what)), []).append(relation)
    yield from _check_ends(given)
    for (source, told), group in by_source.items():
        text = yield from _chunk_text(source)
        written = [
            dataclasses.replace(
                r, source=as_written(r.source, text), target=as_written(r.target, text)
            )
            for r in group
        ]
        write: GraphWrite = yield Call(
            "graph_upsert",
            {"relations": written, "reference_time": told, "valid_at": told or s.valid_from()},
        )
        yield from _noted(source, write)


def _remove_sources(ids: list[str]) -> Operation[None]:
    """Remove the episodes read from the chunks ``ids`` names (see the module docstring)."""
    for source in ids:
        namespace = _sources_namespace(source)
        while True:
            notes: list[timestone.Item] = yield Call(
                "search_items", {"namespace_prefix": namespace, "limit": _PAGE}
            )
            for note in notes:
                # removed by other means, what it supported is gone already
                with contextlib.suppress(AlreadyRemoved, NotFound):
                    yield Call("remove_episode", {"episode_id": uuid.UUID(note.key)})
                yield Call("delete_item", {"namespace": namespace, "key": note.key})
            if len(notes) < _PAGE:
                break


def delete(
    s: Settings,
    entity_names: list[str] | None,
    relation_names: list[str] | None,
    properties: dict[str, Any] | None,
    ids: list[str] | None,
) -> Operation[None]:
    s.writable()
    properties = _filter(properties)
    if _ids(relation_names, "relation_names", "relation labels", "a relation in relation_names"):
        # until nothing new matches: a retraction may reopen a relation it had closed, and
        # one written meanwhile is found by the next round
        retracted: set[uuid.UUID | str] = set()
        while True:
            found = yield from _matching(s, entity_names, relation_names, properties, ids)
            fresh = list(dict.fromkeys(e.id for e, _ in found if e.id not in retracted))
            if not fresh:
                return
            yield Call("graph_retract", {"edges": fresh})
            retracted.update(fresh)
    nodes: list[str] = [
        _node_id(n, "a node id to delete")
        for n in [
            *([] if entity_names is None else _nodes_list(entity_names, "entity_names", "names")),
            *([] if ids is None else _nodes_list(ids, "ids", "node ids")),
        ]
    ]
    if properties:
        held = yield from get(s, properties, None)
        nodes += [n.id for n in held]
    if not nodes:
        return
    nodes = list(dict.fromkeys(nodes))
    yield from _remove_sources(nodes)
    yield Call("graph_retract", {"ids": nodes})
