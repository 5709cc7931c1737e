"""User and data text is printed as it is, never read as Rich markup; files the user names
that cannot be read are refused by name, with the exit code of invalid input."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., subprocess.CompletedProcess[str]]
Here = Callable[..., Any]


def _episode(name: str, *facts: dict[str, str]) -> str:
    return json.dumps({"name": name, "reference_time": "2024-01-01T00:00:00Z", "facts": facts})


def test_an_unknown_entity_that_looks_like_markup_is_named_as_given(cli: Run) -> None:
    # in a subprocess: the installed command, its real exit code and stderr
    closing = cli("timeline", "[/x]", check=4)
    assert "unknown entity '[/x]'" in closing.stderr
    assert "Traceback" not in closing.stderr
    styled = cli("timeline", "[bold]Nobody", check=4)
    assert "unknown entity '[bold]Nobody'" in styled.stderr


def test_names_facts_and_titles_print_as_they_are(run_here: Here, tmp_path: Path) -> None:
    path = tmp_path / "brackets.jsonl"
    path.write_text(
        _episode(
            "[/h]",
            {"source": "[bold]Ada", "relation": "KNOWS", "target": "[/x]", "fact": "[i]met[/i]"},
        )
        + "\n"
    )
    written = run_here("ingest", str(path))
    assert "1 episode(s) written" in written.stdout

    table = run_here("facts", "--source", "[bold]Ada").stdout
    for text in ("[bold]Ada", "[/x]", "[i]met[/i]"):
        assert text in table, table
    timeline = run_here("timeline", "[/x]").stdout
    assert "timeline of [/x]" in timeline
    assert "[bold]Ada" in timeline
    assert "[/h]" in run_here("episodes").stdout
    found = run_here("search", "[/x] [bold]", "--scopes", "facts,entities").stdout
    assert "matching '[/x] [bold]'" in found


def test_a_skipped_line_that_looks_like_markup_is_reported_after_the_good_ones(
    run_here: Here, tmp_path: Path
) -> None:
    path = tmp_path / "relation.jsonl"
    good = _episode("good", {"source": "Ada", "relation": "KNOWS", "target": "Bo"})
    bad = _episode("bad", {"source": "Ada", "relation": "[/x]", "target": "Cy"})
    path.write_text(f"{good}\n{bad}\n")
    done = run_here("ingest", str(path), "--skip-bad")
    assert "1 episode(s) written" in done.stdout
    skipped = [line for line in done.stderr.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 1, done.stderr
    assert f"{path}:2:" in skipped[0]
    assert "[/x]" in skipped[0]
    facts = json.loads(run_here("facts", "--source", "Ada", "--json").stdout)
    assert [f["target"] for f in facts] == ["Bo"]


def _nothing_written(run_here: Here) -> None:
    stats = json.loads(run_here("stats", "--json").stdout)["tables"]
    assert sum(c["versions"] for c in stats.values()) == 0


def test_import_refuses_files_it_cannot_read_by_name(cli: Run, tmp_path: Path) -> None:
    latin = tmp_path / "latin1.jsonl"
    latin.write_bytes('{"kind": "header", "group_id": "Café"}\n'.encode("latin-1"))
    refused = cli("import", str(latin), check=3)  # the exit code of ingest's refusal
    assert f"the export {latin} is not UTF-8 text" in refused.stderr
    assert "Traceback" not in refused.stderr
    piped = cli("import", "-", input="", check=3)
    assert "the export on stdin is empty" in piped.stderr


def test_import_refuses_a_folder_an_empty_or_missing_file(run_here: Here, tmp_path: Path) -> None:
    folder = run_here("import", str(tmp_path), check=3)
    assert f"the export {tmp_path} is a folder, not a file" in folder.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    assert f"the export {empty} is empty" in run_here("import", str(empty), check=3).stderr
    missing = tmp_path / "missing.jsonl"
    assert f"{missing} does not exist" in run_here("import", str(missing), check=3).stderr
    _nothing_written(run_here)


def test_other_files_and_dates_the_user_names_are_refused_by_name(
    run_here: Here, tmp_path: Path
) -> None:
    latin = tmp_path / "onto.toml"
    latin.write_bytes('[[edge_types]]\nname = "CAFÉ"\n'.encode("latin-1"))
    onto = run_here("init", "--ontology", str(latin), check=3)
    assert f"the ontology file {latin} is not UTF-8 text" in onto.stderr
    folder = run_here("export", "--output", str(tmp_path), check=3)
    assert f"--output {tmp_path} is a folder" in folder.stderr
    assert not tmp_path.with_name(tmp_path.name + ".partial").exists()
    for bad in ("2019-13", "2019-02-30", "0000", "[/x]"):
        date = run_here("facts", "--valid-at", bad, check=3)
        assert f"--valid-at {bad!r} is not a date" in date.stderr
    _nothing_written(run_here)


@pytest.mark.parametrize(
    ("name", "data"),
    [("latin.txt", "Réserve du château".encode("latin-1")), ("nul.txt", b"a\x00b")],
)
def test_a_text_file_no_document_holds_stops_the_command_before_any_write(
    run_here: Here, tmp_path: Path, name: str, data: bytes
) -> None:
    """Every file is read before the first write: a JSONL file sorted before a text file
    that is not UTF-8, or holds a NUL, writes nothing either."""
    folder = tmp_path / "notes"
    folder.mkdir()
    fact = {"source": "Ann", "relation": "KNOWS", "target": "Bo"}
    line = {"reference_time": "2020-01-01T00:00:00Z", "facts": [fact]}
    (folder / "a.jsonl").write_text(json.dumps(line) + "\n")
    (folder / name).write_bytes(data)
    refused = run_here("ingest", str(folder), check=3)
    assert name in refused.stderr
    _nothing_written(run_here)


def test_a_file_name_in_another_encoding_is_a_title_all_the_same(
    run_here: Here, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / os.fsdecode(b"r\xe9sum\xe9.txt")).write_text("Ann knows Bo.")
    (folder / "other.txt").write_text("Bo knows Cy.")
    run_here("ingest", str(folder))
    titles = sorted(e["name"] for e in json.loads(run_here("episodes", "--json").stdout))
    assert titles == ["other.txt [1/1]", "r\ufffdsum\ufffd.txt [1/1]"]
