"""Language models: the ``LLM`` protocol, ``OpenAICompatibleLLM``, and a replay transport.

Timestone asks a model for JSON that matches a schema and nothing else. The
mechanism parses, validates and retries malformed answers; the model only
reads text. ``OpenAICompatibleLLM`` speaks to any OpenAI-compatible server
(OpenAI, Azure, Ollama, vLLM, llama.cpp) through the ``openai`` SDK:

- structured outputs (``response_format={"type": "json_schema", ...}``), and a
  fallback to JSON mode with the schema in the prompt for servers that refuse
  it (``json_mode="auto"`` switches once and remembers);
- retries with exponential backoff on 408/409/429/5xx and connection errors,
  honouring ``Retry-After``/``retry-after-ms``;
- a concurrency limit shared by every call of the instance;
- per-call token accounting (``LLMReply.prompt_tokens``/``completion_tokens``).

``ReplayTransport`` is the offline test double: an ``httpx`` transport that
serves scripted chat-completion responses (written by hand in the API's shape,
not recorded from a model) in order and keeps what it was asked, so tests
(yours too) run the real client with no network.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import email.utils
import hashlib
import itertools
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

from .errors import InvalidInput, LLMError, UnusableAnswer

if TYPE_CHECKING:
    import httpx
    import openai

    from ._replay import ReplayTransport

__all__ = [
    "LLM",
    "LLMBudget",
    "LLMReply",
    "LLMRequest",
    "LLMUsage",
    "OpenAICompatibleLLM",
    "ReplayTransport",
    "chat_completion",
    "replay_llm",
]

JsonMode = Literal["auto", "schema", "json"]


@dataclasses.dataclass(frozen=True, slots=True)
class LLMRequest:
    """One structured call: chat messages and the JSON schema the answer must match.

    ``step`` names the ingestion step (``extraction``, ``entity resolution``, …) for
    errors and the ledger; ``small`` asks for the cheaper model.
    """

    step: str
    messages: Sequence[Mapping[str, str]]
    schema_name: str
    schema: Mapping[str, Any]
    small: bool = False
    max_tokens: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class LLMReply:
    """The model's raw answer (JSON text) and what it cost."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclasses.dataclass(frozen=True, slots=True)
class LLMBudget:
    """A group's LLM budget: at most ``max_calls`` calls and ``max_tokens`` tokens in any
    window of ``period`` (``None``: no limit on that measure)."""

    max_calls: int | None
    max_tokens: int | None
    period: timedelta


