"""What every command shares: the options of the store, errors as exit codes, opening."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from ..errors import EmbedderMismatch, InvalidInput, TimestoneError
from ._files import DEFAULT_MAX_FILE, DEFAULT_MAX_LINE, Limits, format_size, parse_size
from ._output import err_console, exit_code_for, print_error
from ._store import (
    check_dsn,
    checked_embedder,
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
    "Hidden",
    "Json",
    "MaxFileSize",
    "MaxLineSize",
    "ValidAt",
    "chosen_embedder",
    "fail",
    "guard",
    "limits",
    "note_source",
    "open_store",
    "resolve_store",
]

T = TypeVar("T")

# The options of this run given on the command line (see ``note_source``).
_TYPED: ContextVar[frozenset[str]] = ContextVar("typed_options", default=frozenset())


def note_source(ctx: typer.Context, param: typer.CallbackParam, value: T) -> T:
    """Keep whether the option's value was typed on the command line or taken from its
    environment variable: an option given explicitly wins over the environment, and a
    refusal names the one the user set."""
    name = param.name or ""
    source = ctx.get_parameter_source(name)
    typed = source is not None and source.name == "COMMANDLINE"
    others = _TYPED.get() - {name}
    _TYPED.set(others | {name} if typed else others)
    return value


Dsn = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        envvar="TIMESTONE_DSN",
        callback=note_source,
        help="Postgres DSN (default: embedded server).",
    ),
]
DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        envvar="TIMESTONE_DATA_DIR",
        callback=note_source,
        help="Data dir of the embedded server (given, it wins over TIMESTONE_DSN).",
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
        callback=note_source,
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
Hidden = Annotated[
    bool,
    typer.Option(
        "--hidden",
        help="Walk a folder's hidden files and folders too (names starting with '.', such "
        "as .git; default: skipped and reported).",
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
    hidden: bool = False,
    default_file: int = DEFAULT_MAX_FILE,
) -> Limits:
    """The reading limits of the options (exit 3 for a size that is not one)."""
    return guard(
        lambda: Limits(
            max_file=parse_size(max_file, "--max-file-size", default_file),
            max_line=parse_size(max_line, "--max-line-size", DEFAULT_MAX_LINE),
            follow_symlinks=follow_symlinks,
            hidden=hidden,
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


def _typed(name: str, value: object) -> bool:
    """Whether the option of the parameter ``name`` was given on the command line, not
    taken from its environment variable."""
    return value is not None and name in _TYPED.get()


def chosen_embedder(spec: str | None) -> Embedder | None:
    """The embedder ``--embedder`` or ``TIMESTONE_EMBEDDER`` names, built and checked
    before anything is opened, a refusal naming the one that gave it; None when neither
    is set (a blank variable counts as unset, an empty option is refused)."""
    typed = _typed("embedder", spec)
    if spec is None or not (typed or spec.strip()):
        return None
    if not spec.strip():
        raise InvalidInput("--embedder is empty")
    return checked_embedder(spec, "--embedder" if typed else "TIMESTONE_EMBEDDER")


def _dsn_setting(dsn: str | None, data_dir: Path | None) -> tuple[str | None, str]:
    """The DSN to connect to and the setting that gave it, or (None, "") for the embedded
    server in the data dir. An option given on the command line wins over a variable:
    ``--data-dir`` over ``TIMESTONE_DSN``; ``--dsn`` and ``--data-dir`` together are
    refused. An empty ``--dsn`` is refused; a blank ``TIMESTONE_DSN`` counts as unset."""
    dsn_typed, dir_typed = _typed("dsn", dsn), _typed("data_dir", data_dir)
    if dsn_typed and dir_typed:
        raise InvalidInput("pass --dsn or --data-dir, not both")
    if dsn_typed:
        if dsn is None or not dsn.strip():
            raise InvalidInput("--dsn is empty")
        return dsn, "--dsn"
    if dir_typed or dsn is None or not dsn.strip():
        return None, ""
    return dsn, "TIMESTONE_DSN"


def check_settings(dsn: str | None, data_dir: Path | None) -> tuple[str | None, str]:
    """The settings every command that opens the store reads, checked before anything is
    started or written: the DSN (and the setting it came from), prepared statements."""
    from ..db._prepared import prepared_statements

    prepared_statements(None)  # TIMESTONE_PREPARED_STATEMENTS: on or off
    given, named = _dsn_setting(dsn, data_dir)
    return (check_dsn(given, named) if given is not None else None), named


def resolve_store(
    dsn: str | None,
    data_dir: Path | None,
    embedder: str | None,
    ontology_file: Path | None = None,
    read_limits: Limits | None = None,
    source_embedder: Mapping[str, Any] | None = None,
) -> tuple[str, Embedder, Ontology | None]:
    """The DSN, embedder and ontology to open with; a new ontology file is stored first.
    Every setting is checked before the embedded server starts or the DSN is connected.
    The embedder: ``--embedder``, else the store's, else ``source_embedder`` (that of
    the data to be written: an import's header), else WordLlama."""
    document = load_ontology_file(ontology_file, read_limits) if ontology_file is not None else None
    given, named = check_settings(dsn, data_dir)
    chosen = chosen_embedder(embedder)
    # TIMESTONE_DATA_DIR is left to the library, which reads (and checks) it
    target = resolve_dsn(given, data_dir if _typed("data_dir", data_dir) else None, named)
    stored = stored_meta(target, "ontology", named=named or None)
    if chosen is None:
        held = stored_meta(target, "embedder")
        chosen = embedder_for(None, held if held is not None else source_embedder)
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
    source_embedder: Mapping[str, Any] | None = None,
) -> Generator[Memory]:
    """Open the store with the ontology and embedder it keeps; map errors to exit codes.
    ``embeds``: the command embeds text (a search, a write), so the embedder's model is
    loaded beside the opening; a read that embeds nothing does not load it."""
    from .._memory import Memory

    try:
        target, chosen, ontology = resolve_store(
            dsn, data_dir, embedder, ontology_file, read_limits, source_embedder
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
