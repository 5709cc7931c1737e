"""create_agent with Timestone: the memory middleware and the LangGraph store, offline."""

# create_agent's compiled graph and ToolRuntime are generic in types these tests leave open.
# pyright: reportUnknownMemberType=false, reportUnknownVariableType=false
# pyright: reportUnknownParameterType=false

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from pydantic import Field

import timestone
from langchain_timestone import TimestoneMemoryMiddleware, TimestoneStore
from timestone.errors import InvalidInput
from timestone.search._tokens import default_counter


class RecordingModel(GenericFakeChatModel):
    """A scripted chat model that keeps the prompts it was given and accepts tools."""

    seen: list[list[BaseMessage]] = Field(default_factory=list[list[BaseMessage]])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _model(replies: list[AIMessage]) -> RecordingModel:
    it: Iterator[AIMessage] = iter(replies)
    return RecordingModel(messages=it)


def test_middleware_recalls_before_the_model_and_records_after(
    memory: timestone.Memory, mira: str
) -> None:
    model = _model([AIMessage("She works at Château Sud.")])
    agent = create_agent(
        model,
        system_prompt="You are a wine assistant.",
        middleware=[TimestoneMemoryMiddleware(memory, mira)],
    )
    out = agent.invoke({"messages": [HumanMessage("Where does Mira work now?")]})
    assert out["messages"][-1].content == "She works at Château Sud."
    system = model.seen[0][0]
    assert isinstance(system, SystemMessage)
    assert str(system.content).startswith("You are a wine assistant.")
    assert "Mira works at Château Sud." in str(system.content)
    assert "[F-" in str(system.content)  # citation ids
    assert len(out["messages"]) == 2  # recall changed the prompt, not the state
    recorded = memory.search(mira, "Where does Mira work now", scopes=("episodes",), limit=5)
    assert any(
        e.content == "User: Where does Mira work now?\nAssistant: She works at Château Sud."
        for e in recorded.episodes
    )


@pytest.mark.parametrize("budget", [82, 120, 400])
def test_what_the_middleware_adds_keeps_to_its_budget(
    memory: timestone.Memory, mira: str, budget: int
) -> None:
    """``token_budget`` bounds all the middleware adds to the system message: the
    evidence, its label and the break before it, counted by the context's tokenizer; a
    budget that leaves the context less than it takes is refused when the middleware is
    made."""
    model = _model([AIMessage("ok")])
    agent = create_agent(
        model,
        system_prompt="SYS",
        middleware=[TimestoneMemoryMiddleware(memory, mira, token_budget=budget, record=False)],
    )
    agent.invoke({"messages": [HumanMessage("Which grape does Mira work with?")]})
    with pytest.raises(InvalidInput, match=r"token_budget must be at least 82 \(32 go to"):
        TimestoneMemoryMiddleware(memory, mira, token_budget=81)
    added = str(model.seen[0][0].content).removeprefix("SYS")
    assert ("[F-" in added) is (budget >= 120)  # the least budget holds no item
    assert default_counter().count(added) <= budget


def test_a_long_message_with_a_nul_byte_is_recalled_and_recorded(
    memory: timestone.Memory, mira: str
) -> None:
    """A pasted log of 30,000 characters holding a NUL byte, then the question: recall
    reads the message's end (a search takes 10,000 characters), and the exchange is
    recorded with the NUL replaced; neither fails the run."""
    pasted = "log line\x00 " * 2_500 + "Where does Mira work now?"
    model = _model([AIMessage("At Château Sud.")])
    agent = create_agent(model, middleware=[TimestoneMemoryMiddleware(memory, mira)])
    out = agent.invoke({"messages": [HumanMessage(pasted)]})
    assert out["messages"][-1].content == "At Château Sud."
    assert "Mira works at Château Sud." in str(model.seen[0][0].content)
    recorded = memory.search(mira, "log line Where does Mira work", scopes=("episodes",))
    assert any("log line\ufffd " in e.content for e in recorded.episodes)