@dataclasses.dataclass(frozen=True, slots=True)
class LLMUsage:
    """The LLM calls and tokens a group spent since ``since`` (``None``: ever)."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    since: datetime | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@runtime_checkable
class LLM(Protocol):
    """What Timestone needs of a model: a blocking and an async structured completion.

    Raise ``timestone.errors.LLMError`` for failures; any other exception is wrapped.
    """

    def complete(self, request: LLMRequest) -> LLMReply:
        """Answer ``request`` (blocking, for ``Memory``): the text, and the tokens used."""
        ...

    async def acomplete(self, request: LLMRequest) -> LLMReply:
        """``complete``, awaited (for ``AsyncMemory``)."""
        ...


def check_llm(value: object) -> LLM | None:
    """``value`` when it is None or a model (``complete`` and ``acomplete``, the ``LLM``
    protocol); anything else, a model's name given where the model goes for one, is
    refused before anything is written or asked."""
    if value is None:
        return None
    lacking = [m for m in ("complete", "acomplete") if not callable(getattr(value, m, None))]
    if lacking:
        raise InvalidInput(
            f"llm must be a timestone.LLM such as OpenAICompatibleLLM(client=..., model=...), "
            f"got {type(value).__name__} {value!r:.60} without {' and '.join(lacking)}"
        )
    return cast(LLM, value)


_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_SCHEMA_REFUSED = ("response_format", "json_schema", "structured output", "not supported")


#: The OpenAI SDK's own default, passed explicitly: given None, the SDK reads
#: ``OPENAI_BASE_URL`` itself, blank or not.
OPENAI_URL = "https://api.openai.com/v1"


def base_url_from_env(error: type[Exception]) -> str | None:
    """``OPENAI_BASE_URL``: None when unset or blank, else an ``http(s)://`` URL with a
    host, or ``error`` naming the variable and its value (a URL without its scheme
    would otherwise be retried as an unreachable server)."""
    from urllib.parse import urlsplit

    base = os.environ.get("OPENAI_BASE_URL", "")
    if not base.strip():
        return None
    try:
        parts = urlsplit(base)
        fine = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        fine = False
    if not fine:
        raise error(
            f"OPENAI_BASE_URL must be an http:// or https:// URL such as "
            f"http://localhost:11434/v1, got {base!r:.200}"
        )
    return base


def _model_from_env(variable: str, default: str) -> str:
    value = os.environ.get(variable)
    if value is None:
        return default
    if not value.strip():
        raise LLMError(f"{variable} is set but blank: name a model, or unset it for {default}")
    return value


class OpenAICompatibleLLM:
    """A model behind any OpenAI-compatible chat-completions endpoint.

    Pass ``client=openai.OpenAI(...)`` for ``Memory`` and/or
    ``async_client=openai.AsyncOpenAI(...)`` for ``AsyncMemory``; an
    ``openai.AsyncOpenAI`` given as ``client`` is taken as the async client.
    ``small_model`` (default: ``model``) serves the cheap steps (condensing
    summaries, saga summaries). ``max_tokens`` caps the answer of every call (local
    servers may otherwise generate until their context is full).
    """

    def __init__(
        self,
        client: openai.OpenAI | openai.AsyncOpenAI | None = None,
        *,
        model: str,
        small_model: str | None = None,
        async_client: openai.AsyncOpenAI | None = None,
        json_mode: JsonMode = "auto",
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_concurrency: int = 8,
        timeout: float = 120.0,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
    ) -> None:
        import openai as _openai

        if isinstance(client, _openai.AsyncOpenAI):
            if async_client is not None:
                raise LLMError("pass one async client: client= was already an AsyncOpenAI")
            client, async_client = None, client
        if client is None and async_client is None:
            raise LLMError(
                "OpenAICompatibleLLM needs client=openai.OpenAI(...) and/or "
                "async_client=openai.AsyncOpenAI(...)"
            )
        for given, what in ((client, "client"), (async_client, "async_client")):
            if given is not None and not callable(getattr(given, "with_options", None)):
                kind = "openai.OpenAI" if what == "client" else "openai.AsyncOpenAI"
                raise LLMError(f"{what} must be an {kind}(...), got {type(given).__name__}")
        if not isinstance(cast(object, model), str) or not model.strip():
            raise LLMError(f"model must be a model's name, got {model!r:.80}")
        if json_mode not in ("auto", "schema", "json"):
            raise LLMError(f"json_mode must be 'auto', 'schema' or 'json', got {json_mode!r}")
        if max_concurrency < 1:
            raise LLMError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if max_tokens is not None and max_tokens < 1:
            raise LLMError(f"max_tokens must be at least 1 or None, got {max_tokens}")
        self.model = model
        self.small_model = small_model or model
        self.json_mode: JsonMode = json_mode
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_concurrency = max_concurrency
        # the SDK's own retries are off: these retries honour Retry-After and count attempts
        self._client = (
            client.with_options(max_retries=0, timeout=timeout) if client is not None else None
        )
        self._async_client = (
            async_client.with_options(max_retries=0, timeout=timeout)
            if async_client is not None
            else None
        )
        self._sync_slots = threading.BoundedSemaphore(max_concurrency)
        self._async_slots: asyncio.Semaphore | None = None
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    @classmethod
    def from_env(cls) -> OpenAICompatibleLLM | None:
        """The default model: ``OPENAI_API_KEY``/``OPENAI_BASE_URL`` set, else ``None``.

        ``TIMESTONE_LLM_MODEL`` (default ``gpt-4.1-mini``) and ``TIMESTONE_LLM_SMALL_MODEL``
        (default ``gpt-4.1-nano``) choose the models. ``OPENAI_BASE_URL`` set but blank
        counts as unset; one that is not an ``http://`` or ``https://`` URL, and a model
        variable set but blank, are refused (``LLMError`` naming the variable), before
        any request.
        """
        key = os.environ.get("OPENAI_API_KEY")
        base = base_url_from_env(LLMError)
        if not key and not base:
            return None
        model = _model_from_env("TIMESTONE_LLM_MODEL", "gpt-4.1-mini")
        small_model = _model_from_env("TIMESTONE_LLM_SMALL_MODEL", "gpt-4.1-nano")
        import openai as _openai

        api_key = key or "unused"  # local servers (Ollama, llama.cpp) ignore the key
        return cls(
            client=_openai.OpenAI(api_key=api_key, base_url=base or OPENAI_URL),
            async_client=_openai.AsyncOpenAI(api_key=api_key, base_url=base or OPENAI_URL),
            model=model,
            small_model=small_model,
        )

    # -- requests --------------------------------------------------------------------

    def _params(self, request: LLMRequest, mode: Literal["schema", "json"]) -> dict[str, Any]:
        messages = [dict(m) for m in request.messages]
        if mode == "schema":
            response_format: dict[str, Any] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name,
                    "schema": dict(request.schema),
                    "strict": True,
                },
            }
        else:
            # JSON mode, with the schema beside it: servers that read it (llama.cpp's
            # Python server, Together, Anyscale) constrain the answer to it, others ignore it.
            response_format = {"type": "json_object", "schema": dict(request.schema)}
            hint = (
                "Answer with one JSON object, and nothing else, that matches this JSON "
                "schema:\n" + json.dumps(request.schema, separators=(",", ":"))
            )
            if messages and messages[0].get("role") == "system":
                messages[0]["content"] = messages[0]["content"] + "\n\n" + hint
            else:
                messages.insert(0, {"role": "system", "content": hint})
        params: dict[str, Any] = {
            "model": self.small_model if request.small else self.model,
            "messages": messages,
            "response_format": response_format,
        }
        if self.temperature is not None:
            params["temperature"] = self.temperature
        limits = [n for n in (request.max_tokens, self.max_tokens) if n is not None]
        if limits:
            params["max_tokens"] = min(limits)
        return params

    def _mode(self) -> Literal["schema", "json"]:
        return "json" if self.json_mode == "json" else "schema"

    def _reply(self, request: LLMRequest, response: Any) -> LLMReply:
        step = request.step
        usage = getattr(response, "usage", None)
        model = str(getattr(response, "model", "") or self.model)
        choices: object = getattr(response, "choices", None)
        choice: Any = None
        if isinstance(choices, list) and choices:
            choice = cast(list[Any], choices)[0]
        message = getattr(choice, "message", None)
        content: object = getattr(message, "content", None)
        text, not_text = _text(content)
        # some local servers omit usage, or report a count that is no count (negative, not
        # a number): that count is estimated, never zero; a count past any model's context
        # is recorded as _MAX_COUNT
        prompt = _count(getattr(usage, "prompt_tokens", None))
        completion = _count(getattr(usage, "completion_tokens", None))
        if prompt is None:
            prompt = sum(len(m.get("content", "")) for m in request.messages) // 4 + 1
        if completion is None:
            answered = text if text is not None or content is None else repr(content)
            completion = len(answered or "") // 4 + 1
        self.calls += 1
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        finish = getattr(choice, "finish_reason", None)
        why: str | None = None
        if choice is None:
            why = "the model sent no choices"
        elif text is None or finish == "content_filter":
            refusal = getattr(message, "refusal", None)
            if refusal:
                why = f"the model gave no answer (it refused: {refusal})"
            elif finish == "content_filter":
                why = "the model's answer was withheld by its content filter"
            elif not_text is not None:
                why = not_text
            else:
                why = "the model gave no answer (its message had no content)"
        elif finish == "length":
            why = (
                "the model's answer was cut off at its output limit (finish_reason "
                f"'length', {completion} completion tokens), so its JSON is incomplete; "
                "shorten the input or use a model with a larger output limit"
            )
        if why is not None:
            raise UnusableAnswer(
                f"{step}: {why}",
                step=step,
                model=model,
                prompt_tokens=prompt,
                completion_tokens=completion,
                finish_reason=None if finish is None else str(finish),
            )
        assert text is not None
        return LLMReply(text=text, model=model, prompt_tokens=prompt, completion_tokens=completion)

    def _decide(self, request: LLMRequest, exc: Exception, attempt: int) -> float | None:
        """Seconds to wait before retrying ``exc``, or None to give up (raising a clear error)."""
        import openai as _openai

        step = request.step
        if isinstance(exc, _openai.AuthenticationError):
            raise LLMError(
                f"{step}: the model server refused the API key (401); check OPENAI_API_KEY "
                "or the api_key of the client passed to OpenAICompatibleLLM",
                step=step,
            ) from exc
        if isinstance(exc, _openai.PermissionDeniedError):
            raise LLMError(
                f"{step}: the model server denied access (403): {exc}", step=step
            ) from exc
        if isinstance(exc, _openai.NotFoundError):
            model = self.small_model if request.small else self.model
            raise LLMError(
                f"{step}: the model server does not know model {model!r} or the endpoint "
                f"(404): {exc}",
                step=step,
            ) from exc
        # 400, or 422 from servers whose request validation rejects the unknown type;
        # llama-cpp-python's server (0.3.36) answers that validation error with a 500
        refused = isinstance(exc, (_openai.BadRequestError, _openai.UnprocessableEntityError)) or (
            isinstance(exc, _openai.InternalServerError) and "response_format" in _said(exc).lower()
        )
        if refused and self.json_mode == "auto":
            message = _said(exc).lower()
            if any(word in message for word in _SCHEMA_REFUSED):
                self.json_mode = "json"  # this server does JSON mode only: remember it
                return 0.0
        # a refusal wrapped in a 500 is no passing failure: asked again, it answers the same
        retryable = not refused and (
            isinstance(exc, (_openai.APIConnectionError, _openai.APITimeoutError))
            or (isinstance(exc, _openai.APIStatusError) and exc.status_code in _RETRY_STATUS)
        )
        if not retryable or attempt >= self.max_retries:
            raise LLMError(f"{step}: {_describe(exc, attempt + 1)}", step=step) from exc
        wait = min(self.max_backoff, self.backoff * (2**attempt))
        if isinstance(exc, _openai.APIStatusError):
            told = _retry_after(exc.response.headers)
            if told is not None:
                wait = min(self.max_backoff, told)
        return wait

    def complete(self, request: LLMRequest) -> LLMReply:
        """The blocking call (``Memory``)."""
        if self._client is None:
            raise LLMError(
                f"{request.step}: this OpenAICompatibleLLM has no blocking client "
                "(pass client=openai.OpenAI(...) to use it from Memory)",
                step=request.step,
            )
        attempt = 0
        while True:
            try:
                with self._sync_slots:
                    response = cast(
                        Any,
                        self._client.chat.completions.create(**self._params(request, self._mode())),
                    )
                return self._reply(request, response)
            except LLMError:
                raise
            except Exception as exc:
                wait = self._decide(request, exc, attempt)
                attempt += 1
                if wait:
                    time.sleep(wait)

    async def acomplete(self, request: LLMRequest) -> LLMReply:
        """The async call (``AsyncMemory``)."""
        if self._async_client is None:
            raise LLMError(
                f"{request.step}: this OpenAICompatibleLLM has no async client "
                "(pass async_client=openai.AsyncOpenAI(...) to use it from AsyncMemory)",
                step=request.step,
            )
        if self._async_slots is None:
            self._async_slots = asyncio.Semaphore(self.max_concurrency)
        attempt = 0
        while True:
            try:
                async with self._async_slots:
                    response = cast(
                        Any,
                        await self._async_client.chat.completions.create(
                            **self._params(request, self._mode())
                        ),
                    )
                return self._reply(request, response)
            except LLMError:
                raise
            except Exception as exc:
                wait = self._decide(request, exc, attempt)
                attempt += 1
                if wait:
                    await asyncio.sleep(wait)


# more tokens than any model's context holds (10 million): a larger count is recorded as
# this, so that the sums of a unit of work fit the ledger's and the episode's integer columns
_MAX_COUNT = 10_000_000
# parts of a message's content that carry a model's reasoning, not its answer
_REASONING_PARTS = frozenset({"thinking", "reasoning"})


def _count(value: object) -> int | None:
    """A token count of the server's ``usage``: a whole number from 0 to ``_MAX_COUNT``;
    None for what is no count (missing, negative, text, true, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value != value or value < 0:
        return None
    return int(value) if value < _MAX_COUNT else _MAX_COUNT


def _text(content: object) -> tuple[str | None, str | None]:
    """The answer's text, and what is wrong when the message's content is not text.

    OpenAI-compatible servers may send the content as a list of parts (Mistral's
    reasoning models: ``thinking`` parts, then ``text`` parts): the text parts are the
    answer, joined; reasoning parts are passed over. Anything else is no answer."""
    if content is None or isinstance(content, str):
        return content, None
    if not isinstance(content, list):
        return None, f"the model's message content is {_kind(content)}, not text"
    texts: list[str] = []
    for n, part in enumerate(cast(list[object], content)):
        if not isinstance(part, Mapping):
            return None, f"the model's message content part {n} is {_kind(part)}, not a part"
        fields = cast(Mapping[str, object], part)
        kind, said, refusal = fields.get("type"), fields.get("text"), fields.get("refusal")
        if kind == "text":
            if not isinstance(said, str):
                return None, f"the model's message content part {n} has no text"
            texts.append(said)
        elif kind == "refusal":
            return None, f"the model gave no answer (it refused: {refusal})"
        elif kind not in _REASONING_PARTS:
            return None, f"the model's message content part {n} is of type {kind!r:.40}, not text"
    if not texts:
        return None, "the model's message content has no text part"
    return "".join(texts), None


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"a number ({value!r:.20})"
    if isinstance(value, Mapping):
        return "a JSON object"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return None if when is None else max(0.0, when.timestamp() - time.time())


def _said(exc: Exception) -> str:
    """What the server said: the SDK's message, with the body when the message is only
    "Error code: 422" (what the SDK makes of a body without an ``error`` object, such as a
    server's request validation errors)."""
    import openai as _openai

    if not isinstance(exc, _openai.APIStatusError):
        return str(exc)
    body: object = exc.body
    if body is None or exc.message != f"Error code: {exc.status_code}":
        return exc.message
    shown = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
    return f"{exc.message} {shown[:500]}"


def _describe(exc: Exception, attempts: int) -> str:
    import openai as _openai

    tries = f" after {attempts} attempt{'s' if attempts != 1 else ''}"
    if isinstance(exc, _openai.APITimeoutError):
        return f"the model did not answer in time{tries}"
    if isinstance(exc, _openai.APIConnectionError):
        return f"the model server could not be reached{tries}: {exc}"
    if isinstance(exc, _openai.APIStatusError):
        return f"the model server answered {exc.status_code}{tries}: {_said(exc)}"
    return f"the model call failed: {type(exc).__name__}: {exc}"


# -- the offline test double -------------------------------------------------------------


_FINGERPRINTS = ("fp_6f2eabb9a5", "fp_b8bc95a0ac", "fp_799e4ca3f1", "fp_38343a2f8f")
_served = itertools.count()
_PLAIN = str.maketrans("", "", "+/=")


def chat_completion(
    content: str | Mapping[str, Any] | None,
    *,
    model: str = "gpt-4.1-mini-2025-04-14",
    prompt_tokens: int = 100,
    completion_tokens: int = 50,
    finish_reason: str = "stop",
    refusal: str | None = None,
    id: str | None = None,
    created: int | None = None,
    system_fingerprint: str | None = None,
) -> dict[str, Any]:
    """A chat-completion response body in the shape the OpenAI API sends, scripted.

    ``content`` is the answer's text (a mapping is sent as its JSON); ``None`` with
    ``refusal`` is a refusal. Unless given, the id, the ``created`` time and the system
    fingerprint vary from one response to the next, as a real server's do.
    """
    text = (
        content
        if content is None or isinstance(content, str)
        else json.dumps(content, ensure_ascii=False)
    )
    n = next(_served)
    digest = hashlib.sha256(f"{n}\x1f{text}".encode()).digest()
    return {
        "id": id or "chatcmpl-" + base64.b64encode(digest).decode().translate(_PLAIN)[:29],
        "object": "chat.completion",
        "created": created if created is not None else 1764000000 + 7 * n + digest[0] % 5,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "refusal": refusal,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": system_fingerprint or _FINGERPRINTS[digest[1] % len(_FINGERPRINTS)],
    }


def replay_llm(
    transport: ReplayTransport,
    *,
    model: str = "gpt-4.1-mini",
    small_model: str | None = "gpt-4.1-nano",
    **options: Any,
) -> OpenAICompatibleLLM:
    """An ``OpenAICompatibleLLM`` with both clients on ``transport`` (no network)."""
    import openai as _openai

    return OpenAICompatibleLLM(
        client=_openai.OpenAI(api_key="sk-replay", http_client=_http(transport)),
        async_client=_openai.AsyncOpenAI(api_key="sk-replay", http_client=_http(transport, True)),
        model=model,
        small_model=small_model,
        **options,
    )


def _http(transport: httpx.BaseTransport, use_async: bool = False) -> Any:
    """An ``httpx`` client on ``transport`` (the SDK accepts one; typed as Any for its stubs)."""
    import httpx

    if use_async:
        return httpx.AsyncClient(transport=cast(httpx.AsyncBaseTransport, transport))
    return httpx.Client(transport=transport)


def __getattr__(name: str) -> Any:
    # ``ReplayTransport`` subclasses an ``httpx`` transport: it is defined in a module of
    # its own, imported when it is asked for, so that opening a store loads no HTTP client
    if name == "ReplayTransport":
        from ._replay import ReplayTransport

        return ReplayTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
