"""What every write transaction shares: its connection, group, clock, locks and embedder."""

from __future__ import annotations

import contextvars
import dataclasses
import decimal
import json
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

from psycopg import sql

from .._arrays import TextArray, UuidArray
from .._compat import AWork
from ..db._database_async import Conn
from ..embedders import Embedder, aembed_rows
from ..errors import ConflictError

if TYPE_CHECKING:
    from .._vectors import Row

__all__ = [
    "ENTITY_COLUMNS",
    "Relock",
    "Write",
    "as_stored",
    "begin_write",
    "copied_values",
    "copy_columns",
    "json_object",
    "json_text",
    "renaming",
    "stored_order",
    "vector_inserts",
    "write_with_retry",
]

T = TypeVar("T")
RETRIES = 3  # attempts of one write before its ConflictError reaches the caller


class Relock(Exception):
    """Raised inside a write that resolved a name to a stored entity spelled otherwise
    ("Maximillian" to "Maximilian"), whose lock key it does not hold: ``write_with_retry``
    runs the write again holding ``keys`` too, taken with the others before the clock is
    read, so that the write meets every writer of that entity in commit order."""

    def __init__(self, keys: Iterable[str]) -> None:
        super().__init__("a write met an entity under another spelling")
        self.keys = frozenset(keys)


# the keys ``Relock`` added, for the attempts of the write that raised it; past this many,
# the names kept changing under the write, which then fails as a conflict
_MAX_EXTRA_KEYS = 1000
_EXTRA_KEYS: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "timestone_extra_keys", default=frozenset()
)


async def write_with_retry(write: AWork[T], *, attempts: int = RETRIES) -> T:
    """Run ``write`` (one transaction) again when a concurrent writer won a race for a
    name, a key or a slot (``ConflictError``); the last attempt's error is raised. A
    ``Relock`` runs it again with more lock keys (``begin_write`` adds them); it does
    not count as an attempt while it adds keys."""
    outer = _EXTRA_KEYS.get()
    attempt = 0
    try:
        while True:
            try:
                return await write()
            except Relock as more:
                keys = _EXTRA_KEYS.get()
                if more.keys <= keys or len(keys) >= _MAX_EXTRA_KEYS:
                    raise ConflictError(
                        "a write kept meeting entities under names it had not locked "
                        "(they were renamed while it ran); try it again"
                    ) from more
                _EXTRA_KEYS.set(keys | more.keys)
            except ConflictError:
                attempt += 1
                if attempt >= attempts:
                    raise
    finally:
        _EXTRA_KEYS.set(outer)


def _no_vectors() -> dict[str, Row]:
    return {}


@dataclasses.dataclass
class Write:
    """One write transaction of one group: ``now`` is its system time, for every row it writes."""

    conn: Conn
    group_id: str
    now: datetime
    embedder: Embedder
    _vectors: dict[str, Row] = dataclasses.field(default_factory=_no_vectors)
    keys: frozenset[str] = frozenset()  # the advisory lock keys it holds

    async def embed(self, texts: Iterable[str]) -> dict[str, Row]:
        """Vectors for ``texts``, embedding only those not seen in this write, in one batch."""
        wanted = list(dict.fromkeys(texts))
        missing = [t for t in wanted if t not in self._vectors]
        if missing:
            vectors = await aembed_rows(self.embedder, missing)
            self._vectors.update(zip(missing, vectors, strict=True))
        return {t: self._vectors[t] for t in wanted}

    def remember(self, vectors: Mapping[str, Row]) -> None:
        """Vectors computed before the transaction began (embedding outside the locks)."""
        self._vectors.update(vectors)


def vector_inserts(template: sql.SQL, table: str, column: str) -> tuple[sql.Composed, sql.Composed]:
    """The two forms of a bulk insert of versioned rows with a vector column.

    ``template`` has the slots ``{vector}`` (the value inserted), ``{column}`` (the
    unnest argument), ``{name}`` (its alias) and ``{join}``. The first form takes new
    vectors as a parameter typed by its dumper (the column's type is not named); the
    second copies each vector, as stored, from the version a row replaces (``keep``),
    for rows whose text did not change.
    """
    embedded = template.format(
        vector=sql.SQL("x.embedding"),
        column=sql.SQL("%(embedding)b"),
        name=sql.SQL("embedding"),
        join=sql.SQL(""),
    )
    kept = template.format(
        vector=sql.SQL("o.{}").format(sql.Identifier(column)),
        column=sql.SQL("%(keep)b::uuid[]"),
        name=sql.SQL("keep"),
        join=sql.SQL(
            " JOIN timestone.{} AS o ON o.group_id = %(group)s AND o.version_id = x.keep"
        ).format(sql.Identifier(table)),
    )
    return embedded, kept


