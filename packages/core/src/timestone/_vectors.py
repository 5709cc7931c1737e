"""Many vectors as one binary ``vector[]`` parameter, encoded by numpy in one pass.

A list of vectors is otherwise dumped one element at a time, each through a
Python ``Vector`` and a byte swap: at a thousand 256-dimension vectors per
write that is most of the cost of the parameter.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg import BaseConnection
from psycopg.adapt import Dumper
from psycopg.pq import Format

from .errors import DatabaseError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Row = npt.NDArray[np.float32]  # one vector, or several as rows

__all__ = ["VectorArray", "register_vector_array"]  # and, for type checking, Row


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
