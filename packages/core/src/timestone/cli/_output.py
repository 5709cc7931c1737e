"""What the command line prints: JSON for scripts, Rich tables for people, and exit codes.

Exit codes:

====  ===========================================================
0     success
1     an unexpected failure (a bug: please report it)
2     a usage error (unknown option, missing argument)
3     invalid input: a malformed file or line, a date the parser cannot read
4     not found: unknown entity or episode, an episode already removed
5     conflict: the database refused the write (a concurrent writer won)
6     the database or the embedded server failed, or does not connect
7     no LLM configured, or the model failed
8     the embedder differs from the one the database was built with
9     the address (port) is already in use
10    the output could not be written: a full disk, a closed pipe
====  ===========================================================
"""

from __future__ import annotations

import dataclasses
import json
import sys
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from enum import IntEnum
from typing import TYPE_CHECKING, Any, cast

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import (
    AddressInUse,
    ConflictError,
    DatabaseError,
    EmbeddedServerError,
    EmbedderError,
    EmbedderMismatch,
    InvalidInput,
    LLMError,
    NotFound,
)

if TYPE_CHECKING:  # --help loads no model records
    from .._records import Entity, Episode, Fact

__all__ = [
    "AddressInUse",
    "ExitCode",
    "console",
    "err_console",
    "exit_code_for",
    "fact_table",
    "labelled",
    "print_error",
    "print_json",
    "to_jsonable",
]

# Markup off: names, facts, paths and messages are user and data text, printed as they are
# ("[bold]Nobody" is a name, not a style); the few styled words are ``Text`` with a style.
console = Console(highlight=False, soft_wrap=True, markup=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def labelled(label: str, style: str, message: object) -> Text:
    """``label`` in ``style``, then ``message`` as plain text (never read as markup)."""
    return Text.assemble((label, style), " ", str(message))


def print_error(exc: BaseException) -> None:
    """The one line an error prints on stderr: ``error: <what went wrong>``."""
    err_console.print(labelled("error:", "bold red", exc))


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1
    USAGE = 2
    INVALID_INPUT = 3
    NOT_FOUND = 4
    CONFLICT = 5
    DATABASE = 6
    LLM = 7
    EMBEDDER = 8
    ADDRESS_IN_USE = 9
    OUTPUT = 10


def exit_code_for(exc: BaseException) -> ExitCode:
    if isinstance(exc, AddressInUse):
        return ExitCode.ADDRESS_IN_USE
    if isinstance(exc, InvalidInput):
        return ExitCode.INVALID_INPUT
    if isinstance(exc, NotFound):
        return ExitCode.NOT_FOUND
    if isinstance(exc, ConflictError):
        return ExitCode.CONFLICT
    if isinstance(exc, DatabaseError | EmbeddedServerError):
        return ExitCode.DATABASE
    if isinstance(exc, LLMError):
        return ExitCode.LLM
    if isinstance(exc, EmbedderMismatch | EmbedderError):
        return ExitCode.EMBEDDER
    return ExitCode.FAILURE


def to_jsonable(value: Any) -> Any:
    """Records, UUIDs and datetimes as JSON values (ISO 8601, UTC)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        mapping = cast(Mapping[Any, Any], value)
        return {str(k): to_jsonable(v) for k, v in mapping.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in cast(Iterable[Any], value)]
    return value


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(value), ensure_ascii=False, indent=2, sort_keys=True))
    sys.stdout.write("\n")
    sys.stdout.flush()


OPEN = "(open)"  # a period without an end (or start); Rich marks a cut text with "…"


def _when(value: datetime | None) -> str:
    if value is None:
        return OPEN
    if value.hour == value.minute == value.second == value.microsecond == 0:
        return value.date().isoformat()
    return value.isoformat(timespec="seconds").replace("+00:00", "Z")


def fact_table(facts: Sequence[Fact], *, title: str, history: bool = False) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("source")
    table.add_column("relation", style="cyan")
    table.add_column("target")
    table.add_column("valid from")
    table.add_column("until")
    if history:
        table.add_column("recorded")
        table.add_column("superseded")
    table.add_column("fact", overflow="fold")
    for f in facts:
        cells = [f.source, f.relation, f.target, _when(f.valid_at), _when(f.invalid_at)]
        if history:
            cells += [_when(f.created_at), _when(f.expired_at) if f.expired_at else ""]
        style = "dim" if f.expired_at is not None else None
        table.add_row(*cells, f.fact, style=style)
    return table


def episode_table(episodes: Sequence[Episode], *, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("id", no_wrap=True)
    table.add_column("reference time")
    table.add_column("name")
    table.add_column("source")
    table.add_column("recorded")
    for e in episodes:
        table.add_row(str(e.id), _when(e.reference_time), e.name, e.source, _when(e.created_at))
    return table


def entity_table(entities: Sequence[Entity], *, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("name")
    table.add_column("type", style="cyan")
    table.add_column("score")
    table.add_column("summary", overflow="fold")
    for e in entities:
        score = f"{e.score:.3f}" if e.score is not None else ""
        table.add_row(e.name, e.entity_type, score, e.summary[:200])
    return table
