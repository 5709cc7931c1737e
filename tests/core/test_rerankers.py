"""What a search does with a cross-encoder's scores: one finite number per passage is
taken, anything else is refused with a ``RerankerError`` naming the reranker and what it
returned, and the search returns nothing.

The user's cross-encoders here return what real ones have been seen to return: a numpy
array, a label per passage, NaN where the model could not score, a dict of index to
score. ``HTTPReranker`` talks to a ``/rerank`` endpoint scripted on ``httpx.MockTransport``
in the shape of vLLM's and TEI's answers, mistakes included.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import cast

import httpx
import numpy as np
import pytest

import timestone
from timestone import FactInput, HTTPReranker
from timestone.errors import RerankerError

REF = datetime(2024, 1, 1, tzinfo=UTC)
QUERY = "who works at which company"


class Scripted:
    """A user's cross-encoder whose answer is scripted per batch of passages."""

    name = "my-cross-encoder"

    def __init__(self, answer: Callable[[Sequence[str]], object]) -> None:
        self.answer = answer
        self.passages: list[str] = []

    def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        self.passages = list(passages)
        return cast(list[float], self.answer(passages))

    async def arerank(self, query: str, passages: Sequence[str]) -> list[float]:
        return self.rerank(query, passages)


def _seed(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(
        group,
        [
            FactInput(
                f"Person {i}", "WORKS_AT", f"Company {i}", fact=f"Person {i} works at Company {i}."
            )
            for i in range(6)
        ],
        reference_time=REF,
    )


def _nan_every_other(passages: Sequence[str]) -> list[float]:
    return [float("nan") if i % 2 == 0 else float(i) for i in range(len(passages))]


BAD_ANSWERS: list[tuple[str, Callable[[Sequence[str]], object], str]] = [
    # NaN keys left the results in no order, the best passage cut, and NaN scores returned
    ("NaN", _nan_every_other, "returned NaN for passage 0, not a finite score"),
    (
        "infinity",
        lambda p: [float("-inf")] * len(p),
        "returned -infinity for passage 0, not a finite score",
    ),
    # the dict's keys were taken as the scores
    (
        "dict",
        lambda p: {i: i / 10 for i in range(len(p))},
        "returned dict, not one number per passage",
    ),
    ("labels", lambda p: ["relevant"] * len(p), "returned 'relevant' for passage 0, not a number"),
    ("None each", lambda p: [None] * len(p), "returned None for passage 0, not a number"),
    ("generator", lambda p: (0.5 for _ in p), "returned generator, not one number per passage"),
    (
        "column",
        lambda p: np.ones((len(p), 1), dtype=np.float32),
        "returned an array of shape (6, 1), not one number per passage",
    ),
    ("None", lambda p: None, "returned None, not one number per passage"),
    ("a string", lambda p: "0.5", "returned str, not one number per passage"),
]


@pytest.mark.parametrize(
    ("answer", "message"), [(a, m) for _, a, m in BAD_ANSWERS], ids=[w for w, _, _ in BAD_ANSWERS]
)
def test_a_cross_encoders_bad_scores_are_refused_by_name(
    memory: timestone.Memory,
    group: str,
    answer: Callable[[Sequence[str]], object],
    message: str,
) -> None:
    _seed(memory, group)
    reranker = Scripted(answer)
    with pytest.raises(RerankerError) as caught:
        memory.search(group, QUERY, scopes=["facts"], limit=4, reranker=reranker)
    assert str(caught.value) == f"reranker 'my-cross-encoder' {message}"
    assert len(reranker.passages) == 6  # it was asked: the refusal is of its answer


async def test_the_async_twin_refuses_them_too(amemory: timestone.AsyncMemory, group: str) -> None:
    await amemory.add_facts(
        group,
        [FactInput(f"Person {i}", "WORKS_AT", f"Company {i}") for i in range(3)],
        reference_time=REF,
    )
    with pytest.raises(RerankerError) as caught:
        await amemory.search(group, QUERY, scopes=["facts"], reranker=Scripted(_nan_every_other))
    assert str(caught.value) == (
        "reranker 'my-cross-encoder' returned NaN for passage 0, not a finite score"
    )


GOOD_ANSWERS: list[Callable[[Sequence[str]], object]] = [
    lambda p: [float(len(q)) for q in p],
    lambda p: tuple(len(q) for q in p),  # integers
    lambda p: np.array([len(q) for q in p], dtype=np.float32),  # as sentence-transformers
]


@pytest.mark.parametrize("answer", GOOD_ANSWERS, ids=["list", "tuple of ints", "numpy array"])
def test_scores_as_a_sequence_or_an_array_order_the_results(
    memory: timestone.Memory, group: str, answer: Callable[[Sequence[str]], object]
) -> None:
    memory.add_facts(
        group,
        [
            FactInput("Ann", "WORKS_AT", "Acme", fact="Ann works at Acme."),
            FactInput("Bob", "WORKS_AT", "Initech", fact="Bob works at Initech in Berlin."),
            FactInput("Cy", "WORKS_AT", "Hooli", fact="Cy works at Hooli in Palo Alto, CA."),
        ],
        reference_time=REF,
    )
    found = memory.search(group, QUERY, scopes=["facts"], limit=2, reranker=Scripted(answer))
    assert [f.fact for f in found.facts] == [
        "Cy works at Hooli in Palo Alto, CA.",
        "Bob works at Initech in Berlin.",
    ]
    assert [f.score for f in found.facts] == [35.0, 31.0]


def test_check_scores_takes_numbers_only() -> None:
    from timestone.rerankers import check_scores

    assert check_scores("x", [1, 0.5, True], 3) == [1.0, 0.5, 1.0]
    assert check_scores("x", np.array([0.25, 0.5]), 2) == [0.25, 0.5]
    for scores, message in [
        ([10**400], "returned infinity for passage 0, not a finite score"),
        (np.array(0.5), "returned an array of shape (), not one number per passage"),
        (np.array(["0.5"]), "returned '0.5' for passage 0, not a number"),
        ([0.5, 0.5], "returned 2 scores for 1 passages"),
    ]:
        with pytest.raises(RerankerError) as caught:
            check_scores("x", scores, 1)
        assert str(caught.value) == f"reranker 'x' {message}"


# -- HTTPReranker ---------------------------------------------------------------------


def _http(answer: Callable[[list[str]], httpx.Response]) -> HTTPReranker:
    def handler(request: httpx.Request) -> httpx.Response:
        return answer(json.loads(request.content)["documents"])

    return HTTPReranker(
        "bge-reranker",
        base_url="http://127.0.0.1:9/v1",
        transport=httpx.MockTransport(handler),
        async_transport=httpx.MockTransport(handler),
    )


def _results(scores: list[str]) -> httpx.Response:
    """A /rerank answer written as JSON text, so that a score may be the ``NaN`` or
    ``1e999`` that some servers' encoders emit."""
    results = ", ".join(f'{{"index": {i}, "relevance_score": {s}}}' for i, s in enumerate(scores))
    return httpx.Response(
        200,
        content=f'{{"id": "rerank-1", "model": "bge-reranker", "results": [{results}]}}'.encode(),
        headers={"content-type": "application/json"},
    )


HTTP_ANSWERS: list[tuple[Callable[[list[str]], httpx.Response], str]] = [
    (
        lambda docs: _results(["NaN"] + [str(i / 10) for i in range(1, len(docs))]),
        "returned NaN for passage 0, not a finite score",
    ),
    (
        lambda docs: _results(["0.5", "1e999"] + ["0.1"] * (len(docs) - 2)),
        "returned infinity for passage 1, not a finite score",
    ),
    (
        # the body cut short
        lambda docs: httpx.Response(200, content=b'{"results": [{"index": 0, "relevance_sc'),
        "answered 200 with a body that is not JSON (no content type): "
        '{"results": [{"index": 0, "relevance_sc',
    ),
    (
        # a proxy's page in place of the answer
        lambda docs: httpx.Response(
            200,
            content=b"<html><head><title>502 Bad Gateway</title></head>"
            b"<body><h1>502 Bad Gateway</h1></body></html>",
            headers={"content-type": "text/html"},
        ),
        "answered 200 with a body that is not JSON (text/html): 502 Bad Gateway 502 Bad Gateway",
    ),
    (
        lambda docs: httpx.Response(200, content=b""),
        "answered 200 with a body that is not JSON (no content type): (an empty body)",
    ),
]


@pytest.mark.parametrize(
    ("answer", "message"),
    HTTP_ANSWERS,
    ids=["NaN", "1e999", "cut short", "HTML", "empty"],
)
async def test_http_rerankers_bad_answer_is_a_reranker_error(
    memory: timestone.Memory,
    group: str,
    answer: Callable[[list[str]], httpx.Response],
    message: str,
) -> None:
    _seed(memory, group)
    reranker = _http(answer)
    passages = ["Person 0 works at Company 0.", "Person 1 works at Company 1.", "Person 2."]
    for call in (
        lambda: memory.search(group, QUERY, scopes=["facts"], limit=4, reranker=reranker),
        lambda: reranker.rerank(QUERY, passages),
    ):
        with pytest.raises(RerankerError) as caught:
            call()
        assert str(caught.value) == f"reranker 'bge-reranker' {message}"
    with pytest.raises(RerankerError) as caught:
        await reranker.arerank(QUERY, passages)
    assert str(caught.value) == f"reranker 'bge-reranker' {message}"


class _GoneAway(Exception):
    """What a cross-encoder served over the network raises when its server restarts."""


def _server_gone(passages: Sequence[str]) -> object:
    raise _GoneAway("Server disconnected without sending a response.\nretry later")


def test_a_cross_encoder_that_raises_is_a_reranker_error(
    memory: timestone.Memory, group: str
) -> None:
    """A caller that catches Timestone's errors catches this one too; what the
    cross-encoder raised stays its cause."""
    _seed(memory, group)
    with pytest.raises(RerankerError) as caught:
        memory.search(group, QUERY, scopes=["facts"], reranker=Scripted(_server_gone))
    assert str(caught.value) == (
        "reranker 'my-cross-encoder' failed: _GoneAway: Server disconnected without "
        "sending a response."
    )
    assert isinstance(caught.value.__cause__, _GoneAway)


async def test_an_async_cross_encoder_that_raises_is_a_reranker_error(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    await amemory.add_facts(group, [FactInput("Ann", "WORKS_AT", "Acme")], reference_time=REF)
    with pytest.raises(RerankerError, match="failed: _GoneAway") as caught:
        await amemory.search(group, "Ann", scopes=["facts"], reranker=Scripted(_server_gone))
    assert isinstance(caught.value.__cause__, _GoneAway)
