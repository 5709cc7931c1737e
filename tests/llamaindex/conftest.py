"""The store the LlamaIndex tests compare: LlamaIndex's own in-memory property graph store
beside Timestone's, each test run against both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llama_index.core.graph_stores import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import PropertyGraphStore
from llama_index.graph_stores.timestone import TimestonePropertyGraphStore

import timestone


@pytest.fixture(params=["simple", "timestone"])
def store(
    request: pytest.FixtureRequest, memory: timestone.Memory, group: str
) -> Iterator[PropertyGraphStore]:
    if request.param == "simple":
        yield SimplePropertyGraphStore()
    else:
        yield TimestonePropertyGraphStore(memory, group)
