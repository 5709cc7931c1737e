"""Answers a model really gives, read for what they say: a boolean where a number goes, a
message content that is not text, a ``usage`` block whose counts are no counts.

The real ``OpenAICompatibleLLM`` reads scripted chat completions (written by hand in the
API's shape) in JSON mode, where the server enforces no schema; the graph is the real
embedded Postgres. A test fails when a scripted response goes unplayed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from llm_rows import ledger, spent, stored

import timestone
from timestone.errors import LLMError, UnusableAnswer
from timestone.llm import ReplayTransport, chat_completion, replay_llm

ONTOLOGY = timestone.Ontology(
    entity_types=[
        timestone.EntityType("Person"),
        timestone.EntityType("Organization"),
        timestone.EntityType("Place"),
    ]
)


def at(year: int, month: int = 1, day: int = 1) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


@pytest.fixture(scope="module")
def module_mem(dsn: str) -> Iterator[timestone.Memory]:
    m = timestone.Memory.open(dsn, ontology=ONTOLOGY, infer_cardinality=False)
    yield m
    m.close()


@pytest.fixture
def replay(module_mem: timestone.Memory) -> Iterator[ReplayTransport]:
    """The scripted server, in JSON mode (a local server, or the fallback for one without
    structured outputs); unplayed responses fail the test."""
    t = ReplayTransport()
    module_mem.llm = replay_llm(t, json_mode="json", backoff=0.0)
    yield t
    module_mem.llm = None
    t.check()


@pytest.fixture
def mem(module_mem: timestone.Memory, replay: ReplayTransport) -> timestone.Memory:
    return module_mem


def extraction(person: str, target: str, relation: str, fact: str, when: str) -> dict[str, Any]:
    kind = "Place" if relation == "LIVES_IN" else "Entity"
    return {
        "step": "extraction",
        "body": chat_completion(
            {
                "entities": [
                    {"name": person, "type": "Person", "attributes": []},
                    {"name": target, "type": kind, "attributes": []},
                ],
                "facts": [
                    {
                        "source": person,
                        "relation": relation,
                        "target": target,
                        "fact": fact,
                        "valid_at": when,
                        "invalid_at": None,
                        "attributes": [],
                    }
                ],
            },
            prompt_tokens=812,
            completion_tokens=74,
        ),
    }


def answer(step: str, text: str) -> dict[str, Any]:
    """An answer as a model in JSON mode writes it (raw text: ``false`` where it means no)."""
    return {"step": step, "body": chat_completion(text, prompt_tokens=655, completion_tokens=21)}


TEA = extraction("Ada", "Tea", "LIKES", "Ada likes tea.", "2020-01-01T00:00:00Z")
COFFEE = extraction("Ada", "Coffee", "LIKES", "Ada likes coffee.", "2024-03-01T00:00:00Z")
KATHERINE = extraction(
    "Katherine Johansson",
    "Gothenburg",
    "LIVES_IN",
    "Katherine Johansson lives in Gothenburg.",
    "2018-01-01T00:00:00Z",
)
KATHY = extraction(
    "Kathy Johansson",
    "Stockholm",
    "LIVES_IN",
    "Kathy Johansson lives in Stockholm.",
    "2022-09-01T00:00:00Z",
)


# -- a boolean where a number goes ----------------------------------------------------------


def test_false_for_no_duplicate_is_read_as_null_not_as_fact_0(
    mem: timestone.Memory, replay: ReplayTransport, dsn: str, group: str
) -> None:
    """``"duplicate_of": false`` is a model saying "not a duplicate"; read as the number 0
    it would drop the new fact as a duplicate of existing fact 0."""
    judged = answer(
        "fact_resolution", '{"judgements": [{"new": 0, "duplicate_of": false, "contradicts": []}]}'
    )
    replay.extend([TEA, COFFEE, judged])
    mem.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
    second = mem.add_episode(group, "Ada likes coffee.", reference_time=at(2024, 3, 5))
    assert [f.fact for f in second.facts] == ["Ada likes coffee."]
    assert second.invalidated == []
    held = sorted((f.fact, f.target) for f in mem.facts(group, source="Ada"))
    assert held == [("Ada likes coffee.", "Coffee"), ("Ada likes tea.", "Tea")]
    assert [row[4] for row in ledger(dsn, group) if row[0] == "fact resolution"] == [True]


def test_false_for_no_match_keeps_two_people_apart(
    mem: timestone.Memory, replay: ReplayTransport, group: str
) -> None:
    """``"match": false`` is "no match"; read as candidate 0 it would merge Kathy
    Johansson into Katherine Johansson."""
    decided = answer("entity_resolution", '{"decisions": [{"item": 0, "match": false}]}')
    replay.extend([KATHERINE, KATHY, decided])
    first = mem.add_episode(
        group, "Katherine Johansson lives in Gothenburg.", reference_time=at(2018, 3)
    )
    second = mem.add_episode(
        group, "Kathy Johansson lives in Stockholm.", reference_time=at(2022, 10)
    )
    katherine = next(e for e in first.entities if e.name == "Katherine Johansson")
    kathy = next(e for e in second.entities if e.name == "Kathy Johansson")
    assert kathy.id != katherine.id
    held = [f.fact for f in mem.facts(group, source=katherine.id)]
    assert held == ["Katherine Johansson lives in Gothenburg."]
    assert [f.fact for f in mem.facts(group, source=kathy.id)] == [
        "Kathy Johansson lives in Stockholm."
    ]


BOOLEANS: dict[str, tuple[str, str, str]] = {
    "true for a duplicate": (
        "fact_resolution",
        '{"judgements": [{"new": 0, "duplicate_of": true, "contradicts": []}]}',
        "judgements.0.duplicate_of: true is a boolean, not a number",
    ),
    "false for the new fact": (
        "fact_resolution",
        '{"judgements": [{"new": false, "duplicate_of": null, "contradicts": [0]}]}',
        "judgements.0.new: false is a boolean, not a number",
    ),
    "true among the contradicted": (
        "fact_resolution",
        '{"judgements": [{"new": 0, "duplicate_of": null, "contradicts": [true]}]}',
        "judgements.0.contradicts.0: true is a boolean, not a number",
    ),
}


@pytest.mark.parametrize("case", list(BOOLEANS))
def test_a_boolean_for_a_fact_number_is_malformed_and_writes_nothing(
    mem: timestone.Memory, replay: ReplayTransport, dsn: str, group: str, case: str
) -> None:
    """``true`` is not fact 1, nor ``false`` fact 0: asked again twice, then an ``LLMError``;
    the graph is what it was, and the ledger holds every answer."""
    step, text, last = BOOLEANS[case]
    replay.extend([TEA])
    mem.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
    before, paid = stored(mem, dsn, group), ledger(dsn, group)
    bad = answer(step, text)
    replay.extend([COFFEE, bad, bad, bad])
    with pytest.raises(LLMError) as caught:
        mem.add_episode(group, "Ada likes coffee.", reference_time=at(2024, 3, 5))
    assert str(caught.value) == (
        f"fact resolution: the model returned malformed output 3 times (last: {last}); "
        "nothing was written"
    )
    assert stored(mem, dsn, group) == before
    assert ledger(dsn, group) == sorted(
        [
            *paid,
            spent("extraction", COFFEE["body"], True),
            *[spent("fact resolution", bad["body"], False)] * 3,
        ]
    )


@pytest.mark.parametrize(
    ("text", "last"),
    [
        (
            '{"decisions": [{"item": 0, "match": true}]}',
            "decisions.0.match: true is a boolean, not a number",
        ),
        (
            '{"decisions": [{"item": false, "match": 0}]}',
            "decisions.0.item: false is a boolean, not a number",
        ),
    ],
)
def test_a_boolean_for_an_entity_number_is_malformed_and_merges_nothing(
    mem: timestone.Memory, replay: ReplayTransport, dsn: str, group: str, text: str, last: str
) -> None:
    replay.extend([KATHERINE])
    mem.add_episode(group, "Katherine Johansson lives in Gothenburg.", reference_time=at(2018, 3))
    before = stored(mem, dsn, group)
    bad = answer("entity_resolution", text)
    replay.extend([KATHY, bad, bad, bad])
    with pytest.raises(LLMError) as caught:
        mem.add_episode(group, "Kathy Johansson lives in Stockholm.", reference_time=at(2022, 10))
    assert str(caught.value) == (
        f"entity resolution: the model returned malformed output 3 times (last: {last}); "
        "nothing was written"
    )
    assert caught.value.step == "entity resolution"
    assert stored(mem, dsn, group) == before
    assert mem.get_entity(group, "Kathy Johansson") is None
    assert [r[4] for r in ledger(dsn, group) if r[0] == "entity resolution"] == [False] * 3


# -- a message content that is not text -----------------------------------------------------

ADA: dict[str, Any] = {
    "entities": [{"name": "Ada", "type": "Person", "attributes": []}],
    "facts": [],
}


def with_content(content: object) -> dict[str, Any]:
    body = chat_completion("", prompt_tokens=734, completion_tokens=38)
    body["choices"][0]["message"]["content"] = content
    return {"step": "extraction", "body": body}


def test_content_parts_of_text_are_the_answer(
    mem: timestone.Memory, replay: ReplayTransport, dsn: str, group: str
) -> None:
    """Mistral's reasoning models send the content as parts: a ``thinking`` part, then
    the answer in ``text`` parts. The text parts, joined, are the answer."""
    text = json.dumps(ADA)
    parts = [
        {"type": "thinking", "thinking": [{"type": "text", "text": "Ada is a person."}]},
        {"type": "text", "text": text[:20]},
        {"type": "text", "text": text[20:]},
    ]
    reply = with_content(parts)
    replay.extend([reply])
    res = mem.add_episode(group, "Ada likes tea.", reference_time=at(2024))
    assert [e.name for e in res.entities] == ["Ada"]
    assert ledger(dsn, group) == [spent("extraction", reply["body"], True, episode=True)]


NOT_TEXT: dict[str, tuple[object, str]] = {
    "an object": (ADA, "extraction: the model's message content is a JSON object, not text"),
    "a number": (42, "extraction: the model's message content is a number (42), not text"),
    "true": (True, "extraction: the model's message content is true, not text"),
    "parts without text": (
        [{"type": "thinking", "thinking": "Ada."}],
        "extraction: the model's message content has no text part",
    ),
    "a part of another kind": (
        [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],
        "extraction: the model's message content part 0 is of type 'image_url', not text",
    ),
    "a text part without its text": (
        [{"type": "text", "text": None}],
        "extraction: the model's message content part 0 has no text",
    ),
    "a part that is a string": (
        ['{"entities": [], "facts": []}'],
        "extraction: the model's message content part 0 is a str, not a part",
    ),
    "a refusal part": (
        [{"type": "refusal", "refusal": "I can't help with that."}],
        "extraction: the model gave no answer (it refused: I can't help with that.)",
    ),
}


@pytest.mark.parametrize("case", list(NOT_TEXT))
def test_a_content_that_is_not_text_is_unusable_and_in_the_ledger(
    mem: timestone.Memory, replay: ReplayTransport, dsn: str, group: str, case: str
) -> None:
    """One ``UnusableAnswer`` at once (asked the same, the server answers the same way),
    nothing written, and the call's cost in the group's ledger."""
    content, message = NOT_TEXT[case]
    reply = with_content(content)
    replay.extend([reply])
    with pytest.raises(UnusableAnswer) as caught:
        mem.add_episode(group, "Ada likes tea.", reference_time=at(2024))
    assert str(caught.value) == message
    assert caught.value.step == "extraction"
    assert len(replay.requests) == 1
    assert stored(mem, dsn, group)[0] == (0, 0, 0, 0, 0)
    assert ledger(dsn, group) == [spent("extraction", reply["body"], False)]


# -- a usage block whose counts are no counts ----------------------------------------------


def with_usage(**usage: object) -> dict[str, Any]:
    body = chat_completion(ADA)
    body["usage"] = {"total_tokens": 119, **usage}
    return {"step": "extraction", "body": body}


# as with no usage: the characters of the answer, and of the prompt, / 4
ESTIMATED = len(json.dumps(ADA)) // 4 + 1


@pytest.mark.parametrize(
    ("usage", "counted"),
    [
        ({"prompt_tokens": 120, "completion_tokens": -1}, (120, ESTIMATED)),
        ({"prompt_tokens": 10**20, "completion_tokens": 10**7 + 1}, (10**7, 10**7)),
        ({"prompt_tokens": 120, "completion_tokens": "twelve"}, (120, ESTIMATED)),
        ({"prompt_tokens": 120, "completion_tokens": None}, (120, ESTIMATED)),
        ({"prompt_tokens": 120.0, "completion_tokens": 12}, (120, 12)),
        ({"prompt_tokens": 0, "completion_tokens": 0}, (0, 0)),
    ],
)
def test_a_usage_count_that_is_no_count_is_estimated_and_the_episode_written(
    mem: timestone.Memory,
    replay: ReplayTransport,
    dsn: str,
    group: str,
    usage: dict[str, object],
    counted: tuple[int, int],
) -> None:
    """A negative, textual or missing count is estimated as when a server sends no usage
    (never zero); a count past any model's context (10 million) is recorded as 10 million.
    The answer was good: the episode is written, and no database error about the ledger
    reaches the caller."""
    reply = with_usage(**usage)
    replay.extend([reply])
    res = mem.add_episode(group, "Ada likes tea.", reference_time=at(2024))
    assert [e.name for e in res.entities] == ["Ada"]
    assert res.llm_tokens == sum(counted)
    assert ledger(dsn, group) == [("extraction", reply["body"]["model"], *counted, True, True)]
    used = mem.llm_usage(group)
    assert (used.calls, used.prompt_tokens, used.completion_tokens) == (1, *counted)
