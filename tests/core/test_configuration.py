"""Settings read at open, from arguments and the environment: each bad one is refused by
name before a server is started or anything is written; ``dsn``, then ``TIMESTONE_DSN``,
then ``data_dir``, then ``TIMESTONE_DATA_DIR`` says where; a variable set but blank counts
as unset where that is documented."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from llm_rows import row_counts

import timestone
from timestone import HashEmbedder, WordLlamaEmbedder
from timestone.db._embedded import default_data_dir
from timestone.distributed import adistribute, distribute
from timestone.embedders import OpenAICompatibleEmbedder
from timestone.errors import EmbedderError, InvalidInput, LLMError
from timestone.llm import OpenAICompatibleLLM

REF = datetime(2024, 5, 8, tzinfo=UTC)
NOWHERE = "postgresql://nobody@/nowhere?host=/nonexistent-socket-dir"


# -- where: dsn, data_dir, TIMESTONE_DSN, TIMESTONE_DATA_DIR ------------------------------


def test_a_blank_timestone_dsn_counts_as_unset(
    monkeypatch: pytest.MonkeyPatch, data_dir: Path, dsn: str
) -> None:
    """A blank TIMESTONE_DSN given to libpq would connect wherever its defaults point
    (PGHOST, the default socket) and migrate the schema there."""
    monkeypatch.setenv("TIMESTONE_DSN", "   ")
    with timestone.Memory.open(data_dir=data_dir, warm=False) as mem:
        assert mem.dsn == dsn
    monkeypatch.setenv("TIMESTONE_DATA_DIR", str(data_dir))
    with timestone.Memory.open(warm=False) as mem:
        assert mem.dsn == dsn


def test_timestone_dsn_wins_over_a_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dsn: str
) -> None:
    """The deployment's variable points every open at its server, a data dir in the code
    included (the contract: no ``dsn`` and no ``TIMESTONE_DSN``, then the data dir)."""
    monkeypatch.setenv("TIMESTONE_DSN", dsn)
    with timestone.Memory.open(data_dir=tmp_path / "unused", warm=False) as mem:
        assert mem.dsn == dsn
    assert not (tmp_path / "unused").exists()


def test_a_dsn_and_a_data_dir_together_are_refused(tmp_path: Path, dsn: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        timestone.Memory.open(dsn, data_dir=tmp_path / "data", warm=False)
    assert str(caught.value) == (
        "pass dsn= or data_dir=, not both: data_dir is the embedded server's"
    )
    assert not (tmp_path / "data").exists()


def test_whitespace_around_timestone_data_dir_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`` /path`` would be a folder named `` `` in the current directory."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TIMESTONE_DATA_DIR", f" {tmp_path / 'data'}")
    with pytest.raises(InvalidInput) as caught:
        timestone.Memory.open(warm=False)
    assert str(caught.value) == (
        f"TIMESTONE_DATA_DIR begins or ends with whitespace: ' {tmp_path / 'data'}'; remove it"
    )
    assert list(work.iterdir()) == []
    assert not (tmp_path / "data").exists()


def test_a_blank_timestone_data_dir_counts_as_unset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setenv("TIMESTONE_DATA_DIR", "  ")
    assert default_data_dir() == tmp_path / "timestone"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"pool_size": 10**6},
            "pool_size must be at most 100 (Postgres's default max_connections), got 1000000",
        ),
        (
            {"pool_size": 101},
            "pool_size must be at most 100 (Postgres's default max_connections), got 101",
        ),
        ({"infer_cardinality": "no"}, "infer_cardinality must be True or False, got 'no'"),
        ({"pool_timeout": 0}, "pool_timeout must be a number of seconds above 0, got 0"),
        ({"pool_timeout": -1.5}, "pool_timeout must be a number of seconds above 0, got -1.5"),
        (
            {"pool_timeout": float("nan")},
            "pool_timeout must be a number of seconds above 0, got nan",
        ),
        (
            {"pool_timeout": float("inf")},
            "pool_timeout must be a number of seconds above 0, got inf",
        ),
        ({"pool_timeout": "5"}, "pool_timeout must be a number of seconds above 0, got '5'"),
        ({"pool_timeout": True}, "pool_timeout must be a number of seconds above 0, got True"),
    ],
)
def test_bad_arguments_are_refused_before_the_data_dir_is_made(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        timestone.Memory.open(data_dir=tmp_path / "data", warm=False, **kwargs)
    assert str(caught.value) == message
    assert not (tmp_path / "data").exists()


# -- the model's variables ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "TIMESTONE_LLM_MODEL",
            "",
            "TIMESTONE_LLM_MODEL is set but blank: name a model, or unset it for gpt-4.1-mini",
        ),
        (
            "TIMESTONE_LLM_SMALL_MODEL",
            "  ",
            "TIMESTONE_LLM_SMALL_MODEL is set but blank: name a model, or unset it for "
            "gpt-4.1-nano",
        ),
        (
            "OPENAI_BASE_URL",
            "localhost:11434/v1",
            "OPENAI_BASE_URL must be an http:// or https:// URL such as "
            "http://localhost:11434/v1, got 'localhost:11434/v1'",
        ),
        (
            "OPENAI_BASE_URL",
            "ftp://x/v1",
            "OPENAI_BASE_URL must be an http:// or https:// URL such as "
            "http://localhost:11434/v1, got 'ftp://x/v1'",
        ),
        (
            "OPENAI_BASE_URL",
            "not a url",
            "OPENAI_BASE_URL must be an http:// or https:// URL such as "
            "http://localhost:11434/v1, got 'not a url'",
        ),
        (
            "OPENAI_BASE_URL",
            "http://",
            "OPENAI_BASE_URL must be an http:// or https:// URL such as "
            "http://localhost:11434/v1, got 'http://'",
        ),
    ],
)
def test_a_bad_model_variable_is_refused_by_name_before_the_data_dir_is_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv(variable, value)
    with pytest.raises(LLMError) as caught:
        timestone.Memory.open(data_dir=tmp_path / "data", warm=False)
    assert str(caught.value) == message
    assert not (tmp_path / "data").exists()
    if variable == "OPENAI_BASE_URL":
        with pytest.raises(EmbedderError) as refused:
            OpenAICompatibleEmbedder.from_env("nomic-embed-text", 768)
        assert str(refused.value) == message


def test_a_blank_base_url_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "   ")
    assert OpenAICompatibleLLM.from_env() is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = OpenAICompatibleLLM.from_env()
    assert model is not None
    client: Any = model._client  # pyright: ignore[reportPrivateUsage]
    assert str(client.base_url) == "https://api.openai.com/v1/"
    embedder: Any = OpenAICompatibleEmbedder.from_env("text-embedding-3-small", 1536)
    assert str(embedder._client.base_url) == "https://api.openai.com/v1/"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    model = OpenAICompatibleLLM.from_env()
    assert model is not None
    assert (model.model, model.small_model) == ("gpt-4.1-mini", "gpt-4.1-nano")


# -- distribute ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [(None, "NoneType"), (5432, "int"), (b"postgresql://localhost/x", "bytes"), ("", "''")],
)
def test_distribute_refuses_a_dsn_that_is_not_one(dsn: object, shown: str) -> None:
    message = (
        f"dsn must be the connection string (postgresql://...) of a Citus coordinator, got {shown}"
    )
    with pytest.raises(InvalidInput) as caught:
        distribute(cast(Any, dsn))
    assert str(caught.value) == message


async def test_adistribute_refuses_a_blank_dsn() -> None:
    with pytest.raises(InvalidInput) as caught:
        await adistribute("   ")
    assert str(caught.value) == (
        "dsn must be the connection string (postgresql://...) of a Citus coordinator, got '   '"
    )


# -- embedder constructors ----------------------------------------------------------------


def test_an_embedder_dimension_of_another_type_is_refused_showing_its_type() -> None:
    with pytest.raises(EmbedderError) as caught:
        HashEmbedder(cast(Any, "64"))
    assert str(caught.value) == (
        "HashEmbedder dimension must be an integer of at least 2, got '64' (a str)"
    )
    with pytest.raises(EmbedderError) as caught:
        WordLlamaEmbedder(cast(Any, "256"))
    assert str(caught.value) == (
        "WordLlamaEmbedder dimension must be 64, 128 or 256, got '256' (a str)"
    )
    with pytest.raises(EmbedderError) as caught:
        WordLlamaEmbedder(cast(Any, 256.0))
    assert str(caught.value) == (
        "WordLlamaEmbedder dimension must be 64, 128 or 256, got 256.0 (a float)"
    )


# -- after close -------------------------------------------------------------------------


def test_a_closed_memory_says_so_and_writes_nothing(fresh_dsn: str, group: str) -> None:
    mem = timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16), warm=False)
    mem.close()
    calls: list[tuple[str, Any]] = [
        ("searching", lambda: mem.search(group, "tea")),
        (
            "adding facts",
            lambda: mem.add_facts(
                group, [timestone.FactInput("Ada", "KNOWS", "Grace")], reference_time=REF
            ),
        ),
        (
            f"lending a connection bound to group {group!r}",
            lambda: mem.connection(group).__enter__(),
        ),
        ("connecting", lambda: mem.reembed(HashEmbedder(16))),
    ]
    for doing, call in calls:
        with pytest.raises(InvalidInput) as caught:
            call()
        assert str(caught.value) == f"{doing}: this Memory is closed (close() was called on it)"
    mem.close()  # a second close does nothing
    assert sum(row_counts(fresh_dsn, group)) == 0


async def test_a_closed_async_memory_says_so_and_writes_nothing(fresh_dsn: str, group: str) -> None:
    mem = await timestone.AsyncMemory.open(fresh_dsn, embedder=HashEmbedder(16), warm=False)
    await mem.close()
    with pytest.raises(InvalidInput) as caught:
        await mem.search(group, "tea")
    assert str(caught.value) == "searching: this Memory is closed (close() was called on it)"
    facts = [timestone.FactInput("Ada", "KNOWS", "Grace")]
    with pytest.raises(InvalidInput) as caught:
        await mem.add_facts(group, facts, reference_time=REF)
    assert str(caught.value) == "adding facts: this Memory is closed (close() was called on it)"
    assert sum(row_counts(fresh_dsn, group)) == 0


@pytest.mark.parametrize(
    "form",
    [
        "host={folder} dbname=x user=ada password=hunter2",
        "host={folder} dbname=x user=ada password='hunter2'",
        "postgresql://ada:hunter2@/x?host={folder}",
        "postgresql:///x?host={folder}&user=ada&password=hunter2",
        "postgresql://ada:hunter%32@/x?host={folder}",
    ],
)
def test_a_dsn_that_does_not_connect_is_shown_without_its_password(
    tmp_path: Path, form: str
) -> None:
    """Each way libpq takes a password (a keyword, quoted or not, a URI's user info or its
    query, percent-encoded) is masked in the error, the server's own text included."""
    dsn = form.format(folder=tmp_path / "no-server")
    with pytest.raises(timestone.errors.ConnectionFailed) as caught:
        timestone.Memory.open(dsn, warm=False)
    message = str(caught.value)
    assert message.startswith("cannot connect to ")
    assert "***" in message
    assert "hunter" not in message
    assert str(tmp_path / "no-server") in message  # where it tried, still said
