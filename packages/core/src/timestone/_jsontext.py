"""JSON text from files: parsed with its nesting bounded and its errors placed.

Python's ``json`` reader recurses once per level of nesting: a value nested a
hundred thousand levels deep ends in ``RecursionError`` instead of a refusal.
``loads`` counts the levels first (strings skipped, at C speed when the text
holds few brackets) and refuses a value deeper than ``MAX_DEPTH``, naming where.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import InvalidInput

__all__ = ["MAX_DEPTH", "check_depth", "loads", "place"]

MAX_DEPTH = 512
# a JSON string (skipped whole: brackets inside it are text), or one bracket
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def place(text: str, offset: int) -> str:
    """``line L column C`` of a character offset (both counted from 1)."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line} column {column}"


def check_depth(text: str, what: str, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON text nested deeper than ``limit`` levels, naming ``what`` and where."""
    if text.count("[") + text.count("{") <= limit:
        return
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                raise InvalidInput(
                    f"{what} is nested deeper than {limit} levels (at "
                    f"{place(text, match.start())}); flatten it"
                )
        elif token in "]}":
            depth -= 1


def loads(text: str, what: str, limit: int = MAX_DEPTH) -> Any:
    """The JSON value of ``text``; ``InvalidInput`` naming ``what``, the line and the column
    of a syntax error, or the depth limit."""
    check_depth(text, what, limit)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{what} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
