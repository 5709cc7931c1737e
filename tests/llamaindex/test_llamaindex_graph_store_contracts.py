"""The store's contracts, pinned against SimplePropertyGraphStore: each scenario runs the
same calls on the reference and on ours, and compares what they give. Node ids per
tenant, ignore_rels walked through, deleting a document, and bad inputs."""

# PropertyGraphStore's signatures use bare dict; LlamaIndex's LLM classes are loosely typed.
# pyright: reportUnknownMemberType=false, reportIncompatibleMethodOverride=false

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import Document, PropertyGraphIndex, SimpleDirectoryReader
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.graph_stores import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import (
    TRIPLET_SOURCE_KEY,
    EntityNode,
    LabelledNode,
    PropertyGraphStore,
    Relation,
)
from llama_index.core.indices.property_graph import SimpleLLMPathExtractor
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.schema import TextNode
from llama_index.graph_stores.timestone import TimestonePropertyGraphStore
from llama_index.graph_stores.timestone._graph_store import relation_name

import timestone
from timestone.errors import InvalidInput

Triple = tuple[str, str, str]


def _names(triplets: Sequence[tuple[object, Relation, object]]) -> set[Triple]:
    return {(r.source_id, relation_name(r.label), r.target_id) for _, r, _ in triplets}


def _entity_triples(store: PropertyGraphStore) -> set[Triple]:
    """Every relation between two entities (chunks aside)."""
    entities = [n.id for n in store.get() if isinstance(n, EntityNode)]
    return {t for t in _names(store.get_triplets(ids=entities)) if t[0] in entities}


