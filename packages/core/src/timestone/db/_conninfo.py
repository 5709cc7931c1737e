"""A connection string's password kept out of what is shown: errors, logs, the CLI."""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["redact"]

# A password in a DSN: in a URI's user info or query, or a ``password=`` keyword (quoted
# or not; an unterminated quote runs to the end, as libpq reads it).
_PASSWORDS = (
    re.compile(r"://[^@/]*?:([^@/]*)@"),
    re.compile(r"[?&]password=([^&#]*)"),
    re.compile(r"(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'?|\S+)"),
)


def _passwords(dsn: str) -> set[str]:
    """The DSN's password in every form a message may echo: as written, percent-decoded,
    unquoted, and as libpq reads it."""
    from psycopg import Error
    from psycopg.conninfo import conninfo_to_dict

    secrets: set[str] = set()
    for pattern in _PASSWORDS:
        for found in pattern.finditer(dsn):
            given = found.group(1)
            bare = given[1:].removesuffix("'") if given.startswith("'") else given
            secrets.update((given, unquote(given), bare, re.sub(r"\\(.)", r"\1", bare)))
    try:
        read = conninfo_to_dict(dsn).get("password")
    except Error:  # not a connection string libpq reads: the patterns found what there is
        read = None
    if read is not None:
        secrets.add(str(read))
    return secrets - {""}


def redact(text: str, dsn: str) -> str:
    """``text`` (the DSN itself, or a message about it) with the DSN's password, in each
    form it may take, replaced by ``***``."""
    for secret in sorted(_passwords(dsn), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
