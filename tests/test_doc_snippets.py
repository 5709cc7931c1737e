"""Every Python block of README.md, docs/*.md and packages/*/README.md runs as pasted.

The blocks are found by ``pytest-examples`` (a block added to any of these pages is
picked up by itself) and each runs in a fresh database of the test server, with the
toolkits' own test doubles in place of real models (the ``offline_toolkits`` fixture):

- ``TIMESTONE_DSN`` names a new, empty database, so ``Memory.open()`` opens it;
- LangChain: ``init_chat_model`` (what ``create_agent("openai:...")`` calls) gives a
  ``GenericFakeChatModel`` that answers "Château Sud.";
- LlamaIndex: ``Settings.llm`` is ``MockLLM`` and ``Settings.embed_model`` is
  ``MockEmbedding``;
- PydanticAI: a model named by a string (``Agent("openai:gpt-4o-mini")``) is
  ``TestModel``.

So a block names its model as a reader would (a string, or LlamaIndex's ``Settings``),
and runs here offline. A block that needs what the suite does not have is fenced with a
marker: ````python {test="needs-server"}```` (a Citus coordinator, a remote server, a
file of the reader's) or ````python {test="needs-key"}```` (Timestone's own model, an
``OpenAICompatibleLLM`` with a real key). The suite then checks that it compiles and
names nothing it does not define or import (ruff's F821), but does not run it.
"""

# LangChain's and LlamaIndex's classes are loosely typed.
# pyright: reportUnknownMemberType=false, reportUnknownVariableType=false, reportUnknownArgumentType=false

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pytest_examples import CodeExample, EvalExample, find_examples

import timestone

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "packages").glob("*/README.md")),
]
EXAMPLES = [e for e in find_examples(*PAGES) if e.prefix.split()[0] in ("py", "python")]
NOT_RUN = {"needs-server", "needs-key"}  # the markers a block may carry: {test="needs-key"}


def _id(example: CodeExample) -> str:
    """``page.md:line``, the page relative to the repository when it is in it."""
    path = example.path
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return f"{shown}:{example.start_line}"


@pytest.fixture
def offline_toolkits(
    monkeypatch: pytest.MonkeyPatch, fresh_dsn: str, tmp_path: Path
) -> Iterator[None]:
    """A fresh database and the toolkits' own test doubles (see the module docstring), in a
    directory of its own (a block's ``data_dir="./..."`` lands there, not in the checkout)."""
    import langchain.agents.factory
    import langchain.chat_models
    import pydantic_ai.models
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from llama_index.core import Settings
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM
    from pydantic_ai.models.test import TestModel

    class FakeChat(GenericFakeChatModel):
        """LangChain's fake chat model, taking tools as a real one does (it calls none)."""

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            return self

    def fake_chat(*args: Any, **kwargs: Any) -> FakeChat:
        return FakeChat(messages=iter([AIMessage("Château Sud.") for _ in range(20)]))

    monkeypatch.setenv("TIMESTONE_DSN", fresh_dsn)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(langchain.chat_models, "init_chat_model", fake_chat)
    monkeypatch.setattr(langchain.agents.factory, "init_chat_model", fake_chat)

    def test_model(model: object) -> TestModel:
        return TestModel()

    monkeypatch.setattr(pydantic_ai.models, "infer_model", test_model)
    # every blocking memory a block opens is closed after it, as the end of a script
    # closes it, wherever the block kept it (a name, an argument, nowhere)
    opened: list[timestone.Memory] = []
    real_open = timestone.Memory.open

    def recording_open(*args: Any, **kwargs: Any) -> timestone.Memory:
        mem = real_open(*args, **kwargs)
        opened.append(mem)
        return mem

    monkeypatch.setattr(timestone.Memory, "open", recording_open)
    llm, embed_model = Settings._llm, Settings._embed_model  # pyright: ignore[reportPrivateUsage]
    Settings.llm = MockLLM(max_tokens=16)
    Settings.embed_model = MockEmbedding(embed_dim=8)
    try:
        yield
    finally:
        Settings._llm, Settings._embed_model = llm, embed_model  # pyright: ignore[reportPrivateUsage]
        for mem in opened:
            mem.close()


def _marker(example: CodeExample) -> str | None:
    marker = example.prefix_settings().get("test")
    if marker is not None and marker not in NOT_RUN:
        raise AssertionError(f"{_id(example)}: unknown marker test={marker!r}; use {NOT_RUN}")
    return marker


def _undefined_names(source: str) -> str:
    """What ruff's F821 says of the block (nothing: every name is defined or imported)."""
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821",
         "--output-format", "concise", "-"],
        input=source, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return proc.stdout.strip() if proc.returncode else ""


def _close_memories(namespace: dict[str, Any]) -> None:
    """Close the blocking memories a block left open (an async one closes with its loop)."""
    import timestone

    for value in namespace.values():
        if isinstance(value, timestone.Memory):
            value.close()


@pytest.mark.parametrize("example", EXAMPLES, ids=_id)
def test_the_block_runs_as_pasted(
    example: CodeExample, eval_example: EvalExample, request: pytest.FixtureRequest
) -> None:
    if _marker(example) is not None:
        compile(example.source, _id(example), "exec")
        assert _undefined_names(example.source) == "", _id(example)
        return
    request.getfixturevalue("offline_toolkits")
    namespace = eval_example.run(example)
    _close_memories(namespace)


def test_every_page_is_searched() -> None:
    """The pages whose blocks run: the README, each page of docs/ and each package's."""
    pages = {e.path for e in EXAMPLES}
    assert ROOT / "README.md" in pages
    assert {p.parent.name for p in pages if p.name == "README.md" and p.parent != ROOT} == {
        "core",
        "langchain",
        "llamaindex",
        "pydanticai",
    }


def test_a_block_that_drifts_fails(
    tmp_path: Path, eval_example: EvalExample, offline_toolkits: None
) -> None:
    """The runner sees a block that uses a name it never defined, and a marker it does not
    know."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nimport timestone\nprint(timestone.NOW, group)\n```\n"
        '```python {test="later"}\nx = 1\n```\n'
    )
    drifted, unknown = find_examples(page)
    with pytest.raises(NameError, match="group"):
        eval_example.run(drifted)
    with pytest.raises(AssertionError, match="unknown marker test='later'"):
        _marker(unknown)
    assert "F821 Undefined name `group`" in _undefined_names(drifted.source)
