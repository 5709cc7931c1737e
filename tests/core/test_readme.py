"""The README: its Python example runs as written (on the test database, in a fresh group),
its set-up is two commands, and its command-line examples run on fresh data."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _block(after: str) -> str:
    text = README.read_text()
    start = text.index(after)
    match = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert match is not None
    return match.group(1)


def test_the_python_example(dsn: str, group: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIMESTONE_DSN", dsn)
    code = _block("## In Python").replace('"acme"', repr(group))
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)
    mem = namespace["mem"]
    assert mem.__class__.__name__ == "Memory"
    mem.close()  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]


def _section(heading: str) -> str:
    text = README.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end >= 0 else len(text)]


def _sh_lines(section: str) -> list[str]:
    return [
        line.split("#")[0].strip()
        for block in re.findall(r"```sh\n(.*?)```", section, re.S)
        for line in block.splitlines()
        if line.split("#")[0].strip()
    ]


def test_the_setup_is_two_commands() -> None:
    """The heading says two commands, and lists two; ``make test`` installs what its tests
    need (Chromium for the pictures); CI runs the two, and the other targets it runs are
    ones the README names."""
    assert _sh_lines(_section("## Two commands")) == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^test:(.*)$", makefile, re.M)
    assert target is not None
    assert target.group(1).split() == ["venv", "browser"]
    ci = re.findall(r"^make ([\w-]+)$", (ROOT / ".ci" / "run").read_text(), re.M)
    assert {"demo", "test"} <= set(ci)
    named = set(re.findall(r"`make ([\w-]+)`", README.read_text()))
    assert set(ci) - {"demo", "test"} <= named, "CI runs a target the README does not name"


def test_the_readme_says_how_to_run_the_command() -> None:
    section = _section("## Command line and MCP")
    for way in (".venv/bin/timestone", "source .venv/bin/activate", "uv run timestone"):
        assert way in section
    assert "pipx install timestone" in section


def test_the_files_the_readme_names_exist() -> None:
    named = [
        word
        for line in _sh_lines(README.read_text())
        for word in shlex.split(line)
        if re.fullmatch(r"[\w./-]+\.(toml|jsonl|json|py)", word)
    ]
    assert "examples/wine.toml" in named
    assert [n for n in named if not (ROOT / n).exists()] == []


def test_the_example_ontology_is_the_demos() -> None:
    import tomllib

    from timestone.cli._store import ontology_document, ontology_from_document

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from demo import ONTOLOGY  # pyright: ignore[reportMissingImports, reportUnknownVariableType]
    finally:
        sys.path.remove(str(ROOT / "examples"))
    document = tomllib.loads((ROOT / "examples" / "wine.toml").read_text())
    wine = ontology_from_document(document, "examples/wine.toml")
    assert ontology_document(wine) == ontology_document(ONTOLOGY)  # pyright: ignore[reportUnknownArgumentType]


@pytest.mark.timeout(900)  # three whole processes, each starting the embedded server
def test_the_readme_commands_run_on_fresh_data(tmp_path: Path) -> None:
    """The first commands of the README, in the repository, on a new data folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    env.update(TIMESTONE_DATA_DIR=str(tmp_path / "data"), COLUMNS="200", NO_COLOR="1")
    command = str(Path(sys.executable).parent / "timestone")
    commands = [
        shlex.split(part)
        for line in _sh_lines(_section("## Command line and MCP"))
        for part in line.split("&&")
    ]
    ran: list[str] = []
    out = ""
    for words in commands:
        if words[:2] not in (
            ["timestone", "init"],
            ["timestone", "ingest"],
            ["timestone", "facts"],
        ):
            continue
        proc = subprocess.run(
            [command, *words[1:]], cwd=ROOT, env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, f"{' '.join(words)}: {proc.stderr}"
        ran.append(words[1])
        out = proc.stdout
    assert ran == ["init", "ingest", "facts"]
    # in 2019 Mira directed Château Nord, worked there and worked with Gamay
    assert sorted((f["relation"], f["target"]) for f in json.loads(out)) == [
        ("DIRECTS", "Château Nord"),
        ("WORKS_AT", "Château Nord"),
        ("WORKS_WITH_GRAPE", "Gamay"),
    ]
