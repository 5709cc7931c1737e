"""Vectors on the wire and in the HNSW indexes.

Many vectors go as one binary ``vector[]`` parameter, encoded by numpy in one
pass. A list of vectors is otherwise dumped one element at a time, each through
a Python ``Vector`` and a byte swap: at a thousand 256-dimension vectors per
write that is most of the cost of the parameter.

The HNSW indexes hold each vector keyed by its group (``keyed``): normalized,
with eight coordinates drawn from the group id appended. pgvector keeps at most
ten rows of one vector in one graph node; the eleventh and later copies of a
sentence that many tenants share get nodes of their own, and can fall out of
the graph's reach (measured by ``bench.duplicates``). Keyed, the copies of
different groups are different vectors, far apart; within a group the order by
cosine distance is unchanged (every distance maps through one increasing
function), so a search reads the index by the keyed distance and ranks by the
plain one.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg import BaseConnection, sql
from psycopg.adapt import Dumper
from psycopg.pq import Format

from .errors import DatabaseError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Row = npt.NDArray[np.float32]  # one vector, or several as rows

__all__ = ["KEY_DIMENSIONS", "TOLD_SEED", "VectorArray", "keyed", "register_vector_array"]
# and, for type checking, Row


class VectorArray:
    """Vectors of one dimension (rows of float32), sent as one ``vector[]`` parameter."""

    __slots__ = ("rows",)

    def __init__(self, rows: Sequence[Row], dimension: int) -> None:
        import numpy as np

        self.rows = (
            np.stack(rows).astype(np.float32, copy=False)
            if rows
            else np.empty((0, dimension), dtype=np.float32)
        )


class _VectorArrayDumper(Dumper):
    """The array's binary wire form: a header, then each element's length, dimension, an
    unused field and its floats, big-endian (pgvector's ``vector_recv``)."""

    format = Format.BINARY
    element_oid = 0

    def dump(self, obj: VectorArray) -> bytes:
        import numpy as np

        count, dimension = obj.rows.shape
        if count == 0:
            return struct.pack(">iiI", 0, 0, self.element_oid)
        head = struct.pack(">iiIii", 1, 0, self.element_oid, count, 1)
        body = np.empty(
            count,
            dtype=[("size", ">i4"), ("dim", ">u2"), ("unused", ">u2"), ("v", ">f4", dimension)],
        )
        body["size"] = 4 + 4 * dimension
        body["dim"] = dimension
        body["unused"] = 0
        body["v"] = obj.rows
        return head + body.tobytes()


def register_vector_array(conn: BaseConnection[Any]) -> None:
    """After pgvector's own registration, which looked up the ``vector`` type."""
    info = conn.adapters.types.get("vector")
    if info is None:
        raise DatabaseError("the vector type is not registered on this connection")
    dumper = type(
        "VectorArrayDumper",
        (_VectorArrayDumper,),
        {"oid": info.array_oid, "element_oid": info.oid},
    )
    conn.adapters.register_dumper(VectorArray, dumper)


KEY_DIMENSIONS = 8
# the seeds of the index of told episodes (``_db.VECTOR_INDEXES``), which holds a subset of
# the rows of the index of every episode
TOLD_SEED = 1 + KEY_DIMENSIONS
# pgvector's HNSW indexes hold vectors of at most 2,000 dimensions, and half-precision
# vectors (halfvec) of at most 4,000.
_VECTOR_INDEX_LIMIT = 2_000
_HALFVEC_INDEX_LIMIT = 4_000
MAX_DIMENSION = _HALFVEC_INDEX_LIMIT - KEY_DIMENSIONS  # the widest embedding indexed


def half_indexed(dimension: int) -> bool:
    """Whether the HNSW indexes hold embeddings of ``dimension`` at half precision: from
    1,993 dimensions (3,072 for OpenAI's text-embedding-3-large), where the keyed vector
    is past pgvector's 2,000 for full precision. The columns keep 4-byte floats, and a
    search ranks its candidates by their full-precision distance; only the index's
    graph, which chooses the candidates, is built from rounded coordinates."""
    return dimension + KEY_DIMENSIONS > _VECTOR_INDEX_LIMIT


def index_opclass(dimension: int) -> sql.SQL:
    """The HNSW operator class of the keyed vectors of embeddings of ``dimension``."""
    return sql.SQL("halfvec_cosine_ops" if half_indexed(dimension) else "vector_cosine_ops")


def keyed(
    vector: sql.Composable, group: sql.Composable, dimension: int, *, seed: int = 1
) -> sql.Composable:
    """``vector`` (of ``dimension``) normalized, followed by ``KEY_DIMENSIONS`` coordinates
    from ``group`` (``hashtextextended`` of the group id with seeds 1 to 8, each mapped to
    (-1, 1)): the expression every HNSW index is built on, and that a search orders by
    to read it (as ``halfvec`` past 1,992 dimensions: ``half_indexed``). Built-in
    functions only, written out so the planner matches the index expression and
    computes it in C; an SQL function of it, kept from inlining, cost 0.4 to 1 ms per
    search at 100k facts, mostly per row returned. ``mod``, not ``%``: statements are
    sent with numbered placeholders and no percent sign left.

    ``seed``: the first of the seeds; an index on other seeds (``TOLD_SEED``) is read
    only by the statements that order by them, where a partial index on the same
    expression as another would be chosen between them by a cost that ties."""
    parts = sql.SQL(", ").join(
        sql.SQL("mod(hashtextextended({g}, {i}), 1000)::float4 / 1000").format(
            g=group, i=sql.Literal(i)
        )
        for i in range(seed, seed + KEY_DIMENSIONS)
    )
    kind = sql.SQL("halfvec" if half_indexed(dimension) else "vector")
    return sql.SQL("(l2_normalize({v}) || ARRAY[{parts}]::vector({k}))::{t}({d})").format(
        v=vector,
        t=kind,
        parts=parts,
        k=sql.Literal(KEY_DIMENSIONS),
        d=sql.Literal(dimension + KEY_DIMENSIONS),
    )
