"""What every command shares: the options of the store, errors as exit codes, opening."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from ..errors import EmbedderMismatch, InvalidInput, TimestoneError
from ._files import DEFAULT_MAX_FILE, DEFAULT_MAX_LINE, Limits, format_size, parse_size
from ._output import err_console, exit_code_for, print_error
from ._store import (
    embedder_for,
    load_ontology_file,
    ontology_document,
    ontology_from_document,
    resolve_dsn,
    save_ontology,
    stored_meta,
)

if TYPE_CHECKING:  # imported where used: --help loads no database driver or model
    from .._memory import Memory
    from ..embedders import Embedder
    from ..ontology import Ontology

__all__ = [
    "AsOf",
    "DataDir",
    "Dsn",
    "EmbedderOpt",
    "FollowLinks",
    "Group",
    "Json",
    "MaxFileSize",
    "MaxLineSize",
    "ValidAt",
    "fail",
    "guard",
    "limits",
    "open_store",
    "resolve_store",
]

T = TypeVar("T")

Dsn = Annotated[
    str | None,
    typer.Option("--dsn", envvar="TIMESTONE_DSN", help="Postgres DSN (default: embedded server)."),
]
DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", envvar="TIMESTONE_DATA_DIR", help="Data dir of the embedded server."
    ),
]
Group = Annotated[
    str | None,
    typer.Option(
        "--group", "-g", envvar="TIMESTONE_GROUP", help="Group (tenant) id [default: default]."
    ),
]
EmbedderOpt = Annotated[
    str | None,
    typer.Option(
        "--embedder",
        envvar="TIMESTONE_EMBEDDER",
        help=(
            "wordllama[:DIM], hash[:DIM], onnx[:FOLDER_OR_MODEL_ID] or openai:MODEL:DIM"
            " (server from OPENAI_API_KEY / OPENAI_BASE_URL); default: the one the"
            " database was built with."
        ),
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
AsOf = Annotated[
    str | None,
    typer.Option("--as-of", help="System time: what the graph held then (default: now)."),
]
ValidAt = Annotated[
    str | None,
    typer.Option(
        "--valid-at", help="World time the facts are true at (default: now; 'all': every period)."
    ),
]

FollowLinks = Annotated[
    bool,
    typer.Option(
        "--follow-symlinks",
        help="Read the files symbolic links point to (default: a link is refused, or "
        "skipped in a folder).",
    ),
]
MaxFileSize = Annotated[
    str | None,
    typer.Option(
        "--max-file-size",
        help="Refuse a file larger than this, e.g. 1GB "
        f"[default: {format_size(DEFAULT_MAX_FILE)}].",
    ),
]
MaxLineSize = Annotated[
    str | None,
    typer.Option(
        "--max-line-size",
        help="Refuse a line (JSONL, an export) longer than this "
        f"[default: {format_size(DEFAULT_MAX_LINE)}].",
    ),
]


def limits(
    max_file: str | None = None,
    max_line: str | None = None,
    follow_symlinks: bool = False,
    *,
    default_file: int = DEFAULT_MAX_FILE,
) -> Limits:
    """The reading limits of the options (exit 3 for a size that is not one)."""
    return guard(
        lambda: Limits(
            max_file=parse_size(max_file, "--max-file-size", default_file),
            max_line=parse_size(max_line, "--max-line-size", DEFAULT_MAX_LINE),
            follow_symlinks=follow_symlinks,
        )
    )


def fail(exc: BaseException) -> typer.Exit:
    code = exit_code_for(exc)
    print_error(exc)
    if isinstance(exc, EmbedderMismatch):
        err_console.print(
            "from the command line: leave out --embedder to use the stored one, or move the "
            "store with `timestone reembed --embedder SPEC`",
            highlight=False,
        )
    return typer.Exit(int(code))


def guard(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except TimestoneError as exc:
        raise fail(exc) from exc
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise fail(InvalidInput(f"{where}{exc.strerror or exc}")) from exc


def resolve_store(
    dsn: str | None,
    data_dir: Path | None,
    embedder: str | None,
    ontology_file: Path | None = None,
    read_limits: Limits | None = None,
) -> tuple[str, Embedder, Ontology | None]:
    """The DSN, embedder and ontology to open with; a new ontology file is stored first."""
    document = load_ontology_file(ontology_file, read_limits) if ontology_file is not None else None
    target = resolve_dsn(dsn, data_dir)
    stored = stored_meta(target, "ontology")
    chosen = embedder_for(embedder, stored_meta(target, "embedder"))
    doc = document if document is not None else stored
    ontology = ontology_from_document(doc, "stored ontology") if doc is not None else None
    return target, chosen, ontology


@contextlib.contextmanager
def open_store(
    dsn: str | None,
    data_dir: Path | None,
    embedder: str | None,
    *,
    ontology_file: Path | None = None,
    embeds: bool = False,
    read_limits: Limits | None = None,
) -> Generator[Memory]:
    """Open the store with the ontology and embedder it keeps; map errors to exit codes.
    ``embeds``: the command embeds text (a search, a write), so the embedder's model is
    loaded beside the opening; a read that embeds nothing does not load it."""
    from .._memory import Memory

    try:
        target, chosen, ontology = resolve_store(
            dsn, data_dir, embedder, ontology_file, read_limits
        )
        mem = Memory.open(target, embedder=chosen, ontology=ontology, warm=embeds)
        if ontology_file is not None and ontology is not None:
            save_ontology(target, ontology_document(ontology))
    except TimestoneError as exc:
        raise fail(exc) from exc
    try:
        yield mem
    except TimestoneError as exc:
        raise fail(exc) from exc
    finally:
        mem.close()
