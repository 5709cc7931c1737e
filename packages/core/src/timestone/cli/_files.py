"""Reading the files a user names: regular files only, bounded, symbolic links on request.

Every file the command line reads (``ingest``, ``import``, ``--ontology``) is
opened without following a symbolic link (``O_NOFOLLOW``) unless
``--follow-symlinks``, and without blocking (``O_NONBLOCK``: a FIFO does not
hang the open); what was opened must be a regular file (``fstat``), so a
device (``/dev/zero``), a FIFO, a socket or a folder is refused by name. A
file larger than ``--max-file-size``, or a line of a line-oriented file
(JSONL, an export) longer than ``--max-line-size``, is refused naming the limit
and the option that raises it. A folder is walked without entering or reading
its links unless ``--follow-symlinks`` (a loop of links is then walked once);
what it skips is reported.
"""

from __future__ import annotations

import codecs
import dataclasses
import errno
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import InvalidInput

__all__ = [
    "DEFAULT_MAX_FILE",
    "DEFAULT_MAX_LINE",
    "Limits",
    "decode_utf8",
    "format_size",
    "json_lines",
    "parse_size",
    "read_file",
    "read_stream",
    "walk_folder",
]

KB, MB, GB = 1024, 1024**2, 1024**3
DEFAULT_MAX_FILE = 256 * MB
DEFAULT_MAX_LINE = 16 * MB
_UNITS = {"": 1, "B": 1, "KB": KB, "MB": MB, "GB": GB, "TB": 1024 * GB}
_SIZE = re.compile(r"(\d+)\s*([KMGT]?B?)", re.IGNORECASE)


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """What a command reads: the largest file and line, whether links are followed, and
    whether a folder's hidden files and folders (a name starting with ".") are walked."""

    max_file: int = DEFAULT_MAX_FILE
    max_line: int = DEFAULT_MAX_LINE
    follow_symlinks: bool = False
    hidden: bool = False


def parse_size(text: str | None, option: str, default: int) -> int:
    """A size such as ``512KB``, ``16MB``, ``1GB`` (units of 1024) or a count of bytes."""
    if text is None:
        return default
    found = _SIZE.fullmatch(text.strip())
    unit = found.group(2).upper() if found else ""
    if found is None or (unit and not unit.endswith("B")) or int(found.group(1)) < 1:
        raise InvalidInput(
            f"{option} {text!r:.40} is not a size; write a whole number of bytes or of KB, "
            "MB, GB (units of 1024), such as 64MB"
        )
    return int(found.group(1)) * _UNITS[unit]


def format_size(size: int) -> str:
    for unit in ("TB", "GB", "MB", "KB"):
        if size >= _UNITS[unit] and size % _UNITS[unit] == 0:
            return f"{size // _UNITS[unit]}{unit}"
    return f"{size} bytes"


def decode_utf8(data: bytes, what: str) -> str:
    """``data`` as UTF-8 text; ``InvalidInput`` naming ``what`` and the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "save it as UTF-8 and try again"
        ) from exc


def _kind(mode: int) -> str | None:
    """What a file that is not a regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    if stat.S_ISLNK(mode):
        return "a symbolic link (pass --follow-symlinks to read what it points to)"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe), not a regular file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a regular file"
    return "not a regular file"


def _open(path: Path, named: str, limits: Limits) -> int:
    try:
        kind = _kind(path.stat().st_mode if limits.follow_symlinks else path.lstat().st_mode)
    except FileNotFoundError as exc:
        raise InvalidInput(f"{named} does not exist") from exc
    except OSError as exc:
        raise InvalidInput(f"cannot read {named}: {exc.strerror or exc}") from exc
    if kind is not None:
        raise InvalidInput(f"{named} is {kind}")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not limits.follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as exc:  # gone since it was looked at
        raise InvalidInput(f"{named} does not exist") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP and not limits.follow_symlinks:
            raise InvalidInput(f"{named} is {_kind(stat.S_IFLNK)}") from exc
        raise InvalidInput(f"cannot read {named}: {exc.strerror or exc}") from exc
    kind = _kind(os.fstat(fd).st_mode)  # what was opened, whatever the name now points to
    if kind is not None:
        os.close(fd)
        raise InvalidInput(f"{named} is {kind}")
    return fd


