"""The README's Python example runs as written (on the test database, in a fresh group)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


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


def test_every_python_block_compiles() -> None:
    """The toolkit examples need models to run; they must at least be Python."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 5  # Python, the three toolkits, a real model
    for block in blocks:
        compile(block, str(README), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
