"""The ``timestone`` command: every verb of the library, for shells and scripts.

Every command opens the store with ``--dsn`` / ``TIMESTONE_DSN`` or the
embedded server in ``--data-dir`` / ``TIMESTONE_DATA_DIR``, and works in
``--group`` / ``TIMESTONE_GROUP`` (default ``default``). Reads print a table,
or JSON with ``--json``. Exit codes are listed in ``timestone.cli._output``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.table import Table

from .._time import NOW, parse_when
from ..db._conninfo import redact
from ..errors import InvalidInput, NotFound, TimestoneError
from ._export import STDOUT_NAMES, check_target, export_group_to
from ._files import GB, json_lines, read_stream
from ._options import (
    AsOf,
    DataDir,
    Dsn,
    EmbedderOpt,
    FollowLinks,
    Group,
    Hidden,
    Json,
    MaxFileSize,
    MaxLineSize,
    ValidAt,
    chosen_embedder,
    fail,
    guard,
    limits,
    note_source,
    open_store,
)
from ._output import (
    ExitCode,
    console,
    entity_table,
    episode_table,
    err_console,
    exit_code_for,
    fact_table,
    labelled,
    print_error,
    print_json,
)
from ._serve import serve_app, ui
from ._signals import exit_code, stop_on_signals
from ._store import (
    ontology_document,
    ontology_from_document,
    other_groups,
    read_text_file,
    resolve_group,
    save_ontology,
    stored_meta,
)

if TYPE_CHECKING:  # imported where used: --help loads no database driver, model or numpy
    from .._memory import Memory
    from ..ontology import Ontology

__all__ = ["app", "main"]

app = typer.Typer(
    name="timestone",
    help="Timestone: a knowledge graph that tells time, inside PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _when(text: str | None, what: str) -> datetime | None:
    return None if text is None else guard(lambda: parse_when(text, what))


def _valid(text: str | None) -> Any:
    if text is None:
        return NOW
    if text.strip().lower() in ("all", "any", "history"):
        return None
    return _when(text, "--valid-at")


def _entity_arg(name: str | None, what: str) -> None:
    """Refuse an entity name the library would refuse (empty, too long, a NUL), naming
    the argument that gave it (``what``) rather than the library's parameter."""
    from .._arguments import entity_ref

    if name is not None:
        guard(lambda: entity_ref(name, what))


def _file_arg(path: Path | None, what: str) -> None:
    """Refuse a folder where the command writes a file, naming the option, before it runs."""
    if path is not None and path.is_dir():
        raise fail(InvalidInput(f"{what} {path} is a folder; name the file to write"))


def _require_entity(mem: Memory, group: str, name: str, as_of: datetime | None) -> None:
    if mem.get_entity(group, name, as_of=as_of) is None:
        _note_unknown_group(mem, group)
        raise NotFound(f"unknown entity {name!r:.80} in group {group!r:.80}")


def _note_unknown_group(mem: Memory, group: str) -> None:
    """On stderr, when ``group`` holds nothing: the groups that hold something (a mistyped
    --group reads as an empty one, and the answer alone cannot tell them apart)."""
    import difflib

    others = other_groups(mem.dsn, group)
    if others is None:
        return
    close = difflib.get_close_matches(group, others, n=3, cutoff=0.6)
    shown = [*close, *(g for g in others if g not in close)][:20]
    if not shown:
        listed = "no group holds anything yet"
    else:
        more = f" and {len(others) - len(shown)} more" if len(others) > len(shown) else ""
        listed = "groups that hold something: " + ", ".join(shown) + more
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    err_console.print(
        labelled("note:", "yellow", f"group {group!r:.80} holds nothing{guess}; {listed}")
    )


# -- commands ----------------------------------------------------------------------------


