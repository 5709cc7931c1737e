"""The apps (the MCP server, the web view and the picture of time) stand on the core,
not on the command line: what they share with it lives in the core."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "packages" / "core" / "src" / "timestone"
APPS = [PACKAGE / "mcp_server.py", *sorted((PACKAGE / "viz").glob("*.py"))]


def cli_imports(source: str, package: tuple[str, ...]) -> list[str]:
    """Each import of the command line's package in ``source``, a module of ``package``
    (``("timestone", "viz")``), as ``line: module``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            names = [".".join([*base, node.module or ""]).strip(".")]
        else:
            continue
        found += [f"{node.lineno}: {n}" for n in names if n.split(".")[:2] == ["timestone", "cli"]]
    return found


def test_the_apps_do_not_import_the_command_line() -> None:
    assert len(APPS) >= 3
    offenders: dict[str, list[str]] = {}
    for path in APPS:
        package = path.relative_to(PACKAGE.parent).parts[:-1]
        uses = cli_imports(path.read_text(encoding="utf-8"), package)
        if uses:
            offenders[str(path.relative_to(PACKAGE))] = uses
    assert offenders == {}


def test_the_check_sees_an_import_of_the_command_line() -> None:
    source = (
        "from ..cli._store import read_text_file\nimport timestone.cli\nfrom .._time import NOW\n"
    )
    assert cli_imports(source, ("timestone", "viz")) == [
        "1: timestone.cli._store",
        "2: timestone.cli",
    ]
    assert cli_imports("from .cli import app\n", ("timestone",)) == ["1: timestone.cli"]
