"""``timestone export``: where the export goes, and nothing half-written under its name.

``-o -``, ``-o /dev/stdout`` and no ``-o`` write to standard output. Any other
target must be a regular file or not exist yet: the export is written to a
temporary file beside it, flushed to disk, and renamed over the target only
once it is whole, so a failed export leaves the target as it was. A device,
a FIFO, a socket or a folder is refused, and so is a symbolic link: a link is
never replaced, and never written through (in a folder others can write to,
a link planted there would aim the export, written as whoever runs it, at a
file of their choosing); name the file it points to instead. A full disk or a
closed pipe ends the command with one line on stderr and exit code 10.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import InvalidInput
from ._output import ExitCode, err_console, labelled

if TYPE_CHECKING:
    from .._memory import Memory

__all__ = ["STDOUT_NAMES", "check_target", "export_group_to"]

STDOUT_NAMES = ("-", "/dev/stdout")


def _refused(output: Path, why: str) -> InvalidInput:
    return InvalidInput(f"--output {output} {why}")


def check_target(output: Path) -> int | None:
    """The mode of the regular file ``output`` names, None when it does not exist yet;
    ``InvalidInput`` for anything else, naming it."""
    try:
        mode = output.lstat().st_mode
    except FileNotFoundError:
        parent = output.parent
        if not parent.is_dir():
            raise _refused(output, f"cannot be written: no folder {parent}") from None
        return None
    except OSError as exc:
        raise _refused(output, f"cannot be looked at: {exc.strerror or exc}") from exc
    if stat.S_ISREG(mode):
        return stat.S_IMODE(mode)
    if stat.S_ISLNK(mode):
        raise _refused(
            output,
            f"is a symbolic link (to {os.readlink(output)}); export neither replaces a link "
            "nor writes through one: name the file it points to",
        )
    if stat.S_ISDIR(mode):
        why = "is a folder; name the file to write"
    elif stat.S_ISFIFO(mode):
        why = "is a FIFO (named pipe); export writes regular files (-o - for standard output)"
    elif stat.S_ISSOCK(mode):
        why = "is a socket; export writes regular files (-o - for standard output)"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        why = "is a device; export writes regular files (-o - for standard output)"
    else:
        why = "is not a regular file; export writes regular files"
    raise _refused(output, why)


def _new_file_mode() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _failed(message: str) -> typer.Exit:
    err_console.print(labelled("error:", "bold red", message))
    return typer.Exit(int(ExitCode.OUTPUT))


def _quiet_stdout() -> None:
    """Point fd 1 at /dev/null: what is still buffered for a stdout that failed would
    fail again at exit, with a traceback-like note."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        fileno = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fileno)
        os.close(devnull)


def _to_stdout(mem: Memory, group_id: str) -> dict[str, int]:
    try:
        counts = mem.export_group(group_id, sys.stdout)
        sys.stdout.flush()
    except OSError as exc:
        _quiet_stdout()
        raise _failed(
            f"standard output took no more of the export ({exc.strerror or exc}): "
            "the export is incomplete"
        ) from exc
    return counts


def _to_file(mem: Memory, group_id: str, output: Path, mode: int | None) -> dict[str, int]:
    fd, name = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".partial")
    tmp = Path(name)
    try:
        os.fchmod(fd, _new_file_mode() if mode is None else mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            counts = mem.export_group(group_id, handle)
            handle.flush()
            os.fsync(handle.fileno())
        check_target(output)  # still a regular file, or still absent
        tmp.replace(output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _failed(
            f"cannot write {output}: {exc.strerror or exc}; {output} was left as it was"
        ) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return counts


def export_group_to(mem: Memory, group_id: str, output: Path | None) -> dict[str, int]:
    """Export the group to ``output`` (standard output: None, ``-`` or ``/dev/stdout``);
    its target checked before anything is read (``check_target``). Returns the rows
    written per table."""
    if output is None or str(output) in STDOUT_NAMES:
        return _to_stdout(mem, group_id)
    counts = _to_file(mem, group_id, output, check_target(output))
    err_console.print(f"exported {sum(counts.values())} row(s) of group {group_id} to {output}")
    return counts