@app.command()
def init(
    ontology: Annotated[
        Path | None,
        typer.Option("--ontology", help="Edge and entity types (JSON or TOML) to store."),
    ] = None,
    follow_symlinks: FollowLinks = False,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    embedder: EmbedderOpt = None,
    json_: Json = False,
) -> None:
    """Create (or migrate) the store, and store an ontology in it."""
    read = limits(follow_symlinks=follow_symlinks)
    with open_store(dsn, data_dir, embedder, ontology_file=ontology, read_limits=read) as mem:
        info: dict[str, Any] = {
            "dsn": redact(mem.dsn, mem.dsn),  # printed: its password masked
            "schema_version": stored_meta(mem.dsn, "schema_version"),
            "embedder": stored_meta(mem.dsn, "embedder"),
            "ontology": stored_meta(mem.dsn, "ontology"),
        }
        if json_:
            print_json(info)
        else:
            emb: dict[str, Any] = info["embedder"] or {}
            console.print(
                f"store ready: schema {info['schema_version']}, embedder "
                f"{emb.get('name')} ({emb.get('dimension')} dimensions)"
            )
            onto: dict[str, Any] | None = info["ontology"]
            if onto:
                ones = [e["name"] for e in onto["edge_types"] if e["cardinality"] == "one"]
                console.print(
                    f"ontology: {len(onto['edge_types'])} edge type(s); "
                    f"cardinality one: {', '.join(ones) or 'none'}"
                )


def _build_options(bulk: bool, memory: str | None, workers: int | None) -> dict[str, Any]:
    """The index build options of ``ingest --bulk``, checked before the store is opened
    (an ontology given with them is stored at the opening)."""
    from ..db._index_build import check_memory_setting, check_workers

    if not bulk and (memory is not None or workers is not None):
        given = "--maintenance-work-mem" if memory is not None else "--workers"
        raise InvalidInput(f"{given} sets the index build of a bulk load: add --bulk")
    return {
        "maintenance_work_mem": None if memory is None else check_memory_setting(memory),
        "workers": check_workers(workers),
    }


@app.command()
def ingest(
    paths: Annotated[
        list[Path], typer.Argument(help="JSONL files, JSON episode files, text files or folders.")
    ],
    ontology: Annotated[
        Path | None, typer.Option("--ontology", help="Store this ontology first (JSON or TOML).")
    ] = None,
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Skip malformed lines instead of refusing the file.")
    ] = False,
    reference_time: Annotated[
        str | None,
        typer.Option("--reference-time", help="Reference time of text files (default: mtime)."),
    ] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")
    ] = True,
    bulk: Annotated[
        bool,
        typer.Option(
            "--bulk",
            help="Drop the vector indexes for the load and build them once at its end "
            "(an initial import: every group's vector search is exact meanwhile).",
        ),
    ] = False,
    maintenance_work_mem: Annotated[
        str | None,
        typer.Option(
            "--maintenance-work-mem",
            help="With --bulk: memory for each index build at the end, e.g. 2GB "
            "(default: sized to the largest graph).",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", help="With --bulk: parallel index build workers (default: the server's)."
        ),
    ] = None,
    max_file_size: MaxFileSize = None,
    max_line_size: MaxLineSize = None,
    follow_symlinks: FollowLinks = False,
    hidden: Hidden = False,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
    json_: Json = False,
) -> None:
    """Ingest structured episodes (JSONL), text files and folders; safe to run again."""
    from ._ingest import ingest_paths, nothing_found

    ref = _when(reference_time, "--reference-time")
    g = resolve_group(group)
    build = guard(lambda: _build_options(bulk, maintenance_work_mem, workers))
    read = limits(max_file_size, max_line_size, follow_symlinks, hidden=hidden)
    with (
        open_store(
            dsn, data_dir, embedder, ontology_file=ontology, embeds=True, read_limits=read
        ) as mem,
        mem.bulk_load(**build) if bulk else contextlib.nullcontext(),
    ):
        summary = ingest_paths(
            mem,
            g,
            paths,
            skip_bad=skip_bad,
            reference_time=ref,
            show_progress=progress and not json_ and err_console.is_terminal,
            limits=read,
        )
    if json_:
        print_json(summary)
    else:
        console.print(
            f"{summary.episodes_created} episode(s) written, {summary.episodes_skipped} already "
            f"there, {summary.facts_written} fact(s), from {summary.files} file(s)"
        )
        for message in [*summary.bad_lines, *summary.skipped_files]:
            err_console.print(labelled("skipped", "yellow", message))
    note = nothing_found(summary, paths)
    if note is not None:
        err_console.print(labelled("note:", "yellow", note))


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    limit: Annotated[int, typer.Option("--limit", "-n")] = 10,
    scopes: Annotated[
        str, typer.Option("--scopes", help="Comma-separated: facts, entities, episodes.")
    ] = "facts,entities",
    valid_at: ValidAt = None,
    as_of: AsOf = None,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
    json_: Json = False,
) -> None:
    """Search facts, entities and episodes (hybrid: full text, vectors, graph)."""
    g = resolve_group(group)
    system = _when(as_of, "--as-of")
    world = _valid(valid_at)
    with open_store(dsn, data_dir, embedder, embeds=True) as mem:
        wanted = tuple(s.strip() for s in scopes.split(",") if s.strip())
        results = mem.search(g, query, limit=limit, scopes=wanted, valid_at=world, as_of=system)
        if not len(results):
            _note_unknown_group(mem, g)
        if json_:
            print_json(results)
            return
        facts, entities = list(results.facts), list(results.entities)
        if facts:
            console.print(fact_table(facts, title=f"facts matching {query!r}"))
        if entities:
            console.print(entity_table(entities, title=f"entities matching {query!r}"))
        if results.episodes:
            console.print(
                episode_table(list(results.episodes), title=f"episodes matching {query!r}")
            )
        if not len(results):
            console.print("nothing found")


