"""OpenAICompatibleLLM on the real openai SDK, against scripted HTTP responses (no network)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import httpx
import openai
import pydantic
import pytest

import timestone
from timestone.errors import LLMError, UnusableAnswer
from timestone.extract._answers import loads
from timestone.extract._calls import Ledger, call
from timestone.llm import LLMRequest, ReplayTransport, chat_completion, replay_llm

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def request(step: str = "extraction", *, small: bool = False) -> LLMRequest:
    return LLMRequest(
        step=step,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        schema_name=step,
        schema=SCHEMA,
        small=small,
    )


def error(status: int, message: str, **headers: str) -> dict[str, Any]:
    return {
        "status": status,
        "headers": headers,
        "body": {"error": {"message": message, "type": "server_error", "code": None}},
    }


def test_structured_output_request_and_token_accounting() -> None:
    t = ReplayTransport(
        [chat_completion({"answer": "hello"}, prompt_tokens=12, completion_tokens=3)]
    )
    llm = replay_llm(t, model="big", small_model="small")
    reply = llm.complete(request())
    assert json.loads(reply.text) == {"answer": "hello"}
    assert (reply.prompt_tokens, reply.completion_tokens, reply.tokens) == (12, 3, 15)
    [sent] = t.requests
    assert sent["model"] == "big"
    assert sent["temperature"] == 0.0
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "extraction", "schema": SCHEMA, "strict": True},
    }
    t.extend([chat_completion({"answer": "x"}, prompt_tokens=5, completion_tokens=1)])
    llm.complete(request(small=True))
    assert t.requests[-1]["model"] == "small"
    assert (llm.calls, llm.prompt_tokens, llm.completion_tokens) == (2, 17, 4)
    t.check()


def test_falls_back_to_json_mode_when_the_server_refuses_schemas() -> None:
    refused = error(
        400, "'response_format.type' must be 'json_object' or 'text'; json_schema is not supported"
    )
    t = ReplayTransport(
        [refused, chat_completion({"answer": "a"}), chat_completion({"answer": "b"})]
    )
    llm = replay_llm(t)
    assert json.loads(llm.complete(request()).text) == {"answer": "a"}
    assert llm.json_mode == "json"  # remembered: the next call goes straight to JSON mode
    assert json.loads(llm.complete(request()).text) == {"answer": "b"}
    kinds = [r["response_format"]["type"] for r in t.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]
    system = t.requests[1]["messages"][0]["content"]
    assert system.startswith("Be brief.")
    assert '"required":["answer"]' in system  # the schema travels in the prompt
    t.check()


def test_json_mode_forced_for_local_servers() -> None:
    t = ReplayTransport([chat_completion({"answer": "a"})])
    llm = replay_llm(t, json_mode="json")
    llm.complete(request())
    # the schema travels beside the type too: servers that read it constrain the answer
    assert t.requests[0]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    t.check()


def test_falls_back_when_request_validation_refuses_json_schema() -> None:
    """llama.cpp's Python server validates the request and answers 422 naming the field."""
    refused = {
        "status": 422,
        "body": {
            "detail": [
                {
                    "type": "literal_error",
                    "loc": ["body", "response_format", "type"],
                    "msg": "Input should be 'text' or 'json_object'",
                    "input": "json_schema",
                }
            ]
        },
    }
    t = ReplayTransport([refused, chat_completion({"answer": "a"})])
    llm = replay_llm(t)
    assert json.loads(llm.complete(request()).text) == {"answer": "a"}
    assert llm.json_mode == "json"
    assert [r["response_format"]["type"] for r in t.requests] == ["json_schema", "json_object"]
    t.check()


# llama-cpp-python's server (0.3.36) wraps its request validation error in a 500
LLAMA_CPP_REFUSAL: dict[str, Any] = {
    "status": 500,
    "body": {
        "error": {
            "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
            "'response_format', 'type'), 'msg': \"Input should be 'text' or "
            "'json_object'\", 'input': 'json_schema'}",
            "type": "internal_server_error",
        }
    },
}


