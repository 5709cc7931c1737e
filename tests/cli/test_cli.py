"""The command line end to end: ingest, read, as-of, rollback, errors and exit codes."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from timestone.db._embedded import embedded_dsn

Run = Callable[..., subprocess.CompletedProcess[str]]
Here = Callable[..., Any]


def as_json(proc: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(proc.stdout)


def _targets(facts: list[dict[str, object]], relation: str) -> list[object]:
    return [f["target"] for f in facts if f["relation"] == relation]


def test_ingest_is_resumable_and_reads_tell_time(
    cli: Run, run_here: Here, mira_file: Path, ontology_file: Path
) -> None:
    # the installed command in a subprocess for ingest, read, as-of and rollback; the
    # remaining reads run the same command in this process, to keep the test quick
    first = as_json(cli("ingest", str(mira_file), "--ontology", str(ontology_file), "--json"))
    assert (first["episodes_created"], first["episodes_skipped"], first["facts_written"]) == (
        3,
        0,
        7,
    )
    again = as_json(run_here("ingest", str(mira_file), "--json"))
    assert (again["episodes_created"], again["episodes_skipped"]) == (0, 3)

    # today Mira directs Château Sud; in 2019 she directed Château Nord
    now = as_json(cli("facts", "--source", "Mira", "--json"))
    assert _targets(now, "DIRECTS") == ["Château Sud"]
    then = as_json(run_here("facts", "--relation", "DIRECTS", "--valid-at", "2019-06", "--json"))
    assert _targets(then, "DIRECTS") == ["Château Nord"]

    # as of before the 2023 episode was ingested, the graph believed she still directed Nord
    episodes = as_json(run_here("episodes", "--json"))
    assert [e["name"] for e in episodes] == [
        "2023 trade press",
        "2019 interview (ingested late)",
        "2015 harvest report",
    ]
    recorded_2023 = datetime.fromisoformat(episodes[0]["created_at"])
    before = (recorded_2023 - timedelta(microseconds=1)).isoformat()
    believed = as_json(cli("as-of", before, "--entity", "Mira", "--json"))
    assert _targets(believed, "DIRECTS") == ["Château Nord"]

    periods = as_json(run_here("timeline", "Mira", "--json"))
    directs = [
        (p["target"], p["valid_at"][:10], (p["invalid_at"] or "")[:10])
        for p in periods
        if p["relation"] == "DIRECTS"
    ]
    assert directs == [
        ("Château Nord", "2015-01-01", "2023-06-01"),
        ("Château Sud", "2023-06-01", ""),
    ]
    # narrowed: the periods of one relation that last past 2020 and start before 2024
    narrowed = as_json(
        run_here(
            "timeline",
            "Mira",
            "--relation",
            "DIRECTS",
            "--since",
            "2020-01-01",
            "--until",
            "2024-01-01",
            "--limit",
            "1",
            "--json",
        )
    )
    assert [(p["target"], p["valid_at"][:10]) for p in narrowed] == [("Château Nord", "2015-01-01")]
    backwards = cli("timeline", "Mira", "--since", "2024-01-01", "--until", "2020-01-01", check=3)
    assert "must be after since" in backwards.stderr

    # rollback to before the 2023 episode: the present is Nord again, and reversible
    report = as_json(cli("rollback", "--to", before, "--json"))
    assert report["expired"]["facts"] > 0
    assert _targets(as_json(cli("facts", "--source", "Mira", "--json")), "DIRECTS") == [
        "Château Nord"
    ]


def test_remove_episode_and_not_found(run_here: Here, mira_file: Path, ontology_file: Path) -> None:
    cli = run_here
    init = as_json(cli("init", "--ontology", str(ontology_file), "--json"))
    cardinalities = {e["name"]: e["cardinality"] for e in init["ontology"]["edge_types"]}
    assert cardinalities == {"DIRECTS": "one", "WORKS_AT": "one", "WORKS_WITH_GRAPE": "one"}
    cli("ingest", str(mira_file), "--json")
    assert as_json(cli("stats", "--json"))["tables"]["episodes"] == {"current": 3, "versions": 3}
    found = as_json(cli("search", "who directs the winery", "--json"))
    assert "Mira directs Château Sud." in [f["fact"] for f in found["facts"]]
    latest = as_json(cli("episodes", "--json", "--limit", "1"))[0]
    removed = as_json(cli("remove-episode", latest["id"], "--json"))
    assert removed["episode_id"] == latest["id"]
    assert _targets(as_json(cli("facts", "--source", "Mira", "--json")), "DIRECTS") == [
        "Château Nord"
    ]
    again = cli("remove-episode", latest["id"], check=4)
    assert "removed" in again.stderr
    unknown = cli("timeline", "Nobody", check=4)
    assert "unknown entity 'Nobody'" in unknown.stderr


def test_malformed_jsonl_names_the_line_and_writes_nothing(
    run_here: Here, mira_file: Path, tmp_path: Path
) -> None:
    cli = run_here
    lines = mira_file.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], '{"name": "broken", "facts": [', lines[1]]) + "\n")
    refused = cli("ingest", str(bad), check=3)
    assert f"{bad}:2: not JSON" in refused.stderr
    assert "nothing from" in refused.stderr
    assert as_json(cli("stats", "--json"))["tables"]["episodes"]["versions"] == 0

    skipped = as_json(cli("ingest", str(bad), "--skip-bad", "--json"))
    assert skipped["episodes_created"] == 2
    assert len(skipped["bad_lines"]) == 1

    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text(json.dumps({"reference_time": "2020-01-01", "facts": []}) + "\n")
    naive = cli("ingest", str(wrong), check=3)
    assert ":1: " in naive.stderr

    missing = cli("ingest", str(tmp_path / "nope.jsonl"), check=3)
    assert "no such file" in missing.stderr


def test_an_episode_the_library_refuses_stops_the_file_at_its_line(
    run_here: Here, tmp_path: Path
) -> None:
    """A line that parses but that ``add_facts`` refuses (its period ends before the
    reference time it starts at) is caught while the lines before it are written."""
    cli = run_here

    def line(name: str, **fact: str) -> str:
        body = {"source": "Ada", "relation": "KNOWS", "target": name, **fact}
        return json.dumps({"name": name, "reference_time": "2024-01-01T00:00:00Z", "facts": [body]})

    path = tmp_path / "refused.jsonl"
    bad = line("Cy", invalid_at="2020-01-01T00:00:00Z")
    path.write_text("\n".join([line("Bo"), bad, line("Di")]) + "\n")
    refused = cli("ingest", str(path), check=3)
    assert f"{path}:2: KNOWS fact: invalid_at" in refused.stderr
    assert "batches[" not in refused.stderr
    assert "the episodes before line 2 were written" in refused.stderr
    assert as_json(cli("stats", "--json"))["tables"]["episodes"]["versions"] == 1

    skipped = as_json(cli("ingest", str(path), "--skip-bad", "--json"))
    assert (skipped["episodes_created"], skipped["episodes_skipped"]) == (1, 1)
    assert [b.split(": ", 1)[0] for b in skipped["bad_lines"]] == [f"{path}:2"]
    assert sorted(f["target"] for f in as_json(cli("facts", "--source", "Ada", "--json"))) == [
        "Bo",
        "Di",
    ]


def test_prepared_statements_from_the_environment(
    run_here: Here, monkeypatch: pytest.MonkeyPatch, mira_file: Path
) -> None:
    # for a pooler in transaction mode that does not carry prepared statements
    monkeypatch.setenv("TIMESTONE_PREPARED_STATEMENTS", "maybe")
    bad = run_here("facts", check=3)
    assert "TIMESTONE_PREPARED_STATEMENTS must be on or off, got 'maybe'" in bad.stderr
    monkeypatch.setenv("TIMESTONE_PREPARED_STATEMENTS", "off")
    run_here("ingest", str(mira_file), "--json")
    found = as_json(run_here("search", "who directs the winery", "--json"))
    assert "Mira directs Château Sud." in [f["fact"] for f in found["facts"]]


def test_bad_dates_usage_errors_and_busy_ports(run_here: Here) -> None:
    cli = run_here
    bad_date = cli("facts", "--as-of", "last tuesday", check=3)
    assert "'last tuesday' is not a date" in bad_date.stderr
    # aware and valid where it is, past year 9999 in UTC: refused by name, no traceback
    too_late = cli("facts", "--as-of", "9999-12-31T23:00:00-05:00", check=3)
    assert "outside the years 1 to 9999 in UTC" in too_late.stderr
    assert "Traceback" not in too_late.stderr
    cli("facts", "--no-such-option", check=2)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        taken = cli("ui", "--port", str(port), check=9)
    assert f"port {port} on 127.0.0.1 is already in use" in taken.stderr
    # out of range: refused by name, not the socket module's OverflowError
    for command in (("ui",), ("serve", "mcp", "--transport", "http")):
        wide = cli(*command, "--port", "70000", check=3)
        assert "port must be an integer from 0 to 65535, got 70000" in wide.stderr
        assert "Traceback" not in wide.stderr
    # an explicitly empty group is refused, not taken for the default one
    empty = cli("stats", "--group", "", check=3)
    assert "group_id is empty" in empty.stderr


def test_text_files_and_folders_become_documents(run_here: Here, tmp_path: Path) -> None:
    cli = run_here
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Vineyard notes\n\nThe Gamay vines are forty years old.\n")
    (folder / "b.txt").write_text("Harvest began early this year.\n")
    (folder / "ignored.bin").write_bytes(b"\x00\x01")
    done = as_json(cli("ingest", str(folder), "--reference-time", "2024-09-01", "--json"))
    assert (done["documents"], done["episodes_created"]) == (2, 2)
    episodes = as_json(cli("episodes", "--json"))
    assert {e["reference_time"][:10] for e in episodes} == {"2024-09-01"}
    assert all(e["source"] == "document" for e in episodes)
    again = as_json(cli("ingest", str(folder), "--reference-time", "2024-09-01", "--json"))
    assert again["episodes_created"] == 0


def test_bulk_ingest_builds_the_vector_indexes_at_the_end(
    cli_fresh: Run, fresh_data_dir: Path, mira_file: Path, ontology_file: Path
) -> None:
    load = ("ingest", str(mira_file), "--ontology", str(ontology_file))
    # the build's options are checked before anything is stored (the ontology included)
    for options, message in (
        (("--bulk", "--maintenance-work-mem", "0"), "maintenance_work_mem must be a Postgres"),
        (("--bulk", "--maintenance-work-mem", "3000GB"), "must be from 1MB to 2047GB"),
        (("--bulk", "--workers", "65"), "workers must be an integer from 0 to 64"),
        (("--workers", "1"), "--workers sets the index build of a bulk load: add --bulk"),
        (("--maintenance-work-mem", "2GB"), "--maintenance-work-mem sets the index build"),
    ):
        refused = cli_fresh(*load, *options, check=3)
        assert message in refused.stderr, options
        assert "Traceback" not in refused.stderr
    assert as_json(cli_fresh("episodes", "--json")) == []
    assert as_json(cli_fresh("init", "--json"))["ontology"] is None
    done = as_json(
        cli_fresh(*load, "--bulk", "--maintenance-work-mem", "64MB", "--workers", "0", "--json")
    )
    assert (done["episodes_created"], done["facts_written"]) == (3, 7)
    assert as_json(cli_fresh("init", "--json"))["ontology"] is not None
    with psycopg.connect(embedded_dsn(fresh_data_dir)) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
            " JOIN pg_am AS a ON a.oid = c.relam WHERE a.amname = 'hnsw' AND i.indisvalid"
        ).fetchall()
    assert {r[0] for r in rows} == {
        "episodes_embedding_hnsw",
        "episodes_told_embedding_hnsw",
        "entities_name_embedding_hnsw",
        "facts_embedding_hnsw",
        "facts_embedding_closed_hnsw",
        "communities_name_embedding_hnsw",
    }
    found = as_json(cli_fresh("search", "Which grape does Mira work with?", "--json"))
    assert any("Cabernet Franc" in f["fact"] for f in found["facts"])
    # rebuilt in place after churn: one index, then a name that is not one (exit 3)
    rebuilt = as_json(
        cli_fresh("rebuild-indexes", "--index", "facts_embedding_hnsw", "--workers", "0", "--json")
    )
    assert list(rebuilt["seconds"]) == ["facts_embedding_hnsw"]
    health = as_json(cli_fresh("index-health", "--sample", "20", "--json"))["found"]
    assert health["communities_name_embedding_hnsw"] is None
    assert 0.9 <= health["facts_embedding_hnsw"] <= 1.0
    bad_sample = cli_fresh("index-health", "--sample", "0", check=3)
    assert "sample must be an integer from 1 to 10,000, got 0" in bad_sample.stderr
    wrong = cli_fresh("rebuild-indexes", "--index", "facts_hnsw", check=3)
    assert "'facts_hnsw' is not a vector index of timestone" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    found = as_json(cli_fresh("search", "Which grape does Mira work with?", "--json"))
    assert any("Cabernet Franc" in f["fact"] for f in found["facts"])
