"""The optional rewrite of a search question (``search(..., rewrite=True)``).

The real ``OpenAICompatibleLLM`` on scripted responses (``chat_completion``, written
by hand in the API's shape), the real embedded Postgres and embedder. A transport
fails its ``check()`` when a scripted answer went unplayed or an unscripted call was
made: a test that expects no call scripts none.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from psycopg import sql

import timestone
from timestone.errors import InvalidInput, RewriteWarning
from timestone.llm import ReplayTransport, chat_completion, replay_llm

STEP = "question_rewrite"
T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
TURNS = [
    "Caroline: I finally adopted a beagle, his name is Bingo!",
    "Melanie: The pottery class was fun, I made a bowl.",
    "Caroline: The support group meeting was long today.",
    "Melanie: We went camping by the lake with the kids.",
    "Caroline: I read a novel about a lighthouse keeper.",
    "Melanie: My painting of a sunset is almost done.",
]
QUESTION = "What did Caroline take home from the shelter?"


def answer(content: Any, **options: Any) -> dict[str, Any]:
    return {
        "step": STEP,
        **chat_completion(content, prompt_tokens=120, completion_tokens=30, **options),
    }


def rewrite(alternatives: list[str], after: str | None = None, before: str | None = None) -> Any:
    return answer({"alternatives": alternatives, "after": after, "before": before})


@pytest.fixture
def transport() -> Iterator[ReplayTransport]:
    t = ReplayTransport()
    yield t
    t.check()


@pytest.fixture
def mem(dsn: str, transport: ReplayTransport) -> Iterator[timestone.Memory]:
    m = timestone.Memory.open(
        dsn, llm=replay_llm(transport, backoff=0.0, max_retries=0), warm=False
    )
    yield m
    m.close()


def told(mem: timestone.Memory, group: str, lines: list[str], at: datetime = T0) -> None:
    """Turns written by a memory with no model (one with a model would extract them)."""
    assert mem.llm is None
    for i, line in enumerate(lines):
        mem.add_document(group, f"turn-{at.date()}-{i}", line, reference_time=at)


def uris(results: timestone.SearchResults) -> list[str]:
    return [e.document_uri or "" for e in results.episodes]


def ledger(mem: timestone.Memory, group: str) -> list[tuple[str, str, int, int, bool]]:
    with mem.connection(group) as conn:
        rows = conn.execute(
            "SELECT step, model, prompt_tokens, completion_tokens, ok FROM timestone.llm_ledger"
            " ORDER BY created_at"
        ).fetchall()
    return [
        (r["step"], r["model"], r["prompt_tokens"], r["completion_tokens"], r["ok"]) for r in rows
    ]


def rows_held(mem: timestone.Memory, group: str) -> tuple[int, ...]:
    """Every row of the group outside the ledger: a search writes none."""
    with mem.connection(group) as conn:
        counts = [
            conn.execute(
                sql.SQL("SELECT count(*) AS n FROM timestone.{}").format(sql.Identifier(table))
            ).fetchone()
            for table in ("episodes", "facts", "entities", "mentions", "communities")
        ]
    return tuple(int(c["n"]) for c in counts if c is not None)


def search(mem: timestone.Memory, group: str, question: str = QUESTION, **options: Any) -> Any:
    return mem.search(group, question, scopes=("episodes",), valid_at=None, limit=1, **options)


def test_the_phrasings_find_what_the_question_alone_misses(
    mem: timestone.Memory, memory: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    told(memory, group, TURNS)
    plain = uris(search(mem, group))
    assert plain != [f"turn-{T0.date()}-0"]  # the question's words are not the turn's
    transport.extend([rewrite(["Caroline adopted a dog", "Caroline's new pet beagle"])])
    before = rows_held(mem, group)
    found = search(mem, group, rewrite=True)
    assert uris(found) == [f"turn-{T0.date()}-0"]
    assert found.query == QUESTION
    # one small call, the question and the reference moment in it
    [sent] = transport.requests
    assert sent["model"] == "gpt-4.1-nano"
    assert sent["response_format"]["json_schema"]["name"] == STEP
    user = sent["messages"][-1]["content"]
    assert QUESTION in user
    assert f"Reference moment: {datetime.now(UTC).date()}" in user
    assert ledger(mem, group) == [("question rewrite", "gpt-4.1-mini-2025-04-14", 120, 30, True)]
    assert rows_held(mem, group) == before
    assert mem.llm_usage(group).calls == 1


def test_the_reference_moment_is_valid_at(
    mem: timestone.Memory, memory: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    told(memory, group, TURNS)
    transport.extend([rewrite([])])
    at = datetime(2023, 6, 1, tzinfo=UTC)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an answer with no phrasing is no failure
        found = mem.search(group, QUESTION, scopes=("episodes",), valid_at=at, rewrite=True)
    assert "Reference moment: 2023-06-01" in transport.requests[0]["messages"][-1]["content"]
    plain = mem.search(group, QUESTION, scopes=("episodes",), valid_at=at)
    assert uris(found) == uris(plain)


def test_a_window_from_the_model_favours_what_was_told_then(
    mem: timestone.Memory, memory: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    """The same words told in two months; the question names neither, the model's window
    names May, and May's turn leads (written second, it would not lead otherwise)."""
    may, june = datetime(2023, 5, 20, tzinfo=UTC), datetime(2023, 6, 20, tzinfo=UTC)
    told(memory, group, ["Maria: we volunteered at the shelter today."], at=june)
    told(memory, group, ["Maria: we volunteered at the shelter today."], at=may)
    question = "Where did Maria volunteer around her birthday?"
    assert search(mem, group, question).episodes[0].reference_time == june
    transport.extend([rewrite([], after="2023-05-01", before="2023-06-01")])
    assert search(mem, group, question, rewrite=True).episodes[0].reference_time == may


