"""timestone_tools: search_memory, entity_timeline and remember as LangChain tools, called by
a real create_agent run (a scripted chat model), on Memory and AsyncMemory."""

# create_agent's compiled graph is generic in types these tests leave open.
# pyright: reportUnknownMemberType=false, reportUnknownVariableType=false
# pyright: reportUnknownArgumentType=false

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable

import timestone
from langchain_timestone import timestone_tools
from timestone.errors import InvalidGroup, NaiveDatetime

CITED = r"\[F-[0-9a-f]{10}\] "


class ToolCallingModel(GenericFakeChatModel):
    """A scripted chat model that accepts tools (its script names the calls)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self


def _calls(*calls: tuple[str, dict[str, Any]]) -> list[AIMessage]:
    """One model turn per tool call, then the answer ``done``."""
    turns = [
        AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"c{n}"}])
        for n, (name, args) in enumerate(calls)
    ]
    return [*turns, AIMessage("done")]


def _agent(tools: Sequence[Any], script: list[AIMessage]) -> Any:
    it: Iterator[AIMessage] = iter(script)
    return create_agent(ToolCallingModel(messages=it), tools=list(tools))


def _returns(messages: Sequence[BaseMessage], status: str = "success") -> list[tuple[str, str]]:
    """(tool name, content) of each tool message, in order; each of them with ``status``."""
    found = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.status for m in found] == [status] * len(found)
    return [(m.name or "", str(m.content)) for m in found]


def test_an_agent_remembers_reads_timelines_and_searches(
    memory: timestone.Memory, mira: str
) -> None:
    script = _calls(
        (
            "remember",
            {"subject": "Ada", "relation": "LIKES", "object": "Gamay", "valid_from": "2024-05-01"},
        ),
        ("entity_timeline", {"entity": "Mira", "relation": "WORKS_AT"}),
        ("entity_timeline", {"entity": "Mira", "until": "2016-01-01"}),
        ("entity_timeline", {"entity": "Ada", "until": "2020-01-01"}),
        ("search_memory", {"query": "Where does Mira work?"}),
    )
    out = _agent(timestone_tools(memory, mira), script).invoke(
        {"messages": [HumanMessage("Ada likes Gamay. Where does Mira work?")]}
    )
    assert out["messages"][-1].content == "done"
    remembered, works, early, none, found = _returns(out["messages"])
    assert remembered[0] == "remember"
    assert re.search(CITED + r"\(2024-05-01 to present\) Ada likes Gamay\.", remembered[1])
    stored = memory.facts(mira, source="Ada")
    assert [(f.relation, f.target, f.valid_at.date().isoformat()) for f in stored] == [
        ("LIKES", "Gamay", "2024-05-01")
    ]
    # one relation: both employers, in order, nothing else
    lines = works[1].splitlines()
    assert lines[0] == "Timeline of Mira (cite items by [id]):"
    assert len(lines) == 3
    assert re.fullmatch(CITED + r"\(2015-10-01 to .*\) Mira works at Château Nord\.", lines[1])
    assert re.fullmatch(CITED + r"\(2023-06-15 to present\) Mira works at Château Sud\.", lines[2])
    # periods that start before 2016: the first year's facts, none of 2019 or 2023
    assert "Château Nord" in early[1]
    assert "Gamay" in early[1]
    assert "Château Sud" not in early[1]
    assert "Dijon" not in early[1]
    assert none[1] == "Memory holds no facts about 'Ada' of that relation or in those dates."
    assert found[0] == "search_memory"
    assert "Mira works at Château Sud." in found[1]
    assert re.search(r"\[F-[0-9a-f]{10}\]", found[1])


def test_refused_arguments_go_back_to_the_model_and_write_nothing(
    memory: timestone.Memory, group: str
) -> None:
    """A relation that is not an identifier, a date a model made up, a query past the
    length a search takes, a name with a NUL byte: each comes back as the tool's answer,
    naming the tool and the reason, and the run goes on."""
    script = _calls(
        ("remember", {"subject": "Ada", "relation": "likes wine", "object": "Gamay"}),
        (
            "remember",
            {"subject": "Ada", "relation": "LIKES", "object": "Gamay", "valid_from": "last spring"},
        ),
        ("search_memory", {"query": "wine " * 5_000}),
        ("search_memory", {"query": "   "}),
        ("entity_timeline", {"entity": "A\x00da"}),
        ("entity_timeline", {"entity": "Ada", "since": "2024-06-01", "until": "2024-01-01"}),
    )
    out = _agent(timestone_tools(memory, group), script).invoke(
        {"messages": [HumanMessage("Remember that I like Gamay")]}
    )
    assert out["messages"][-1].content == "done"
    answers = [text for _, text in _returns(out["messages"], "error")]
    assert len(answers) == 6
    assert answers[0].startswith("remember refused the fact: ")
    assert "relation 'likes wine' must be an identifier" in answers[0]
    assert "valid_from 'last spring' is not a date" in answers[1]
    assert answers[2].startswith("search_memory refused the query: context query has 25,000")
    assert answers[3] == "search_memory needs a non-empty query"
    assert answers[4].startswith("entity_timeline refused the request: ")
    assert "NUL" in answers[4]
    assert answers[5].startswith("entity_timeline refused the request: ")
    assert "until" in answers[5]
    assert memory.facts(group, valid_at=None) == []
    assert memory.episodes(group) == []


def test_the_tools_read_at_the_times_they_were_given(memory: timestone.Memory, mira: str) -> None:
    """``valid_at`` and ``as_of`` reach the reads: in 2019 Mira worked at Château Nord;
    before any episode was recorded, the graph held nothing about her."""
    then = timestone_tools(memory, mira, valid_at=datetime(2019, 6, 1, tzinfo=UTC))
    search = {t.name: t for t in then}["search_memory"]
    in_2019 = search.invoke({"query": "Where does Mira work?"})
    assert "Mira works at Château Nord." in in_2019
    assert "Mira works at Château Sud" not in in_2019
    before = timestone_tools(memory, mira, as_of=datetime.now(UTC) - timedelta(days=1))
    tools = {t.name: t for t in before}
    assert tools["search_memory"].invoke({"query": "Where does Mira work?"}) == (
        "Nothing in memory matches this query."
    )
    assert tools["entity_timeline"].invoke({"entity": "Mira"}) == (
        "Memory holds no facts about 'Mira'."
    )


async def test_async_memory_serves_ainvoke_and_refuses_invoke(
    amemory: timestone.AsyncMemory, mira: str
) -> None:
    script = _calls(
        ("remember", {"subject": "Ada", "relation": "LIKES", "object": "Pinot"}),
        ("entity_timeline", {"entity": "Ada"}),
    )
    out = await _agent(timestone_tools(amemory, mira), script).ainvoke(
        {"messages": [HumanMessage("Remember that I like Pinot")]}
    )
    remembered, timeline = _returns(out["messages"])
    assert "Ada likes Pinot." in remembered[1]
    assert "Ada likes Pinot." in timeline[1]
    assert [f.target for f in await amemory.facts(mira, source="Ada")] == ["Pinot"]
    timeline_tool = {t.name: t for t in timestone_tools(amemory, mira)}["entity_timeline"]
    with pytest.raises(TypeError, match="wraps an AsyncMemory: call ainvoke"):
        timeline_tool.invoke({"entity": "Ada"})


async def test_a_blocking_memory_serves_ainvoke_too(memory: timestone.Memory, mira: str) -> None:
    tools = {t.name: t for t in timestone_tools(memory, mira)}
    text = await tools["entity_timeline"].ainvoke({"entity": "Mira", "relation": "WORKS_AT"})
    assert "Mira works at Château Sud." in text


def test_what_the_model_reads_about_each_tool(memory: timestone.Memory, group: str) -> None:
    tools = {t.name: t for t in timestone_tools(memory, group)}
    assert list(tools) == ["search_memory", "entity_timeline", "remember"]
    assert tools["entity_timeline"].description.startswith(
        "Every period of every fact about an entity, oldest first."
    )
    assert "Args:" not in tools["entity_timeline"].description
    fields = tools["remember"].args
    assert list(fields) == ["subject", "relation", "object", "sentence", "valid_from"]
    assert "UPPER_SNAKE_CASE" in fields["relation"]["description"]


def test_bad_construction(memory: timestone.Memory, group: str) -> None:
    with pytest.raises(TypeError, match=r"needs a timestone\.Memory or AsyncMemory"):
        timestone_tools("postgresql://", group)  # type: ignore[arg-type]
    with pytest.raises(InvalidGroup):
        timestone_tools(memory, "")
    with pytest.raises(NaiveDatetime, match="valid_at"):
        timestone_tools(memory, group, valid_at=datetime(2020, 1, 1))
    with pytest.raises(NaiveDatetime, match="as_of"):
        timestone_tools(memory, group, as_of=datetime(2020, 1, 1))
    with pytest.raises(NaiveDatetime, match="valid_at must be a timezone-aware datetime"):
        timestone_tools(memory, group, valid_at="2020-01-01")  # type: ignore[arg-type]
    for budget in (0, -5, True, 2.5):
        with pytest.raises(ValueError, match="token_budget must be an integer from 50"):
            timestone_tools(memory, group, token_budget=budget)  # type: ignore[arg-type]


def test_a_budget_search_memory_cannot_use_is_refused_when_made(
    memory: timestone.Memory, group: str
) -> None:
    """The budget ``context`` takes, checked when the tools are made: not at every
    ``search_memory`` call, where the model would read a refusal it cannot fix."""
    for budget in (10, 49, 200_001, 10**6):
        message = f"token_budget must be an integer from 50 to 200,000, got {budget}"
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            timestone_tools(memory, group, token_budget=budget)
    for budget in (50, 200_000):
        search = timestone_tools(memory, group, token_budget=budget)[0]
        assert search.invoke({"query": "Where does Mira work?"}) == (
            "Nothing in memory matches this query."
        )
