"""OpenAICompatibleEmbedder on the real openai SDK, against an embeddings endpoint that
keeps the API's limits (no network).

The endpoint answers in the exact shape of OpenAI's ``/v1/embeddings`` and refuses, with
OpenAI's own error, an input past the model's context (8,191 tokens, counted here as a
token per four characters) or a request past 300,000 tokens. Its vectors are the
``HashEmbedder``'s of each input, so what a search finds is checkable.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import openai
import pytest

import timestone
from timestone import FactInput, HashEmbedder
from timestone.embedders import OpenAICompatibleEmbedder
from timestone.errors import EmbedderError, InvalidInput

REF = datetime(2024, 1, 1, tzinfo=UTC)
CONTEXT_TOKENS = 8_191
REQUEST_TOKENS = 300_000


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class Endpoint:
    """The embeddings endpoint: what it was sent, and its answers."""

    def __init__(self, dimension: int = 64) -> None:
        self.vectors = HashEmbedder(dimension=dimension)
        self.requests: list[list[str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/embeddings")
        body: dict[str, Any] = json.loads(request.content)
        inputs: list[str] = body["input"]
        self.requests.append(inputs)
        longest = max(inputs, key=_tokens)
        if _tokens(longest) > CONTEXT_TOKENS:
            return _refusal(
                f"This model's maximum context length is {CONTEXT_TOKENS + 1} tokens, however "
                f"you requested {_tokens(longest)} tokens ({_tokens(longest)} in your prompt; "
                "0 for the completion). Please reduce your prompt; or completion length."
            )
        total = sum(_tokens(t) for t in inputs)
        if total > REQUEST_TOKENS:
            return _refusal(f"Requested {total} tokens, max {REQUEST_TOKENS} tokens per request")
        data = [
            {"object": "embedding", "index": i, "embedding": v}
            for i, v in enumerate(self.vectors.embed(inputs))
        ]
        data.reverse()  # the API does not promise the order: the index says it
        return httpx.Response(
            200,
            json={
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": total, "total_tokens": total},
            },
        )


def _refusal(message: str) -> httpx.Response:
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return httpx.Response(400, json={"error": error})


def _embedder(endpoint: Endpoint, **options: Any) -> OpenAICompatibleEmbedder:
    transport = httpx.MockTransport(endpoint)
    # the SDK takes an httpx client; its stubs name another httpx's types
    sync_http: Any = httpx.Client(transport=transport)
    async_http: Any = httpx.AsyncClient(transport=transport)
    return OpenAICompatibleEmbedder(
        model="text-embedding-3-small",
        dimension=endpoint.vectors.dimension,
        client=openai.OpenAI(api_key="sk-test", http_client=sync_http),
        async_client=openai.AsyncOpenAI(api_key="sk-test", http_client=async_http),
        **options,
    )


def _facts(n: int) -> list[FactInput]:
    return [
        FactInput(
            f"Person {i:04d}",
            "WORKS_AT",
            f"Company {i % 37:02d}",
            fact=f"Person {i:04d} works at Company {i % 37:02d} as its engineer {i}.",
        )
        for i in range(n)
    ]


def test_a_large_call_fits_the_endpoints_limits(fresh_dsn: str) -> None:
    """1,000 facts in one call: their episode (every sentence, 52,889 characters, over
    13,000 tokens) was sent whole and refused by the endpoint; each text now goes as its
    first 8,000 characters, in requests within the endpoint's total."""
    endpoint = Endpoint()
    with timestone.Memory.open(fresh_dsn, embedder=_embedder(endpoint)) as mem:
        res = mem.add_facts("g", _facts(1000), reference_time=REF)
        assert len(res.facts) == 1000
        sent = [t for r in endpoint.requests for t in r]
        assert max(map(len, sent)) == 8_000  # the episode's text, cut
        assert len(res.episode.content) > 50_000  # stored whole
        assert all(len(r) <= 256 for r in endpoint.requests)
        found = mem.search("g", "Person 0421 works at Company 14", limit=3).facts
        assert found[0].fact == "Person 0421 works at Company 14 as its engineer 421."


async def test_the_async_twin_cuts_and_groups_the_same_way() -> None:
    endpoint = Endpoint()
    embedder = _embedder(endpoint, batch_size=3, max_chars=10, max_request_chars=25)
    texts = ["a" * 30, "b" * 5, "c" * 12, "d", "e", "f"]
    got = await embedder.aembed(texts)
    assert endpoint.requests == [["a" * 10, "b" * 5, "c" * 10], ["d", "e", "f"]]
    assert got == HashEmbedder(dimension=64).embed(["a" * 10, "b" * 5, "c" * 10, "d", "e", "f"])
    embedder.embed(texts)
    assert endpoint.requests[2:] == endpoint.requests[:2]


def test_a_refusal_names_the_cut_it_was_sent_with() -> None:
    """A text of many tokens per character can still pass the context: the error says
    how long the texts were cut, and which setting to lower."""
    endpoint = Endpoint()
    embedder = _embedder(endpoint, max_chars=40_000)
    with pytest.raises(
        EmbedderError,
        match=r"maximum context length .* first 40,000 "
        r"characters: lower max_chars",
    ):
        embedder.embed(["word " * 8_000])


@pytest.mark.parametrize("option", ["batch_size", "max_chars", "max_request_chars"])
@pytest.mark.parametrize("value", [0, -1, True, "8000"])
def test_bad_limits_are_refused(option: str, value: object) -> None:
    with pytest.raises(InvalidInput, match=f"{option} must be a positive integer"):
        _embedder(Endpoint(), **{option: value})
