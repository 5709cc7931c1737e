"""PydanticAI agents with Timestone memory: TestModel, FunctionModel and the citation check."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import timestone
from pydantic_ai_timestone import (
    GroundedAnswer,
    TimestoneDeps,
    TimestoneMemory,
    check_citations,
    entity_timeline,
    memory_toolset,
    remember,
)
from timestone.errors import InvalidGroup, NaiveDatetime
from timestone.toolkit import citation_of


def _tool_returns(messages: list[ModelMessage], name: str) -> list[str]:
    return [
        part.model_response_str()
        for m in messages
        if isinstance(m, ModelRequest)
        for part in m.parts
        if isinstance(part, ToolReturnPart) and part.tool_name == name
    ]


def _retries(messages: list[ModelMessage]) -> list[str]:
    """What was sent back to the model to try again (a retry prompt, or a retried return)."""
    out: list[str] = []
    for m in messages:
        if not isinstance(m, ModelRequest):
            continue
        for part in m.parts:
            if isinstance(part, RetryFeedbackPart):
                out.append(part.model_response())
            elif isinstance(part, ToolReturnPart) and part.outcome == "retried":
                out.append(part.model_response_str())
    return out


def _citation(memory: timestone.Memory, group: str, sentence: str) -> str:
    fact = next(f for f in memory.facts(group, limit=100) if f.fact == sentence)
    return "F-" + fact.id.hex[-10:]  # a time-ordered id: its random end


async def test_test_model_uses_the_toolset(memory: timestone.Memory, mira: str) -> None:
    agent = Agent(
        TestModel(call_tools=["search_memory", "entity_timeline"]),
        deps_type=TimestoneDeps,
        toolsets=[memory_toolset()],
    )
    result = await agent.run("Where does Mira work?", deps=TimestoneDeps(memory, mira))
    searched = _tool_returns(result.all_messages(), "search_memory")
    assert len(searched) == 1
    assert re.search(r"\[F-[0-9a-f]{10}\]", searched[0])
    assert len(_tool_returns(result.all_messages(), "entity_timeline")) == 1


async def test_capability_accepts_a_real_citation(memory: timestone.Memory, mira: str) -> None:
    real = _citation(memory, mira, "Mira works at Château Sud.")
    agent = Agent(
        TestModel(
            call_tools=["search_memory"],
            custom_output_args={"answer": "Château Sud", "citations": [real]},
        ),
        deps_type=TimestoneDeps,
        output_type=GroundedAnswer,
        capabilities=[TimestoneMemory()],
    )
    result = await agent.run("Where does Mira work?", deps=TimestoneDeps(memory, mira))
    assert result.output == GroundedAnswer(answer="Château Sud", citations=[real])
    assert real in _tool_returns(result.all_messages(), "search_memory")[0]
    assert _retries(result.all_messages()) == []


def _scripted(*outputs: dict[str, Any], cite_from_search: bool = True) -> FunctionModel:
    """Search first; then give each output in turn; the last one cites what the search found."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns = sum(isinstance(m, ModelResponse) for m in messages)
        if turns == 0:
            call = ToolCallPart("search_memory", {"query": "Where does Mira work?"})
            return ModelResponse(parts=[call])
        output_tool = info.output_tools[0].name
        if turns <= len(outputs):
            return ModelResponse(parts=[ToolCallPart(output_tool, outputs[turns - 1])])
        found = _tool_returns(messages, "search_memory")[0]
        line = next(x for x in found.splitlines() if "works at Château Sud" in x)
        cited = re.findall(r"F-[0-9a-f]{10}", line)
        return ModelResponse(
            parts=[ToolCallPart(output_tool, {"answer": "Château Sud", "citations": cited})]
        )

    return FunctionModel(respond)


