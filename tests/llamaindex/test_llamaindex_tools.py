"""TimestoneToolSpec: search_memory, entity_timeline and remember as LlamaIndex tools, called
by a real FunctionAgent run (a scripted function-calling model), on Memory and AsyncMemory."""

# A workflow handler's result and a tool's parameter schema are untyped in LlamaIndex.
# pyright: reportUnknownMemberType=false, reportUnknownVariableType=false
# pyright: reportUnknownArgumentType=false

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.tools.timestone import TimestoneToolSpec

import timestone
from timestone.errors import InvalidGroup, NaiveDatetime, ToolRefused

CITED = r"\[F-[0-9a-f]{10}\] "

# A FunctionAgent's workflow lists its own members when it is built (inspect.getmembers),
# reading every deprecated attribute pydantic keeps on a model (``__fields__``,
# ``model_computed_fields`` on an instance, ...): those warnings are the workflow's.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")


def _scripted(calls: Sequence[tuple[str, dict[str, Any]]]) -> MockFunctionCallingLLM:
    """A model that makes ``calls`` one turn each, then answers ``done``."""

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        turn = sum(m.role == MessageRole.TOOL for m in messages)
        if turn == len(calls):
            return ChatMessage(role=MessageRole.ASSISTANT, content="done")
        name, args = calls[turn]
        block = ToolCallBlock(tool_call_id=f"c{turn}", tool_name=name, tool_kwargs=args)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])

    return MockFunctionCallingLLM(response_generator=respond)


async def _run(spec: TimestoneToolSpec, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Every tool result of an agent run that makes ``calls``; the run answers ``done``."""
    agent = FunctionAgent(tools=spec.to_tool_list(), llm=_scripted(calls))
    # the keyword form LlamaIndex asks for; pyright resolves it to the deprecated overload
    handler = agent.run(user_msg="Go")  # pyright: ignore[reportDeprecated]
    results = [ev async for ev in handler.stream_events() if isinstance(ev, ToolCallResult)]
    assert str(await handler) == "done"
    assert [r.tool_name for r in results] == [name for name, _ in calls]
    return [r.tool_output for r in results]


async def test_an_agent_remembers_reads_timelines_and_searches(
    memory: timestone.Memory, mira: str
) -> None:
    outputs = await _run(
        TimestoneToolSpec(memory, mira),
        [
            (
                "remember",
                {
                    "subject": "Ada",
                    "relation": "LIKES",
                    "object": "Gamay",
                    "valid_from": "2024-05-01",
                },
            ),
            ("entity_timeline", {"entity": "Mira", "relation": "WORKS_AT"}),
            ("entity_timeline", {"entity": "Mira", "until": "2016-01-01"}),
            ("search_memory", {"query": "Where does Mira work?"}),
        ],
    )
    assert [o.is_error for o in outputs] == [False] * 4
    remembered, works, early, found = (o.content for o in outputs)
    assert re.search(CITED + r"\(2024-05-01 to present\) Ada likes Gamay\.", remembered)
    assert [(f.relation, f.target) for f in memory.facts(mira, source="Ada")] == [
        ("LIKES", "Gamay")
    ]
    lines = works.splitlines()
    assert len(lines) == 3
    assert re.fullmatch(CITED + r"\(2015-10-01 to .*\) Mira works at Château Nord\.", lines[1])
    assert re.fullmatch(CITED + r"\(2023-06-15 to present\) Mira works at Château Sud\.", lines[2])
    assert "Château Nord" in early
    assert "Château Sud" not in early
    assert "Mira works at Château Sud." in found


async def test_refused_arguments_reach_the_model_as_errors_and_write_nothing(
    memory: timestone.Memory, group: str
) -> None:
    outputs = await _run(
        TimestoneToolSpec(memory, group),
        [
            ("remember", {"subject": "Ada", "relation": "likes wine", "object": "Gamay"}),
            ("search_memory", {"query": "wine " * 5_000}),
            ("entity_timeline", {"entity": "Ada", "since": "last spring"}),
        ],
    )
    assert [o.is_error for o in outputs] == [True] * 3
    assert all(isinstance(o.exception, ToolRefused) for o in outputs)
    assert "remember refused the fact: relation 'likes wine' must be an identifier" in (
        outputs[0].content
    )
    assert outputs[1].content.startswith("search_memory refused the query: context query has")
    assert "since 'last spring' is not a date" in outputs[2].content
    assert memory.facts(group, valid_at=None) == []
    assert memory.episodes(group) == []


async def test_async_memory(amemory: timestone.AsyncMemory, mira: str) -> None:
    outputs = await _run(
        TimestoneToolSpec(amemory, mira),
        [
            ("remember", {"subject": "Ada", "relation": "LIKES", "object": "Pinot"}),
            ("entity_timeline", {"entity": "Ada"}),
        ],
    )
    assert "Ada likes Pinot." in outputs[1].content
    assert [f.target for f in await amemory.facts(mira, source="Ada")] == ["Pinot"]
    tools = {t.metadata.name: t for t in TimestoneToolSpec(amemory, mira).to_tool_list()}
    with pytest.raises(TypeError, match="wraps an AsyncMemory: call acall"):
        tools["entity_timeline"].call(entity="Ada")


def test_blocking_calls_and_the_times_given(memory: timestone.Memory, mira: str) -> None:
    in_2019 = TimestoneToolSpec(memory, mira, valid_at=datetime(2019, 6, 1, tzinfo=UTC))
    tools = {t.metadata.name: t for t in in_2019.to_tool_list()}
    assert set(tools) == {"search_memory", "entity_timeline", "remember"}
    text = tools["search_memory"].call(query="Where does Mira work?").content
    assert "Mira works at Château Nord." in text
    assert "Mira works at Château Sud" not in text
    timeline = tools["entity_timeline"].metadata
    schema = timeline.get_parameters_dict()
    assert schema["required"] == ["entity"]
    assert set(schema["properties"]) == {"entity", "relation", "since", "until"}
    assert "Every period of every fact about an entity, oldest first." in timeline.description
    assert "until: Only periods that start before this ISO 8601 date" in timeline.description
    before = TimestoneToolSpec(memory, mira, as_of=datetime.now(UTC) - timedelta(days=1))
    assert before.entity_timeline("Mira") == "Memory holds no facts about 'Mira'."


def test_bad_construction(memory: timestone.Memory, group: str) -> None:
    with pytest.raises(TypeError, match=r"needs a timestone\.Memory or AsyncMemory"):
        TimestoneToolSpec("postgresql://", group)  # type: ignore[arg-type]
    with pytest.raises(InvalidGroup):
        TimestoneToolSpec(memory, " ")
    with pytest.raises(NaiveDatetime, match="as_of"):
        TimestoneToolSpec(memory, group, as_of=datetime(2020, 1, 1))
    with pytest.raises(ValueError, match="token_budget must be an integer from 50"):
        TimestoneToolSpec(memory, group, token_budget=0)


def test_a_budget_search_memory_cannot_use_is_refused_when_made(
    memory: timestone.Memory, group: str
) -> None:
    """The budget ``context`` takes, checked when the spec is made: not at every
    ``search_memory`` call, where the model would read a refusal it cannot fix."""
    for budget in (10, 49, 200_001, 10**6):
        message = f"token_budget must be an integer from 50 to 200,000, got {budget}"
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            TimestoneToolSpec(memory, group, token_budget=budget)
    for budget in (50, 200_000):
        spec = TimestoneToolSpec(memory, group, token_budget=budget)
        assert spec.search_memory("Where does Mira work?") == (
            "Nothing in memory matches this query."
        )
