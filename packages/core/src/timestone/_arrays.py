"""Arrays on the wire, encoded once, in PostgreSQL's binary array format.

psycopg dumps a list of ``str`` through a raw cursor (``%s`` or ``$1``) in the
text format, quoting each element with a regular expression: 260 µs for the
66 name n-grams of a 13-word question, against 30 µs for the binary form, and
a search sends its n-grams to two statements. ``TextArray`` goes as a binary
``text[]``, encoded at its first dump and reused by the next.

A write sends its rows as columns, one array a column (``unnest``): a list goes
through psycopg's generic list dumper, which looks for an element to learn the
list's type, makes a dumper for it, then dumps each element through it (4 to 8
µs a list of a few elements; an ``add_facts`` call sends about sixty). The
arrays of one element type here (``UuidArray``, ``IntArray``, ``TimeArray``,
``BoolArray``, ``TextArray``) encode their elements directly; ``None`` is SQL NULL.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Generic, TypeVar

import psycopg
from psycopg import BaseConnection
from psycopg.adapt import Dumper
from psycopg.pq import Format

__all__ = ["BoolArray", "IntArray", "TextArray", "TimeArray", "UuidArray", "register_arrays"]

_LENGTH = struct.Struct(">i")
_INT8 = struct.Struct(">iq")  # an element's length (8) and value
_NULL = _LENGTH.pack(-1)
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # PostgreSQL's, for timestamptz
_MICROSECOND = timedelta(microseconds=1)

T = TypeVar("T")


class _Array(Generic[T]):
    """Elements sent as one binary array parameter of ``ELEMENT_OID`` (empty: ``'{}'``)."""

    __slots__ = ("_wire", "items")
    ELEMENT_OID: ClassVar[int]

    def __init__(self, items: Iterable[T | None]) -> None:
        self.items = tuple(items)
        self._wire: bytes | None = None

    @staticmethod
    def _element(item: Any) -> bytes:  # an element's length and bytes
        raise NotImplementedError

    def wire(self) -> bytes:
        """The array's binary form: a header, then each element's length and bytes (-1
        for NULL)."""
        if self._wire is None:
            if not self.items:
                self._wire = struct.pack(">iiI", 0, 0, self.ELEMENT_OID)
            else:
                nulls = None in self.items
                head = struct.pack(">iiIii", 1, nulls, self.ELEMENT_OID, len(self.items), 1)
                element: Callable[[Any], bytes] = self._element
                self._wire = head + b"".join(
                    [_NULL if x is None else element(x) for x in self.items]
                )
        return self._wire

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.items)!r})"


class TextArray(_Array[str]):
    """Strings sent as one binary ``text[]`` parameter."""

    __slots__ = ()
    ELEMENT_OID = 25

    @staticmethod
    def _element(item: str) -> bytes:
        b = item.encode()
        return _LENGTH.pack(len(b)) + b


class UuidArray(_Array[uuid.UUID]):
    """UUIDs sent as one binary ``uuid[]`` parameter."""

    __slots__ = ()
    ELEMENT_OID = 2950

    @staticmethod
    def _element(item: uuid.UUID) -> bytes:
        return b"\x00\x00\x00\x10" + item.bytes


class IntArray(_Array[int]):
    """Integers sent as one binary ``bigint[]`` parameter (a statement casts it to
    ``int[]`` where its column is one)."""

    __slots__ = ()
    ELEMENT_OID = 20

    @staticmethod
    def _element(item: int) -> bytes:
        return _INT8.pack(8, item)


class TimeArray(_Array[datetime]):
    """Aware datetimes sent as one binary ``timestamptz[]`` parameter, to the
    microsecond; a naive one is refused, as it has no instant."""

    __slots__ = ()
    ELEMENT_OID = 1184

    @staticmethod
    def _element(item: datetime) -> bytes:
        if item.tzinfo is None or item.utcoffset() is None:
            raise ValueError(f"a naive datetime has no instant to send: {item!r}")
        return _INT8.pack(8, (item - _EPOCH) // _MICROSECOND)


class BoolArray(_Array[bool]):
    """Booleans sent as one binary ``boolean[]`` parameter."""

    __slots__ = ()
    ELEMENT_OID = 16

    @staticmethod
    def _element(item: bool) -> bytes:
        return b"\x00\x00\x00\x01\x01" if item else b"\x00\x00\x00\x01\x00"


def _dumper(cls: type[_Array[Any]], array_oid: int) -> type[Dumper]:
    class _ArrayDumper(Dumper):
        format = Format.BINARY
        oid = array_oid

        def dump(self, obj: _Array[Any]) -> bytes:
            return obj.wire()

    _ArrayDumper.__name__ = f"_{cls.__name__}Dumper"
    return _ArrayDumper


_DUMPERS: tuple[tuple[type[_Array[Any]], type[Dumper]], ...] = (
    (TextArray, _dumper(TextArray, 1009)),
    (UuidArray, _dumper(UuidArray, 2951)),
    (IntArray, _dumper(IntArray, 1016)),
    (TimeArray, _dumper(TimeArray, 1185)),
    (BoolArray, _dumper(BoolArray, 1000)),
)


def register_arrays(conn: BaseConnection[Any]) -> None:
    """On a connection made before this module was imported (its adapters are a copy of
    psycopg's global ones, taken when it connected); the library's pool calls it for
    each of its own."""
    for cls, dumper in _DUMPERS:
        conn.adapters.register_dumper(cls, dumper)


# the array types are built in (their oids are fixed), and the classes are this module's
# own: registered for every connection made from now on, the library's and any other
# that sends one
for _cls, _dumper_cls in _DUMPERS:
    psycopg.adapters.register_dumper(_cls, _dumper_cls)
