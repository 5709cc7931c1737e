"""LlamaIndex: a query engine that retrieves from Timestone (offline by default).

    .venv/bin/python examples/llamaindex_query.py

Offline, LlamaIndex's MockLLM writes the response (it echoes the prompt), so
what to look at is the retrieved evidence. With OPENAI_API_KEY set and
``llama-index-llms-openai`` installed, gpt-4o-mini answers.
TIMESTONE_DSN picks the Postgres (default: embedded).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from llama_index.core.llms import LLM, MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.graph_stores.timestone import TimestoneRetriever

import timestone

GROUP = "example-llamaindex"


def llm() -> LLM:
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from llama_index.llms.openai import OpenAI  # type: ignore[import-not-found]

            return OpenAI(model="gpt-4o-mini")  # pyright: ignore[reportUnknownVariableType]
        except ImportError:
            print("(llama-index-llms-openai is not installed: using MockLLM)")
    return MockLLM(max_tokens=40)


def main() -> None:
    with timestone.Memory.open() as memory:
        memory.add_facts(
            GROUP,
            [
                {"source": "Mira", "relation": "DIRECTS", "target": "Château Sud"},
                {"source": "Château Sud", "relation": "LOCATED_IN", "target": "Loire Valley"},
                {"source": "Château Sud", "relation": "GROWS", "target": "Cabernet Franc"},
            ],
            reference_time=datetime(2023, 6, 15, tzinfo=UTC),
        )
        retriever = TimestoneRetriever(memory, GROUP, similarity_top_k=2)
        engine = RetrieverQueryEngine.from_args(retriever, llm=llm())
        response = engine.query("Where is the winery Mira directs?")
        for hit in response.source_nodes:
            print(f"evidence ({hit.score:.3f}): {hit.node.get_content()}")
        print("response:", str(response).strip()[:80])


if __name__ == "__main__":
    main()
