"""What the documentation site (``make docs``) stands on, checked without building it:

- every public name of the modules the reference renders has a docstring, and so has
  every public method of their classes (the reference shows only what is documented);
- every page of ``docs/`` is in the site's navigation or listed as left out of it;
- guides and reference pages stay short: history lives in ``docs/benchmark-history.md``
  and the decision records;
- the core has no import circle: a lower layer never imports one that builds on it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Container, Iterator
from pathlib import Path

import griffe
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CORE = ROOT / "packages" / "core" / "src"
SOURCES = [
    CORE,
    *(ROOT / "packages" / p / "src" for p in ("langchain", "llamaindex", "pydanticai")),
]
REFERENCE = (
    "timestone",
    "timestone.toolkit",
    "timestone.distributed",
    "timestone.errors",
    "langchain_timestone",
    "llama_index.graph_stores.timestone",
    "pydantic_ai_timestone",
)
# pages that are long by nature: generated tables, the history, the decisions' index
LONG_PAGES = {"benchmarks.md", "benchmark-history.md"}
MAX_PAGE_LINES = 400


def _public(obj: griffe.Object | griffe.Alias) -> Iterator[tuple[str, griffe.Object]]:
    names = obj.exports if obj.exports is not None else list(obj.members)
    for name in names:
        if not isinstance(name, str) or name.startswith("_"):
            continue
        member = obj.members[name]
        target = member.final_target if isinstance(member, griffe.Alias) else member
        if not target.is_module:
            yield name, target


def undocumented(module: str) -> list[str]:
    """The public names of ``module`` (its ``__all__``) and the public methods of its
    classes that have no docstring."""
    loader = griffe.GriffeLoader(search_paths=[str(p) for p in SOURCES])
    top = loader.load(module)
    loader.resolve_aliases(implicit=False, external=False)
    missing: list[str] = []
    for name, target in _public(top):
        if not target.docstring:
            missing.append(name)
        if target.is_class:
            missing += [f"{name}.{method}" for method in _undocumented_methods(target)]
    return missing


def _undocumented_methods(cls: griffe.Object) -> Iterator[str]:
    """The public methods of ``cls`` without a docstring: its own, and those it inherits
    from the project's classes (the reference shows both; a framework's are its own)."""
    for method, member in cls.all_members.items():
        if method.startswith("_"):
            continue
        try:
            target = member.final_target if isinstance(member, griffe.Alias) else member
        except griffe.AliasResolutionError:
            continue  # inherited from a framework the loader did not read
        if not target.is_function:
            continue
        if ROOT / "packages" not in Path(str(target.filepath)).parents:
            continue
        if not target.docstring:
            yield method


@pytest.mark.parametrize("module", REFERENCE)
def test_every_public_name_has_a_docstring(module: str) -> None:
    assert undocumented(module) == []


def test_the_docstring_check_sees_a_missing_docstring(tmp_path: Path) -> None:
    package = tmp_path / "sample"
    package.mkdir()
    (package / "__init__.py").write_text(
        '"""A sample."""\n__all__ = ["Shown", "bare"]\n\n'
        'class Shown:\n    """Documented."""\n\n    def method(self) -> None:\n        pass\n\n'
        "def bare() -> None:\n    pass\n"
    )
    loader = griffe.GriffeLoader(search_paths=[str(tmp_path)])
    found = [name for name, target in _public(loader.load("sample")) if not target.docstring]
    assert found == ["bare"]


def _nav_pages() -> set[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    return set(re.findall(r":\s*([\w./-]+\.md)\s*$", text, re.MULTILINE))


def test_every_page_is_in_the_navigation() -> None:
    generated = {"index.md", "reference/cli.md", "reference/mcp.md"}  # tools/docs/hooks.py
    listed = _nav_pages()
    assert generated <= listed
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    decisions = {p for p in pages if re.fullmatch(r"decisions/\d{3}-.+\.md", p)}
    assert pages - decisions - listed == set()
    assert listed - generated - pages == set(), "the navigation names a page that is not there"


def test_pages_stay_short() -> None:
    long = {
        p.relative_to(DOCS).as_posix(): n
        for p in DOCS.rglob("*.md")
        if p.name not in LONG_PAGES
        and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_PAGE_LINES
    }
    assert long == {}


def import_graph(source: Path, top: str) -> dict[str, set[str]]:
    """Module -> the modules of ``top`` it imports, at load or at call time (imports
    under ``if TYPE_CHECKING:`` are for the type checker and left out)."""
    modules: dict[str, Path] = {}
    for path in (source / top).rglob("*.py"):
        parts = path.relative_to(source).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, package, modules):
                if target != name:
                    edges[name].add(target)
    return edges


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        else:
            yield from _imports(node)


def _targets(node: ast.Import | ast.ImportFrom, package: str, modules: Container[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in modules]
    base = node.module or ""
    if node.level:
        parent = package.split(".")
        parent = parent[: len(parent) - node.level + 1]
        base = ".".join([*parent, node.module] if node.module else parent)
    # ``from . import x``: the module ``x`` where there is one, else the package's name
    found = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
    if len(found) < len(node.names) and base in modules:
        found.append(base)
    return found


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group: list[str] = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_core_has_no_import_circle() -> None:
    assert circles(import_graph(CORE, "timestone")) == []


def test_the_circle_check_sees_a_circle_through_a_call_time_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from .high import g\n    return g\n")
    (package / "high.py").write_text("from .low import f\n\ndef g():\n    return f\n")
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .high import g\n"
    )
    assert circles(import_graph(tmp_path, "pkg")) == [["pkg.high", "pkg.low"]]