def test_a_message_longer_than_a_document_is_recorded_cut(
    memory: timestone.Memory, mira: str
) -> None:
    """A paste past what one document holds: the exchange is recorded within the limit,
    the message's end and the answer kept, instead of failing the run after the model
    answered."""
    pasted = "log " * 250_001 + "Where does Mira work now?"  # 1,000,029 characters
    model = _model([AIMessage("At Château Sud.")])
    agent = create_agent(model, middleware=[TimestoneMemoryMiddleware(memory, mira)])
    out = agent.invoke({"messages": [HumanMessage(pasted)]})
    assert out["messages"][-1].content == "At Château Sud."
    chunks = [e for e in memory.episodes(mira, limit=1000) if e.document_uri]
    assert {e.document_uri for e in chunks} == {chunks[0].document_uri}
    first = min(chunks, key=lambda e: e.char_start or 0)
    last = max(chunks, key=lambda e: e.char_end or 0)
    assert first.char_start == 0
    assert first.content.startswith("User: … log log ")
    assert last.char_end == 1_000_000
    assert last.content.endswith("log Where does Mira work now?\nAssistant: At Château Sud.")


def test_middleware_settings_are_checked_when_made(memory: timestone.Memory, mira: str) -> None:
    """A budget ``context`` does not take, a ``conversation`` no record can be named by, or
    a ``record`` that is not a bool: refused when the middleware is made, naming the
    setting, not after the model has answered."""
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        (
            {"token_budget": 10},
            ValueError,
            "token_budget must be an integer from 50 to 200,000, got 10",
        ),
        (
            {"conversation": "chat\x001"},
            timestone.errors.InvalidInput,
            "conversation contains a NUL byte, which Postgres text cannot store",
        ),
        (
            {"conversation": "c" * 492},
            timestone.errors.InvalidInput,
            "conversation has 492 characters; the limit is 491",
        ),
        ({"conversation": " "}, timestone.errors.InvalidInput, "conversation is empty"),
        ({"record": "no"}, TypeError, "record must be True or False, got 'no'"),
    ]
    for settings, error, message in cases:
        with pytest.raises(error) as raised:
            TimestoneMemoryMiddleware(memory, mira, **settings)
        assert str(raised.value) == message
    # the longest conversation names its records
    middleware = TimestoneMemoryMiddleware(memory, mira, conversation="c" * 491)
    agent = create_agent(_model([AIMessage("At Château Sud.")]), middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("Where does Mira work now?")]})
    uris = {e.document_uri for e in memory.episodes(mira, limit=1000) if e.document_uri}
    assert [len(u) for u in uris if u.startswith("ccc")] == [512]


async def test_middleware_on_async_memory(amemory: timestone.AsyncMemory, mira: str) -> None:
    model = _model([AIMessage("Gamay, then Cabernet Franc.")])
    agent = create_agent(model, middleware=[TimestoneMemoryMiddleware(amemory, mira)])
    await agent.ainvoke({"messages": [HumanMessage("Which grapes has Mira worked with?")]})
    assert "Cabernet Franc" in str(model.seen[0][0].content)
    recorded = await amemory.search(mira, "grapes Mira worked with", scopes=("episodes",))
    assert any(
        e.content.endswith("Assistant: Gamay, then Cabernet Franc.") for e in recorded.episodes
    )


def test_a_system_prompt_of_blocks_keeps_them_and_gets_the_evidence_as_one_more(
    memory: timestone.Memory, mira: str
) -> None:
    blocks: list[str | dict[str, Any]] = [
        {"type": "text", "text": "You are a wine assistant.", "cache_control": {"type": "x"}},
        {"type": "text", "text": "Answer briefly."},
    ]
    model = _model([AIMessage("At Château Sud.")])
    agent = create_agent(
        model,
        system_prompt=SystemMessage(content=blocks),
        middleware=[TimestoneMemoryMiddleware(memory, mira, record=False)],
    )
    agent.invoke({"messages": [HumanMessage("Where does Mira work now?")]})
    content = model.seen[0][0].content
    assert isinstance(content, list)
    assert content[:2] == blocks  # as given, the cache mark included
    [added] = content[2:]
    assert isinstance(added, dict)
    assert "Mira works at Château Sud." in str(added["text"])


def test_the_parts_of_a_message_are_recorded_apart(memory: timestone.Memory, group: str) -> None:
    agent = create_agent(
        _model([AIMessage("From the Loire.")]),
        middleware=[TimestoneMemoryMiddleware(memory, group)],
    )
    parts: list[str | dict[str, Any]] = [
        {"type": "text", "text": "Here is a label."},
        {"type": "image", "url": "https://example.invalid/label.png"},
        {"type": "text", "text": "Which estate is it from?"},
    ]
    agent.invoke({"messages": [HumanMessage(content=parts)]})
    [episode] = memory.episodes(group)
    assert episode.content == (
        "User: Here is a label.\nWhich estate is it from?\nAssistant: From the Loire."
    )


