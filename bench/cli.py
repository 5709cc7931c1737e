"""How fast the ``timestone`` command answers: each command a whole process, as a shell runs it.

    .venv/bin/python -m bench.cli [--runs 5]

In a fresh data folder (the embedded server, the default embedder): ``--help``; ``init
--ontology examples/wine.toml`` first on the empty folder, then again on the initialised
one; ``ingest examples/data/mira.jsonl`` first, then again (each episode is found already
there); ``facts --source Mira``. Each is run ``--runs`` times (the first ``init`` and
``ingest`` once) and its wall time kept, min and median. Beside them, in processes of
their own: Python doing nothing, importing the command's module (what ``--help`` loads),
and starting the embedded server on the initialised folder (``embedded_dsn``). Written to
``bench/results/cli.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench._common import cpu_pace_ms, scratch_data_dir, write_result

ROOT = Path(__file__).resolve().parents[1]
COMMAND = str(Path(sys.executable).parent / "timestone")
ONTOLOGY = ROOT / "examples" / "wine.toml"
DEMO = ROOT / "examples" / "data" / "mira.jsonl"

IMPORT = (
    "import time; t = time.perf_counter(); import timestone.cli._app; "
    "print(time.perf_counter() - t)"
)
SERVER = (
    "import sys, time; from timestone.db._embedded import embedded_dsn, release_embedded; "
    "t = time.perf_counter(); embedded_dsn(sys.argv[1]); print(time.perf_counter() - t); "
    "release_embedded(sys.argv[1])"
)


def _env(data_dir: Path) -> dict[str, str]:
    """The caller's environment without its Timestone and OpenAI settings, on ``data_dir``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_"))}
    return {**env, "TIMESTONE_DATA_DIR": str(data_dir), "NO_COLOR": "1"}


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


def measure(runs: int) -> dict[str, Any]:
    commands: dict[str, list[float]] = {}
    inner: dict[str, list[float]] = {"python": [], "import": [], "server_start": []}
    with scratch_data_dir() as data_dir:
        env = _env(data_dir)

        def timed(name: str, args: list[str], times: int) -> None:
            for _ in range(times):
                commands.setdefault(name, []).append(_run([COMMAND, *args], env)[0])

        timed("--help", ["--help"], runs)
        timed("init, empty folder", ["init", "--ontology", str(ONTOLOGY)], 1)
        timed("init", ["init", "--ontology", str(ONTOLOGY)], runs)
        timed("ingest, first", ["ingest", str(DEMO)], 1)
        timed("ingest", ["ingest", str(DEMO)], runs)
        timed("facts", ["facts", "--source", "Mira"], runs)
        for _ in range(runs):
            inner["python"].append(_run([sys.executable, "-c", "pass"], env)[0])
            inner["import"].append(float(_run([sys.executable, "-c", IMPORT], env)[1]))
            start = _run([sys.executable, "-c", SERVER, str(data_dir)], env)[1]
            inner["server_start"].append(float(start))
    return {
        "commands": {name: _figures(s) for name, s in commands.items()},
        "python_s": _figures(inner["python"]),
        "help_import_s": _figures(inner["import"]),
        "server_start_s": _figures(inner["server_start"]),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    pace = cpu_pace_ms()
    figures = measure(args.runs)
    payload = {"pace_ms": pace, "pace_after_ms": cpu_pace_ms(), **figures}
    path = write_result("cli", payload)
    for name, f in figures["commands"].items():
        print(
            f"{name:<20} min {f['min_s']:.2f} s  median {f['median_s']:.2f} s  ({f['runs']} runs)"
        )
    for key in ("python_s", "help_import_s", "server_start_s"):
        f = figures[key]
        print(f"{key:<20} min {f['min_s']:.2f} s  median {f['median_s']:.2f} s")
    print(f"pace {pace} ms; written to {path}")


if __name__ == "__main__":
    main()
