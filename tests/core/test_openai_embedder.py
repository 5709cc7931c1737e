"""OpenAICompatibleEmbedder on the real openai SDK, against an embeddings endpoint that
keeps the API's limits (no network).

The endpoint answers in the exact shape of OpenAI's ``/v1/embeddings`` and refuses, with
OpenAI's own error, an input past the model's context (8,191 tokens, counted here as a
token per four characters) or a request past 300,000 tokens. Its vectors are the
``HashEmbedder``'s of each input, so what a search finds is checkable.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np
import openai
import psycopg
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


# -- answers that are not one vector per text ---------------------------------------------

NAME = "openai/text-embedding-3-small"
TEXTS = ["Ann works at Acme.", "Bob lives in Paris.", "Cleo plays the cello."]


def _base64(vector: list[float]) -> str:
    """A vector as OpenAI sends it when asked for base64 (the SDK asks by default)."""
    return base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode()


def _answer(items: list[dict[str, Any]]) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "object": "list",
            "data": items,
            "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": 8, "total_tokens": 8},
        },
    )


def _scripted(
    answer: Callable[[list[str]], httpx.Response], **options: Any
) -> OpenAICompatibleEmbedder:
    def handler(request: httpx.Request) -> httpx.Response:
        return answer(json.loads(request.content)["input"])

    transport = httpx.MockTransport(handler)
    sync_http: Any = httpx.Client(transport=transport)
    async_http: Any = httpx.AsyncClient(transport=transport)
    return OpenAICompatibleEmbedder(
        model="text-embedding-3-small",
        dimension=16,
        client=openai.OpenAI(api_key="sk-test", http_client=sync_http, max_retries=0),
        async_client=openai.AsyncOpenAI(api_key="sk-test", http_client=async_http, max_retries=0),
        **options,
    )


def _indexed(indexes: Callable[[int], Sequence[object]]) -> Callable[[list[str]], httpx.Response]:
    """An endpoint that sends the texts' vectors in reverse order, the last text's first,
    under the indexes given, in the order they are sent."""

    def answer(inputs: list[str]) -> httpx.Response:
        vectors = HashEmbedder(dimension=16).embed(inputs)[::-1]
        return _answer(
            [
                {"object": "embedding", "index": index, "embedding": _base64(vector)}
                for index, vector in zip(indexes(len(inputs)), vectors, strict=True)
            ]
        )

    return answer


async def _refused_by_both(embedder: OpenAICompatibleEmbedder, texts: list[str]) -> str:
    """The message of both twins' refusal, which must be the same."""
    with pytest.raises(EmbedderError) as blocking:
        embedder.embed(texts)
    with pytest.raises(EmbedderError) as awaited:
        await embedder.aembed(texts)
    assert str(awaited.value) == str(blocking.value)
    return str(blocking.value)


async def test_vectors_are_put_back_in_order_by_their_index() -> None:
    embedder = _scripted(_indexed(lambda n: range(n - 1, -1, -1)))
    expected = HashEmbedder(dimension=16).embed(TEXTS)
    np.testing.assert_allclose(embedder.embed(TEXTS), expected, rtol=1e-6)
    np.testing.assert_allclose(await embedder.aembed(TEXTS), expected, rtol=1e-6)


@pytest.mark.parametrize(
    ("indexes", "shown"),
    [
        ([0, 0, 0], "[0, 0, 0]"),  # every item says index 0
        ([5, 6, 7], "[5, 6, 7]"),  # out of range
        ([2, 1, None], "[2, 1, None]"),  # one item without its index
        (["2", "1", "0"], "['2', '1', '0']"),
        ([2, True, False], "[2, True, False]"),
    ],
)
async def test_indexes_that_are_not_each_text_once_are_refused(
    indexes: list[object], shown: str
) -> None:
    """Each text got the vector of the item whose index named it: with ``[0, 0, 0]`` the
    first text took the first text's vector and the others none; with ``[5, 6, 7]`` the
    vectors were taken in the list's order, the last text's first."""
    embedder = _scripted(_indexed(lambda n: indexes))
    assert await _refused_by_both(embedder, TEXTS) == (
        f"embedder {NAME!r} answered 3 texts with indexes {shown}; expected each of 0 to 2 once"
    )


