"""The server's pgvector: which versions Timestone needs, and why an older one is refused."""

from __future__ import annotations

import re

__all__ = ["PGVECTOR_LIBRARY", "PGVECTOR_SQL", "dotted", "pgvector_refusal"]

# pgvector 0.8.0 brought iterative index scans (``hnsw.iterative_scan``), which every
# filtered vector search sets; 0.7.0 the SQL functions and types the indexes are built on
# (``l2_normalize``, vector concatenation, ``halfvec``). The setting comes from the
# server's pgvector library, the functions from the extension's SQL version, which
# ``ALTER EXTENSION vector UPDATE`` brings up to the library's.
PGVECTOR_LIBRARY = (0, 8, 0)
PGVECTOR_SQL = (0, 7, 0)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def pgvector_refusal(version: str, iterative: str | None) -> str | None:
    """Why the server's pgvector cannot serve Timestone, or None: ``version`` is the
    extension's SQL version (``pg_extension.extversion``), ``iterative`` the value of
    ``hnsw.iterative_scan`` once its library is loaded (None where it has no such
    setting)."""
    if iterative is None:
        return (
            f"the server's pgvector (extension version {version}) has no iterative index "
            f"scans; Timestone needs pgvector {dotted(PGVECTOR_LIBRARY)} or newer: install "
            "it on the server, then run ALTER EXTENSION vector UPDATE in this database"
        )
    if _version(version) < PGVECTOR_SQL:
        return (
            f"the extension vector is at version {version} in this database, older than "
            f"the server's pgvector library; Timestone needs {dotted(PGVECTOR_SQL)} or "
            "newer: run ALTER EXTENSION vector UPDATE in this database"
        )
    return None
