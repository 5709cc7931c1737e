"""PydanticAI: an agent with Timestone memory whose answers must cite what it retrieved.

``TimestoneMemory`` adds the memory tools (search_memory, entity_timeline,
remember) and their instructions; with ``output_type=GroundedAnswer`` an answer
citing anything the tools did not return in this run is sent back to the model.

    .venv/bin/python examples/pydanticai_agent.py

Offline, a scripted FunctionModel plays the model: it first cites an id it made
up (and is sent back), then cites the fact it retrieved. With OPENAI_API_KEY
set, gpt-4o-mini answers. TIMESTONE_DSN picks the Postgres (default: embedded).
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

import timestone
from pydantic_ai_timestone import GroundedAnswer, TimestoneDeps, TimestoneMemory
from timestone import EdgeType, Ontology

ONTOLOGY = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
GROUP = "example-pydanticai"


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Search, answer with a made-up citation, then with the one the search returned."""
    turns = sum(isinstance(m, ModelResponse) for m in messages)
    if turns == 0:
        return ModelResponse(parts=[ToolCallPart("search_memory", {"query": "Mira works at"})])
    found = "\n".join(
        part.model_response_str()
        for m in messages
        if isinstance(m, ModelRequest)
        for part in m.parts
        if isinstance(part, ToolReturnPart) and part.tool_name == "search_memory"
    )
    line = next(x for x in found.splitlines() if "Château Sud" in x)
    cited = ["F-0000000000"] if turns == 1 else re.findall(r"F-[0-9a-f]{10}", line)
    answer = {"answer": "Mira works at Château Sud.", "citations": cited}
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, answer)])


def model() -> Model | str:
    return "openai:gpt-4o-mini" if os.environ.get("OPENAI_API_KEY") else FunctionModel(scripted)


def main() -> None:
    with timestone.Memory.open(ontology=ONTOLOGY) as memory:
        for day, target in (("2015-10-01", "Château Nord"), ("2023-06-15", "Château Sud")):
            memory.add_facts(
                GROUP,
                [{"source": "Mira", "relation": "WORKS_AT", "target": target}],
                reference_time=datetime.fromisoformat(day).replace(tzinfo=UTC),
            )
        agent = Agent(
            model(),
            deps_type=TimestoneDeps,
            output_type=GroundedAnswer,
            capabilities=[TimestoneMemory()],
        )
        result = agent.run_sync("Where does Mira work now?", deps=TimestoneDeps(memory, GROUP))
        for m in result.all_messages():
            for part in getattr(m, "parts", []):
                if getattr(part, "outcome", None) == "retried":
                    print("sent back to the model:", part.content)
        print("answer:", result.output.answer)
        print("citations:", ", ".join(result.output.citations))


if __name__ == "__main__":
    main()
