"""Tests of the core suite, run again on the cluster (``make test-citus``).

From ``tests/core/test_bitemporal.py``, the property tests against the independent
reference model: as-of after each episode, removal equals never ingesting, rollback
equals as-of, timelines independent of ingestion order, re-ingestion writes nothing.
From ``tests/core/test_concurrency.py``, eight writers on overlapping names, one
idempotency key from many writers, and a writer killed (SIGKILL) in the middle of its
transaction. From ``tests/core/test_tenancy.py``, the tenancy
tests that go through the library. Here each group's writes and reads run on its shard
of a distributed schema.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import timestone
from timestone import EdgeType, HashEmbedder, Ontology
from timestone.distributed import Distribution
from tools.citus.cluster import Cluster

# the core suite's tests, collected here again
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
_bitemporal: Any = importlib.import_module("test_bitemporal")
_concurrency: Any = importlib.import_module("test_concurrency")
_tenancy: Any = importlib.import_module("test_tenancy")
test_as_of_removal_and_rollback_match_the_model: Any = (
    _bitemporal.test_as_of_removal_and_rollback_match_the_model
)
test_reingestion_writes_nothing: Any = _bitemporal.test_reingestion_writes_nothing
test_timeline_is_independent_of_ingestion_order: Any = (
    _bitemporal.test_timeline_is_independent_of_ingestion_order
)
test_eight_writers_on_overlapping_names: Any = _concurrency.test_eight_writers_on_overlapping_names
test_one_idempotency_key_from_many_writers: Any = (
    _concurrency.test_one_idempotency_key_from_many_writers
)
test_writer_killed_mid_transaction_leaves_nothing: Any = (
    _concurrency.test_writer_killed_mid_transaction_leaves_nothing
)
# the tenancy tests through the library (the raw-connection ones set the group the way
# of one server; test_citus_cluster.py checks the cluster's way)
two_groups: Any = _tenancy.two_groups
test_pool_connections_run_as_library_role: Any = _tenancy.test_pool_connections_run_as_library_role
test_api_reads_are_scoped: Any = _tenancy.test_api_reads_are_scoped
test_bad_group_ids_are_refused: Any = _tenancy.test_bad_group_ids_are_refused

pytestmark = pytest.mark.citus
__all__ = [
    "test_api_reads_are_scoped",
    "test_as_of_removal_and_rollback_match_the_model",
    "test_bad_group_ids_are_refused",
    "test_eight_writers_on_overlapping_names",
    "test_one_idempotency_key_from_many_writers",
    "test_pool_connections_run_as_library_role",
    "test_reingestion_writes_nothing",
    "test_timeline_is_independent_of_ingestion_order",
    "test_writer_killed_mid_transaction_leaves_nothing",
    "two_groups",
]


@pytest.fixture(scope="module")
def dsn(cluster: Cluster, distribution: Distribution) -> str:
    """The distributed database (the tests count rows there as its owner)."""
    return cluster.dsn


@pytest.fixture(scope="module")
def slot_memory(dsn: str) -> Iterator[timestone.Memory]:
    """The core suite's memory, on the cluster: its embedder is the cluster's."""
    onto = Ontology(edge_types=[EdgeType("DIRECTS", cardinality="one")])
    with timestone.Memory.open(dsn, ontology=onto, embedder=HashEmbedder(16), warm=False) as mem:
        yield mem