@app.command()
def facts(
    source: Annotated[str | None, typer.Option("--source", "-s")] = None,
    relation: Annotated[str | None, typer.Option("--relation", "-r")] = None,
    target: Annotated[str | None, typer.Option("--target", "-t")] = None,
    valid_at: ValidAt = None,
    as_of: AsOf = None,
    limit: Annotated[int, typer.Option("--limit", "-n")] = 100,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
    json_: Json = False,
) -> None:
    """Facts true at --valid-at, as the graph held them at --as-of."""
    _entity_arg(source, "--source")
    _entity_arg(target, "--target")
    g = resolve_group(group)
    system = _when(as_of, "--as-of")
    world = _valid(valid_at)
    with open_store(dsn, data_dir, embedder) as mem:
        for name in (source, target):
            if name is not None:
                _require_entity(mem, g, name, system)
        found = mem.facts(
            g,
            source=source,
            relation=relation,
            target=target,
            valid_at=world,
            as_of=system,
            limit=limit,
        )
        if not found:
            _note_unknown_group(mem, g)
    if json_:
        print_json(found)
    else:
        console.print(fact_table(found, title=f"{len(found)} fact(s) in {g}"))


@app.command()
def timeline(
    entity: Annotated[str, typer.Argument(help="Entity name or id.")],
    as_of: AsOf = None,
    relation: Annotated[str | None, typer.Option("--relation", "-r")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Periods that last past this world time.")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Periods that start before this world time.")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", help="The first periods only.")
    ] = None,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write the timeline picture to this HTML file.")
    ] = None,
    png: Annotated[
        Path | None, typer.Option("--png", help="Also a PNG screenshot (needs Chromium).")
    ] = None,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
    json_: Json = False,
) -> None:
    """Every period of every fact about ENTITY, by world time; --html draws it.

    --relation, --since, --until and --limit narrow it (an entity of long history)."""
    _entity_arg(entity, "ENTITY")
    _file_arg(html, "--html")
    _file_arg(png, "--png")
    g = resolve_group(group)
    system = _when(as_of, "--as-of")
    start, end = _when(since, "--since"), _when(until, "--until")
    with open_store(dsn, data_dir, embedder) as mem:
        _require_entity(mem, g, entity, system)
        periods = mem.timeline(
            g, entity, as_of=system, relation=relation, since=start, until=end, limit=limit
        )
        history = mem.fact_history(g, entity) if (html or png) else []
    if html is not None or png is not None:
        _picture(entity, history, periods, system, html, png)
    if json_:
        print_json(periods)
    elif html is None and png is None:
        console.print(fact_table(periods, title=f"timeline of {entity}"))


