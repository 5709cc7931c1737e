"""The whole pipeline against the real model: the invariants that hold whatever it says.

A 135M model extracts poorly: these tests do not grade what it extracts (that is
``bench/extraction.py``), they pin what the library does with any answer. For each
hand-written episode (text, messages, JSON): no crash; either the episode is written or
``add_episode`` fails with an ``LLMError`` (``UnusableAnswer`` included) and nothing of
it is written; every entity written occurs in the episode's text after name
normalization; the ledger counts exactly the calls and tokens the server reported;
the requests are bounded; every answer the server finished fits the schema sent.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import openai
import pytest
from _invariants import (
    LOCAL_PORTS,
    MAX_REQUESTS,
    Episode,
    Outcome,
    entity_names,
    ingest,
    ledger,
    load_episodes,
    rows,
    ungrounded,
)

import timestone
from timestone.errors import BudgetExceeded, UnusableAnswer
from timestone.extract import _prompts as P
from timestone.extract._answers import loads
from tools.model.build import ensure_built
from tools.model.client import MakeLLM, Recorder
from tools.model.server import Server

EPISODES = load_episodes()
# every answer is capped: a small model can otherwise go on until the context is full
MAX_TOKENS = 512


def check_ledger(mem: timestone.Memory, group: str, recorder: Recorder) -> None:
    """The ledger holds one row per answer the server gave, with the server's own tokens."""
    spent = ledger(mem, group)
    assert len(spent) == len(recorder.answered)
    assert (sum(r[1] for r in spent), sum(r[2] for r in spent)) == recorder.tokens()
    usage = mem.llm_usage(group)
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (
        len(spent),
        *recorder.tokens(),
    )


def check_answers_fit_the_schema(recorder: Recorder) -> None:
    """Every extraction answer the server finished (``stop``) validates: the schema the
    library sent constrained it."""
    for exchange in recorder.answered:
        choice = exchange.body["choices"][0]
        if choice["finish_reason"] != "stop":
            continue
        system = exchange.request["messages"][0]["content"]
        if "You extract a knowledge graph" in system:
            P.Extraction.model_validate(loads(choice["message"]["content"]))


def extracted_facts(recorder: Recorder) -> int:
    """How many facts the last extraction answer the library could read stated."""
    stated = 0
    for exchange in recorder.answered:
        system = exchange.request["messages"][0]["content"]
        if "You extract a knowledge graph" not in system:
            continue
        try:
            answer = P.Extraction.model_validate(
                loads(exchange.body["choices"][0]["message"]["content"])
            )
        except ValueError:  # pydantic's ValidationError is a ValueError
            continue
        stated = len(answer.facts)
    return stated


def check_episode(
    mem: timestone.Memory, group: str, episode: Episode, outcome: Outcome, recorder: Recorder
) -> None:
    """What must hold after ``episode`` went through the pipeline, whatever the model said.

    The server answered (a request that never reached a model, or timed out, says
    nothing of what the library does with an answer); the episode is written with its
    facts, or ``add_episode`` failed with an ``LLMError`` about the answers and wrote
    nothing; every fact the model stated is written or dropped with a warning; every
    entity written is grounded; the ledger is the server's count; the requests are
    bounded; every finished extraction answer fits the schema sent.
    """
    assert recorder.answered, (
        f"the model server answered none of {len(recorder.exchanges)} requests: {outcome.error}"
    )
    written = rows(mem, group)
    if outcome.error is not None:
        assert not isinstance(outcome.error.__cause__, openai.APIConnectionError), (
            f"the model server failed, not its answer: {outcome.error}"
        )
        assert outcome.error.step is not None
        assert written == dict.fromkeys(written, 0), f"{outcome.error} but rows: {written}"
    else:
        assert outcome.result is not None
        assert written["episodes"] == 1
        assert bool(written["facts"]) == bool(outcome.result.facts)
        if not outcome.result.facts:
            # nothing lost in silence: each fact the model stated was dropped with a
            # warning saying why ("fact '...' names ..., which is not an extracted entity")
            stated = extracted_facts(recorder)
            warned = sum(w.startswith("fact ") for w in outcome.warnings)
            assert warned >= stated, (
                f"the model stated {stated} facts, none was written and {warned} warned of"
            )
    names = entity_names(mem, group)
    assert ungrounded(names, episode.content) == []
    check_ledger(mem, group, recorder)
    assert len(recorder.exchanges) <= MAX_REQUESTS
    asked = Counter(
        e.request["messages"][0]["content"][:40] for e in recorder.exchanges if e.status == 200
    )
    assert max(asked.values(), default=0) <= 3  # one step asked at most 1 + 2 times
    check_answers_fit_the_schema(recorder)