def test_falls_back_when_the_server_answers_its_validation_error_with_a_500() -> None:
    """llama-cpp-python's server (0.3.36) wraps the same validation error in a 500."""
    t = ReplayTransport([LLAMA_CPP_REFUSAL, chat_completion({"answer": "a"})])
    llm = replay_llm(t)
    assert json.loads(llm.complete(request()).text) == {"answer": "a"}
    assert llm.json_mode == "json"
    assert [r["response_format"]["type"] for r in t.requests] == ["json_schema", "json_object"]
    t.check()


def test_schema_mode_takes_the_500_refusal_at_once() -> None:
    """Asked again, a server that refuses json_schema with a 500 refuses again: with the
    schema mode chosen, one request and one error naming the status and the field."""
    t = ReplayTransport([LLAMA_CPP_REFUSAL])
    llm = replay_llm(t, json_mode="schema", backoff=0.0)
    with pytest.raises(LLMError) as caught:
        llm.complete(request())
    assert str(caught.value).startswith("extraction: the model server answered 500 after 1 attempt")
    assert "response_format" in str(caught.value)
    assert len(t.requests) == 1
    assert llm.json_mode == "schema"
    t.check()


def test_a_500_about_anything_else_is_retried_not_taken_for_a_refusal() -> None:
    failed = {"status": 500, "body": {"error": {"message": "out of memory", "type": "server"}}}
    t = ReplayTransport([failed, chat_completion({"answer": "a"})])
    llm = replay_llm(t, backoff=0.0)
    assert json.loads(llm.complete(request()).text) == {"answer": "a"}
    assert llm.json_mode == "auto"
    assert [r["response_format"]["type"] for r in t.requests] == ["json_schema", "json_schema"]
    t.check()


def test_a_422_on_anything_else_is_not_a_fallback_and_names_what_was_wrong() -> None:
    invalid = {"detail": [{"loc": ["body", "messages"], "msg": "Field required"}]}
    t = ReplayTransport([{"status": 422, "body": invalid}])
    llm = replay_llm(t)
    with pytest.raises(LLMError) as caught:
        llm.complete(request())
    assert str(caught.value) == (
        "extraction: the model server answered 422 after 1 attempt: Error code: 422 "
        '{"detail": [{"loc": ["body", "messages"], "msg": "Field required"}]}'
    )
    assert llm.json_mode == "auto"
    t.check()


def test_max_tokens_caps_every_call() -> None:
    t = ReplayTransport([chat_completion({"answer": "a"}), chat_completion({"answer": "b"})])
    llm = replay_llm(t, max_tokens=64)
    llm.complete(request())
    short = LLMRequest(
        step="question rewrite",
        messages=request().messages,
        schema_name="question_rewrite",
        schema=SCHEMA,
        max_tokens=16,
    )
    llm.complete(short)
    assert [r["max_tokens"] for r in t.requests] == [64, 16]  # the smaller limit wins
    t.check()
    with pytest.raises(LLMError, match=r"max_tokens must be at least 1 or None, got 0"):
        replay_llm(ReplayTransport(), max_tokens=0)


def test_retries_429_and_5xx_honouring_retry_after() -> None:
    t = ReplayTransport(
        [
            error(429, "Rate limit reached", **{"retry-after": "0"}),
            error(503, "overloaded", **{"retry-after-ms": "1"}),
            error(500, "boom"),
            chat_completion({"answer": "finally"}),
        ]
    )
    llm = replay_llm(t, backoff=0.0, max_retries=3)
    assert json.loads(llm.complete(request()).text) == {"answer": "finally"}
    assert len(t.requests) == 4
    assert llm.calls == 1  # failed attempts are not model answers
    t.check()