async def test_function_model_fabricated_citation_is_sent_back(
    amemory: timestone.AsyncMemory, memory: timestone.Memory, mira: str
) -> None:
    agent = Agent(
        _scripted(
            {"answer": "Château Sud", "citations": ["F-0000000000"]},
            {"answer": "Château Sud", "citations": ["the 2023 trade press"]},
        ),
        deps_type=TimestoneDeps,
        output_type=GroundedAnswer,
        capabilities=[TimestoneMemory()],
        retries=3,
    )
    result = await agent.run("Where does Mira work?", deps=TimestoneDeps(amemory, mira))
    retries = _retries(result.all_messages())
    assert len(retries) == 2
    assert "F-0000000000 was not retrieved in this run" in retries[0]
    assert "'the 2023 trade press' is not a citation id" in retries[1]
    assert result.output.citations == [_citation(memory, mira, "Mira works at Château Sud.")]


async def test_a_citation_quoted_in_a_passage_was_not_retrieved(
    amemory: timestone.AsyncMemory, memory: timestone.Memory, mira: str
) -> None:
    """What a run retrieved is the citations that lead the items a memory tool returned:
    an id a passage quotes (a recorded exchange that cited a fact not true now), and the
    tail of a longer word (``REF-0123456789ab``), are text, not retrieved evidence."""
    later = memory.add_facts(
        mira,
        [
            timestone.FactInput(
                "Mira",
                "OWNS",
                "Clos Secret",
                valid_at=datetime.fromisoformat("2099-01-01T00:00:00+00:00"),
            )
        ],
        reference_time=datetime.fromisoformat("2024-01-01T00:00:00+00:00"),
    )
    hidden = citation_of("fact", later.facts[0].id)
    memory.add_document(
        mira,
        "conversation:earlier",
        f"User: where does Mira work? Assistant: at Château Sud, and she owns "
        f"Clos Secret [{hidden}]. Ticket REF-0123456789ab.",
        reference_time=datetime.fromisoformat("2024-02-01T00:00:00+00:00"),
    )
    agent = Agent(
        _scripted(
            {"answer": "Clos Secret", "citations": [hidden]},
            {"answer": "Clos Secret", "citations": ["F-0123456789"]},
        ),
        deps_type=TimestoneDeps,
        output_type=GroundedAnswer,
        capabilities=[TimestoneMemory()],
        retries=3,
    )
    result = await agent.run("Where does Mira work?", deps=TimestoneDeps(amemory, mira))
    [found] = _tool_returns(result.all_messages(), "search_memory")
    assert hidden in found  # quoted by the passage shown
    retries = _retries(result.all_messages())
    assert f"{hidden} was not retrieved in this run" in retries[0]
    assert "F-0123456789 was not retrieved in this run" in retries[1]
    assert result.output.citations == [_citation(memory, mira, "Mira works at Château Sud.")]


@pytest.mark.parametrize("run_ids", ["kept", "stripped"])
async def test_citations_from_an_earlier_run_do_not_count(
    memory: timestone.Memory, mira: str, run_ids: str
) -> None:
    """Nor do those of history stored without run ids: a request without one is not this
    run's."""
    real = _citation(memory, mira, "Mira works at Château Sud.")
    first = await Agent(
        TestModel(call_tools=["search_memory"], custom_output_text="ok"),
        deps_type=TimestoneDeps,
        capabilities=[TimestoneMemory()],
    ).run("Where does Mira work?", deps=TimestoneDeps(memory, mira))
    history = first.all_messages()
    if run_ids == "stripped":
        history = [dataclasses.replace(m, run_id=None) for m in history]
    agent = Agent(
        TestModel(call_tools=[], custom_output_args={"answer": "Sud", "citations": [real]}),
        deps_type=TimestoneDeps,
        output_type=GroundedAnswer,
        capabilities=[TimestoneMemory()],
        retries=1,
    )
    with pytest.raises(Exception, match=r"Exceeded maximum (output )?retries"):
        await agent.run("And now?", deps=TimestoneDeps(memory, mira), message_history=history)


