"""Repeatable migrations: the schema's SQL functions, one file each, applied after the
numbered migrations.

Each function of the schema (search functions, trigger functions, helpers) has one file,
``timestone/migrations/functions/<name>.sql``, holding its current definition:
``CREATE OR REPLACE FUNCTION``, the ``DROP FUNCTION IF EXISTS`` of an overload an earlier
schema had where its signature changed, and its grants. Like Flyway's repeatable
migrations (``R__name.sql``), the files are applied, in the order of their names, after
the numbered ones, whenever what the database last applied differs: their checksum and
the schema version they were applied at are kept in ``timestone.meta`` under
``functions``. ``_db.migrate`` calls ``apply_functions`` under the migration lock, in a
transaction of its own, after the numbered migrations' transactions. The numbered
migrations keep tables, indexes and data moves; those before the cut-over (``CUT_OVER``)
define functions too, and stay as they are: an upgrade from any earlier schema replays
them, then applies the current files. The rule and its reasons:
``migrations/functions/README.md``, docs/decisions/020-sql-functions-in-files.md.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import re
from typing import TYPE_CHECKING, Any, NamedTuple

from ._routing_async import run_script

if TYPE_CHECKING:
    from ._database_async import Conn

__all__ = [
    "CUT_OVER",
    "FUNCTIONS",
    "FunctionFile",
    "apply_functions",
    "checksum",
    "defined_functions",
]

# The last numbered migration that may define a function: after it, a function changes
# in its file (tests/core/test_function_files.py holds every later migration to it).
CUT_OVER = 37
_KEY = "functions"


class FunctionFile(NamedTuple):
    """One repeatable migration: the function ``name`` and its file's ``text``."""

    name: str
    text: bytes


def _function_files() -> tuple[FunctionFile, ...]:
    folder = importlib.resources.files("timestone") / "migrations" / "functions"
    found = [
        FunctionFile(entry.name[: -len(".sql")], entry.read_bytes())
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")  # each defines the function it names (tested)
    ]
    return tuple(sorted(found))


FUNCTIONS = _function_files()

# A function a script defines (``CREATE [OR REPLACE] FUNCTION timestone.<name>``).
_DEFINES = re.compile(
    r"\bCREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(?:timestone|\"timestone\")\s*\.\s*\"?(\w+)",
    re.IGNORECASE,
)


def defined_functions(script: str) -> set[str]:
    """The names of the functions of the schema ``script`` creates or replaces (comments
    left out)."""
    bare = re.sub(r"--[^\n]*|/\*.*?\*/", "", script, flags=re.DOTALL)
    return {match.group(1).lower() for match in _DEFINES.finditer(bare)}


def checksum(files: tuple[FunctionFile, ...]) -> str:
    """The SHA-256 of the files' names and texts, in order."""
    digest = hashlib.sha256()
    for name, text in files:
        for part in (name.encode(), text):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
    return digest.hexdigest()


async def _applied(conn: Conn) -> Any:
    cur = await conn.execute("SELECT value FROM timestone.meta WHERE key = %s", (_KEY,))
    row = await cur.fetchone()
    return None if row is None else row["value"]


async def apply_functions(
    conn: Conn, distributed: bool, version: int, files: tuple[FunctionFile, ...] | None = None
) -> bool:
    """Apply the function files (``FUNCTIONS`` by default) on ``conn``, the owner's, in one
    transaction, unless the database already holds them as applied at schema ``version``.
    The caller holds the migration lock. Returns whether they were applied."""
    files = FUNCTIONS if files is None else files
    stamp = {"sha256": checksum(files), "schema_version": version}
    if await _applied(conn) == stamp:
        return False
    async with conn.transaction():
        for _, text in files:
            await run_script(conn, text, distributed)
        await conn.execute(
            "INSERT INTO timestone.meta (key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (_KEY, json.dumps(stamp)),
        )
    return True