class ReadingLLM(CustomLLM):
    """Answers SimpleLLMPathExtractor's prompt with the triplets the chunk's text states,
    written in it as ``subject | relation | object`` lines, as a model would, offline."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        said = (line.removeprefix("Text:").strip() for line in prompt.splitlines())
        lines = [line.split(" | ") for line in said if line.count(" | ") == 2]
        return CompletionResponse(text="\n".join(f"({s}, {r}, {o})" for s, r, o in lines))

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


def _index(store: PropertyGraphStore) -> PropertyGraphIndex:
    llm = ReadingLLM()
    return PropertyGraphIndex.from_existing(
        store,
        llm=llm,
        embed_model=MockEmbedding(embed_dim=8),
        kg_extractors=[SimpleLLMPathExtractor(llm=llm)],
        use_async=False,
    )


# -- 7. node ids are per tenant -----------------------------------------------------------


def test_one_document_loads_into_two_tenants_as_into_two_reference_stores(
    memory: timestone.Memory,
) -> None:
    """A deterministic chunk id (as ``filename_as_id`` makes) in two tenants: two stores of
    the reference, two groups of ours; each tenant reads its own chunk and graph."""
    a, b = "tenant-a-" + uuid.uuid4().hex[:8], "tenant-b-" + uuid.uuid4().hex[:8]
    kinds: dict[str, Callable[[str], PropertyGraphStore]] = {
        "simple": lambda _: SimplePropertyGraphStore(),
        "timestone": lambda tenant: TimestonePropertyGraphStore(memory, tenant),
    }
    seen: dict[str, dict[str, tuple[list[str], set[Triple]]]] = {}
    for kind, make in kinds.items():
        seen[kind] = {}
        for tenant, text in ((a, "Ada | knows | Bo"), (b, "Cy | knows | Dee")):
            store = make(tenant)
            _index(store).insert_nodes([TextNode(id_="handbook_part_0", text=text)])
            chunks = [n.get_content() for n in store.get_llama_nodes(["handbook_part_0"])]
            seen[kind][tenant] = (chunks, _entity_triples(store))
    assert seen["timestone"] == seen["simple"]
    assert seen["timestone"][b] == (["Cy | knows | Dee"], {("Cy", "KNOWS", "Dee")})
    # deleting the chunk in one tenant leaves the other's
    TimestonePropertyGraphStore(memory, b).delete(ids=["handbook_part_0"])
    assert TimestonePropertyGraphStore(memory, b).get(ids=["handbook_part_0"]) == []
    kept = TimestonePropertyGraphStore(memory, a).get_llama_nodes(["handbook_part_0"])
    assert [n.get_content() for n in kept] == ["Ada | knows | Bo"]


def test_an_id_of_another_tenant_tells_nothing(memory: timestone.Memory) -> None:
    """What a tenant sees of an id does not depend on another tenant holding it: an entity
    id (a UUID) of tenant a, used in tenant b, names a node of b, as in a fresh reference."""
    a, b = "tenant-a-" + uuid.uuid4().hex[:8], "tenant-b-" + uuid.uuid4().hex[:8]
    TimestonePropertyGraphStore(memory, a).upsert_nodes([EntityNode(name="Ada")])
    ada = memory.get_entity(a, "Ada")
    assert ada is not None
    results: dict[str, set[Triple]] = {}
    for kind, store in (
        ("simple", SimplePropertyGraphStore()),
        ("timestone", TimestonePropertyGraphStore(memory, b)),
    ):
        store.upsert_relations([Relation(label="KNOWS", source_id=str(ada.id), target_id="Cy")])
        results[kind] = _names(store.get_triplets(entity_names=[str(ada.id)]))
    assert results["timestone"] == results["simple"] == {(str(ada.id), "KNOWS", "Cy")}
    assert memory.get_entity(a, "Cy") is None


# -- 8. ignore_rels is walked through -----------------------------------------------------


@pytest.fixture(params=["simple", "timestone"])
def store(
    request: pytest.FixtureRequest, memory: timestone.Memory, group: str
) -> PropertyGraphStore:
    if request.param == "simple":
        return SimplePropertyGraphStore()
    return TimestonePropertyGraphStore(memory, group)


def _chain(store: PropertyGraphStore, edges: list[Triple]) -> None:
    names = sorted({n for s, _, t in edges for n in (s, t)})
    store.upsert_nodes([EntityNode(name=n) for n in names])
    store.upsert_relations([Relation(label=r, source_id=s, target_id=t) for s, r, t in edges])


# edges, (depth, limit), and what the reference gives with ignore_rels=["IGNORE"]
REFERENCE_RELMAP: dict[str, tuple[list[Triple], tuple[int, int], set[Triple]]] = {
    "through": (
        [("A", "IGNORE", "B"), ("B", "KEEP", "C")],
        (2, 30),
        {("B", "KEEP", "C")},
    ),
    "two ignored hops": (
        [("A", "IGNORE", "B"), ("B", "IGNORE", "C"), ("C", "KEEP", "D")],
        (3, 30),
        {("C", "KEEP", "D")},
    ),
    "depth still bounds": (
        [("A", "IGNORE", "B"), ("B", "IGNORE", "C"), ("C", "KEEP", "D")],
        (2, 30),
        set[Triple](),
    ),
    "many ignored before the limit": (
        [("A", "IGNORE", f"B{i:02}") for i in range(40)] + [("B00", "KEEP", "C")],
        (2, 5),
        {("B00", "KEEP", "C")},
    ),
}


@pytest.mark.parametrize("case", sorted(REFERENCE_RELMAP))
def test_rel_map_walks_through_ignored_relations(store: PropertyGraphStore, case: str) -> None:
    edges, (depth, limit), expected = REFERENCE_RELMAP[case]
    _chain(store, edges)
    start: list[LabelledNode] = [EntityNode(name="A")]
    found = store.get_rel_map(start, depth=depth, limit=limit, ignore_rels=["IGNORE"])
    assert _names(found) == expected


# -- 10. deleting a document removes what only it supported -------------------------------

HANDBOOK = Document(
    text="Mira | directs | Nord\nMira | likes | Gamay", id_="handbook.txt", metadata={}
)
MEMO = Document(text="Mira | directs | Nord\nNord | is in | Loire", id_="memo.txt", metadata={})


def test_deleting_a_document_leaves_the_graph_that_never_saw_it(
    memory: timestone.Memory, group: str
) -> None:
    """The reference keeps a deleted document's facts; ours removes what only that
    document supported, so its graph is the reference's graph of the other document."""
    ours = TimestonePropertyGraphStore(memory, group)
    reference = SimplePropertyGraphStore()
    never_saw_it = SimplePropertyGraphStore()
    indexes = [_index(ours), _index(reference)]  # their docstores know each document's chunks
    for index in indexes:
        index.insert(HANDBOOK)
        index.insert(MEMO)
    _index(never_saw_it).insert(MEMO)
    assert _entity_triples(ours) == _entity_triples(reference)

    for index in indexes:
        index.delete_ref_doc(HANDBOOK.doc_id)
    assert _entity_triples(ours) == _entity_triples(never_saw_it)
    assert ("Mira", "LIKES", "Gamay") in _entity_triples(reference)  # the reference's gap
    # the memory agrees: the fact only the handbook stated is gone, the shared one stays
    assert {(f.source, f.relation, f.target) for f in memory.facts(group)} == {
        ("Mira", "DIRECTS", "Nord"),
        ("Nord", "IS_IN", "Loire"),
    }
    assert memory.get_entity(group, "Gamay") is None
    assert memory.get_entity(group, "Mira") is not None


