"""Where items and graph vectors go: an address the database index cannot hold, a
namespace the graph keeps for itself, a vector that is zero once stored, and writers of
one vector space at once are refused or serialized before anything is written."""

from __future__ import annotations

import threading

import pytest

import timestone
from timestone.errors import InvalidInput
from timestone.items._item import MAX_ADDRESS_BYTES


def test_an_address_past_the_index_is_refused_by_its_size(
    memory: timestone.Memory, group: str
) -> None:
    cjk = "鍵" * 1024  # 3,072 bytes in UTF-8, within the 1,024 characters a key takes
    with pytest.raises(InvalidInput, match="take 3,073 bytes in UTF-8 together; at most 2,200"):
        memory.put_item(group, ("a",), cjk, {"v": 1})
    with pytest.raises(InvalidInput, match="take 3,073 bytes in UTF-8 together"):
        memory.put_item(group, ("名" * 256,) * 4, "k", {"v": 1})
    assert memory.item_namespaces(group) == []


def test_the_largest_address_fits_the_index(memory: timestone.Memory) -> None:
    group = "g" * 128  # the longest group id
    labels = tuple("é" * 34 for _ in range(32))  # 32 labels of 68 bytes: 2,176
    key = "k" * (MAX_ADDRESS_BYTES - 2176)
    memory.put_item(group, labels, key, {"v": 1})
    item = memory.get_item(group, labels, key)
    assert item is not None
    assert item.value == {"v": 1}


@pytest.mark.parametrize(
    "namespace", [("graph", "links"), ("graph", "chunks"), ("graph", "vectors", "default")]
)
def test_the_graphs_own_namespaces_are_written_through_the_graph_only(
    memory: timestone.Memory, group: str, namespace: tuple[str, ...]
) -> None:
    memory.graph_upsert(group, entities=[{"name": "Ann"}], vectors={"Ann": [1.0, 0.0, 0.0]})
    with pytest.raises(InvalidInput, match="is the graph's own"):
        memory.put_item(group, namespace, "my-note", {"v": 1})
    with pytest.raises(InvalidInput, match="is the graph's own"):
        memory.delete_item(group, namespace, "my-note")
    [ann] = memory.graph_nearest(group, vector=[1.0, 0.0, 0.0])
    assert ann.name == "Ann"
    memory.put_item(group, ("graph", "notes"), "mine", {"v": 1})  # beside them: anyone's


def test_a_vector_that_is_zero_in_four_byte_floats_is_refused(
    memory: timestone.Memory, group: str
) -> None:
    with pytest.raises(InvalidInput, match="all zeros"):
        memory.graph_upsert(group, entities=[{"name": "C"}], vectors={"C": [1e-46, 0.0, 0.0]})
    assert memory.get_entity(group, "C") is None


def test_writers_of_one_vector_space_keep_it_one_dimension(
    memory: timestone.Memory, group: str
) -> None:
    dims = {"A": 3, "B": 4}
    for trial in range(5):
        g = f"{group}-{trial}"
        barrier = threading.Barrier(2)
        refused: dict[str, str] = {}

        def write(
            name: str,
            g: str = g,
            barrier: threading.Barrier = barrier,
            refused: dict[str, str] = refused,
        ) -> None:
            barrier.wait()
            try:
                memory.graph_upsert(
                    g, entities=[{"name": name}], vectors={name: [1.0] * dims[name]}
                )
            except InvalidInput as exc:
                refused[name] = str(exc)

        threads = [threading.Thread(target=write, args=(name,)) for name in dims]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(refused) == 1, f"trial {trial}: the second writer sees the first's dimension"
        assert all("dimensions" in why for why in refused.values())
        [winner] = [name for name in dims if name not in refused]
        found = memory.graph_nearest(g, vector=[1.0] * dims[winner])
        assert [e.name for e in found] == [winner]
        memory.graph_upsert(g, entities=[{"name": "C"}], vectors={"C": [1.0] * dims[winner]})