def test_gives_up_after_max_retries_with_the_step_and_status() -> None:
    t = ReplayTransport([error(503, "overloaded")] * 6)
    llm = replay_llm(t, backoff=0.0, max_retries=2)
    judging = LLMRequest(
        step="fact resolution",
        messages=request().messages,
        schema_name="fact_resolution",
        schema=SCHEMA,
    )
    with pytest.raises(LLMError, match=r"^fact resolution: the model server answered 503 after 3"):
        llm.complete(judging)
    with pytest.raises(LLMError) as e:
        llm.complete(judging)
    assert e.value.step == "fact resolution"
    t.check()


def test_client_errors_are_not_retried() -> None:
    t = ReplayTransport([error(422, "unprocessable")])
    llm = replay_llm(t, backoff=0.0)
    with pytest.raises(LLMError, match="answered 422 after 1 attempt"):
        llm.complete(request())
    t.check()


def test_wrong_key_and_unknown_model_are_clear() -> None:
    t = ReplayTransport([error(401, "Incorrect API key provided"), error(404, "model not found")])
    llm = replay_llm(t, model="gpt-nope")
    with pytest.raises(LLMError, match="refused the API key"):
        llm.complete(request())
    with pytest.raises(LLMError, match="does not know model 'gpt-nope'"):
        llm.complete(request())
    t.check()


def test_a_refusal_or_empty_answer_is_an_error() -> None:
    body = chat_completion("x")
    body["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": "I can't."}
    t = ReplayTransport([body])
    with pytest.raises(LLMError, match="refused: I can't"):
        replay_llm(t).complete(request())
    t.check()


async def test_async_client_given_as_client_and_concurrency_limit() -> None:
    in_flight = 0
    peak = 0

    async def handler(req: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(200, json=chat_completion({"answer": "ok"}))

    client = openai.AsyncOpenAI(
        api_key="sk-test",
        http_client=cast(Any, httpx.AsyncClient(transport=httpx.MockTransport(handler))),
    )
    llm = timestone.OpenAICompatibleLLM(client=client, model="m", max_concurrency=2)
    replies = await asyncio.gather(*(llm.acomplete(request()) for _ in range(6)))
    assert len(replies) == 6
    assert peak == 2
    with pytest.raises(LLMError, match="no blocking client"):
        llm.complete(request())


def test_needs_a_client_and_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LLMError, match="needs client="):
        timestone.OpenAICompatibleLLM(model="m")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert timestone.OpenAICompatibleLLM.from_env() is None
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("TIMESTONE_LLM_MODEL", "llama3.2")
    llm = timestone.OpenAICompatibleLLM.from_env()
    assert llm is not None
    assert (llm.model, llm.small_model) == ("llama3.2", "gpt-4.1-nano")


def test_replay_transport_fails_on_unplayed_and_unscripted_calls() -> None:
    t = ReplayTransport([chat_completion({"answer": "a"}), chat_completion({"answer": "b"})])
    llm = replay_llm(t)
    llm.complete(request())
    with pytest.raises(AssertionError, match="1 scripted response"):
        t.check()
    llm.complete(request())
    with pytest.raises(LLMError, match="599"):
        llm.complete(request())
    with pytest.raises(AssertionError, match="1 unscripted call"):
        t.check()


def test_a_timeout_is_retried_then_named() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=req)

    client = openai.OpenAI(
        api_key="sk-test",
        http_client=cast(Any, httpx.Client(transport=httpx.MockTransport(handler))),
    )
    llm = timestone.OpenAICompatibleLLM(client=client, model="m", max_retries=1, backoff=0.0)
    with pytest.raises(LLMError, match="extraction: the model did not answer in time after 2"):
        llm.complete(request())


