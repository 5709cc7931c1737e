"""The cardinality of undeclared relations, asked of the model once per group and name.

The real ``OpenAICompatibleLLM`` on scripted responses (``chat_completion``, written
by hand in the API's shape), the real embedded Postgres. A transport fails its
``check()`` when a scripted answer went unplayed or an unscripted call was made: a
test that expects no question scripts none.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

import timestone
from timestone.errors import LLMError, UnusableAnswer
from timestone.llm import ReplayTransport, chat_completion, replay_llm

STEP = "relation_cardinality"


def at(year: int) -> datetime:
    return datetime(year, 1, 1, tzinfo=UTC)


def answer(cardinality: Any, **options: Any) -> dict[str, Any]:
    return {
        "step": STEP,
        **chat_completion({"cardinality": cardinality}, prompt_tokens=40, completion_tokens=5),
        **options,
    }


def works_at(target: str, year: int, relation: str = "WORKS_AT") -> list[dict[str, Any]]:
    return [
        {
            "source": {"name": "Mira", "labels": ["Person"]},
            "relation": relation,
            "target": {"name": target, "labels": ["Organization"]},
            "valid_at": at(year),
        }
    ]


@pytest.fixture
def transport() -> Iterator[ReplayTransport]:
    t = ReplayTransport()
    yield t
    t.check()


@pytest.fixture
def mem(dsn: str, transport: ReplayTransport) -> Iterator[timestone.Memory]:
    m = timestone.Memory.open(dsn, llm=replay_llm(transport, backoff=0.0), warm=False)
    yield m
    m.close()


def open_targets(mem: timestone.Memory, group: str) -> list[str]:
    return sorted(f.target for f in mem.facts(group, source="Mira", relation="WORKS_AT"))


def stored(mem: timestone.Memory, group: str) -> list[tuple[str, str]]:
    with mem.connection(group) as conn:
        rows = conn.execute(
            "SELECT relation, cardinality FROM timestone.relation_cardinalities ORDER BY 1"
        ).fetchall()
    return [(r["relation"], r["cardinality"]) for r in rows]


def ledger(mem: timestone.Memory, group: str) -> list[tuple[str, int, int, bool]]:
    with mem.connection(group) as conn:
        rows = conn.execute(
            "SELECT step, prompt_tokens, completion_tokens, ok FROM timestone.llm_ledger"
            " ORDER BY created_at"
        ).fetchall()
    return [(r["step"], r["prompt_tokens"], r["completion_tokens"], r["ok"]) for r in rows]


def test_one_makes_a_later_fact_supersede_the_earlier(
    mem: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    transport.extend([answer("one")])
    mem.add_facts(group, works_at("Nord", 2020), reference_time=at(2020))
    result = mem.add_facts(group, works_at("Sud", 2022), reference_time=at(2022))
    assert open_targets(mem, group) == ["Sud"]
    [closed] = result.invalidated
    assert (closed.target, closed.invalid_at) == ("Nord", at(2022))
    # one small call, about the relation in its normal form
    [sent] = transport.requests
    assert sent["model"] == "gpt-4.1-nano"
    assert "Relation: WORKS_AT" in sent["messages"][-1]["content"]
    assert stored(mem, group) == [("WORKS_AT", "one")]
    assert ledger(mem, group) == [("relation cardinality", 40, 5, True)]
    usage = mem.llm_usage(group)
    assert (usage.calls, usage.tokens) == (1, 45)


def test_many_keeps_both_open(
    mem: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    transport.extend([answer("many")])
    mem.add_facts(group, works_at("Nord", 2020), reference_time=at(2020))
    result = mem.add_facts(group, works_at("Sud", 2022), reference_time=at(2022))
    assert result.invalidated == []
    assert open_targets(mem, group) == ["Nord", "Sud"]
    assert stored(mem, group) == [("WORKS_AT", "many")]


def test_asked_once_across_writes_spellings_and_memories(
    dsn: str, mem: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    transport.extend([answer("one")])
    mem.add_facts(group, works_at("Nord", 2019), reference_time=at(2019))
    mem.add_facts(group, works_at("Ost", 2020, "worksAt"), reference_time=at(2020))
    assert len(transport.requests) == 1
    assert open_targets(mem, group) == ["Ost"]
    # another memory (another process would be the same: the answer is in the database)
    silent = ReplayTransport()
    with timestone.Memory.open(dsn, llm=replay_llm(silent), warm=False) as other:
        other.add_facts(group, works_at("Sud", 2022, "Works_At"), reference_time=at(2022))
        assert open_targets(other, group) == ["Sud"]
    silent.check()  # nothing was asked
    assert ledger(mem, group) == [("relation cardinality", 40, 5, True)]


def test_each_group_is_asked_for_itself(
    mem: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    other = group + "-b"
    transport.extend([answer("one"), answer("many")])
    mem.add_facts(group, works_at("Nord", 2020), reference_time=at(2020))
    mem.add_facts(other, works_at("Nord", 2020), reference_time=at(2020))
    mem.add_facts(other, works_at("Sud", 2022), reference_time=at(2022))
    assert stored(mem, group) == [("WORKS_AT", "one")]
    assert stored(mem, other) == [("WORKS_AT", "many")]
    assert open_targets(mem, other) == ["Nord", "Sud"]


def test_concurrent_writers_ask_once_and_agree(
    dsn: str, transport: ReplayTransport, group: str
) -> None:
    transport.extend([answer("one")])
    llm = replay_llm(transport, backoff=0.0)
    memories = [timestone.Memory.open(dsn, llm=llm, warm=False) for _ in range(2)]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def write(m: timestone.Memory, target: str, year: int) -> None:
        try:
            start.wait()
            m.add_facts(group, works_at(target, year), reference_time=at(year))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(m, t, y))
        for m, t, y in zip(memories, ["Nord", "Sud"], [2020, 2022], strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert len(transport.requests) == 1
        assert open_targets(memories[0], group) == ["Sud"]
        assert stored(memories[0], group) == [("WORKS_AT", "one")]
    finally:
        for m in memories:
            m.close()


def test_a_declared_relation_is_never_asked(dsn: str, group: str) -> None:
    silent = ReplayTransport()
    ontology = timestone.Ontology(edge_types=[timestone.EdgeType("WORKS_AT", cardinality="many")])
    with timestone.Memory.open(dsn, llm=replay_llm(silent), ontology=ontology, warm=False) as m:
        m.add_facts(group, works_at("Nord", 2020, "worksAt"), reference_time=at(2020))
        m.add_facts(group, works_at("Sud", 2022), reference_time=at(2022))
        assert open_targets(m, group) == ["Nord", "Sud"]
        assert stored(m, group) == []
    silent.check()


def test_a_declared_relation_wins_over_a_stored_answer(
    dsn: str, mem: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    transport.extend([answer("one")])
    mem.add_facts(group, works_at("Nord", 2020), reference_time=at(2020))
    ontology = timestone.Ontology(edge_types=[timestone.EdgeType("WORKS_AT", cardinality="many")])
    with timestone.Memory.open(dsn, ontology=ontology, warm=False) as m:
        m.add_facts(group, works_at("Sud", 2022), reference_time=at(2022))
        assert open_targets(m, group) == ["Nord", "Sud"]


def test_without_a_model_relations_are_many_and_stored_answers_still_hold(
    dsn: str, mem: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    with timestone.Memory.open(dsn, warm=False) as bare:
        assert bare.llm is None
        bare.add_facts(group, works_at("Nord", 2020), reference_time=at(2020))
        bare.add_facts(group, works_at("Sud", 2022), reference_time=at(2022))
        assert open_targets(bare, group) == ["Nord", "Sud"]  # nothing supersedes
        assert stored(bare, group) == []
        # a name answered in this group (by a memory with a model) holds here too
        transport.extend([answer("one")])
        mem.add_facts(group, works_at("Ost", 2023, "LEADS"), reference_time=at(2023))
        facts = [
            {**works_at("Ost", 2023, "LEADS")[0], "target": {"name": "West"}, "valid_at": at(2024)}
        ]
        result = bare.add_facts(group, facts, reference_time=at(2024))
        assert [f.target for f in result.invalidated] == ["Ost"]


def test_infer_cardinality_false_asks_nothing(dsn: str, group: str) -> None:
    silent = ReplayTransport()
    with timestone.Memory.open(
        dsn, llm=replay_llm(silent), infer_cardinality=False, warm=False
    ) as m:
        m.add_facts(group, works_at("Nord", 2020), reference_time=at(2020))
        m.add_facts(group, works_at("Sud", 2022), reference_time=at(2022))
        assert open_targets(m, group) == ["Nord", "Sud"]
    silent.check()


def test_infer_cardinality_must_be_a_bool(dsn: str) -> None:
    with pytest.raises(timestone.errors.InvalidInput, match="infer_cardinality"):
        timestone.Memory.open(dsn, infer_cardinality="yes", warm=False)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("replies", "error", "calls"),
    [
        # malformed three times: asked again twice, then the step fails
        ([answer("several")] * 3, LLMError, 3),
        ([{"step": STEP, **chat_completion("one")}] * 3, LLMError, 3),
        # unusable: fails at once
        ([{"step": STEP, **chat_completion(None, refusal="I cannot help")}], UnusableAnswer, 1),
        (
            [{"step": STEP, **chat_completion('{"cardin', finish_reason="length")}],
            UnusableAnswer,
            1,
        ),
    ],
    ids=["wrong-value", "not-json-object", "refused", "cut-off"],
)
def test_a_bad_answer_is_a_clear_error_and_writes_nothing(
    mem: timestone.Memory,
    transport: ReplayTransport,
    group: str,
    replies: list[dict[str, Any]],
    error: type[LLMError],
    calls: int,
) -> None:
    transport.extend(replies)
    with pytest.raises(error, match="relation cardinality") as caught:
        mem.add_facts(group, works_at("Nord", 2020), reference_time=at(2020))
    assert caught.value.step == "relation cardinality"
    assert mem.episodes(group) == []
    assert mem.facts(group) == []
    assert stored(mem, group) == []
    # the spent calls count against the group, marked failed
    assert [(s, ok) for s, _, _, ok in ledger(mem, group)] == [
        ("relation cardinality", False)
    ] * calls
    # the next write asks again
    transport.extend([answer("one")])
    mem.add_facts(group, works_at("Nord", 2020), reference_time=at(2020))
    assert stored(mem, group) == [("WORKS_AT", "one")]


def test_an_extracted_fact_uses_the_answer_and_asks_nothing(
    mem: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    transport.extend([answer("one")])
    mem.add_facts(group, works_at("Nord", 2020), reference_time=at(2020))
    extracted: dict[str, Any] = {
        "entities": [
            {"name": "Mira", "type": "Person", "attributes": []},
            {"name": "Sud", "type": "Organization", "attributes": []},
        ],
        "facts": [
            {
                "source": "Mira",
                "relation": "WORKS_AT",
                "target": "Sud",
                "fact": "Mira works at Sud.",
                "valid_at": "2022-01-01T00:00:00Z",
                "invalid_at": None,
                "attributes": [],
            }
        ],
    }
    # no fact resolution: the slot's date fight closes Nord, as "one" answered says
    transport.extend([{"step": "extraction", **chat_completion(extracted)}])
    result = mem.add_episode(group, "Mira works at Sud now.", reference_time=at(2022))
    assert [f.target for f in result.invalidated] == ["Nord"]
    assert open_targets(mem, group) == ["Sud"]
    steps = [r["response_format"]["json_schema"]["name"] for r in transport.requests]
    assert steps == ["relation_cardinality", "extraction"]


def test_extraction_does_not_ask(
    mem: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    extracted: dict[str, Any] = {
        "entities": [
            {"name": "Mira", "type": "Person", "attributes": []},
            {"name": "Lyon", "type": "Place", "attributes": []},
        ],
        "facts": [
            {
                "source": "Mira",
                "relation": "VISITS",
                "target": "Lyon",
                "fact": "Mira visits Lyon.",
                "valid_at": None,
                "invalid_at": None,
                "attributes": [],
            }
        ],
    }
    transport.extend([{"step": "extraction", **chat_completion(extracted)}])
    mem.add_episode(group, "Mira visits Lyon.", reference_time=at(2022))
    assert [r["response_format"]["json_schema"]["name"] for r in transport.requests] == [
        "extraction"
    ]
    assert stored(mem, group) == []


def test_an_exported_group_keeps_its_answers(
    dsn: str, mem: timestone.Memory, transport: ReplayTransport, group: str
) -> None:
    transport.extend([answer("one")])
    mem.add_facts(group, works_at("Nord", 2020), reference_time=at(2020))
    out = io.StringIO()
    rows = mem.export_group(group, out)
    assert rows["relation_cardinalities"] == 1
    copy = group + "-copy"
    silent = ReplayTransport()
    with timestone.Memory.open(dsn, llm=replay_llm(silent), warm=False) as m:
        m.import_group(out.getvalue().splitlines(), group_id=copy)
        assert stored(m, copy) == [("WORKS_AT", "one")]
        m.add_facts(copy, works_at("Sud", 2022), reference_time=at(2022))
        assert open_targets(m, copy) == ["Sud"]
    silent.check()
