"""Text ingestion offline: a local model server extracts facts, no API key needed.

Starts the local server of ``python -m tools.model.run`` (llama-cpp-python with the packaged
SmolLM2-135M-Instruct, built once into a cache outside the repository; the first build
takes a while), gives it three short episodes, and prints what was written. A 135M model
extracts poorly: it shows the pipeline, not the quality a larger model gives.

    .venv/bin/python examples/local_model.py
    .venv/bin/python examples/local_model.py --base-url http://127.0.0.1:11434/v1 --model llama3.2

With ``--base-url`` it uses that server instead (Ollama, vLLM, llama.cpp's own server).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Generator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import openai

import timestone
from timestone.errors import ExtractionWarning, LLMError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tools.model

EPISODES = [
    ("Priya Natarajan joined Northwind Labs in January 2021.", "text", datetime(2021, 1, 20)),
    ("Sam Okafor: I moved to Nairobi last month.", "message", datetime(2024, 3, 10)),
    ('{"employee": "Omar Haddad", "employer": "Cedar Logistics"}', "json", datetime(2023, 9, 1)),
]


@contextmanager
def local_server() -> Generator[tuple[str, str]]:
    from tools.model.build import ensure_built
    from tools.model.server import Server

    print("starting the local model server (the first run builds it)...", flush=True)
    with Server(ensure_built()) as server:
        yield server.base_url, server.model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: local)")
    parser.add_argument("--model", default="local", help="the model's name on that server")
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        if args.base_url:
            base_url, model = args.base_url, args.model
        else:
            base_url, model = stack.enter_context(local_server())
        llm = timestone.OpenAICompatibleLLM(
            client=openai.OpenAI(base_url=base_url, api_key="unused"),
            model=model,
            max_tokens=768,  # a small model can otherwise write until its context is full
        )
        mem = stack.enter_context(timestone.Memory.open(llm=llm))  # the embedded Postgres
        for content, source, when in EPISODES:
            print(f"\n{source}: {content}")
            with warnings.catch_warnings(record=True) as dropped:
                warnings.simplefilter("always", ExtractionWarning)
                try:
                    res = mem.add_episode(
                        "local-model-example",
                        content,
                        reference_time=when.replace(tzinfo=UTC),
                        source=source,
                    )
                except LLMError as exc:  # a small model's answer can be unusable
                    print(f"  not written: {exc}")
                    continue
            for fact in res.facts:
                print(f"  {fact.source} {fact.relation} {fact.target}  ({fact.fact})")
            if not res.facts:
                print(f"  no facts; entities: {', '.join(e.name for e in res.entities) or 'none'}")
            print(f"  {res.llm_calls} call(s), {res.llm_tokens} tokens", end="")
            print(f", {len(dropped)} dropped by the checks" if dropped else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