def _too_large(named: str, limits: Limits) -> InvalidInput:
    return InvalidInput(
        f"{named} is larger than {format_size(limits.max_file)} (--max-file-size raises the limit)"
    )


def _text(data: bytes, named: str, limits: Limits, *, lines: bool) -> str:
    if lines:
        _check_lines(data, named, limits)
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    return decode_utf8(data, named)


def read_file(path: Path, what: str, limits: Limits, *, lines: bool = False) -> str:
    """The UTF-8 text of a regular file (a leading byte order mark dropped), within the
    limits; ``lines``: a line-oriented file, each line within ``max_line``."""
    named = f"{what} {path}" if what else str(path)
    fd = _open(path, named, limits)
    try:
        if os.fstat(fd).st_size > limits.max_file:
            raise _too_large(named, limits)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limits.max_file + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {named}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if len(data) > limits.max_file:  # it grew while it was read
        raise _too_large(named, limits)
    return _text(data, named, limits, lines=lines)


def json_lines(text: str) -> list[str]:
    """The lines of JSON Lines text: split at ``\n`` only. ``str.splitlines`` also breaks
    at U+2028, U+2029, U+0085 and other separators, which JSON strings hold raw (an export
    writes them so: text pulled from PDFs and web pages carries them)."""
    return text.split("\n")


def read_stream(stream: BinaryIO, named: str, limits: Limits, *, lines: bool = False) -> str:
    """The UTF-8 text of a stream (standard input), within the limits."""
    data = stream.read(limits.max_file + 1)
    if len(data) > limits.max_file:
        raise _too_large(named, limits)
    return _text(data, named, limits, lines=lines)


def _check_lines(data: bytes, named: str, limits: Limits) -> None:
    if len(data) <= limits.max_line:
        return
    start = 0
    while start <= len(data):
        end = data.find(b"\n", start)
        stop = len(data) if end < 0 else end
        if stop - start > limits.max_line:
            number = data.count(b"\n", 0, start) + 1
            raise InvalidInput(
                f"{named}: line {number} is longer than {format_size(limits.max_line)} "
                "(--max-line-size raises the limit)"
            )
        if end < 0:
            return
        start = end + 1


def walk_folder(
    folder: Path, suffixes: tuple[str, ...], limits: Limits, skipped: list[str]
) -> Iterator[Path]:
    """The files of ``folder`` and its subfolders whose suffix is one of ``suffixes``,
    sorted; links (unless followed), files that are not regular, loops of links and hidden
    files and folders (unless walked: ``.git``, ``.venv``, an editor's settings) are left
    out, each noted in ``skipped``."""
    found: list[Path] = []
    seen: set[tuple[int, int]] = set()

    def visit(directory: Path) -> None:
        info = directory.stat()
        if (info.st_dev, info.st_ino) in seen:
            skipped.append(f"{directory}: a folder already walked (a loop of links)")
            return
        seen.add((info.st_dev, info.st_ino))
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(f"{directory}: cannot read the folder ({exc.strerror or exc})")
            return
        for entry in entries:
            path = Path(entry.path)
            wanted = path.suffix.lower() in suffixes
            try:
                if entry.name.startswith(".") and not limits.hidden:
                    if wanted or entry.is_dir():
                        skipped.append(f"{path}: hidden (--hidden walks it)")
                elif entry.is_symlink() and not limits.follow_symlinks:
                    if wanted or entry.is_dir():
                        skipped.append(f"{path}: {_kind(stat.S_IFLNK)}")
                elif entry.is_dir():
                    visit(path)
                elif wanted and entry.is_file():
                    found.append(path)
                elif wanted:
                    kind = _kind(entry.stat().st_mode) or "not a regular file"
                    skipped.append(f"{path}: {kind}")
            except OSError as exc:  # a dangling link followed, a file gone meanwhile
                skipped.append(f"{path}: {exc.strerror or exc}")

    visit(folder)
    yield from sorted(found)
