"""Structured output against the real server, and bad input: a server that is down, slow,
cut short, or that ignores the schema.

llama.cpp's Python server has no ``json_schema`` response format: its request
validation refuses it, and 0.3.36 answers that with a 500 whose message names
``response_format`` (a 422 elsewhere; tests/core/test_llm.py pins both on scripted
answers). The library then switches, once, to JSON mode with the schema beside the
type, which this server turns into a grammar: the answer is constrained to the schema. Each failure below ends in a clear ``LLMError`` after bounded attempts, and
writes nothing.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx
import openai
import pytest
from _invariants import LOCAL_PORTS, check_nothing_written, ingest, load_episodes, rows

import timestone
from timestone.errors import LLMError, UnusableAnswer
from timestone.extract import _cardinality_async as cardinality
from timestone.extract import _prompts as P
from timestone.extract._answers import loads
from timestone.llm import LLMRequest
from tools.model.build import ensure_built
from tools.model.client import MakeLLM
from tools.model.server import Server, free_port

EPISODE = load_episodes()[0]

CITY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Lisbon", "Oslo", "Nairobi"]},
        "year": {"type": ["integer", "null"]},
    },
    "required": ["city", "year"],
    "additionalProperties": False,
}


def city_request(question: str) -> LLMRequest:
    return LLMRequest(
        step="extraction",
        messages=[
            {"role": "system", "content": "Answer the question."},
            {"role": "user", "content": question},
        ],
        schema_name="city",
        schema=CITY,
        max_tokens=48,
    )


def check_city(text: str) -> None:
    answer = loads(text)
    assert set(answer) == {"city", "year"}
    assert answer["city"] in {"Lisbon", "Oslo", "Nairobi"}
    assert answer["year"] is None or isinstance(answer["year"], int)


def library_schemas() -> dict[str, Any]:
    """Every schema the library sends, in the forms it takes."""
    return {
        "extraction (open)": P.extraction_schema([], []),
        "extraction (closed)": P.extraction_schema(["Person", "Place"], ["LIVES_IN", "WORKS_AT"]),
        "entity resolution": P.ENTITY_RESOLUTION_SCHEMA,
        "fact resolution": P.FACT_RESOLUTION_SCHEMA,
        "summary condensation": P.CONDENSE_SCHEMA,
        "saga summary": P.SAGA_SCHEMA,
        "question rewrite": P.REWRITE_SCHEMA,
        "relation cardinality": cardinality._SCHEMA,  # pyright: ignore[reportPrivateUsage]
    }


_CONVERT = """
import json, sys
from llama_cpp.llama_grammar import LlamaGrammar
for name, schema in json.load(sys.stdin).items():
    LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    print(name)
