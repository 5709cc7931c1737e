"""The table of ``bench.cli`` (the command's start) for docs/benchmarks.md."""

from __future__ import annotations

from bench._report_tables import Lines, Result, table

# what each command is held to on a quiet machine (README: the command starts at once)
TARGETS = {
    "--help": "under 0.5 s",
    "init": "under 2 s",
    "ingest": "under 2 s",
    "facts": "under 2 s",
}


def cli_section(r: Result) -> Lines:
    rows = [
        [f"`timestone {name}`", str(f["runs"]), f"{f['min_s']:.2f}", f"{f['median_s']:.2f}",
         TARGETS.get(name, "")]
        for name, f in r["commands"].items()
    ]  # fmt: skip
    for key, what in (
        ("python_s", "Python doing nothing (`python -c pass`)"),
        (
            "help_import_s",
            "importing what `--help` loads (`import timestone.cli._app`), in-process",
        ),
        ("server_start_s", "starting the embedded server on the initialised folder, in-process"),
    ):
        f = r[key]
        rows.append([what, str(f["runs"]), f"{f['min_s']:.2f}", f"{f['median_s']:.2f}", ""])
    lines = table(["command", "runs", "min s", "median s", "target (quiet machine)"], rows,
                  [False, True, True, True, False])  # fmt: skip
    pace = r.get("pace_ms")
    if pace is not None:
        lines += [
            "",
            f"The CPU pace was {pace} ms before and {r.get('pace_after_ms')} ms after "
            "(42 to 47 ms on a quiet machine): above that, the machine was loaded and every "
            "figure is inflated.",
        ]
    return lines
