"""Where ``timestone export`` writes: a regular file, whole or not at all; standard output;
never a device, a FIFO, a socket, a folder or a symbolic link; a full disk or a closed
pipe ends in one line on stderr and exit code 10, nothing partial under the target."""

from __future__ import annotations

import os
import resource
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Here = Callable[..., Any]
TIMESTONE = str(Path(sys.executable).parent / "timestone")  # the installed console script


@pytest.fixture
def filled(run_here: Here, mira_file: Path) -> Here:
    """The test's group with the running example in it."""
    run_here("ingest", str(mira_file), "--no-progress")
    return run_here


def _env(data_dir: Path, group: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    env.update(TIMESTONE_DATA_DIR=str(data_dir), TIMESTONE_GROUP=group)
    return env


@pytest.fixture
def export_process(filled: Here, data_dir: Path, group: str) -> Callable[..., Any]:
    """``timestone export ARGS`` in a subprocess, its stdout where the test says."""
    del filled

    def start(*args: str, **popen: Any) -> Any:
        return subprocess.Popen(
            [TIMESTONE, "export", *args],
            env=_env(data_dir, group),
            stderr=subprocess.PIPE,
            **popen,
        )

    return start


def _one_error_line(stderr: bytes) -> str:
    text = stderr.decode()
    assert "Traceback" not in text, text
    assert "Exception ignored" not in text, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert lines[0].startswith("error: "), text
    return lines[0]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    where = tmp_path / "targets"
    where.mkdir()
    return where


def test_export_refuses_targets_that_are_not_regular_files(filled: Here, folder: Path) -> None:
    fifo = folder / "pipe.jsonl"
    os.mkfifo(fifo)
    kept = folder / "kept.jsonl"
    kept.write_text("kept\n")
    link = folder / "link.jsonl"
    link.symlink_to(kept.name)
    dangling = folder / "dangling.jsonl"
    dangling.symlink_to("nowhere.jsonl")
    device = folder / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    sub = folder / "sub"
    sub.mkdir()
    sock_path = folder / "sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        before = sorted(os.listdir(folder))
        for target, why in (
            (fifo, "is a FIFO (named pipe)"),
            (device, "is a device"),
            (sock_path, "is a socket"),
            (sub, "is a folder"),
            (link, "is a symbolic link (to kept.jsonl)"),
            (dangling, "is a symbolic link (to nowhere.jsonl)"),
            (folder / "missing" / "x.jsonl", f"cannot be written: no folder {folder / 'missing'}"),
        ):
            refused = filled("export", "-o", str(target), check=3)
            assert f"--output {target} {why}" in refused.stderr
            assert refused.stdout == ""
            assert sorted(os.listdir(folder)) == before  # nothing partial, nothing replaced
        assert stat.S_ISSOCK(sock_path.lstat().st_mode)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert stat.S_ISCHR(device.lstat().st_mode)
    assert link.is_symlink()
    assert os.readlink(link) == "kept.jsonl"
    assert kept.read_text() == "kept\n"
    assert dangling.is_symlink()
    assert not (folder / "nowhere.jsonl").exists()


def test_export_replaces_a_regular_file_whole_and_dash_is_stdout(
    filled: Here, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = folder / "group.jsonl"
    target.write_text("old\n")
    target.chmod(0o640)
    done = filled("export", "-o", str(target))
    assert "exported" in done.stderr
    lines = target.read_text().splitlines()
    assert '"kind":"header"' in lines[0]
    assert '"kind":"end"' in lines[-1]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # its mode kept
    assert os.listdir(folder) == ["group.jsonl"]

    monkeypatch.chdir(folder)
    dashed = filled("export", "-o", "-")
    assert dashed.stdout.splitlines()[1:] == lines[1:]  # the header says when
    assert os.listdir(folder) == ["group.jsonl"]  # no file named "-"


def test_dev_stdout_is_standard_output(export_process: Callable[..., Any], folder: Path) -> None:
    out = folder / "redirected.jsonl"
    with out.open("wb") as handle:
        proc = export_process("-o", "/dev/stdout", stdout=handle)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert '"kind":"end"' in out.read_text().splitlines()[-1]
    assert Path("/dev/stdout").is_symlink()  # written through, never replaced


def test_a_full_stdout_or_a_closed_pipe_ends_in_one_line(
    export_process: Callable[..., Any],
) -> None:
    with open("/dev/full", "wb") as full:
        proc = export_process(stdout=full)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 10
    assert "No space left on device" in _one_error_line(err)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)

    read, write = os.pipe()
    os.close(read)  # as `| head -0` does
    proc = export_process(stdout=write)
    os.close(write)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 10
    assert "Broken pipe" in _one_error_line(err)


def _file_size_limit(limit: int) -> Callable[[], None]:
    def limited() -> None:  # in the child: writes past the limit fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return limited


def test_a_file_that_cannot_be_written_whole_is_left_as_it_was(
    export_process: Callable[..., Any], folder: Path
) -> None:
    target = folder / "group.jsonl"
    target.write_text("old\n")
    proc = export_process(
        "-o", str(target), stdout=subprocess.DEVNULL, preexec_fn=_file_size_limit(8000)
    )
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 10, err
    line = _one_error_line(err)
    assert f"cannot write {target}: File too large; {target} was left as it was" in line
    assert target.read_text() == "old\n"
    assert os.listdir(folder) == ["group.jsonl"]  # the temporary file removed
