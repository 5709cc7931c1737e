"""LangChain: an agent whose long-term memory is Timestone (offline by default).

Four pieces, each a few lines: ``TimestoneRetriever`` (facts as Documents),
``TimestoneStore`` (LangGraph long-term memory; namespace[0] is the group),
``TimestoneMemoryMiddleware`` (recalls evidence before the model, records the
exchange after the agent) and ``timestone_tools`` (search_memory, entity_timeline
and remember, for an agent that looks things up itself).

    .venv/bin/python examples/langchain_agent.py

Offline, small scripted chat models answer from the evidence they are shown, and
call a tool where the example needs one.
With OPENAI_API_KEY set and ``langchain-openai`` installed, gpt-4o-mini answers.
TIMESTONE_DSN picks the Postgres (default: the embedded one).
"""

# create_agent's compiled graph is generic in types this example leaves open.
# pyright: reportUnknownMemberType=false, reportUnknownVariableType=false

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult

import timestone
from langchain_timestone import (
    TimestoneMemoryMiddleware,
    TimestoneRetriever,
    TimestoneStore,
    timestone_tools,
)
from timestone import EdgeType, Ontology

ONTOLOGY = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
GROUP = "example-langchain"
FACTS = [
    ("2015-10-01", "Mira", "WORKS_AT", "Château Nord"),
    ("2023-06-15", "Mira", "WORKS_AT", "Château Sud"),
    ("2023-06-15", "Mira", "WORKS_WITH_GRAPE", "Cabernet Franc"),
]


class EvidenceEcho(BaseChatModel):
    """An offline stand-in for a chat model: answers with the best evidence line it was given."""

    @property
    def _llm_type(self) -> str:
        return "evidence-echo"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        system = next((m for m in messages if isinstance(m, SystemMessage)), None)
        lines = [x for x in str(system.content if system else "").splitlines() if x.startswith("[")]
        answer = f"From memory: {lines[0]}" if lines else "I don't know."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(answer))])


class TimelineCaller(BaseChatModel):
    """An offline stand-in for a model with tools: asks for Mira's employers, then answers
    with the latest period the tool returned."""

    @property
    def _llm_type(self) -> str:
        return "timeline-caller"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        returned = [m for m in messages if isinstance(m, ToolMessage)]
        if not returned:
            call = {"name": "entity_timeline", "args": {"entity": "Mira", "relation": "WORKS_AT"}}
            answer = AIMessage("", tool_calls=[{**call, "id": "call-1"}])
        else:
            answer = AIMessage(f"From her timeline: {str(returned[-1].content).splitlines()[-1]}")
        return ChatResult(generations=[ChatGeneration(message=answer)])


def chat_model(tools: bool = False) -> BaseChatModel:
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from langchain.chat_models import init_chat_model

            return init_chat_model("openai:gpt-4o-mini")
        except ImportError:
            print("(langchain-openai is not installed: using the offline model)")
    return TimelineCaller() if tools else EvidenceEcho()


def main() -> None:
    with timestone.Memory.open(ontology=ONTOLOGY) as memory:
        for day, source, relation, target in FACTS:
            memory.add_facts(
                GROUP,
                [{"source": source, "relation": relation, "target": target}],
                reference_time=datetime.fromisoformat(day).replace(tzinfo=UTC),
            )

        # 1. A retriever: facts and passages as Documents, with both clocks in metadata
        # (a fact is true from its valid_at; a passage was told at its reference_time).
        retriever = TimestoneRetriever(memory=memory, group_id=GROUP, k=2)
        for doc in retriever.invoke("Where does Mira work?"):
            when = doc.metadata.get("valid_at") or doc.metadata["reference_time"]
            print(f"retrieved: {doc.page_content[:80]}  ({doc.metadata['kind']}, {when[:10]})")

        # 2. An agent with memory: recall before the model, record after the agent.
        agent = create_agent(
            chat_model(),
            system_prompt="You answer questions about winemakers.",
            middleware=[TimestoneMemoryMiddleware(memory, GROUP)],
            store=TimestoneStore(memory),
        )
        out = agent.invoke({"messages": [HumanMessage("Where does Mira work now?")]})
        print("agent:", out["messages"][-1].content)

        # 3. The LangGraph store: key-value memory with semantic search, versioned.
        store = TimestoneStore(memory)
        store.put((GROUP, "users", "ada"), "taste", {"text": "Ada prefers Loire reds"})
        hit = store.search((GROUP, "users"), query="which wines does Ada like?", limit=1)[0]
        print(f"store: {hit.value['text']} (score {hit.score:.2f})")

        # 4. The memory tools: the agent looks up what it needs, each item cited and dated.
        agent = create_agent(chat_model(tools=True), tools=timestone_tools(memory, GROUP))
        out = agent.invoke({"messages": [HumanMessage("Where has Mira worked?")]})
        print("tools agent:", out["messages"][-1].content)


if __name__ == "__main__":
    main()
