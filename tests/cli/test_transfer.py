"""Export then import into a fresh data dir: every read answers the same, history included."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import timestone
from timestone.errors import InvalidInput

Run = Callable[..., subprocess.CompletedProcess[str]]


def test_export_import_into_a_fresh_data_dir_reads_the_same(
    cli: Run,
    cli_fresh: Run,
    run_here: Callable[..., Any],
    mira_file: Path,
    ontology_file: Path,
    tmp_path: Path,
) -> None:
    # export, import and the fresh store's reads run the installed command in a subprocess;
    # the setup and the source's reads run the same command in this process
    run_here("ingest", str(mira_file), "--ontology", str(ontology_file), "--json")
    listed = json.loads(run_here("episodes", "--json").stdout)
    first, latest = listed[-1], listed[0]
    run_here("remove-episode", latest["id"])  # history the export must carry
    between = (datetime.fromisoformat(latest["created_at"]) + timedelta(microseconds=1)).isoformat()

    dump = tmp_path / "mira-export.jsonl"
    cli("export", "--output", str(dump))
    lines = dump.read_text().splitlines()
    header, end = json.loads(lines[0]), json.loads(lines[-1])
    assert header["format"] == "timestone-export"
    assert header["ontology"]["edge_types"][0]["cardinality"] == "one"
    assert end == {"kind": "end", "rows": len(lines) - 2}
    assert any(json.loads(line)["row"].get("expired_at") for line in lines[1:-1])

    imported = json.loads(cli_fresh("import", str(dump), "--json").stdout)
    assert sum(imported["rows"].values()) == end["rows"]

    reads = [
        ("facts", "--valid-at", "all", "--json"),
        ("as-of", between, "--entity", "Mira", "--json"),
        ("episodes", "--as-of", first["created_at"], "--json"),
    ]
    for args in reads:
        before, after = run_here(*args).stdout, cli_fresh(*args).stdout
        assert json.loads(before), args
        assert after == before, args


def test_bad_exports_are_refused_and_write_nothing(
    memory: timestone.Memory, group: str, other_group: str
) -> None:
    memory.add_facts(
        group,
        [{"source": "Ada", "relation": "LIKES", "target": "tea"}],
        reference_time=datetime.fromisoformat("2024-01-01T00:00:00+00:00"),
    )
    out = io.StringIO()
    counts = memory.export_group(group, out)
    lines = out.getvalue().splitlines(keepends=True)
    assert counts["facts"] == 1

    with pytest.raises(InvalidInput, match="truncated"):
        memory.import_group(lines[:-1], group_id=other_group)
    broken = [*lines[:2], "{not json\n", *lines[2:]]
    with pytest.raises(InvalidInput, match="line 3: not JSON"):
        memory.import_group(broken, group_id=other_group)
    header = json.loads(lines[0])
    header["rows"]["nope"] = 1
    rows = ['{"kind": "row", "table": "nope", "row": {}}\n', *lines[1:-1]]
    end = json.dumps({"kind": "end", "rows": len(rows)}) + "\n"
    unknown = [json.dumps(header) + "\n", *rows, end]
    with pytest.raises(InvalidInput, match=r"^line 2: the export has rows of table 'nope'"):
        memory.import_group(unknown, group_id=other_group)
    record = [json.loads(line) for line in lines]
    for item in record:
        if item.get("table") == "episodes":
            item["row"]["content"] = "Ada likes tea."  # a record of facts holds JSON
    with pytest.raises(InvalidInput, match=r"record of facts .* it is not JSON"):
        memory.import_group([json.dumps(i) + "\n" for i in record], group_id=other_group)
    assert sum(c["versions"] for c in memory.stats(other_group).values()) == 0

    assert memory.import_group(lines, group_id=other_group)["facts"] == 1
    with pytest.raises(InvalidInput, match="already holds"):
        memory.import_group(lines, group_id=other_group)
    copied = memory.facts(other_group, valid_at=None)
    original = memory.facts(group, valid_at=None)
    assert [(f.id, f.version_id, f.created_at) for f in copied] == [
        (f.id, f.version_id, f.created_at) for f in original
    ]


def test_text_holding_unicode_line_separators_round_trips(
    cli: Run, cli_fresh: Run, run_here: Callable[..., Any], tmp_path: Path
) -> None:
    """JSON strings hold U+2028, U+2029 and U+0085 raw (text from PDFs and web pages
    carries them), and an export writes them so: JSON Lines end at a newline only, and
    ``ingest`` and ``import`` read them as text, not as line breaks."""
    said = "Ann works at Acme.\u2028Since 2020,\u0085she leads\u2029the cellar."
    episode: dict[str, Any] = {
        "reference_time": "2020-01-01T00:00:00Z",
        "content": said,
        "facts": [{"source": "Ann", "relation": "WORKS_AT", "target": "Acme", "fact": said}],
    }
    bad: dict[str, Any] = {"reference_time": "2020-02-01", "facts": []}  # no UTC offset
    source = tmp_path / "separators.jsonl"
    source.write_text(
        "\n".join(
            json.dumps(e, ensure_ascii=False) for e in (episode, episode | {"name": "b"}, bad)
        )
        + "\n",
        encoding="utf-8",
    )
    refused = run_here("ingest", str(source), check=3)
    assert f"{source}:3: " in refused.stderr  # the third line, as the file counts them
    run_here("ingest", str(source), "--skip-bad")
    before = run_here("facts", "--valid-at", "all", "--json").stdout
    assert [f["fact"] for f in json.loads(before)] == [said]

    dump = tmp_path / "separators-export.jsonl"
    cli("export", "--output", str(dump))
    assert "\u2028" in dump.read_text(encoding="utf-8")  # written raw
    cli_fresh("import", str(dump))
    assert cli_fresh("facts", "--valid-at", "all", "--json").stdout == before


def _one_fact_exported(
    run_here: Callable[..., Any], tmp_path: Path
) -> tuple[dict[str, Any], list[str]]:
    """A group of one fact, ingested then exported: the export's header and its lines."""
    episode = {
        "reference_time": "2020-01-01T00:00:00Z",
        "facts": [{"source": "Ann", "relation": "WORKS_AT", "target": "Acme"}],
    }
    source = tmp_path / "one.jsonl"
    source.write_text(json.dumps(episode) + "\n", encoding="utf-8")
    run_here("ingest", str(source))
    dump = tmp_path / "one-export.jsonl"
    run_here("export", "--output", str(dump))
    lines = dump.read_text(encoding="utf-8").split("\n")
    return json.loads(lines[0]), lines


