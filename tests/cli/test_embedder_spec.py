"""``--embedder`` specs and stored embedders the command line rebuilds."""

from __future__ import annotations

import json
from typing import Any, cast

import httpx
import openai
import pytest

from timestone.cli._store import embedder_for
from timestone.embedders import HashEmbedder, OpenAICompatibleEmbedder, WordLlamaEmbedder
from timestone.errors import EmbedderError, InvalidInput


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://embeddings.invalid/v1")


def test_openai_spec_takes_model_and_dimension(openai_env: None) -> None:
    chosen = embedder_for("openai:nomic-embed-text:latest:768", None)
    assert isinstance(chosen, OpenAICompatibleEmbedder)
    assert (chosen.name, chosen.dimension) == ("openai/nomic-embed-text:latest", 768)


def test_stored_openai_embedder_is_rebuilt_from_the_environment(openai_env: None) -> None:
    chosen = embedder_for(None, {"name": "openai/text-embedding-3-small", "dimension": 8})
    assert isinstance(chosen, OpenAICompatibleEmbedder)
    assert (chosen.name, chosen.dimension) == ("openai/text-embedding-3-small", 8)


def test_rebuilt_embedder_talks_to_the_configured_server(
    openai_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, str]] = []

    def reply(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), json.loads(request.content)["model"]))
        data = [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]}]
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        return httpx.Response(
            200, json={"object": "list", "data": data, "model": "tiny", "usage": usage}
        )

    real = openai.OpenAI

    def recorded(**kwargs: Any) -> openai.OpenAI:
        client = httpx.Client(transport=httpx.MockTransport(reply))
        return real(http_client=cast(Any, client), **kwargs)

    monkeypatch.setattr(openai, "OpenAI", recorded)
    chosen = embedder_for("openai:tiny:3", None)
    assert chosen.embed(["hello"]) == [[0.1, 0.2, 0.3]]
    assert seen == [("http://embeddings.invalid/v1/embeddings", "tiny")]


def test_openai_embedder_without_a_server_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(EmbedderError, match="OPENAI_API_KEY or OPENAI_BASE_URL"):
        embedder_for("openai:text-embedding-3-small:1536", None)
    with pytest.raises(EmbedderError, match="OPENAI_API_KEY or OPENAI_BASE_URL"):
        embedder_for(None, {"name": "openai/text-embedding-3-small", "dimension": 1536})


@pytest.mark.parametrize(
    "spec", ["openai:text-embedding-3-small", "openai::8", "openai:m:0", "openai:m:x"]
)
def test_malformed_openai_specs_name_the_form(openai_env: None, spec: str) -> None:
    with pytest.raises(InvalidInput, match="openai:MODEL:DIMENSION"):
        embedder_for(spec, None)


def test_local_specs_and_unknown_names() -> None:
    assert isinstance(embedder_for("hash:16", None), HashEmbedder)
    assert embedder_for("hash:16", None).dimension == 16
    assert isinstance(
        embedder_for(None, {"name": "wordllama-l2-supercat", "dimension": 64}), WordLlamaEmbedder
    )
    with pytest.raises(InvalidInput, match="openai:MODEL:DIMENSION"):
        embedder_for("cohere:embed", None)
    with pytest.raises(InvalidInput, match="cannot construct"):
        embedder_for(None, {"name": "custom/thing", "dimension": 8})