async def test_each_request_answers_for_its_own_texts() -> None:
    """Two requests of two texts: the first answered one vector and the second three. The
    total was right, so three texts took another text's vector."""

    def answer(inputs: list[str]) -> httpx.Response:
        texts = inputs[:1] if inputs[0] == "t0 alpha" else [*inputs, "one more"]
        vectors = HashEmbedder(dimension=16).embed(texts)
        return _answer(
            [
                {"object": "embedding", "index": i, "embedding": _base64(v)}
                for i, v in enumerate(vectors)
            ]
        )

    embedder = _scripted(answer, batch_size=2)
    assert await _refused_by_both(embedder, ["t0 alpha", "t1 beta", "t2 gamma", "t3 delta"]) == (
        f"embedder {NAME!r} returned 1 vectors for 2 texts (request 1 of 2)"
    )


@pytest.mark.parametrize("missing", [{}, {"index": None}])
async def test_an_answer_without_indexes_is_taken_in_its_order(missing: dict[str, Any]) -> None:
    """A server that sends no ``index`` (and ignores the SDK's request for base64) sends
    the vectors in the texts' order: that order is taken, as documented."""

    def answer(inputs: list[str]) -> httpx.Response:
        vectors = HashEmbedder(dimension=16).embed(inputs)
        return _answer([{"object": "embedding", "embedding": v, **missing} for v in vectors])

    embedder = _scripted(answer)
    expected = HashEmbedder(dimension=16).embed(TEXTS)
    assert embedder.embed(TEXTS) == expected
    assert await embedder.aembed(TEXTS) == expected


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (
            # a proxy that passes the model's error on with status 200
            lambda: httpx.Response(
                200,
                json={
                    "error": {
                        "message": "model 'text-embedding-3-small' is overloaded",
                        "type": "server_error",
                    }
                },
            ),
            f"embedder {NAME!r}: the server answered 200 with an error: "
            "model 'text-embedding-3-small' is overloaded",
        ),
        (
            lambda: httpx.Response(
                200,
                content=b"<html>\n<head><title>502 Bad Gateway</title></head>\n"
                b"<body><center><h1>502 Bad Gateway</h1></center>\n<hr><center>nginx</center>"
                b"\n</body>\n</html>\n",
                headers={"content-type": "text/html; charset=utf-8"},
            ),
            f"embedder {NAME!r}: the server answered 200 with text/html, not an embeddings "
            "list: 502 Bad Gateway 502 Bad Gateway nginx",
        ),
        (lambda: _answer([]), f"embedder {NAME!r} returned 0 vectors for 3 texts"),
    ],
)
async def test_a_200_that_is_not_an_embeddings_list_says_what_the_server_said(
    response: Callable[[], httpx.Response], message: str
) -> None:
    """These were refused with the SDK's own words: "No embedding data received", "'str'
    object has no attribute 'data'"."""
    assert await _refused_by_both(_scripted(lambda inputs: response()), TEXTS) == message


def test_a_bad_answer_writes_nothing(fresh_dsn: str) -> None:
    """Every fact of a call whose vectors came back under index 0 was stored, each with
    another fact's vector."""
    answers = {"good": _indexed(lambda n: range(n - 1, -1, -1)), "bad": _indexed(lambda n: [0] * n)}
    mode = ["good"]
    embedder = _scripted(lambda inputs: answers[mode[0]](inputs))
    facts = [
        FactInput("Ann", "WORKS_AT", "Acme", fact="Ann works at Acme."),
        FactInput("Bob", "LIVES_IN", "Paris", fact="Bob lives in Paris."),
    ]
    with timestone.Memory.open(fresh_dsn, embedder=embedder) as mem:
        mode[0] = "bad"
        with pytest.raises(EmbedderError) as caught:
            mem.add_facts("g", facts, reference_time=REF)
        assert str(caught.value) == (
            f"embedder {NAME!r} answered 3 texts with indexes [0, 0, 0]; expected each of "
            "0 to 2 once"
        )
        with psycopg.connect(fresh_dsn) as conn:
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM timestone.episodes),"
                " (SELECT count(*) FROM timestone.entities),"
                " (SELECT count(*) FROM timestone.facts)"
            ).fetchone()
        assert counts == (0, 0, 0)
        mode[0] = "good"
        mem.add_facts("g", facts, reference_time=REF)
        found = mem.search("g", "Bob lives in Paris", scopes=["facts"], limit=1).facts
        assert [f.fact for f in found] == ["Bob lives in Paris."]