def test_delete_llama_nodes_by_ref_doc_id(memory: timestone.Memory, group: str) -> None:
    ours = TimestonePropertyGraphStore(memory, group)
    never_saw_it = SimplePropertyGraphStore()
    _index(ours).insert(HANDBOOK)
    _index(ours).insert(MEMO)
    _index(never_saw_it).insert(HANDBOOK)
    ours.delete_llama_nodes(ref_doc_ids=[MEMO.doc_id])
    assert _entity_triples(ours) == _entity_triples(never_saw_it)
    assert [n.ref_doc_id for n in ours.get_llama_nodes([n.id for n in ours.get()])] == [
        HANDBOOK.doc_id
    ]
    # the rest of the handbook deletes cleanly too: the graph is empty
    ours.delete_llama_nodes(ref_doc_ids=[HANDBOOK.doc_id])
    assert _entity_triples(ours) == set()
    assert memory.facts(group) == []


# -- bad inputs ----------------------------------------------------------------------------


FROM_ONE = {TRIPLET_SOURCE_KEY: "chunk-1"}
FROM_TWO = {TRIPLET_SOURCE_KEY: "chunk-2"}
BAD: dict[str, tuple[Callable[[PropertyGraphStore], object], str]] = {
    "a NUL in an entity name": (
        lambda s: s.upsert_nodes([EntityNode(name="Ada\x00")]),
        "NUL",
    ),
    "a NUL in a chunk id": (
        lambda s: s.upsert_llama_nodes([TextNode(id_="part\x000", text="x")]),
        "NUL",
    ),
    "a NUL in a relation end": (
        lambda s: s.upsert_relations([Relation(label="KNOWS", source_id="Ada", target_id="B\x00")]),
        "NUL",
    ),
    "an empty relation end": (
        lambda s: s.upsert_relations([Relation(label="KNOWS", source_id="Ada", target_id=" ")]),
        "target_id is empty",
    ),
    "an empty entity name": (lambda s: s.upsert_nodes([EntityNode(name="")]), "empty"),
    # each chunk's relations are written apart: the second chunk's bad one must stop the first's
    "huge properties": (
        lambda s: s.upsert_relations(
            [
                Relation(label="KNOWS", source_id="Ada", target_id="Bo", properties=FROM_ONE),
                Relation(
                    label="KNOWS",
                    source_id="Cy",
                    target_id="Dee",
                    properties={**FROM_TWO, "x": "y" * 200_000},
                ),
            ]
        ),
        "characters of JSON",
    ),
    "an embedding that is not a number": (
        lambda s: s.upsert_nodes(
            [
                EntityNode(name="Ada", embedding=[1.0, 0.0], properties=FROM_ONE),
                EntityNode(name="Bo", embedding=[1.0, float("nan")], properties=FROM_TWO),
            ]
        ),
        "not a finite number",
    ),
    "a property JSON cannot hold": (
        lambda s: s.upsert_nodes(
            [EntityNode(name="Ada"), EntityNode(name="Bo", properties={"when": object()})]
        ),
        "cannot be stored as JSON",
    ),
    "a NUL in a property": (
        lambda s: s.upsert_nodes([EntityNode(name="Ada", properties={"note": "a\x00b"})]),
        "NUL",
    ),
    "a NUL in a nested property key": (
        lambda s: s.upsert_nodes([EntityNode(name="Ada", properties={"a": [{"b\x00": 1}]})]),
        "NUL",
    ),
    "a NUL in an id to delete": (lambda s: s.delete(ids=["Ada\x00"]), "NUL"),
    "an empty id to delete": (lambda s: s.delete(ids=[""]), "empty"),
    "embeddings of two sizes": (
        lambda s: s.upsert_nodes(
            [
                EntityNode(name="Ada", embedding=[1.0, 0.0]),
                EntityNode(name="Bo", embedding=[1.0, 0.0, 0.0]),
            ]
        ),
        "dimensions",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_refused_by_name_and_writes_nothing(
    memory: timestone.Memory, group: str, case: str
) -> None:
    """The reference takes each of these (it keeps Python objects); Postgres cannot hold
    them, so ours refuses them with a clear error before any write, the valid records
    of the same call included."""
    call, message = BAD[case]
    reference = SimplePropertyGraphStore()
    call(reference)  # the reference's behaviour: taken, no error
    ours = TimestonePropertyGraphStore(memory, group)
    with pytest.raises(InvalidInput, match=message):
        call(ours)
    assert memory.stats(group)["entities"]["versions"] == 0
    assert memory.stats(group)["items"]["versions"] == 0
    assert ours.get() == []


def test_the_documented_load_into_two_tenants(memory: timestone.Memory, tmp_path: Path) -> None:
    """docs/adapters.md's example: a file read with filename_as_id, loaded into two tenants,
    then deleted from one; two reference stores take the same calls."""
    path = tmp_path / "handbook.txt"
    path.write_text("Mira | directs | Nord\nNord | is in | Loire\n")
    handbook = SimpleDirectoryReader(input_files=[path], filename_as_id=True).load_data()
    tenants = ["tenant-a-" + uuid.uuid4().hex[:8], "tenant-b-" + uuid.uuid4().hex[:8]]
    graphs: dict[str, list[set[Triple]]] = {}
    for kind in ("simple", "timestone"):
        stores: list[PropertyGraphStore] = []
        index: PropertyGraphIndex | None = None
        for tenant in tenants:
            store = (
                SimplePropertyGraphStore()
                if kind == "simple"
                else TimestonePropertyGraphStore(memory, tenant)
            )
            index = _index(store)
            for document in handbook:
                index.insert(document)
            stores.append(store)
        graphs[kind] = [_entity_triples(s) for s in stores]
        assert index is not None
        index.delete_ref_doc(handbook[0].doc_id)  # from the last tenant
        graphs[kind] += [_entity_triples(s) for s in stores]
    loaded = {("Mira", "DIRECTS", "Nord"), ("Nord", "IS_IN", "Loire")}
    assert graphs["timestone"][:2] == graphs["simple"][:2] == [loaded, loaded]
    # after the delete: tenant a keeps its graph; tenant b's is empty here, while the
    # reference keeps the deleted document's relations
    assert graphs["timestone"][2:] == [loaded, set()]
    assert graphs["simple"][2:] == [loaded, loaded]
    assert memory.facts(tenants[1]) == []
    assert len(memory.facts(tenants[0])) == 2


def test_edge_values_round_trip_as_in_the_reference(store: PropertyGraphStore) -> None:
    """Text that looks like an escape, unicode, nested lists, long ids within the limit."""
    long_id = "part_" + "x" * 500
    properties = {"note": "\\u0000 is not NUL", "é": ["✓", {"n": [1, 2.5, None, True]}]}
    store.upsert_nodes([EntityNode(name="Ada", properties=properties)])
    store.upsert_llama_nodes([TextNode(id_=long_id, text="  spaced\ttext ")])
    [ada] = store.get(ids=["Ada"])
    assert ada.properties == properties
    assert [n.get_content() for n in store.get_llama_nodes([long_id])] == ["  spaced\ttext "]
