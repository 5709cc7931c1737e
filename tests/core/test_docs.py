"""The documentation stays true to the repository.

docs/benchmarks.md and the README's benchmark table are what ``bench.report`` makes of
bench/results; the README stays short; its links, and those of docs/, lead somewhere;
its commands are commands the CLI takes; each package README is a page PyPI can show.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
FENCE = re.compile(r"```.*?```", re.S)


@pytest.fixture
def report(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # bench/ is a folder of the repository, not an installed package
    monkeypatch.setattr(sys, "path", [str(ROOT), *sys.path])
    return importlib.import_module("bench.report")


def test_benchmarks_doc_is_what_the_results_make(report: ModuleType) -> None:
    assert (ROOT / "docs" / "benchmarks.md").read_text() == report.render(), (
        "docs/benchmarks.md is not current: run make bench-report"
    )


def test_readme_table_is_what_the_results_make(report: ModuleType) -> None:
    text = README.read_text()
    assert report.BEGIN in text
    assert report.readme_with_table(text) == text, "run make bench-report"
    # the table is there, with the headline figures the results hold
    search = report.load("search")
    assert search is not None
    for size in search["sizes"]:
        assert f"{size['facts_ingested']:,} facts" in text


def test_readme_is_read_in_five_minutes() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; the limit is 300"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _broken_links(path: Path, root: Path = ROOT) -> list[str]:
    broken: list[str] = []
    for target in LINK.findall(FENCE.sub("", path.read_text())):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no such heading in {linked.relative_to(root)}")
    return broken


@pytest.mark.parametrize(
    "page",
    [README, *sorted((ROOT / "docs").rglob("*.md"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_links_lead_somewhere(page: Path) -> None:
    assert _broken_links(page) == []


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# A heading\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Here\n[fine](other.md#a-heading) [self](#here) [gone](nowhere.md)"
        " [bad anchor](other.md#no-heading)\n```\n[in code](ignored.md)\n```\n"
    )
    assert _broken_links(page, tmp_path) == [
        "nowhere.md: no such file",
        "other.md#no-heading: no such heading in other.md",
    ]


def _readme_commands() -> list[list[str]]:
    commands: list[list[str]] = []
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(), re.S):
        for line in block.splitlines():
            for part in line.split("#")[0].split("&&"):
                words = shlex.split(part)
                if words[:1] == ["timestone"]:
                    commands.append(words[1:])
    return commands


def _help(path: list[str]) -> str:
    command = Path(sys.executable).parent / "timestone"
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    proc = subprocess.run(
        [str(command), *path, "--help"], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, f"timestone {' '.join(path)}: {proc.stderr}"
    return proc.stdout


def _unknown_options(args: list[str]) -> list[str]:
    """The options of a README command that its ``--help`` does not list."""
    path = args[:1]
    text = _help(path)
    if "Commands" in text and len(args) > 1:  # a group: serve mcp
        path = args[:2]
        text = _help(path)
    options = [a.split("=")[0] for a in args if a.startswith("--")]
    return [o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text)]


def test_readme_commands_are_commands_the_cli_takes() -> None:
    commands = _readme_commands()
    assert [c[0] for c in commands] == ["init", "ingest", "facts", "timeline", "serve", "serve"]
    for args in commands:
        assert _unknown_options(args) == [], f"timestone {' '.join(args)}"


def test_the_command_check_sees_an_unknown_option() -> None:
    assert _unknown_options(["facts", "--source", "Mira", "--no-such-option"]) == [
        "--no-such-option"
    ]


PACKAGES = sorted((ROOT / "packages").glob("*/README.md"))


@pytest.mark.parametrize("page", PACKAGES, ids=lambda p: p.parent.name)
def test_package_readme_is_a_pypi_page(page: Path) -> None:
    text = page.read_text()
    name = tomllib.loads((page.parent / "pyproject.toml").read_text())["project"]["name"]
    assert f"pip install {name}" in text
    example = re.search(r"```python\n(.*?)```", text, re.S)
    assert example is not None, "a Python example"
    assert len(example.group(1).splitlines()) <= 12
    compile(example.group(1), str(page), "exec")  # no top-level await: it runs as pasted
    # PyPI shows the page away from the repository: a relative link leads nowhere there
    relative = [t for t in LINK.findall(text) if not t.startswith(("http://", "https://"))]
    assert relative == []
    assert "docs/" in text, "where the documentation is"


def test_the_core_package_example(
    dsn: str, group: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TIMESTONE_DSN", dsn)
    page = ROOT / "packages" / "core" / "README.md"
    example = re.search(r"```python\n(.*?)```", page.read_text(), re.S)
    assert example is not None
    namespace: dict[str, object] = {}
    exec(compile(example.group(1).replace('"acme"', repr(group)), str(page), "exec"), namespace)
    namespace["mem"].close()  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
    assert capsys.readouterr().out.splitlines() == ["['Château Sud']", "['Château Nord']"]


def _missing_proofs(text: str, root: Path) -> list[str]:
    """The tests a README names (``tests/x/test_y.py::name`` or ``test_y.py``) that do not exist."""
    missing: list[str] = []
    for file, name in re.findall(r"`((?:tests/[\w/]+/)?test_\w+\.py)(?:::(\w+))?`", text):
        paths = [root / file] if file.startswith("tests/") else list(root.glob(f"tests/*/{file}"))
        if not paths or not all(p.exists() for p in paths):
            missing.append(file)
        elif name and not any(f"def {name}(" in p.read_text() for p in paths):
            missing.append(f"{file}::{name}")
    return missing


def test_the_feature_table_names_tests_that_exist(tmp_path: Path) -> None:
    assert _missing_proofs(README.read_text(), ROOT) == []
    (tmp_path / "tests" / "core").mkdir(parents=True)
    (tmp_path / "tests" / "core" / "test_a.py").write_text("def test_b(): ...\n")
    assert _missing_proofs(
        "`test_a.py::test_b` `test_a.py::test_c` `tests/x/test_d.py`", tmp_path
    ) == [
        "test_a.py::test_c",
        "tests/x/test_d.py",
    ]