def test_an_ontology_the_header_holds_is_checked_before_the_import(
    run_here: Callable[..., Any], other_group: str, tmp_path: Path
) -> None:
    """The header's ontology, which ``import`` stores for a database that has none, is
    read as an ontology file is: a hand-edited one is refused naming it, and nothing of
    the file is written (a stored ontology no command could read would stop them all)."""
    header, lines = _one_fact_exported(run_here, tmp_path)
    for broken, why in [
        ({"edge_types": "WORKS_AT"}, "edge_types must be a list"),
        ("WORKS_AT", "must be an object, got str"),
        ({"edge_types": [{"name": "WORKS_AT", "cardinality": "two"}]}, "cardinality"),
    ]:
        edited = tmp_path / "edited.jsonl"
        edited.write_text("\n".join([json.dumps(header | {"ontology": broken}), *lines[1:]]))
        refused = run_here("import", str(edited), "--group", other_group, check=3)
        assert "the export's header: ontology" in refused.stderr
        assert why in refused.stderr
        counted = json.loads(run_here("stats", "--group", other_group, "--json").stdout)
        assert sum(t["versions"] for t in counted["tables"].values()) == 0


def test_an_import_into_a_new_store_takes_the_exports_embedder(
    cli_fresh: Run, cli_second: Run, tmp_path: Path
) -> None:
    """With no ``--embedder``, a store the import creates is made with the embedder the
    export names (not the default, which would refuse the file and keep the store)."""
    episode = {
        "reference_time": "2020-01-01T00:00:00Z",
        "facts": [{"source": "Ann", "relation": "WORKS_AT", "target": "Acme"}],
    }
    source = tmp_path / "one.jsonl"
    source.write_text(json.dumps(episode) + "\n", encoding="utf-8")
    cli_fresh("ingest", str(source), "--embedder", "hash:64")
    dump = tmp_path / "hashed.jsonl"
    cli_fresh("export", "--output", str(dump))
    assert json.loads(dump.read_text().split("\n")[0])["embedder"]["name"] == "hash"

    cli_second("import", str(dump))
    assert cli_second("facts", "--json").stdout == cli_fresh("facts", "--json").stdout


def test_an_export_of_a_newer_schema_is_refused_with_the_code_of_a_newer_database(
    run_here: Callable[..., Any], other_group: str, tmp_path: Path
) -> None:
    """A file a newer Timestone wrote is refused as a database a newer Timestone migrated
    is (``SchemaTooNew``, code 6), naming both versions and the way out; nothing written."""
    header, lines = _one_fact_exported(run_here, tmp_path)
    newer = tmp_path / "newer.jsonl"
    newer.write_text("\n".join([json.dumps(header | {"schema_version": 9999}), *lines[1:]]))
    refused = run_here("import", str(newer), "--group", other_group, check=6)
    assert "written at schema version 9999" in refused.stderr
    assert "upgrade the timestone package" in refused.stderr
    counted = json.loads(run_here("stats", "--group", other_group, "--json").stdout)
    assert sum(t["versions"] for t in counted["tables"].values()) == 0