"""


def test_every_schema_the_library_sends_becomes_a_grammar(model_server: Server) -> None:
    """The server turns a schema it cannot convert into plain JSON silently: each of the
    library's schemas must convert, or its answers would be unconstrained."""
    schemas = library_schemas()
    done = subprocess.run(
        [str(model_server.build.python), "-c", _CONVERT],
        input=json.dumps(schemas),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == list(schemas)


def test_auto_mode_falls_back_once_and_the_answer_fits_the_schema(make_llm: MakeLLM) -> None:
    llm, recorder = make_llm()
    check_city(llm.complete(city_request("Where does Tomas live? He lives in Lisbon.")).text)
    assert [(e.response_format, e.status) for e in recorder.exchanges] == [
        ("json_schema", 500),
        ("json_object", 200),
    ]
    assert "response_format" in json.dumps(recorder.exchanges[0].body)
    assert llm.json_mode == "json"  # remembered: the next call goes straight to JSON mode
    check_city(llm.complete(city_request("Write a poem about the sea instead.")).text)
    assert [e.response_format for e in recorder.exchanges[2:]] == ["json_object"]
    sent = recorder.exchanges[-1].request["response_format"]
    assert sent == {"type": "json_object", "schema": CITY}
    assert llm.calls == 2
    assert (llm.prompt_tokens, llm.completion_tokens) == recorder.tokens()


def test_json_mode_from_the_start(make_llm: MakeLLM) -> None:
    llm, recorder = make_llm(json_mode="json")
    check_city(llm.complete(city_request("Sam moved to Nairobi in 2024.")).text)
    assert [(e.response_format, e.status) for e in recorder.exchanges] == [("json_object", 200)]


def test_schema_mode_on_this_server_is_one_clear_error(make_llm: MakeLLM) -> None:
    llm, recorder = make_llm(json_mode="schema")
    with pytest.raises(LLMError, match=r"^extraction: the model server answered 500 after 1 ") as e:
        llm.complete(city_request("Where is Oslo?"))
    assert "response_format" in str(e.value)
    assert len(recorder.exchanges) == 1  # a refusal is not retried, even as a 500


# -- bad input: nothing is written ---------------------------------------------------


def test_a_stopped_server_is_a_clear_error_after_bounded_retries(
    mem: timestone.Memory, open_llm: MakeLLM, group: str
) -> None:
    stopped = Server(ensure_built())
    stopped.start()
    port = stopped.port
    stopped.stop()
    assert not stopped.running
    LOCAL_PORTS.add(port)
    llm, recorder = open_llm(stopped.base_url, stopped.model, max_retries=2, backoff=0.01)
    mem.llm = llm
    outcome = ingest(mem, group, EPISODE)
    assert outcome.error is not None
    assert str(outcome.error).startswith(
        "extraction: the model server could not be reached after 3 attempts"
    )
    assert len(recorder.exchanges) == 3
    assert recorder.answered == []
    check_nothing_written(mem, group)


def test_a_port_with_no_server(mem: timestone.Memory, open_llm: MakeLLM, group: str) -> None:
    port = free_port()
    LOCAL_PORTS.add(port)
    llm, recorder = open_llm(f"http://127.0.0.1:{port}/v1", "any", max_retries=1, backoff=0.01)
    mem.llm = llm
    outcome = ingest(mem, group, EPISODE)
    assert outcome.error is not None
    assert "could not be reached after 2 attempts" in str(outcome.error)
    assert len(recorder.exchanges) == 2
    check_nothing_written(mem, group)


def test_slow_answers_time_out_after_bounded_retries(
    mem: timestone.Memory, make_llm: MakeLLM, group: str
) -> None:
    # the server reads a prompt of ~1,500 tokens: far more than 0.2 s on this machine
    llm, recorder = make_llm(json_mode="json", timeout=0.2, max_retries=1, max_tokens=16)
    mem.llm = llm
    outcome = ingest(mem, group, EPISODE)
    assert outcome.error is not None
    assert str(outcome.error) == "extraction: the model did not answer in time after 2 attempts"
    assert len(recorder.exchanges) == 2
    assert recorder.answered == []
    check_nothing_written(mem, group)


def test_truncated_json_is_an_unusable_answer_at_once(
    mem: timestone.Memory, make_llm: MakeLLM, group: str
) -> None:
    llm, recorder = make_llm(max_tokens=5)
    mem.llm = llm
    outcome = ingest(mem, group, EPISODE)
    assert isinstance(outcome.error, UnusableAnswer)
    assert "cut off at its output limit (finish_reason 'length', 5 completion tokens)" in str(
        outcome.error
    )
    assert len(recorder.answered) == 1  # not asked again: it would be cut off again
    assert rows(mem, group)["episodes"] == 0
    spent = mem.llm_usage(group)
    assert (spent.calls, spent.prompt_tokens, spent.completion_tokens) == (
        1,
        *recorder.tokens(),
    )


class SchemaDropped(httpx.HTTPTransport):
    """A server that ignores the schema: the request reaches the real server without it."""

    dropped = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body.get("response_format", {}).pop("schema", None) is not None:
            self.dropped += 1
        headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
        plain = httpx.Request(request.method, request.url, headers=headers, json=body)
        return super().handle_request(plain)


def test_a_server_that_ignores_the_schema(
    mem: timestone.Memory, model_server: Server, open_llm: MakeLLM, group: str
) -> None:
    """Free JSON from a small model: used when it fits, else asked again at most twice,
    then one clear error; either way the invariants hold."""
    dropping = SchemaDropped()
    llm, recorder = open_llm(
        model_server.base_url,
        model_server.model,
        transport=dropping,
        json_mode="json",
        max_tokens=256,
        backoff=0.01,
    )
    mem.llm = llm
    outcome = ingest(mem, group, EPISODE)
    assert dropping.dropped == len(recorder.exchanges) >= 1
    assert recorder.answered, f"the model server answered nothing: {outcome.error}"
    if outcome.error is not None:
        assert not isinstance(outcome.error.__cause__, openai.APIConnectionError), outcome.error
        assert str(outcome.error).startswith("extraction: ")
        assert len(recorder.answered) <= 3
        assert rows(mem, group)["episodes"] == 0
    spent = mem.llm_usage(group)
    assert (spent.prompt_tokens, spent.completion_tokens) == recorder.tokens()
