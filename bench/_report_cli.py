"""The table of ``bench.cli`` (the command's start) for docs/benchmarks.md."""

from __future__ import annotations

from typing import Any

from bench._report_tables import Lines, Result, table

# what each command is held to on a quiet machine (README: the command starts at once)
TARGETS = {
    "--help": "under 0.5 s",
    "init": "under 2 s",
    "ingest": "under 2 s",
    "facts": "under 2 s",
}

INNER = (
    ("python_s", "Python doing nothing (`python -c pass`)"),
    ("help_import_s", "importing what `--help` loads (`import timestone.cli._app`), in-process"),
    (
        "server_start_s",
        "starting the embedded server on the initialised folder (its modules imported "
        "before), in-process",
    ),
    ("server_stop_s", "stopping it, as the last process using it does on exit"),
)


def _cell(f: dict[str, Any] | None) -> str:
    return "" if f is None else f"{f['min_s']:.2f} / {f['median_s']:.2f}"


def _as_run(here: dict[str, Any]) -> str:
    """What the ``as run`` column measured: whether each process compiled its modules."""
    found = here.get("compiled_modules_found", {})
    if here.get("PYTHONDONTWRITEBYTECODE") and not any(found.values()):
        return (
            "Here `PYTHONDONTWRITEBYTECODE` was set and the virtual environment held no "
            "compiled modules, so in the first column every process compiled each module it "
            "imported from its source; the second is the same with the compiled modules "
            "cached, as after `pip install`."
        )
    return (
        "Here Python found or wrote the compiled modules, so both columns measure cached "
        "bytecode (the second in a cache of the bench's own)."
    )


def cli_section(r: Result) -> Lines:
    modes: dict[str, Any] = r.get("modes") or {"as_run": r}
    as_run, cached = modes.get("as_run", {}), modes.get("bytecode", {})
    names = list(as_run.get("commands", {}))
    rows = [
        [
            f"`timestone {name}`",
            str(as_run["commands"][name]["runs"]),
            _cell(as_run["commands"][name]),
            _cell(cached.get("commands", {}).get(name)),
            TARGETS.get(name, ""),
        ]
        for name in names
    ]
    for key, what in INNER:
        if key in as_run:
            rows.append(
                [what, str(as_run[key]["runs"]), _cell(as_run[key]), _cell(cached.get(key)), ""]
            )
    lines = table(
        ["command", "runs", "as run here: min / median s", "cached bytecode: min / median s",
         "target (quiet machine)"],
        rows,
        [False, True, True, True, False],
    )  # fmt: skip
    here = r.get("bytecode_here")
    if here is not None:
        lines += ["", _as_run(here)]
    pace = r.get("pace_ms")
    if pace is not None:
        lines += [
            "",
            f"The CPU pace was {pace} ms before and {r.get('pace_after_ms')} ms after "
            "(42 to 47 ms on a quiet machine): above that, the machine was loaded and every "
            "figure is inflated.",
        ]
    return lines