def _picture(
    entity: str,
    history: list[Any],
    periods: list[Any],
    as_of: datetime | None,
    html: Path | None,
    png: Path | None,
) -> None:
    from ..viz.browser import screenshot
    from ..viz.timeline import page_height, timeline_html

    if as_of is not None:
        # as the graph held it then: its periods solid, what it had already dropped faint
        held = {f.version_id for f in periods}
        history = [
            dataclasses.replace(f, expired_at=None) if f.version_id in held else f
            for f in history
            if f.created_at <= as_of
        ]
    page = timeline_html(entity, history, as_of=as_of)
    target = html or (png.with_suffix(".html") if png is not None else None)
    assert target is not None
    guard(lambda: target.write_text(page, encoding="utf-8"))
    err_console.print(f"timeline written to {target}")
    if png is not None:
        height = max(400, page_height(entity, history))
        guard(lambda: screenshot(target, png, height=height))
        err_console.print(f"screenshot written to {png}")


@app.command("as-of")
def as_of_cmd(
    when: Annotated[str, typer.Argument(help="System time: what did the graph hold then?")],
    entity: Annotated[
        str | None, typer.Option("--entity", "-e", help="Only facts about this entity.")
    ] = None,
    valid_at: ValidAt = None,
    limit: Annotated[int, typer.Option("--limit", "-n")] = 100,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
    json_: Json = False,
) -> None:
    """What the graph held at WHEN (system time), true at --valid-at (default: now)."""
    _entity_arg(entity, "--entity")
    g = resolve_group(group)
    system = _when(when, "as-of time")
    world = _valid(valid_at)
    with open_store(dsn, data_dir, embedder) as mem:
        if entity is not None:
            _require_entity(mem, g, entity, system)
            at = datetime.now(UTC) if world is NOW else world
            found = [
                f for f in mem.timeline(g, entity, as_of=system) if at is None or f.holds_at(at)
            ][:limit]
        else:
            found = mem.facts(g, valid_at=world, as_of=system, limit=limit)
            if not found:
                _note_unknown_group(mem, g)
    if json_:
        print_json(found)
    else:
        console.print(fact_table(found, title=f"{len(found)} fact(s) held at {when}"))


@app.command()
def episodes(
    as_of: AsOf = None,
    limit: Annotated[int, typer.Option("--limit", "-n")] = 100,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
    json_: Json = False,
) -> None:
    """The group's episodes, newest reference time first."""
    g = resolve_group(group)
    system = _when(as_of, "--as-of")
    with open_store(dsn, data_dir, embedder) as mem:
        found = mem.episodes(g, as_of=system, limit=limit)
        if not found:
            _note_unknown_group(mem, g)
    if json_:
        print_json(found)
    else:
        console.print(episode_table(found, title=f"{len(found)} episode(s) in {g}"))


@app.command("remove-episode")
def remove_episode(
    episode_id: Annotated[str, typer.Argument(help="The episode's id (see `timestone episodes`).")],
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
    json_: Json = False,
) -> None:
    """Remove an episode exactly: the graph becomes what it would be without it."""
    g = resolve_group(group)
    with open_store(dsn, data_dir, embedder) as mem:
        report = mem.remove_episode(g, episode_id)
    if json_:
        print_json(report)
    else:
        console.print(
            f"removed episode {report.episode_id}: {report.facts_expired} fact version(s) "
            f"expired, {report.facts_created} written"
        )


@app.command()
def rollback(
    to: Annotated[str, typer.Option("--to", help="The moment (system time) to return to.")],
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
    json_: Json = False,
) -> None:
    """Make the current graph what it held at --to (itself a reversible write)."""
    g = resolve_group(group)
    point = _when(to, "--to")
    assert point is not None
    with open_store(dsn, data_dir, embedder) as mem:
        report = mem.rollback(g, to=point)
    if json_:
        print_json(report)
    else:
        console.print(
            f"rolled back to {report.to.isoformat()}: expired {dict(report.expired)}, "
            f"restored {dict(report.restored)}"
        )


