"""Row ids: random (version 4) UUIDs, drawn from the system's source many at a time.

``uuid.uuid4()`` reads 16 bytes from the operating system per id: a system call for
each of the 110,000 ids a write of 30,000 facts mints (its assertions, mentions, fact
versions and entities). ``new_ids`` reads them all in one and sets the version and
variant bits as ``uuid4`` does.

Each id is made the way ``uuid.UUID`` restores a pickled one (its two slots set on a
bare instance), not through ``UUID(int=...)``, whose checks of arguments that are not
given took half of the 3.1 µs an id cost (1.5 µs this way, in a slow spell).
"""

from __future__ import annotations

import os
import uuid

__all__ = ["new_ids"]

# The version (4) and variant (RFC 4122) fields of the 128-bit integer.
_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_SET = (0x4000 << 64) | (0x8000 << 48)
_UNKNOWN = uuid.SafeUUID.unknown  # what UUID(int=...) records: not from a safe generator


def new_ids(count: int) -> list[uuid.UUID]:
    """``count`` random version-4 UUIDs."""
    raw = os.urandom(16 * count)
    from_bytes = int.from_bytes
    bare = object.__new__
    put = object.__setattr__  # UUID's own __setattr__ refuses: ids are immutable
    made: list[uuid.UUID] = []
    for i in range(0, 16 * count, 16):
        u = bare(uuid.UUID)
        put(u, "int", (from_bytes(raw[i : i + 16]) & _CLEAR) | _SET)
        put(u, "is_safe", _UNKNOWN)
        made.append(u)
    return made
