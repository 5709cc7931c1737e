"""docs/code-map.md names folders and files that exist, and names one for each question a
newcomer asks first."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "code-map.md"
CORE = "packages/core/src/timestone"

QUESTIONS = {  # what a newcomer looks for, and where the map must send them
    "the date-fight rule": "timestone/write/_date_fight.py",
    "a reranker": "timestone/search/_fusion.py",
    "the LangChain retriever": "packages/langchain/src/langchain_timestone/_retriever.py",
    "a SQL function": "timestone/migrations/functions/",
    "a migration": "timestone/migrations/",
    "the embedded server": "timestone/db/_embedded.py",
    "tenancy": "timestone/db/_tenant_async.py",
}


def named_paths(text: str) -> list[str]:
    """Every code span that looks like a path of the repository (has a slash)."""
    spans = re.findall(r"`([^`\s]+)`", text)
    return [s for s in spans if "/" in s and not s.startswith(("http", "make"))]


def on_disk(path: str) -> Path:
    """``timestone/...`` and a feature folder's ``write/...`` are in the core; the rest is
    from the repository's root."""
    if path.startswith("timestone/"):
        return ROOT / CORE / path.removeprefix("timestone/")
    if (ROOT / CORE / path.split("/")[0]).is_dir():
        return ROOT / CORE / path
    return ROOT / path


def test_every_path_the_map_names_exists() -> None:
    paths = named_paths(MAP.read_text(encoding="utf-8"))
    assert len(paths) >= 20
    missing = [p for p in paths if not on_disk(p).exists()]
    assert missing == []


def test_the_map_answers_each_first_question() -> None:
    rows = [line for line in MAP.read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    for question, path in QUESTIONS.items():
        answers = [row for row in rows if question in row.split("|")[1]]
        assert answers, question
        assert any(f"`{path}`" in row for row in answers), question
        assert on_disk(path).exists(), path


def test_the_check_sees_a_wrong_path() -> None:
    text = "open `timestone/write/_no_such_module.py` or `timestone/write/`"
    assert [p for p in named_paths(text) if not on_disk(p).exists()] == [
        "timestone/write/_no_such_module.py"
    ]


def test_the_docs_link_the_map() -> None:
    linked = [p for p in (ROOT / "docs").glob("*.md") if "code-map.md" in p.read_text()]
    assert any(p.name != "code-map.md" for p in linked)
