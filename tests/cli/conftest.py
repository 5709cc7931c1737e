"""The installed ``timestone`` command, run in a subprocess against the embedded database."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from timestone.db._embedded import embedded_dsn

MIRA = Path(__file__).parent / "mira.jsonl"  # the running example of the design
ONTOLOGY = """\
[[edge_types]]
name = "DIRECTS"
cardinality = "one"

[[edge_types]]
name = "WORKS_AT"
cardinality = "one"

[[edge_types]]
name = "WORKS_WITH_GRAPE"
cardinality = "one"
"""

Run = Callable[..., subprocess.CompletedProcess[str]]


def timestone_command() -> str:
    path = Path(sys.executable).parent / "timestone"
    assert path.exists(), f"the console script is not installed at {path}"
    return str(path)


def make_runner(data_dir: Path, group: str) -> Run:
    def run(*args: str, input: str | None = None, check: int | None = 0) -> Any:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
        env.update(TIMESTONE_DATA_DIR=str(data_dir), TIMESTONE_GROUP=group, COLUMNS="200")
        proc = subprocess.run(
            [timestone_command(), *args],
            input=input,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        if check is not None:
            assert proc.returncode == check, (
                f"timestone {' '.join(args)} exited {proc.returncode}, wanted {check}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    return run


@pytest.fixture(scope="session")
def mira_file() -> Path:
    assert MIRA.exists(), f"{MIRA} is missing"
    return MIRA


@pytest.fixture(scope="session")
def ontology_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ontology") / "wine.toml"
    path.write_text(ONTOLOGY)
    return path


@pytest.fixture
def cli(data_dir: Path, dsn: str, group: str) -> Run:
    """``timestone`` on the session's data dir (its server kept up by ``dsn``), in a new group."""
    del dsn
    return make_runner(data_dir, group)


@pytest.fixture
def fresh_data_dir(tmp_path: Path) -> Path:
    """A data dir of its own, whose server this process keeps up while the test runs."""
    path = tmp_path / "fresh-data"
    embedded_dsn(path)
    return path


@pytest.fixture
def other_group() -> str:
    return "t-" + uuid.uuid4().hex[:16]


@dataclasses.dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_here(
    data_dir: Path,
    dsn: str,
    group: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Callable[..., Result]:
    """The same command, run in this process (fast): for the error paths."""
    from timestone.cli._app import main

    del dsn
    for name in os.environ:
        if name.startswith(("TIMESTONE_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TIMESTONE_DATA_DIR", str(data_dir))
    monkeypatch.setenv("TIMESTONE_GROUP", group)

    def run(*args: str, check: int | None = 0) -> Result:
        code = main(list(args))
        out = capsys.readouterr()
        if check is not None:
            assert code == check, f"exit {code}, wanted {check}\n{out.out}\n{out.err}"
        return Result(code, out.out, out.err)

    return run


@pytest.fixture
def cli_fresh(fresh_data_dir: Path, group: str) -> Run:
    """``timestone`` on a data dir of its own (a different server), same group id."""
    return make_runner(fresh_data_dir, group)


@pytest.fixture
def cli_second(tmp_path: Path, group: str) -> Run:
    """``timestone`` on a second data dir of its own, not created yet: another server."""
    return make_runner(tmp_path / "second-store", group)
