"""The adapters use only Timestone's public names, and their own public names stay.

The adapters ship as separate distributions: an import of a private core module
(``timestone._…``) or of a ``_``-prefixed name would break them silently on the next
internal rename. What they need is public, in ``timestone``, ``timestone.errors`` and
``timestone.toolkit``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = [
    ROOT / "packages/langchain/src",
    ROOT / "packages/llamaindex/src",
    ROOT / "packages/pydanticai/src",
]
PUBLIC_ALL = {  # each adapter's __all__: names may be added, never removed
    "langchain_timestone": {
        "TimestoneMemoryMiddleware", "TimestoneRetriever", "TimestoneStore", "entity_document",
        "episode_document", "fact_document", "timestone_tools",
    },
    "llama_index.graph_stores.timestone": {
        "TimestonePropertyGraphStore", "TimestoneRetriever", "entity_node", "episode_node",
        "fact_node",
    },
    "llama_index.tools.timestone": {"TimestoneToolSpec"},
    "pydantic_ai_timestone": {
        "INSTRUCTIONS", "GroundedAnswer", "MemoryDeps", "TimestoneDeps", "TimestoneMemory",
        "check_citations", "entity_timeline", "memory_toolset", "remember",
        "retrieved_citations", "search_memory",
    },
}  # fmt: skip


def _private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def private_uses(source: str) -> list[str]:
    """Every private Timestone name a module's source imports or reads, as
    ``line: what``: a ``timestone._…`` module, a ``_``-prefixed name imported from
    ``timestone`` or one of its modules, or an attribute ``timestone._…``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "timestone" and _private(alias.name):
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "timestone":
                continue
            if _private(node.module):
                found.append(f"{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id == "timestone":
                found.append(f"{node.lineno}: timestone...{node.attr}")
    return found


def _sources() -> list[Path]:
    return sorted(p for src in ADAPTERS for p in src.rglob("*.py"))


def test_the_check_finds_each_kind_of_private_use() -> None:
    source = "\n".join(
        [
            "import timestone._time",
            "from timestone.search._run_async import _settings_of",
            "from timestone import _compat",
            "from timestone.toolkit import _private, check_group",
            "import timestone",
            "x = timestone._results",
            "from timestone import toolkit",
            "from ._documents import fact_document",
            "from langchain_core._api import deprecated",
        ]
    )
    assert [u.split(":")[0] for u in private_uses(source)] == ["1", "2", "2", "3", "4", "6"]


def test_adapters_import_only_public_timestone_names() -> None:
    sources = _sources()
    assert len(sources) >= 15  # every adapter module is read
    offenders: dict[str, list[str]] = {}
    for path in sources:
        rel = path.relative_to(ROOT).as_posix()
        uses = private_uses(path.read_text(encoding="utf-8"))
        if uses:
            offenders[rel] = uses
    assert offenders == {}


@pytest.mark.parametrize("module", sorted(PUBLIC_ALL))
def test_adapter_public_names_stay(module: str) -> None:
    mod = importlib.import_module(module)
    exported = set(mod.__all__)
    assert exported >= PUBLIC_ALL[module]
    for name in exported:
        assert hasattr(mod, name), name