@pytest.mark.timeout(900)  # up to ten calls to a model on a shared CPU
@pytest.mark.parametrize("episode", EPISODES, ids=[e.id for e in EPISODES])
def test_episode_holds_the_invariants(
    mem: timestone.Memory, make_llm: MakeLLM, group: str, episode: Episode
) -> None:
    llm, recorder = make_llm(max_tokens=MAX_TOKENS)
    mem.llm = llm
    outcome = ingest(mem, group, episode)
    check_episode(mem, group, episode, outcome, recorder)


def test_the_invariants_fail_on_a_stopped_server(
    mem: timestone.Memory, open_llm: MakeLLM, group: str
) -> None:
    """A stopped server makes ``add_episode`` fail cleanly, and nothing is written: the
    episode check must still fail, since no answer of a model was put to the test."""
    stopped = Server(ensure_built())
    stopped.start()
    stopped.stop()
    LOCAL_PORTS.add(stopped.port)
    llm, recorder = open_llm(stopped.base_url, stopped.model, max_retries=1, backoff=0.01)
    mem.llm = llm
    outcome = ingest(mem, group, EPISODES[0])
    assert outcome.error is not None
    with pytest.raises(AssertionError, match="answered none of 2 requests"):
        check_episode(mem, group, EPISODES[0], outcome, recorder)
    recorder.exchanges[0].status = 200  # even were one answered, the error is the server's
    with pytest.raises(AssertionError, match="the model server failed, not its answer"):
        check_episode(mem, group, EPISODES[0], outcome, recorder)


def test_the_date_fight_never_asks_the_model(
    mem: timestone.Memory, make_llm: MakeLLM, group: str
) -> None:
    """A relation of cardinality one is a slot: whatever the model extracts of it, the date
    fight settles it and no fact resolution call is made."""
    onto = timestone.Ontology(
        entity_types=[timestone.EntityType("Person"), timestone.EntityType("Organization")],
        edge_types=[timestone.EdgeType("WORKS_AT", cardinality="one")],
        closed=True,  # the schema's enum holds the model to WORKS_AT
    )
    llm, recorder = make_llm(max_tokens=MAX_TOKENS)
    start = datetime(2015, 10, 1, tzinfo=UTC)
    with timestone.Memory.open(mem.dsn, ontology=onto, llm=llm) as own:
        own.add_facts(
            group,
            [{"source": "Mira Sol", "relation": "WORKS_AT", "target": "Chateau Nord"}],
            reference_time=start,
        )
        assert recorder.exchanges == []  # a declared relation is never asked about
        second = Episode(
            "moved",
            "text",
            "Mira Sol left Chateau Nord and now works at Chateau Sud.",
            start + timedelta(days=3000),
            [],
        )
        outcome = ingest(own, group, second)
    steps = {step for step, *_ in ledger(mem, group)}
    assert "extraction" in steps, f"the model was never asked: {outcome.error}"
    assert "fact resolution" not in steps
    assert steps <= {"extraction", "entity resolution"}
    if outcome.result is not None:
        assert {f.relation for f in outcome.result.facts} <= {"WORKS_AT"}
    check_ledger(mem, group, recorder)


def test_the_budget_holds(mem: timestone.Memory, make_llm: MakeLLM, group: str) -> None:
    """One call allowed: the episode makes at most one, or fails before the second and
    writes nothing; a token budget below the prompt's size makes no call at all."""
    episode = EPISODES[1]
    llm, recorder = make_llm(max_tokens=MAX_TOKENS)
    mem.llm = llm
    mem.set_llm_budget(group, max_calls=1, period=timedelta(days=1))
    outcome = ingest(mem, group, episode)
    # the one call allowed is made and answered; a second step, if any, is refused
    assert mem.llm_usage(group).calls == 1
    assert len(recorder.answered) == 1
    # before it, at most the one json_schema request this server refuses
    assert [e.status for e in recorder.exchanges] in ([200], [500, 200])
    if outcome.error is not None:
        assert isinstance(outcome.error, (BudgetExceeded, UnusableAnswer)), outcome.error
        assert rows(mem, group)["episodes"] == 0
    check_ledger(mem, group, recorder)

    other = group + "-tokens"
    recorder.clear()
    mem.set_llm_budget(other, max_tokens=50, period=timedelta(days=1))
    refused = ingest(mem, other, episode)
    assert isinstance(refused.error, BudgetExceeded)
    assert recorder.exchanges == []  # refused before the call
    assert rows(mem, other) == dict.fromkeys(rows(mem, other), 0)
