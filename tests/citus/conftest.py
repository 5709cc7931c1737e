"""A Citus cluster for the tests of the distributed mode: a coordinator and two workers.

Built from the vendored source (``tools.citus.build``, cached outside the repository)
and started once per session; every server it started is stopped when the session ends,
whatever the tests did. ``make test-citus`` runs these tests; ``make test`` does not
collect this folder (``norecursedirs`` in pyproject.toml).

The graph is written to the coordinator first, then distributed in place
(``timestone.distributed.distribute``): the path of a user who outgrows one Postgres.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tools.citus

import timestone
from timestone import EdgeType, HashEmbedder, Ontology
from timestone.distributed import Distribution, distribute
from tools.citus.build import ensure_built
from tools.citus.cluster import SUMMARY, Cluster

ONTOLOGY = Ontology(edge_types=[EdgeType("DIRECTS", cardinality="one")])
DIMENSION = 16
MIRA = "t-mira"  # a group with a date fight: Mira directed Nord, then Sud
BO = "t-bo"  # another group: must never see Mira's rows, nor she its


def _open(dsn: str) -> timestone.Memory:
    return timestone.Memory.open(
        dsn, embedder=HashEmbedder(DIMENSION), ontology=ONTOLOGY, warm=False, pool_size=2
    )


def _day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    with Cluster(ensure_built(), workers=2) as started:
        try:
            yield started
        finally:
            with psycopg.connect(started.dsn) as conn:
                row = conn.execute(
                    "SELECT (SELECT count(*) FROM pg_dist_partition WHERE partmethod = 'h'),"
                    " (SELECT count(*) FROM pg_dist_shard AS s JOIN pg_dist_partition AS p"
                    "   USING (logicalrelid) WHERE p.partmethod = 'h'),"
                    " (SELECT count(*) FROM pg_dist_node WHERE groupid <> 0 AND isactive)"
                ).fetchone()
            assert row is not None
            SUMMARY.update(distributed_tables=row[0], shards=row[1], workers=row[2])


@pytest.fixture(scope="session")
def distribution(cluster: Cluster) -> Distribution:
    """Two groups written on the coordinator, then the schema distributed in place."""
    with _open(cluster.dsn) as mem:
        mem.add_facts(
            MIRA,
            [
                {"source": "Mira", "relation": "DIRECTS", "target": "Chateau Nord"},
                {"source": "Mira", "relation": "WORKS_WITH", "target": "Gamay"},
            ],
            reference_time=_day("2015-10-01"),
        )
        mem.add_facts(
            MIRA,
            [{"source": "Mira", "relation": "DIRECTS", "target": "Chateau Sud"}],
            reference_time=_day("2023-06-15"),
        )
        mem.add_facts(
            BO,
            [{"source": "Bo", "relation": "DIRECTS", "target": "Chateau Est"}],
            reference_time=_day("2020-01-01"),
        )
    made = distribute(cluster.dsn)
    # From here on, a statement that Citus would run on more than one shard fails the test
    # that made it: every statement of the library names its group (``_distributed``).
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        conn.execute("ALTER DATABASE timestone SET citus.multi_task_query_log_level = 'error'")
    return made


@pytest.fixture(scope="session")
def memory(distribution: Distribution, cluster: Cluster) -> Iterator[timestone.Memory]:
    with _open(cluster.dsn) as mem:
        yield mem


@pytest.fixture(scope="session")
def open_memory() -> Callable[[str], timestone.Memory]:
    """Opens a memory the way the tests do (embedder, ontology)."""
    return _open