async def test_output_validator_on_its_own(memory: timestone.Memory, mira: str) -> None:
    agent = Agent(
        _scripted({"answer": "Château Sud", "citations": ["F-0123456789"]}),
        deps_type=TimestoneDeps,
        output_type=GroundedAnswer,
        toolsets=[memory_toolset()],
    )
    agent.output_validator(check_citations)
    result = await agent.run("Where does Mira work?", deps=TimestoneDeps(memory, mira))
    assert "F-0123456789 was not retrieved" in _retries(result.all_messages())[0]


@dataclasses.dataclass
class AppDeps:
    """A deps object of the application's own: the toolset needs only these two attributes."""

    memory: timestone.Memory
    group_id: str
    user_name: str = "ada"


async def test_remember_and_timeline_with_app_deps(memory: timestone.Memory, group: str) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns = sum(isinstance(m, ModelResponse) for m in messages)
        if turns == 0:
            bad = {"subject": "Ada", "relation": "likes wine", "object": "Gamay"}
            return ModelResponse(parts=[ToolCallPart("remember", bad)])
        if turns == 1:
            good = {
                "subject": "Ada",
                "relation": "LIKES",
                "object": "Gamay",
                "valid_from": "2024-05-01",
            }
            return ModelResponse(parts=[ToolCallPart("remember", good)])
        if turns == 2:
            return ModelResponse(parts=[ToolCallPart("entity_timeline", {"entity": "Ada"})])
        if turns == 3:  # a window that ends before the fact began, then a bad date
            early = {"entity": "Ada", "relation": "LIKES", "until": "2024-04-30"}
            return ModelResponse(parts=[ToolCallPart("entity_timeline", early)])
        if turns == 4:
            bad = {"entity": "Ada", "since": "last spring"}
            return ModelResponse(parts=[ToolCallPart("entity_timeline", bad)])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(respond), deps_type=AppDeps, toolsets=[memory_toolset()])
    result = await agent.run("Remember that I like Gamay", deps=AppDeps(memory, group))
    retries = _retries(result.all_messages())
    assert len(retries) == 2
    assert "relation 'likes wine' must be an identifier" in retries[0]
    assert "since 'last spring' is not a date" in retries[1]
    facts = memory.facts(group, source="Ada")
    assert [(f.relation, f.target, f.valid_at.date().isoformat()) for f in facts] == [
        ("LIKES", "Gamay", "2024-05-01")
    ]
    # the third return is the refusal, sent back to retry (counted above)
    timeline, early, _ = _tool_returns(result.all_messages(), "entity_timeline")
    assert "(2024-05-01 to present) Ada likes Gamay." in timeline
    assert early == "Memory holds no facts about 'Ada' of that relation or in those dates."


async def test_a_query_or_name_the_library_refuses_is_sent_back(
    memory: timestone.Memory, group: str
) -> None:
    """A query past the length a search takes, a name with a NUL byte: the model is asked
    again (ModelRetry) instead of the run failing."""
    too_long = "wine " * 5_000

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns = sum(isinstance(m, ModelResponse) for m in messages)
        if turns == 0:
            return ModelResponse(parts=[ToolCallPart("search_memory", {"query": too_long})])
        if turns == 1:
            return ModelResponse(parts=[ToolCallPart("entity_timeline", {"entity": "A\x00da"})])
        if turns == 2:
            return ModelResponse(parts=[ToolCallPart("search_memory", {"query": "wine"})])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(respond), deps_type=AppDeps, toolsets=[memory_toolset()])
    result = await agent.run("What wine?", deps=AppDeps(memory, group))
    retries = _retries(result.all_messages())
    assert len(retries) == 2
    assert "search_memory refused the query: context query has 25,000 characters" in retries[0]
    assert "entity_timeline refused the request" in retries[1]
    assert "NUL" in retries[1]
    assert result.output == "done"


def test_bad_deps(memory: timestone.Memory) -> None:
    with pytest.raises(InvalidGroup, match="group_id is empty"):
        TimestoneDeps(memory, "")
    with pytest.raises(TypeError, match=r"needs a timestone\.Memory"):
        TimestoneDeps("postgresql://nowhere", "g")  # type: ignore[arg-type]
    with pytest.raises(NaiveDatetime, match="as_of"):
        TimestoneDeps(memory, "g", as_of=datetime(2024, 1, 1))
    for budget in (0, -1, True):
        with pytest.raises(ValueError, match="token_budget must be an integer from 50"):
            TimestoneDeps(memory, "g", token_budget=budget)