BAD_ANSWERS: list[tuple[str, dict[str, Any], bool, str]] = [
    ("not JSON", answer("Sure! Here are some phrasings: ..."), True, "malformed"),
    ("wrong shape", answer({"phrasings": ["a dog"]}), True, "malformed"),
    (
        "too many",
        rewrite(["a", "b", "c", "d"]),
        True,
        "4 alternatives, at most 3",
    ),
    ("one end", rewrite(["a dog"], after="2023-05-01"), True, "a window with one end"),
    (
        "backwards",
        rewrite(["a dog"], after="2023-06-01", before="2023-05-01"),
        True,
        "ends (2023-05-01) before it starts",
    ),
    # valid ISO dates that UTC cannot hold (the offset carries them past year 9999)
    (
        "past what UTC holds",
        rewrite(["a dog"], after="2023-05-01", before="9999-12-31T23:00:00-05:00"),
        True,
        "a window past the years 1 to 9999 in UTC",
    ),
    # a year as a number is no date: lax validation would read it as seconds since 1970
    (
        "a year as a number",
        rewrite(["a dog"], after=2023, before="2023-12-31"),  # type: ignore[arg-type]
        True,
        "2023 is a number, not a date",
    ),
    ("refused", answer(None, refusal="I can't help with that."), True, "refused"),
    ("cut off", answer('{"alternatives": ["a d', finish_reason="length"), True, "cut off"),
    ("filtered", answer(None, finish_reason="content_filter"), True, "content filter"),
    (
        "server error",
        {
            "step": STEP,
            "status": 400,
            "body": {"error": {"message": "bad request", "type": "invalid_request_error"}},
        },
        False,
        "answered 400",
    ),
]


@pytest.mark.parametrize(
    ("reply", "counted", "why"),
    [case[1:] for case in BAD_ANSWERS],
    ids=[case[0] for case in BAD_ANSWERS],
)
def test_a_failed_answer_falls_back_to_the_plain_search(
    mem: timestone.Memory,
    memory: timestone.Memory,
    transport: ReplayTransport,
    group: str,
    reply: dict[str, Any],
    counted: bool,
    why: str,
) -> None:
    told(memory, group, TURNS)
    plain = uris(search(mem, group))
    before = rows_held(mem, group)
    transport.extend([reply])
    with pytest.warns(RewriteWarning, match=re.escape(why)) as caught:
        found = search(mem, group, rewrite=True)
    assert "searched the question alone" in str(caught[0].message)
    assert caught[0].filename == __file__  # the warning points at the caller
    assert uris(found) == plain
    assert len(transport.requests) == 1  # not asked again: a search waits on it
    # the answer the model gave is in the ledger, unused; nothing else was written
    expected = [("question rewrite", "gpt-4.1-mini-2025-04-14", 120, 30, False)]
    assert ledger(mem, group) == (expected if counted else [])
    assert rows_held(mem, group) == before


def test_a_spent_budget_makes_no_call(
    mem: timestone.Memory, memory: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    told(memory, group, TURNS)
    mem.set_llm_budget(group, max_calls=0)
    with pytest.warns(RewriteWarning, match="budget of 0 calls"):
        found = search(mem, group, rewrite=True)
    assert uris(found) == uris(search(mem, group))
    assert transport.requests == []
    assert ledger(mem, group) == []


def test_without_a_model_the_rewrite_is_a_plain_search(
    memory: timestone.Memory, group: str
) -> None:
    assert memory.llm is None
    told(memory, group, TURNS)
    with pytest.warns(RewriteWarning, match="no LLM is configured"):
        found = search(memory, group, rewrite=True)
    assert uris(found) == uris(search(memory, group))
    assert ledger(memory, group) == []


def test_rewrite_must_be_a_bool(memory: timestone.Memory, group: str) -> None:
    with pytest.raises(InvalidInput, match="rewrite must be True or False"):
        search(memory, group, rewrite="yes")


async def test_the_async_memory_rewrites_alike(
    dsn: str, amemory: timestone.AsyncMemory, group: str
) -> None:
    transport = ReplayTransport([rewrite(["Caroline adopted a dog"])])
    for i, line in enumerate(TURNS):
        await amemory.add_document(group, f"turn-{i}", line, reference_time=T0)
    amem = await timestone.AsyncMemory.open(dsn, llm=replay_llm(transport), warm=False)
    try:
        found = await amem.search(
            group, QUESTION, scopes=("episodes",), valid_at=None, limit=1, rewrite=True
        )
        assert [e.document_uri for e in found.episodes] == ["turn-0"]
        usage = await amem.llm_usage(group)
        assert (usage.calls, usage.tokens) == (1, 150)
    finally:
        await amem.close()
    transport.check()