@app.command()
def stats(
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
    json_: Json = False,
) -> None:
    """Rows of the group per table: held now, and every version."""
    g = resolve_group(group)
    with open_store(dsn, data_dir, embedder) as mem:
        counts = mem.stats(g)
        if not any(c["versions"] for c in counts.values()):
            _note_unknown_group(mem, g)
    if json_:
        print_json({"group_id": g, "tables": counts})
        return
    table = Table(title=f"group {g}", title_justify="left")
    table.add_column("table")
    table.add_column("held now", justify="right")
    table.add_column("all versions", justify="right")
    for name, c in counts.items():
        table.add_row(name, str(c["current"]), str(c["versions"]))
    console.print(table)


@app.command("export")
def export_cmd(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="A regular file to write, by a temporary file renamed at the end (default, "
            "or - or /dev/stdout: standard output).",
        ),
    ] = None,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
) -> None:
    """Write the group, every row version with both clocks, as JSONL."""
    g = resolve_group(group)
    if output is not None and str(output) not in STDOUT_NAMES:
        guard(lambda: check_target(output))
    with open_store(dsn, data_dir, embedder) as mem:
        if not any(export_group_to(mem, g, output).values()):
            _note_unknown_group(mem, g)


@app.command("import")
def import_cmd(
    source: Annotated[
        Path, typer.Argument(help="A file written by `timestone export`; - for stdin.")
    ],
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            "-g",
            envvar="TIMESTONE_GROUP",
            help="Target group (default: the exported one).",
        ),
    ] = None,
    embedder: EmbedderOpt = None,
    max_file_size: MaxFileSize = None,
    max_line_size: MaxLineSize = None,
    follow_symlinks: FollowLinks = False,
    json_: Json = False,
) -> None:
    """Read an export into an empty group, history and all, in one transaction.

    The file is read whole: --max-file-size (default 1GB) bounds it."""
    read = limits(max_file_size, max_line_size, follow_symlinks, default_file=GB)
    if str(source) == "-":
        text = guard(lambda: read_stream(sys.stdin.buffer, "the export on stdin", read, lines=True))
    else:
        text = guard(lambda: read_text_file(source, "the export", read, lines=True))
    lines = json_lines(text)
    if not any(line.strip() for line in lines):
        where = "on stdin" if str(source) == "-" else str(source)
        raise fail(InvalidInput(f"the export {where} is empty: nothing to import"))
    header = _header(lines)
    onto = header.get("ontology")
    if onto is not None:  # checked before anything is written, as every line is
        onto = ontology_document(guard(lambda: _header_ontology(onto)))
    with open_store(dsn, data_dir, embedder, source_embedder=_header_embedder(header)) as mem:
        counts = mem.import_group(lines, group_id=group)
        if onto is not None and stored_meta(mem.dsn, "ontology") is None:
            save_ontology(mem.dsn, onto)
    target = group or header.get("group_id")
    if json_:
        print_json({"group_id": target, "rows": counts})
    else:
        console.print(f"imported {sum(counts.values())} row(s) into group {target}")


def _header_embedder(header: dict[str, Any]) -> dict[str, Any] | None:
    """The export's embedder, which a store the import creates takes (with no
    ``--embedder``): the import would refuse the file in a store of another."""
    made = header.get("embedder")
    if not isinstance(made, dict):
        return None
    described = cast(dict[str, Any], made)
    if not isinstance(described.get("name"), str) or type(described.get("dimension")) is not int:
        return None
    return described


def _header_ontology(document: object) -> Ontology:
    where = "the export's header: ontology"
    if not isinstance(document, dict):
        raise InvalidInput(f"{where} must be an object, got {type(document).__name__}")
    try:
        return ontology_from_document(cast(dict[str, Any], document), where=where)
    except InvalidInput as exc:
        said = str(exc)
        raise InvalidInput(said if said.startswith(where) else f"{where}: {said}") from None


