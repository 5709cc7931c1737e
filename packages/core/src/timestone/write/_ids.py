"""Row ids: time-ordered (version 7) UUIDs, drawn from the system's source many at a time.

A version 7 UUID starts with the Unix time in milliseconds (48 bits); the 74 bits after
the version and variant fields are random (RFC 9562). Ids minted in a later millisecond
sort after those minted earlier, and the ids of one call are handed out in ascending
order, so a write's rows land at the right edge of the indexes keyed on
``(group_id, version_id)`` or ``(group_id, id)`` instead of on random pages of them
(migration 0024 gives the measurement). An id tells about when it was minted, as its
row's ``created_at`` does; nothing reads the time back from an id.

``uuid.uuid4()`` would read 16 bytes from the operating system per id: a system call for
each of the 110,000 ids a write of 30,000 facts mints (its assertions, mentions, fact
versions and entities). ``new_ids`` reads the random bits of all in one.

Each id is made the way ``uuid.UUID`` restores a pickled one (its two slots set on a
bare instance), not through ``UUID(int=...)``, whose checks of arguments that are not
given took half of the 3.1 µs an id cost (1.5 µs this way, in a slow spell).
"""

from __future__ import annotations

import os
import time
import uuid

__all__ = ["new_ids"]

# The version (7) and variant (RFC 9562) fields of the 128-bit integer.
_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_SET = (0x7000 << 64) | (0x8000 << 48)
_UNKNOWN = uuid.SafeUUID.unknown  # what UUID(int=...) records: not from a safe generator


def new_ids(count: int) -> list[uuid.UUID]:
    """``count`` version-7 UUIDs of the current millisecond, in ascending order."""
    raw = os.urandom(10 * count)
    from_bytes = int.from_bytes
    head = ((time.time_ns() // 1_000_000) << 80) | _SET
    values = sorted(head | (from_bytes(raw[i : i + 10]) & _CLEAR) for i in range(0, 10 * count, 10))
    bare = object.__new__
    put = object.__setattr__  # UUID's own __setattr__ refuses: ids are immutable
    made: list[uuid.UUID] = []
    for value in values:
        u = bare(uuid.UUID)
        put(u, "int", value)
        put(u, "is_safe", _UNKNOWN)
        made.append(u)
    return made