def json_text(value: Mapping[str, Any]) -> str:
    """The text of a JSON object for a ``jsonb`` parameter; the empty one without the encoder."""
    return json.dumps(value) if value else "{}"


def json_object(text: str) -> dict[str, Any]:
    """A ``jsonb`` object read as text; the empty one without the decoder."""
    return {} if text == "{}" else json.loads(text)


def as_stored(text: str) -> dict[str, Any]:
    """The object whose JSON text is ``text`` as a ``jsonb`` column gives it back: keys
    shortest first (then by their UTF-8 bytes), numbers as Postgres prints them."""
    return {} if text == "{}" else _jsonb(json.loads(text))


def stored_order(value: Mapping[str, Any]) -> dict[str, Any]:
    """An object merged from stored ones, with its keys in the order ``jsonb`` gives them."""
    return {k: value[k] for k in sorted(value, key=_key_order)} if value else {}


def _key_order(key: str) -> tuple[int, bytes]:
    raw = key.encode()
    return (len(raw), raw)


def _jsonb(value: Any) -> Any:
    if isinstance(value, dict):
        items = cast(dict[str, Any], value)
        return {k: _jsonb(items[k]) for k in sorted(items, key=_key_order)}
    if isinstance(value, list):
        return [_jsonb(v) for v in cast(list[Any], value)]
    if isinstance(value, float):
        text = repr(value)
        if "e+" in text:  # numeric prints all the digits of a large number: an integer
            return int(decimal.Decimal(text))
        if value == 0.0:
            return 0.0  # numeric has no negative zero
    return value


async def begin_write(
    conn: Conn,
    group_id: str,
    embedder: Embedder,
    *,
    exclusive: bool = False,
    keys: Sequence[str] = (),
) -> Write:
    """Take the group's write lock (shared, or exclusive for removals and rollbacks), then the
    advisory locks of ``keys`` in a fixed order, then read the clock.

    Writers of one group that touch different names run side by side; writers that meet
    serialize on the names they share. Taking the locks in sorted order rules out deadlocks.
    Reading the clock after the locks makes system time follow commit order where writers meet.
    """
    group_lock = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"

    await conn.execute(
        sql.SQL("SELECT {}(hashtextextended(%s, 0))").format(sql.Identifier(group_lock)),
        ("timestone-group\x1f" + group_id,),
    )
    ordered = sorted({*keys, *_EXTRA_KEYS.get()})
    if ordered:
        await conn.execute(
            "SELECT pg_advisory_xact_lock(k) FROM ("
            " SELECT hashtextextended(%s || chr(31) || key, 0) AS k"
            " FROM unnest(%b::text[]) AS key ORDER BY 1) AS locks",
            ("timestone-key\x1f" + group_id, TextArray(ordered)),
        )
    cur = await conn.execute("SELECT pg_catalog.clock_timestamp() AS now")
    row = await cur.fetchone()
    assert row is not None
    return Write(
        conn=conn, group_id=group_id, now=row["now"], embedder=embedder, keys=frozenset(ordered)
    )


async def copy_columns(conn: Conn, table: str) -> list[str]:
    """The columns a copy of a row of ``table`` takes from it: all but its version id and
    its two system times (and generated ones)."""
    cur = await conn.execute(
        "SELECT attname FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''"
        " AND attname NOT IN ('version_id', 'created_at', 'expired_at') ORDER BY attnum",
        (f"timestone.{table}",),
    )
    return [row["attname"] for row in await cur.fetchall()]


# the columns of a mention or an assertion that name an entity
ENTITY_COLUMNS = frozenset({"entity_id", "source_id", "target_id"})


def copied_values(columns: Sequence[str], renamed: Collection[str]) -> sql.Composable:
    """The select list of a copy of rows ``x``: each column as stored, those in ``renamed``
    through the map the ``gone`` and ``current`` parameters hold (``renaming``)."""
    return sql.SQL(", ").join(
        sql.SQL(
            "coalesce((%(current)s::uuid[])[array_position(%(gone)s::uuid[], x.{c})], x.{c})"
        ).format(c=sql.Identifier(c))
        if c in renamed
        else sql.SQL("x.{}").format(sql.Identifier(c))
        for c in columns
    )


def renaming(renamed: Mapping[uuid.UUID, uuid.UUID]) -> dict[str, UuidArray]:
    """The parameters of ``copied_values``: each id ``gone`` stands for its ``current``."""
    return {"gone": UuidArray(renamed), "current": UuidArray(renamed.values())}
