"""Arguments the command refuses by the name the user typed (not the library's parameter),
files it will not write over a folder, and an ingest that finds nothing, or whose first
episode is refused, saying so."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Here = Callable[..., Any]

ADA = json.dumps(
    {
        "name": "hired",
        "reference_time": "2024-01-01T00:00:00Z",
        "facts": [{"source": "Ada", "relation": "WORKS_AT", "target": "Acme"}],
    }
)


def _versions(run_here: Here) -> int:
    stats = json.loads(run_here("stats", "--json").stdout)["tables"]
    return sum(c["versions"] for c in stats.values())


def test_an_empty_entity_is_refused_by_the_argument_that_gave_it(run_here: Here) -> None:
    for args, named in (
        (("timeline", ""), "ENTITY"),
        (("facts", "--source", ""), "--source"),
        (("facts", "--target", "  "), "--target"),
        (("as-of", "now", "--entity", ""), "--entity"),
    ):
        refused = run_here(*args, check=3)
        assert refused.stderr == f"error: {named} is empty\n", args
    assert _versions(run_here) == 0


def test_timeline_refuses_a_folder_for_the_picture(run_here: Here, tmp_path: Path) -> None:
    episode = tmp_path / "ada.jsonl"
    episode.write_text(ADA + "\n")
    run_here("ingest", "--no-progress", str(episode))
    folder = tmp_path / "out"
    folder.mkdir()
    png = run_here("timeline", "Ada", "--png", str(folder), check=3)
    assert png.stderr == f"error: --png {folder} is a folder; name the file to write\n"
    html = run_here("timeline", "Ada", "--html", str(folder), check=3)
    assert html.stderr == f"error: --html {folder} is a folder; name the file to write\n"
    assert list(folder.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ada.jsonl", "out"]


def test_an_ingest_that_finds_nothing_says_so(run_here: Here, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n")
    file = run_here("ingest", "--no-progress", str(empty))
    assert file.stderr.splitlines() == [
        f"skipped {empty}: empty",
        f"note: nothing found to ingest in {empty}",
    ]
    unseen = tmp_path / "unseen.txt"  # zero-width spaces and a byte order mark
    unseen.write_text("\ufeff\u200b\u200b\n\u200c\n")
    text = run_here("ingest", "--no-progress", str(unseen))
    assert text.stderr.splitlines() == [
        f"skipped {unseen}: empty",
        f"note: nothing found to ingest in {unseen}",
    ]
    folder = tmp_path / "nothing"
    folder.mkdir()
    (folder / "picture.png").write_bytes(b"\x89PNG")
    walked = run_here("ingest", "--no-progress", "--json", str(folder))
    assert json.loads(walked.stdout)["files"] == 0
    assert walked.stderr.splitlines() == [
        f"note: nothing found to ingest in {folder}: ingest reads files ending in "
        ".jsonl, .ndjson, .json, .txt, .md, .markdown, .rst, .text"
    ]
    assert _versions(run_here) == 0


def test_a_refused_first_episode_says_nothing_was_written(run_here: Here, tmp_path: Path) -> None:
    fact = {"source": "Ada", "relation": "KNOWS", "target": "Bo", "invalid_at": "2020-01-01"}
    line = {"reference_time": "2024-01-01T00:00:00Z", "facts": [fact]}
    path = tmp_path / "first.jsonl"
    path.write_text(json.dumps(line) + "\n" + ADA + "\n")
    refused = run_here("ingest", "--no-progress", str(path), check=3)
    assert refused.stderr.splitlines()[1:] == [
        f"nothing from {path} was written; fix it or pass --skip-bad"
    ]
    assert refused.stderr.startswith(f"error: {path}:1: KNOWS fact: invalid_at ")
    assert _versions(run_here) == 0
