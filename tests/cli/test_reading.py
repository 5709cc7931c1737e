"""What ``ingest`` and ``import`` read: regular files only, within size limits, symbolic
links on request; JSON bounded in depth; ``.json`` episodes; dates without a zone as UTC;
an empty group named with the groups that exist; open periods as ``(open)``."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

Here = Callable[..., Any]


def _episode(target: str, **extra: Any) -> dict[str, Any]:
    fact = {"source": "Ada", "relation": "KNOWS", "target": target}
    return {"name": target, "reference_time": "2024-01-01T00:00:00Z", "facts": [fact], **extra}


def _line(target: str) -> str:
    return json.dumps(_episode(target)) + "\n"


def _versions(run_here: Here) -> int:
    stats = json.loads(run_here("stats", "--json").stdout)["tables"]
    return sum(c["versions"] for c in stats.values())


def _targets(run_here: Here) -> list[str]:
    facts = json.loads(run_here("facts", "--source", "Ada", "--json").stdout)
    return sorted(f["target"] for f in facts)


def test_ingest_refuses_what_is_not_a_regular_file(run_here: Here, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    refused = run_here("ingest", str(fifo), check=3)  # refused, not blocked on the open
    assert f"{fifo} is a FIFO (named pipe), not a regular file" in refused.stderr
    device = run_here("ingest", "/dev/null", check=3)
    assert "/dev/null is a device, not a regular file" in device.stderr
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock.txt"))
        found = run_here("ingest", str(tmp_path / "sock.txt"), check=3)
    assert "sock.txt is a socket, not a regular file" in found.stderr
    assert _versions(run_here) == 0


def test_symbolic_links_are_read_only_when_asked(run_here: Here, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_text(_line("Secret"))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "own.jsonl").write_text(_line("Own"))
    (notes / "link.jsonl").symlink_to(outside / "secret.jsonl")
    (notes / "loop").symlink_to(notes)  # a loop of links
    (notes / "fifo.jsonl").unlink(missing_ok=True)
    os.mkfifo(notes / "fifo.jsonl")

    named = run_here("ingest", str(notes / "link.jsonl"), check=3)
    assert f"{notes / 'link.jsonl'} is a symbolic link (pass --follow-symlinks" in named.stderr
    assert _versions(run_here) == 0

    walked = run_here("ingest", str(notes), "--no-progress")
    assert _targets(run_here) == ["Own"]
    skipped = [line for line in walked.stderr.splitlines() if line.startswith("skipped ")]
    assert any(f"{notes / 'link.jsonl'}: a symbolic link" in line for line in skipped)
    assert any(f"{notes / 'loop'}: a symbolic link" in line for line in skipped)
    assert any(f"{notes / 'fifo.jsonl'}: a FIFO" in line for line in skipped)

    followed = run_here("ingest", str(notes), "--follow-symlinks", "--no-progress", "--json")
    assert json.loads(followed.stdout)["episodes_created"] == 1
    assert _targets(run_here) == ["Own", "Secret"]  # the loop walked once, no hang


def test_files_and_lines_past_the_limits_are_refused(run_here: Here, tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_text("".join(_line(f"T{i}") for i in range(40)))
    assert big.stat().st_size > 2048
    refused = run_here("ingest", str(big), "--max-file-size", "2KB", check=3)
    assert f"{big} is larger than 2KB (--max-file-size raises the limit)" in refused.stderr
    long = tmp_path / "long.jsonl"
    padded = _episode("Long", content="x" * 5000)
    long.write_text(_line("Short") + json.dumps(padded) + "\n")
    too_long = run_here("ingest", str(long), "--max-line-size", "4KB", check=3)
    assert f"{long}: line 2 is longer than 4KB (--max-line-size raises the limit)" in (
        too_long.stderr
    )
    bad = run_here("ingest", str(long), "--max-line-size", "lots", check=3)
    assert "--max-line-size 'lots' is not a size" in bad.stderr
    assert _versions(run_here) == 0
    run_here("ingest", str(long), "--max-line-size", "8KB", "--no-progress")
    assert _targets(run_here) == ["Long", "Short"]

    export = tmp_path / "export.jsonl"
    run_here("export", "-o", str(export))
    too_big = run_here("import", str(export), "-g", "elsewhere", "--max-file-size", "1KB", check=3)
    assert f"the export {export} is larger than 1KB (--max-file-size" in too_big.stderr
    link = tmp_path / "export-link.jsonl"
    link.symlink_to(export)
    linked = run_here("import", str(link), "-g", "elsewhere", check=3)
    assert f"the export {link} is a symbolic link" in linked.stderr
    assert _versions(run_here) > 0


def test_deep_json_is_refused_by_name(run_here: Here, tmp_path: Path) -> None:
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000
    jsonl = tmp_path / "deep.jsonl"
    jsonl.write_text(_line("Before") + deep + "\n")
    refused = run_here("ingest", str(jsonl), check=3)
    assert f"{jsonl}:2: the line is nested deeper than 512 levels" in refused.stderr
    as_json = tmp_path / "deep.json"
    as_json.write_text(deep)
    refused = run_here("ingest", str(as_json), check=3)
    assert f"{as_json} is nested deeper than 512 levels (at line 1 column 3073)" in refused.stderr
    onto = tmp_path / "deep-onto.json"
    onto.write_text(deep)
    refused = run_here("init", "--ontology", str(onto), check=3)
    assert "is nested deeper than 512 levels" in refused.stderr
    # a string of brackets is text, not nesting
    flat = tmp_path / "flat.jsonl"
    flat.write_text(json.dumps(_episode("Flat", content="[{" * 5000)) + "\n")
    run_here("ingest", str(flat), "--no-progress")
    assert _targets(run_here) == ["Flat"]

    export = tmp_path / "export.jsonl"
    run_here("export", "-o", str(export))
    lines = export.read_text().splitlines()
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join([lines[0], deep, *lines[1:]]) + "\n")
    refused = run_here("import", str(tampered), "-g", "elsewhere", check=3)
    assert "line 2 is nested deeper than 512 levels" in refused.stderr
    assert "Traceback" not in refused.stderr
    empty = run_here("stats", "-g", "elsewhere", "--json")
    assert sum(c["versions"] for c in json.loads(empty.stdout)["tables"].values()) == 0


def test_json_files_hold_episodes_or_are_refused_with_line_and_column(
    run_here: Here, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": 1,}')
    refused = run_here("ingest", str(broken), check=3)
    why = "Expecting property name enclosed in double quotes at line 1 column 9"
    assert f"{broken} is not JSON: {why}" in refused.stderr
    scalar = tmp_path / "scalar.json"
    scalar.write_text("42")
    refused = run_here("ingest", str(scalar), check=3)
    assert f"{scalar}: holds a JSON int; a .json file holds one episode" in refused.stderr
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"a": 1}))
    refused = run_here("ingest", str(wrong), check=3)
    assert f"{wrong}: the episode: unknown key(s) a" in refused.stderr
    assert _versions(run_here) == 0

    one = tmp_path / "good.json"
    one.write_bytes(b"\xef\xbb\xbf" + json.dumps(_episode("Bo"), indent=2).encode())  # a BOM
    many = tmp_path / "many.json"
    many.write_text(json.dumps([_episode("Cy"), _episode("Di")]))
    done = json.loads(run_here("ingest", str(one), str(many), "--json").stdout)
    assert (done["episodes_created"], done["facts_written"], done["documents"]) == (3, 3, 0)
    assert _targets(run_here) == ["Bo", "Cy", "Di"]
    again = json.loads(run_here("ingest", str(one), str(many), "--json").stdout)
    assert (again["episodes_created"], again["episodes_skipped"]) == (0, 3)


def test_dates_without_a_zone_in_files_are_utc(run_here: Here, tmp_path: Path) -> None:
    episode = _episode("Eve")
    episode["reference_time"] = "2024-03-01T12:00:00"
    episode["facts"][0]["valid_at"] = "2020-05-01"
    path = tmp_path / "naive.jsonl"
    path.write_text(json.dumps(episode) + "\n")
    run_here("ingest", str(path), "--no-progress")
    [fact] = json.loads(run_here("facts", "--source", "Ada", "--json").stdout)
    assert fact["valid_at"] == "2020-05-01T00:00:00+00:00"
    [stored] = json.loads(run_here("episodes", "--json").stdout)
    assert stored["reference_time"] == "2024-03-01T12:00:00+00:00"
    episode["facts"][0]["valid_at"] = "May 2020"
    path.write_text(json.dumps(episode) + "\n")
    refused = run_here("ingest", str(path), check=3)
    assert "valid_at 'May 2020' is not a date; use ISO 8601" in refused.stderr
    assert "tzinfo" not in refused.stderr
    episode["facts"][0]["valid_at"] = 2020  # JSON has no dates: a number is refused
    path.write_text(json.dumps(episode) + "\n")
    refused = run_here("ingest", str(path), check=3)
    assert "facts[0]: valid_at must be a date as text, such as 2019-05-01" in refused.stderr
    assert "got int 2020" in refused.stderr


def test_an_empty_group_names_the_groups_that_hold_something(
    run_here: Here, tmp_path: Path, group: str
) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(_line("Fay"))
    run_here("ingest", str(path), "--no-progress")
    mistyped = group + "x"
    found = run_here("facts", "--group", mistyped)  # exit 0: an empty answer is an answer
    assert f"0 fact(s) in {mistyped}" in found.stdout
    assert f"note: group '{mistyped}' holds nothing (did you mean '{group}'?)" in found.stderr
    assert "groups that hold something: " in found.stderr
    as_json = run_here("facts", "--group", mistyped, "--json")
    assert json.loads(as_json.stdout) == []
    assert "holds nothing" in as_json.stderr
    held = run_here("facts")
    assert "holds nothing" not in held.stderr


def test_open_periods_read_open_in_tables(run_here: Here, tmp_path: Path) -> None:
    path = tmp_path / "open.jsonl"
    path.write_text(_line("Gus"))
    run_here("ingest", str(path), "--no-progress")
    table = run_here("facts", "--source", "Ada").stdout
    row = next(line for line in table.splitlines() if "Gus" in line)
    assert "(open)" in row
    assert "…" not in row


def test_hidden_files_and_folders_are_walked_only_when_asked(
    run_here: Here, tmp_path: Path
) -> None:
    """A folder's ``.git``, ``.venv`` or editor settings are not notes: skipped and
    reported unless ``--hidden``; a hidden path named on the command line is read."""
    notes = tmp_path / "notes"
    (notes / ".vscode").mkdir(parents=True)
    (notes / ".vscode" / "settings.json").write_text('{"editor.tabSize": 4}')  # no episode
    (notes / ".drafts").mkdir()
    (notes / ".drafts" / "draft.jsonl").write_text(_line("Draft"))
    (notes / ".hidden.jsonl").write_text(_line("Hidden"))
    (notes / "own.jsonl").write_text(_line("Own"))

    walked = run_here("ingest", str(notes), "--no-progress")
    assert _targets(run_here) == ["Own"]
    skipped = [line for line in walked.stderr.splitlines() if line.startswith("skipped ")]
    for name in (".vscode", ".drafts", ".hidden.jsonl"):
        assert f"skipped {notes / name}: hidden (--hidden walks it)" in skipped

    run_here("ingest", str(notes / ".drafts"), "--no-progress")  # named: read
    assert _targets(run_here) == ["Draft", "Own"]
    refused = run_here("ingest", str(notes), "--hidden", "--no-progress", check=3)
    assert "settings.json" in refused.stderr  # walked, and not an episode
    assert _targets(run_here) == ["Draft", "Own"]  # refused whole, nothing written
    (notes / ".vscode" / "settings.json").unlink()
    run_here("ingest", str(notes), "--hidden", "--no-progress")
    assert _targets(run_here) == ["Draft", "Hidden", "Own"]


def test_a_file_reached_twice_is_read_once_under_its_first_path(
    run_here: Here, tmp_path: Path
) -> None:
    """A link followed beside its target, or a hard link, reaches the same file: read once,
    under the path the walk meets first, so its document keeps one title run after run."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "b-notes.md").write_text("Ada met Grace at the lab in 2019.\n")
    (notes / "a-link.md").symlink_to(notes / "b-notes.md")
    os.link(notes / "b-notes.md", notes / "c-hard.md")
    for _ in range(2):
        walked = run_here("ingest", str(notes), "--follow-symlinks", "--no-progress")
        skipped = [line for line in walked.stderr.splitlines() if line.startswith("skipped ")]
        assert skipped == [
            f"skipped {notes / 'b-notes.md'}: the same file as {notes / 'a-link.md'}",
            f"skipped {notes / 'c-hard.md'}: the same file as {notes / 'a-link.md'}",
        ]
        episodes = json.loads(run_here("episodes", "--json").stdout)
        assert [e["name"] for e in episodes] == ["a-link.md [1/1]"]