@pytest.mark.parametrize(
    ("body", "message", "finish"),
    [
        (
            chat_completion('{"answer": "a long ans', finish_reason="length", completion_tokens=9),
            r"^extraction: the model's answer was cut off at its output limit \(finish_reason "
            r"'length', 9 completion tokens\)",
            "length",
        ),
        (
            chat_completion(None, refusal="I can't help with that."),
            r"^extraction: the model gave no answer \(it refused: I can't help with that\.\)",
            "stop",
        ),
        (
            chat_completion(None, finish_reason="content_filter"),
            r"^extraction: the model's answer was withheld by its content filter",
            "content_filter",
        ),
        (
            chat_completion("", completion_tokens=0) | {"choices": list[Any]()},
            r"^extraction: the model sent no choices",
            None,
        ),
    ],
)
def test_an_unusable_answer_is_one_clear_error_and_its_cost_is_counted(
    body: dict[str, Any], message: str, finish: str | None
) -> None:
    t = ReplayTransport([body])
    llm = replay_llm(t, backoff=0.0)
    with pytest.raises(UnusableAnswer, match=message) as err:
        llm.complete(request())
    assert isinstance(err.value, LLMError)
    assert err.value.step == "extraction"
    assert err.value.finish_reason == finish
    usage = body["usage"]
    assert (err.value.prompt_tokens, err.value.completion_tokens) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )
    assert err.value.model == body["model"]
    assert (llm.calls, llm.prompt_tokens) == (1, usage["prompt_tokens"])  # spent, and counted
    assert len(t.requests) == 1  # not asked again
    t.check()


def test_scripted_completions_vary_like_a_servers() -> None:
    bodies = [chat_completion({"answer": "same"}) for _ in range(4)]
    assert len({b["id"] for b in bodies}) == 4
    assert all(b["id"].startswith("chatcmpl-") and len(b["id"]) == 38 for b in bodies)
    assert len({b["created"] for b in bodies}) == 4
    assert all(b["system_fingerprint"].startswith("fp_") for b in bodies)
    assert "cached_tokens" in bodies[0]["usage"]["prompt_tokens_details"]
    # the real SDK reads every one of them
    t = ReplayTransport(bodies)
    llm = replay_llm(t)
    assert [json.loads(llm.complete(request()).text) for _ in bodies] == [{"answer": "same"}] * 4
    t.check()


@pytest.mark.parametrize(
    "text",
    [
        '{"answer": "a"}',
        '\n  {"answer": "a"}\n\n',
        '```json\n{"answer": "a"}\n```',
        '```\n{"answer": "a"}\n```\n',
        '  ```JSON\r\n{"answer": "a"}\r\n```  ',
        '```json {"answer": "a"}```',  # the object on the fence's line
        '```{"answer": "a"}```',
        '\ufeff{"answer": "a"}',  # a byte order mark
        '\ufeff```json\n{"answer": "a"}\n```',
    ],
)
def test_an_answer_is_read_through_whitespace_and_a_code_fence(text: str) -> None:
    assert loads(text) == {"answer": "a"}


def test_a_line_break_inside_a_string_is_read_as_itself() -> None:
    """llama.cpp's grammar for a schema's strings allows raw control characters: an
    answer with a line break inside a string is used at once, not asked again."""
    assert loads('{"answer": "two\nlines\tand a tab"}') == {"answer": "two\nlines\tand a tab"}
    t = ReplayTransport([chat_completion('{"answer": "Oslo\nNorway"}')])
    ledger = Ledger()
    got = call(replay_llm(t), ledger, request(), _Answer)
    assert got.answer == "Oslo\nNorway"
    assert [e.ok for e in ledger.entries] == [True]  # one call, used
    t.check()


class _Answer(pydantic.BaseModel):
    answer: str


@pytest.mark.parametrize(
    "text",
    ['Sure! ```json\n{"answer": "a"}\n```', '```json\n{"answer": "a"}', '{"answer": "a"} ```'],
)
def test_text_around_the_json_is_not_json(text: str) -> None:
    with pytest.raises(json.JSONDecodeError, match=r"Expecting value|Extra data"):
        loads(text)
