"""What every write transaction shares: its connection, group, clock, locks and embedder."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime

from ..embedders import Embedder, check_vectors
from ._db import Conn

__all__ = ["Write", "begin_write"]

Vector = list[float]


@dataclasses.dataclass
class Write:
    """One write transaction of one group: ``now`` is its system time, for every row it writes."""

    conn: Conn
    group_id: str
    now: datetime
    embedder: Embedder
    _vectors: dict[str, Vector] = dataclasses.field(default_factory=dict[str, Vector])

    async def embed(self, texts: Iterable[str]) -> dict[str, Vector]:
        """Vectors for ``texts``, embedding only those not seen in this write, in one batch."""
        wanted = list(dict.fromkeys(texts))
        missing = [t for t in wanted if t not in self._vectors]
        if missing:
            vectors = check_vectors(self.embedder, missing, await self.embedder.aembed(missing))
            self._vectors.update(zip(missing, vectors, strict=True))
        return {t: self._vectors[t] for t in wanted}

    def remember(self, vectors: dict[str, Vector]) -> None:
        """Vectors computed before the transaction began (embedding outside the locks)."""
        self._vectors.update(vectors)


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
    from psycopg import sql

    await conn.execute(
        sql.SQL("SELECT {}(hashtextextended(%s, 0))").format(sql.Identifier(group_lock)),
        ("timestone-group\x1f" + group_id,),
    )
    ordered = sorted(set(keys))
    if ordered:
        await conn.execute(
            "SELECT pg_advisory_xact_lock(k) FROM ("
            " SELECT hashtextextended(%s || chr(31) || key, 0) AS k"
            " FROM unnest(%s::text[]) AS key ORDER BY 1) AS locks",
            ("timestone-key\x1f" + group_id, ordered),
        )
    cur = await conn.execute("SELECT clock_timestamp() AS now")
    row = await cur.fetchone()
    assert row is not None
    return Write(conn=conn, group_id=group_id, now=row["now"], embedder=embedder)