def _with_model(dsn: str, responses: list[dict[str, Any]]) -> tuple[timestone.Memory, Any]:
    from timestone.llm import ReplayTransport, replay_llm

    transport = ReplayTransport(responses)
    return timestone.Memory.open(dsn, llm=replay_llm(transport, backoff=0.0), warm=False), transport


def test_a_model_that_fails_to_record_does_not_fail_the_run(
    dsn: str, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    refused = {"status": 401, "body": {"error": {"message": "Incorrect API key provided"}}}
    mem, transport = _with_model(dsn, [refused])
    with mem:
        agent = create_agent(
            _model([AIMessage("At Château Sud.")]),
            middleware=[TimestoneMemoryMiddleware(mem, group)],
        )
        out = agent.invoke({"messages": [HumanMessage("Where does Mira work now?")]})
        assert out["messages"][-1].content == "At Château Sud."
        [kept] = mem.episodes(group)  # as a passage, as without a model
        assert kept.content.endswith("Assistant: At Château Sud.")
    assert "kept as a passage" in caplog.text
    transport.check()


def test_an_exchange_recorded_twice_through_a_model_is_one_episode(dsn: str, group: str) -> None:
    from timestone.llm import chat_completion

    reply = '{"entities": [{"name": "Mira", "type": "Entity", "attributes": []}], "facts": []}'
    mem, transport = _with_model(dsn, [{"step": "extraction", "body": chat_completion(reply)}])
    with mem:
        for _ in range(2):
            agent = create_agent(
                _model([AIMessage("At Château Sud.")]),
                middleware=[TimestoneMemoryMiddleware(mem, group)],
            )
            agent.invoke({"messages": [HumanMessage("Where does Mira work now?")]})
        assert len(mem.episodes(group)) == 1
    transport.check()  # one extraction, not two


@tool
def remember(fact: str, runtime: ToolRuntime) -> str:
    """Save a fact about the user."""
    assert runtime.store is not None
    user = runtime.config.get("configurable", {}).get("user", "anon")
    runtime.store.put(("acme-corp", "users", user), "fact-1", {"text": fact})
    return "saved"


def test_create_agent_with_timestone_store(memory: timestone.Memory, group: str) -> None:
    store = TimestoneStore(memory)
    model = _model(
        [
            AIMessage(
                "",
                tool_calls=[{"name": "remember", "args": {"fact": "likes Gamay"}, "id": "c1"}],
            ),
            AIMessage("Noted."),
        ]
    )
    agent = create_agent(model, tools=[remember], store=store)
    agent.invoke(
        {"messages": [HumanMessage("Remember that I like Gamay")]},
        {"configurable": {"user": group}},
    )
    saved = store.get(("acme-corp", "users", group), "fact-1")
    assert saved is not None
    assert saved.value == {"text": "likes Gamay"}
    hits = store.search(("acme-corp", "users"), query="which grape does the user like")
    assert [h.key for h in hits if h.namespace[-1] == group] == ["fact-1"]


# langmem's dependency trustcall imports Send from its pre-1.0 place in langgraph
@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
def test_langmem_tools_on_timestone_store(memory: timestone.Memory, group: str) -> None:
    from langmem import create_manage_memory_tool, create_search_memory_tool

    store = TimestoneStore(memory)
    namespace = (group, "memories", "{user_id}")
    manage = create_manage_memory_tool(namespace, store=store)
    search = create_search_memory_tool(namespace, store=store)
    model = _model(
        [
            AIMessage(
                "",
                tool_calls=[
                    {
                        "name": "manage_memory",
                        "args": {"content": "Ada prefers Loire reds", "action": "create"},
                        "id": "c1",
                    }
                ],
            ),
            AIMessage(
                "",
                tool_calls=[{"name": "search_memory", "args": {"query": "wine"}, "id": "c2"}],
            ),
            AIMessage("You prefer Loire reds."),
        ]
    )
    agent = create_agent(model, tools=[manage, search], store=store)
    out = agent.invoke(
        {"messages": [HumanMessage("I prefer Loire reds; what do I like?")]},
        {"configurable": {"user_id": "ada"}},
    )
    found = store.search((group, "memories", "ada"))
    assert [item.value["content"] for item in found] == ["Ada prefers Loire reds"]
    searched = [m for m in out["messages"] if getattr(m, "name", None) == "search_memory"]
    assert "Ada prefers Loire reds" in str(searched[0].content)