def test_a_budget_search_memory_cannot_use_is_refused_when_made(memory: timestone.Memory) -> None:
    """The budget ``context`` takes, checked when the deps are made: not at every
    ``search_memory`` call, where the model would read a refusal it cannot fix."""
    for budget in (10, 49, 200_001, 10**6):
        message = f"token_budget must be an integer from 50 to 200,000, got {budget}"
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            TimestoneDeps(memory, "g", token_budget=budget)
    for budget in (50, 200_000):
        assert TimestoneDeps(memory, "g", token_budget=budget).token_budget == budget


@dataclasses.dataclass
class LooseDeps:
    """An application's deps object whose settings nothing checked when it was made."""

    memory: object
    group_id: object
    valid_at: object = timestone.NOW
    token_budget: object = 1200


async def _search_once(deps: LooseDeps) -> list[str]:
    """Run an agent whose model calls ``search_memory`` once, then answers; the prompts the
    model was given after its call, as it read them."""
    seen: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("search_memory", {"query": "Ada"})])
        seen.extend(_retries(messages))
        return ModelResponse(parts=[TextPart("I don't know.")])

    agent = Agent(FunctionModel(respond), deps_type=LooseDeps, toolsets=[memory_toolset()])
    await agent.run("Where does Ada work?", deps=deps)
    return seen


async def test_deps_the_tools_cannot_use_raise_to_the_caller(
    memory: timestone.Memory, group: str
) -> None:
    """The deps are the developer's: a memory that is not one, a malformed group, a naive
    or string clock or a budget out of range fail the run, naming the setting, instead of
    going to the model as a retry it cannot act on (the run then answering without
    memory)."""
    cases: list[tuple[LooseDeps, type[Exception], str]] = [
        (
            LooseDeps("postgresql://x", group),
            TypeError,
            "memory_toolset needs a timestone.Memory or AsyncMemory as deps.memory, "
            "got <class 'str'>",
        ),
        (
            LooseDeps(memory, "tenant 42"),
            InvalidGroup,
            "deps.group_id 'tenant 42' is malformed: use 1 to 128 characters of letters, "
            "digits and _ . : @ -, starting with a letter or digit",
        ),
        (
            LooseDeps(memory, group, valid_at=datetime(2024, 1, 1)),
            NaiveDatetime,
            "deps.valid_at is a naive datetime (2024-01-01T00:00:00); pass a timezone-aware "
            "one, for example datetime(..., tzinfo=UTC)",
        ),
        (
            LooseDeps(memory, group, valid_at="2024-01-01"),
            NaiveDatetime,
            "deps.valid_at must be a timezone-aware datetime, got str",
        ),
        (
            LooseDeps(memory, group, token_budget=10),
            ValueError,
            "deps.token_budget must be an integer from 50 to 200,000, got 10",
        ),
    ]
    for deps, error, message in cases:
        with pytest.raises(error) as raised:
            await _search_once(deps)
        assert str(raised.value) == message
    # deps it can use: the model reads the evidence, and nothing is sent back
    assert await _search_once(LooseDeps(memory, group)) == []


def test_what_the_model_reads_about_each_tool() -> None:
    """The descriptions are the core's, one text for every toolkit: the summary for the
    tool, the "Args:" lines for its parameters."""
    from pydantic_ai import Tool

    timeline = Tool(entity_timeline)
    assert timeline.description is not None
    assert timeline.description.startswith(
        "Every period of every fact about an entity, oldest first.\n\nAn entity is a person"
    )
    assert "Args:" not in timeline.description
    properties = timeline.function_schema.json_schema["properties"]
    assert properties["since"]["description"].startswith("Only periods that last past")
    assert (
        "UPPER_SNAKE_CASE"
        in Tool(remember).function_schema.json_schema["properties"]["relation"]["description"]
    )
