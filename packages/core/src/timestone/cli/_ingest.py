"""``timestone ingest``: JSONL of structured episodes, text files, folders; resumable.

A JSONL line is one structured episode in the shape of ``mira.jsonl``::

    {"name": ..., "reference_time": "2015-10-01T00:00:00Z", "content": ...,
     "facts": [{"source": ..., "relation": ..., "target": ..., "valid_at": ...}, ...]}

(optional: ``saga``, ``source_description``, ``idempotency_key``). A whole
file is checked before anything from it is written: a bad line stops the file
with its line number and what is wrong, unless ``--skip-bad``. Each episode
gets an idempotency key (its own, or a hash of the line), so running the same
ingest again writes nothing twice and picks up where an interrupted run
stopped. A ``.json`` file holds one such episode, or a list of them (keyed by a
hash of each episode); a file that is not JSON is refused with the line and
column. Dates without a zone are read as UTC, as the command's flags read them.
Any other file is text and becomes a document (``add_document``): chunked into
episodes, its uri the file's absolute path. Files are read as ``_files`` says:
regular files only, bounded, symbolic links on request.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import stat
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from .._jsontext import check_depth, loads
from .._memory import Memory
from .._records import FactInput, IngestResult, visible
from .._time import parse_when
from ..errors import InvalidInput, InvalidPeriod, TimestoneError
from ._files import Limits, json_lines, read_file, walk_folder

__all__ = [
    "JSONL_SUFFIXES",
    "JSON_SUFFIXES",
    "TEXT_SUFFIXES",
    "IngestSummary",
    "JsonlLine",
    "ingest_paths",
    "nothing_found",
]

JSONL_SUFFIXES = (".jsonl", ".ndjson")
JSON_SUFFIXES = (".json",)
TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".text")
SUFFIXES = JSONL_SUFFIXES + JSON_SUFFIXES + TEXT_SUFFIXES
_KEYS = {
    "name",
    "reference_time",
    "content",
    "facts",
    "saga",
    "source_description",
    "idempotency_key",
}


@dataclasses.dataclass(frozen=True, slots=True)
class JsonlLine:
    """One checked JSONL line, ready for ``add_facts``."""

    line: int
    name: str | None
    reference_time: datetime
    facts: list[FactInput]
    saga: str | None
    source_description: str
    idempotency_key: str
    label: str = "line"

    def place(self, path: Path) -> str:
        """Where the episode is: ``file:3`` for a JSONL line, ``file: episode 3`` else."""
        if self.label == "line":
            return f"{path}:{self.line}"
        return f"{path}: {self.label}" + ("" if self.label == "the episode" else f" {self.line}")


@dataclasses.dataclass
class IngestSummary:
    files: int = 0
    episodes_created: int = 0
    episodes_skipped: int = 0
    facts_written: int = 0
    documents: int = 0
    bad_lines: list[str] = dataclasses.field(default_factory=list[str])
    skipped_files: list[str] = dataclasses.field(default_factory=list[str])


def nothing_found(summary: IngestSummary, paths: Sequence[Path]) -> str | None:
    """The note for an ingest that found nothing to ingest (no episode, no text, no bad
    line); None when it found something."""
    found = summary.episodes_created + summary.episodes_skipped + summary.documents
    if found or summary.bad_lines:
        return None
    where = ", ".join(str(path) for path in paths)
    if summary.files:
        return f"nothing found to ingest in {where}"
    kinds = ", ".join(SUFFIXES)
    return f"nothing found to ingest in {where}: ingest reads files ending in {kinds}"


def _line_key(text: str) -> str:
    return "jsonl:" + hashlib.sha256(text.strip().encode()).hexdigest()


def _when(value: object, what: str) -> object:
    """A date of a file as the flags read one: without a zone, UTC (``parse_when``)."""
    if value is None:
        return None
    if not isinstance(value, str):  # JSON has no dates: a number is not read as one
        raise InvalidPeriod(
            f"{what} must be a date as text, such as 2019-05-01 or 2019-05-01T12:00:00Z,"
            f" got {type(value).__name__} {value!r:.40}"
        )
    return parse_when(value, what)


def parse_line(number: int, text: str) -> JsonlLine:
    """One JSONL line as an episode; ``InvalidInput`` naming what is wrong."""
    check_depth(text, "the line")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"not JSON ({exc.msg} at column {exc.colno})") from exc
    return parse_episode(raw, number, _line_key(text))


def parse_episode(raw: object, number: int, default_key: str, label: str = "line") -> JsonlLine:
    """One episode (a JSON object, from a JSONL line or a JSON file); ``InvalidInput``
    naming what is wrong. ``default_key``: its idempotency key unless it carries one."""
    if not isinstance(raw, dict):
        raise InvalidInput(f"expected a JSON object, got {type(raw).__name__}")
    obj: dict[str, Any] = raw  # pyright: ignore[reportUnknownVariableType]
    extra = set(obj) - _KEYS
    if extra:
        raise InvalidInput(f"unknown key(s) {', '.join(sorted(extra))}; allowed: {sorted(_KEYS)}")
    if "reference_time" not in obj:
        raise InvalidInput("missing reference_time")
    ref = obj["reference_time"]
    if not isinstance(ref, str):
        raise InvalidInput("reference_time must be an ISO 8601 string")
    reference_time = parse_when(ref, "reference_time")
    facts_raw = obj.get("facts")
    if not isinstance(facts_raw, list) or not facts_raw:
        raise InvalidInput("facts must be a non-empty list")
    facts: list[FactInput] = []
    for i, item in enumerate(facts_raw):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        if not isinstance(item, dict):
            raise InvalidInput(f"facts[{i}] must be an object")
        fields: dict[str, Any] = dict(item)  # pyright: ignore[reportUnknownArgumentType]
        try:
            for end in ("valid_at", "invalid_at"):
                if end in fields:
                    fields[end] = _when(fields[end], end)
            facts.append(FactInput.parse(fields))
        except InvalidInput as exc:
            raise InvalidInput(f"facts[{i}]: {exc}") from exc
    for key in ("name", "saga", "source_description", "idempotency_key", "content"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise InvalidInput(f"{key} must be a string")
    return JsonlLine(
        line=number,
        name=obj.get("name"),
        reference_time=reference_time,
        facts=facts,
        saga=obj.get("saga"),
        source_description=obj.get("source_description") or "",
        idempotency_key=obj.get("idempotency_key") or default_key,
        label=label,
    )


def read_jsonl(
    path: Path, *, skip_bad: bool, summary: IngestSummary, limits: Limits
) -> list[JsonlLine]:
    """Every episode of the file; refuse the whole file at its first bad line unless told."""
    lines = json_lines(read_file(path, "", limits, lines=True))
    if not any(text.strip() for text in lines):
        summary.skipped_files.append(f"{path}: empty")
        return []
    episodes: list[JsonlLine] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            episodes.append(parse_line(number, text))
        except InvalidInput as exc:
            message = f"{path}:{number}: {exc}"
            if not skip_bad:
                raise InvalidInput(
                    f"{message}\nnothing from {path} was written; fix the line or pass --skip-bad"
                ) from exc
            summary.bad_lines.append(message)
    return episodes


def read_json(
    path: Path, *, skip_bad: bool, summary: IngestSummary, limits: Limits
) -> list[JsonlLine]:
    """The episode, or the list of episodes, of a ``.json`` file, each in the shape of a
    JSONL line; anything else is refused with its line and column. A malformed file is
    refused whole, ``--skip-bad`` or not; with it, a bad episode of a list is skipped."""
    text = read_file(path, "", limits)
    value: object = loads(text, str(path))
    if isinstance(value, dict):
        items: list[object] = [value]
        label = "the episode"
    elif isinstance(value, list) and value:
        items = list(cast(list[object], value))
        label = "episode"
    else:
        shown = "an empty list" if isinstance(value, list) else f"a JSON {type(value).__name__}"
        raise InvalidInput(
            f"{path}: holds {shown}; a .json file holds one episode (an object) or a list of "
            "them, in the shape of a JSONL line (docs/cli.md)"
        )
    episodes: list[JsonlLine] = []
    for number, item in enumerate(items, start=1):
        key = (
            "json:"
            + hashlib.sha256(
                json.dumps(item, sort_keys=True, ensure_ascii=False).encode()
            ).hexdigest()
        )
        try:
            episodes.append(parse_episode(item, number, key, label))
        except InvalidInput as exc:
            where = label if len(items) == 1 else f"{label} {number}"
            message = f"{path}: {where}: {exc}"
            if not skip_bad:
                raise InvalidInput(
                    f"{message}\nnothing from {path} was written; fix it or pass --skip-bad"
                ) from exc
            summary.bad_lines.append(message)
    return episodes


def expand(paths: Sequence[Path], limits: Limits, skipped: list[str]) -> Iterator[Path]:
    """Files to ingest: the paths given, and the ingestible files of folders, sorted; a
    file reached again (a link followed to a file already found, a hard link, a path given
    twice) is read once, under the first path that reached it."""
    found: dict[tuple[int, int], Path] = {}
    for path in _given(paths, limits, skipped):
        try:
            info = path.stat() if limits.follow_symlinks else path.lstat()
        except OSError:  # gone meanwhile: read_file names it
            yield path
            continue
        key = (info.st_dev, info.st_ino)
        if key in found:
            skipped.append(f"{path}: the same file as {found[key]}")
        else:
            found[key] = path
            yield path


def _given(paths: Sequence[Path], limits: Limits, skipped: list[str]) -> Iterator[Path]:
    for path in paths:
        try:
            mode = (path.stat() if limits.follow_symlinks else path.lstat()).st_mode
        except FileNotFoundError:
            raise InvalidInput(f"no such file or folder: {path}") from None
        except OSError as exc:
            raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from exc
        if stat.S_ISDIR(mode):
            yield from walk_folder(path, SUFFIXES, limits, skipped)
        else:
            yield path  # read_file refuses it if it is not a regular file


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("[cyan]{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        disable=not enabled,
        transient=False,
    )


def ingest_paths(
    mem: Memory,
    group_id: str,
    paths: Sequence[Path],
    *,
    skip_bad: bool,
    reference_time: datetime | None,
    show_progress: bool,
    limits: Limits,
) -> IngestSummary:
    summary = IngestSummary()
    files = list(expand(paths, limits, summary.skipped_files))
    # Check every JSONL and JSON file before writing anything.
    plans: list[tuple[Path, list[JsonlLine] | None]] = []
    for path in files:
        suffix = path.suffix.lower()
        if suffix in JSONL_SUFFIXES:
            plans.append(
                (path, read_jsonl(path, skip_bad=skip_bad, summary=summary, limits=limits))
            )
        elif suffix in JSON_SUFFIXES:
            plans.append((path, read_json(path, skip_bad=skip_bad, summary=summary, limits=limits)))
        else:
            _check_text_file(path, limits)
            plans.append((path, None))
    total = sum(1 if eps is None else len(eps) for _, eps in plans)
    with _progress(show_progress) as progress:
        task = progress.add_task("ingesting", total=total, rate="")
        started = datetime.now(UTC)
        for path, episodes in plans:
            summary.files += 1
            if episodes is None:
                content = read_file(path, "", limits)
                _ingest_text(mem, group_id, path, content, reference_time, summary)
                progress.advance(task)
            else:

                def advance() -> None:
                    progress.advance(task)
                    elapsed = (datetime.now(UTC) - started).total_seconds()
                    if elapsed > 0:
                        done = progress.tasks[0].completed
                        progress.update(task, rate=f"{done / elapsed:.1f} episodes/s")

                _ingest_episodes(
                    mem,
                    group_id,
                    path,
                    episodes,
                    skip_bad=skip_bad,
                    summary=summary,
                    advance=advance,
                )
    return summary


def _ingest_episodes(
    mem: Memory,
    group_id: str,
    path: Path,
    episodes: Sequence[JsonlLine],
    *,
    skip_bad: bool,
    summary: IngestSummary,
    advance: Callable[[], None],
) -> None:
    """A file's episodes, in order, through ``add_fact_batches`` (the next episode checked
    and embedded while the one before is stored). An episode the library refuses stops
    the file there, or with ``skip_bad`` is recorded and the episodes after it go on."""
    start = 0
    while start < len(episodes):
        done = 0

        def progress(count: int, _total: int | None, res: IngestResult) -> None:
            nonlocal done
            done = count
            if res.created:
                summary.episodes_created += 1
                summary.facts_written += len(res.facts)
            else:
                summary.episodes_skipped += 1
            advance()

        try:
            mem.add_fact_batches(
                group_id,
                (
                    {
                        "facts": ep.facts,
                        "reference_time": ep.reference_time,
                        "name": ep.name,
                        "saga": ep.saga,
                        "idempotency_key": ep.idempotency_key,
                        "source_description": ep.source_description,
                    }
                    for ep in episodes[start:]
                ),
                on_progress=progress,
                keep_results=False,
            )
            return
        except InvalidInput as exc:
            ep = episodes[start + done]
            # the library's own words, without its batch number (the line says where)
            reason = exc.__cause__ if isinstance(exc.__cause__, InvalidInput) else exc
            message = f"{ep.place(path)}: {reason}"
            if not skip_bad:
                if start + done == 0:
                    raise InvalidInput(
                        f"{message}\nnothing from {path} was written; fix it or pass --skip-bad"
                    ) from exc
                before = f"line {ep.line}" if ep.label == "line" else f"{ep.label} {ep.line}"
                raise InvalidInput(
                    f"{message}\nthe episodes before {before} were written; "
                    "running the same ingest again resumes after them"
                ) from exc
            summary.bad_lines.append(message)
            advance()
            start += done + 1


def _check_text_file(path: Path, limits: Limits) -> None:
    """A text file read as the write will read it (UTF-8, within the limits), and free of
    what no document holds (a NUL), before anything of the command is written; read
    again when written, not kept (a folder may hold gigabytes)."""
    if "\x00" in read_file(path, "", limits):
        raise InvalidInput(f"{path}: holds a NUL character, which no document holds")


def _title(path: Path) -> str:
    """A file's name as a title: a name in another encoding than UTF-8 (bytes Python keeps
    as lone surrogates) with each such byte shown as U+FFFD."""
    return path.name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _ingest_text(
    mem: Memory,
    group_id: str,
    path: Path,
    content: str,
    reference_time: datetime | None,
    summary: IngestSummary,
) -> None:
    if not visible(content):  # blank, or only zero-width, format or control characters
        summary.skipped_files.append(f"{path}: empty")
        return
    when = reference_time or datetime.fromtimestamp(path.stat().st_mtime, UTC)
    try:
        res = mem.add_document(
            group_id, path.resolve().as_uri(), content, title=_title(path), reference_time=when
        )
    except TimestoneError as exc:
        raise type(exc)(f"{path}: {exc}") from exc
    summary.documents += 1
    if res.created:
        summary.episodes_created += len(res.episodes)
        summary.facts_written += len(res.facts)
    else:
        summary.episodes_skipped += len(res.episodes)
