"""`make demo`, both paths: structured facts, and the episodes' text through a model."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from timestone.llm import ReplayTransport, replay_llm

ROOT = Path(__file__).resolve().parents[2]


def _demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("timestone_demo", ROOT / "examples" / "demo.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def demo(monkeypatch: pytest.MonkeyPatch, fresh_dsn: str) -> ModuleType:
    monkeypatch.setenv("TIMESTONE_DSN", fresh_dsn)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return _demo()


def _answers(out: str) -> list[str]:
    sections = out.split("\n\n")
    return [
        s for s in sections if s.startswith(("Where is Mira today?", "And in 2019?", "What did"))
    ]


def test_structured_path(demo: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main() == 0
    out = capsys.readouterr().out
    today, in_2019, believed = _answers(out)
    assert "DIRECTS          │ Château Sud" in today
    assert "DIRECTS          │ Château Nord" in in_2019
    assert "DIRECTS          │ Château Nord" in believed
    assert "set OPENAI_API_KEY" in out
    # a second run writes nothing: the idempotency keys are there
    assert demo.main() == 0
    assert "already there (idempotent, nothing written)" in capsys.readouterr().out


def test_text_path_through_a_model(demo: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    transport = ReplayTransport()
    scripted = json.loads((ROOT / "tests" / "fixtures" / "llm" / "mira.json").read_text())
    transport.extend(scripted["responses"])
    assert demo.main(llm=replay_llm(transport, backoff=0.0)) == 0
    transport.check()
    out = capsys.readouterr().out
    assert "the episodes' text, through the model" in out
    today, in_2019, believed = _answers(out)
    assert "DIRECTS          │ Château Sud" in today
    assert "DIRECTS          │ Château Nord" in in_2019
    assert "DIRECTS          │ Château Nord" in believed
