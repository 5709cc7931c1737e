"""The settings of an HNSW index build: its memory and its parallel workers.

pgvector builds a graph in memory while it fits in ``maintenance_work_mem`` and the
rest on disk, several times slower. A build is given the memory its largest graph
needs (``row_bytes`` times its rows, and a margin), within bounds (``build_memory_kb``),
and a graph that outgrows it anyway is logged (``warn_spill``). What is checked here is
checked before a bulk load drops anything. The counting itself is ``write._bulk_async``'s.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable

import psycopg

from .._vectors import KEY_DIMENSIONS, half_indexed
from ..errors import InvalidInput

__all__ = [
    "build_memory_kb",
    "check_memory",
    "check_memory_setting",
    "check_workers",
    "need_kb",
    "row_bytes",
    "warn_spill",
]

_log = logging.getLogger("timestone")

_MEMORY = re.compile(r"[1-9][0-9]{0,6}\s*(kB|MB|GB)")
_KB = {"kB": 1, "MB": 1024, "GB": 1024**2}
_MAX_KB = 2_147_483_647  # Postgres's largest maintenance_work_mem


def check_memory_setting(value: object) -> str:
    """A Postgres memory size such as ``"1GB"`` or ``"512MB"``, within what Postgres takes
    (checked before anything is dropped, not at the rebuild after the load)."""
    found = _MEMORY.fullmatch(value.strip()) if isinstance(value, str) else None
    if found is None:
        raise InvalidInput(
            f"maintenance_work_mem must be a Postgres memory size such as '512MB' or '2GB', "
            f"got {value!r:.80}"
        )
    kb = int(found.group(0).rstrip("kMGB ")) * _KB[found.group(1)]
    if not 1024 <= kb <= _MAX_KB:
        raise InvalidInput(f"maintenance_work_mem must be from 1MB to 2047GB, got {value!r:.80}")
    return found.group(0)


def check_memory(value: object) -> str | None:
    """``check_memory_setting``, None passing through (a size to work out)."""
    return None if value is None else check_memory_setting(value)


# What one element of a graph takes in pgvector's in-memory build at m = 16: its vector
# (4 bytes a coordinate, 2 at half precision, and an 8-byte header) and about 710 bytes
# of neighbour lists and bookkeeping (16 MB held 9,472 elements of 264 dimensions, 1,771
# bytes each), rounded up.
_ELEMENT_BYTES = 768
_NEED_MARGIN = 1.2
_MIN_BUILD_KB = 1024**2  # 1 GB, the setting before it was sized


def build_memory_kb(need_kb: int, current_kb: int, buffers_kb: int) -> int:
    """The ``maintenance_work_mem`` (kB) of a build whose largest graph needs ``need_kb``:
    that much, at least 1 GB, at most the server's ``shared_buffers`` (``buffers_kb``: a
    quarter of its memory as servers are usually configured, and as the embedded one is),
    and never less than the server's own setting (``current_kb``)."""
    return max(current_kb, min(max(need_kb, _MIN_BUILD_KB), max(buffers_kb, _MIN_BUILD_KB)))


def row_bytes(dimension: int) -> int:
    """What one element of a graph of vectors of ``dimension`` takes in the build."""
    width = 2 if half_indexed(dimension) else 4
    return width * (dimension + KEY_DIMENSIONS) + 8 + _ELEMENT_BYTES


def need_kb(graph_bytes: int) -> int:
    """The kB a graph of ``graph_bytes`` (``row_bytes`` times its rows) needs, with the
    margin."""
    return math.ceil(graph_bytes * _NEED_MARGIN / 1024)


def warn_spill(memory: str) -> Callable[[psycopg.errors.Diagnostic], None]:
    """A notice handler that logs pgvector's notice of a graph outgrowing ``memory``."""

    def handler(diag: psycopg.errors.Diagnostic) -> None:
        if "maintenance_work_mem" in (diag.message_primary or ""):
            _log.warning(
                "%s (maintenance_work_mem %s): the rest of the graph is built on disk, several "
                "times slower; pass a larger maintenance_work_mem",
                diag.message_primary,
                memory,
            )

    return handler


def check_workers(value: object) -> int | None:
    """Parallel build workers: an integer from 0 to 64, or None for the server's setting."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 64:
        raise InvalidInput(f"workers must be an integer from 0 to 64 or None, got {value!r:.80}")
    return value
