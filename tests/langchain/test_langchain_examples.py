"""The LangChain and time-travel examples run offline, as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, dsn: str) -> str:
    """Run ``examples/<name>.py`` in a fresh interpreter against the test database, offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["TIMESTONE_DSN"] = dsn
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("langchain_agent", "agent: From memory: [F-"),
        ("langchain_agent", "tools agent: From her timeline: [F-"),
        ("time_travel", "held before the 2023 news arrived:     ['Mira directs Château Nord.']"),
    ],
)
def test_example_runs_offline(dsn: str, name: str, expected: str) -> None:
    assert expected in run_example(name, dsn)
