"""The PydanticAI example runs offline, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pydanticai_agent.py"


def test_example_runs_offline(dsn: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["TIMESTONE_DSN"] = dsn
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env, timeout=240
    )
    assert proc.returncode == 0, proc.stderr
    assert "sent back to the model: citation F-0000000000 was not retrieved" in proc.stdout
    assert "answer: Mira works at Château Sud." in proc.stdout