def _header(lines: list[str]) -> dict[str, Any]:
    import json

    for text in lines:
        if text.strip():
            try:
                value = json.loads(text)
            except ValueError:  # the import refuses the line, naming it
                return {}
            return dict(value) if isinstance(value, dict) else {}  # pyright: ignore[reportUnknownArgumentType]
    return {}


@app.command()
def reembed(
    embedder: Annotated[
        str,
        typer.Option(
            "--embedder",
            envvar="TIMESTONE_EMBEDDER",
            callback=note_source,
            help="wordllama[:DIM], hash[:DIM], onnx[:FOLDER_OR_MODEL_ID] or openai:MODEL:DIM"
            " (server from OPENAI_API_KEY / OPENAI_BASE_URL).",
        ),
    ],
    dsn: Dsn = None,
    data_dir: DataDir = None,
    json_: Json = False,
) -> None:
    """Move every stored vector (all groups, all versions) to another embedder."""
    new = guard(lambda: chosen_embedder(embedder))
    if new is None:
        raise fail(InvalidInput("TIMESTONE_EMBEDDER is blank: name the embedder to move to"))
    with open_store(dsn, data_dir, None) as mem:
        done = mem.reembed(new)
    if json_:
        print_json({"embedder": {"name": new.name, "dimension": new.dimension}, "rows": done})
    else:
        console.print(f"re-embedded {done} row(s) with {new.name} ({new.dimension} dimensions)")


@app.command("rebuild-indexes")
def rebuild_indexes(
    index: Annotated[
        list[str] | None,
        typer.Option(
            "--index",
            help="A vector index to rebuild (repeat for several; default: every one).",
        ),
    ] = None,
    maintenance_work_mem: Annotated[
        str | None,
        typer.Option(
            "--maintenance-work-mem",
            help="Memory for each build, e.g. 2GB (default: sized to the largest graph).",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", help="Parallel build workers (default: the server's)."),
    ] = None,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    json_: Json = False,
) -> None:
    """Rebuild the HNSW indexes (REINDEX CONCURRENTLY) after heavy churn; reads go on."""
    with open_store(dsn, data_dir, None) as mem:
        took = mem.rebuild_vector_indexes(
            indexes=index, maintenance_work_mem=maintenance_work_mem, workers=workers
        )
    if json_:
        print_json({"seconds": {name: round(s, 3) for name, s in took.items()}})
    else:
        for name, seconds in took.items():
            console.print(f"rebuilt {name} in {seconds:.1f} s")


@app.command("index-health")
def index_health(
    index: Annotated[
        list[str] | None,
        typer.Option("--index", help="A vector index to probe (repeat; default: every one)."),
    ] = None,
    sample: Annotated[
        int, typer.Option("--sample", help="Rows probed per index, each by its own vector.")
    ] = 200,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    json_: Json = False,
) -> None:
    """The share of its own rows each HNSW index finds: near 1.0 whole, lower when worn."""
    with open_store(dsn, data_dir, None) as mem:
        health = mem.vector_index_health(indexes=index, sample=sample)
    if json_:
        print_json({"found": health})
    else:
        for name, share in health.items():
            console.print(f"{name}: " + ("no rows" if share is None else f"{share:.3f}"))


app.add_typer(serve_app, name="serve")
app.command()(ui)


def main(argv: list[str] | None = None) -> int:
    """Run the command; return its exit code (see ``timestone.cli._output``; a stop signal:
    ``timestone.cli._signals``)."""
    with stop_on_signals():
        return exit_code(_run(argv))


def _run(argv: list[str] | None) -> int:
    try:
        app(args=argv, prog_name="timestone")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return int(ExitCode.OK)
        return code if isinstance(code, int) else int(ExitCode.FAILURE)
    except TimestoneError as exc:
        print_error(exc)
        return int(exit_code_for(exc))
    return int(ExitCode.OK)
