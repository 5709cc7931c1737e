"""``TimestoneMemoryMiddleware``: recall before the model, record after the agent.

Before each model call the middleware asks Timestone for evidence about the
latest user message (``Memory.context``: facts and passages with citation ids,
under a token budget) and appends it to the system message of that call only;
the agent's state is not changed. After the agent finishes, the exchange (the
last user message and what followed it) is recorded as an episode: extracted
into facts by the memory's LLM when one is configured (once: the exchange's
digest is its idempotency key), else kept verbatim as a searchable conversation
passage (``add_document``), so recall works offline too. A model that fails to
extract it does not fail the run, whose answer is given: the exchange is kept as a
passage, with a warning. The evidence joins the system message: appended to its
text, or as one more block when it is blocks (theirs, a cache mark included, kept).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime

import timestone
from timestone.errors import InvalidInput, LLMError
from timestone.toolkit import (
    MAX_DOCUMENT_CHARS,
    MAX_EPISODE_CHARS,
    MAX_NAME_CHARS,
    MAX_QUERY_CHARS,
    MIN_TOKEN_BUDGET,
    check_text,
    check_tool_settings,
)

__all__ = ["TimestoneMemoryMiddleware"]

_log = logging.getLogger("langchain_timestone")

# an exchange is recorded under ``<conversation>:<digest>``: the name of its episode, or the
# uri and title of its document
_DIGEST_CHARS = 20
MAX_CONVERSATION_CHARS = MAX_NAME_CHARS - 1 - _DIGEST_CHARS
"""The longest ``conversation`` a ``TimestoneMemoryMiddleware`` records under."""

Handler = Callable[[ModelRequest[Any]], ModelResponse[Any]]
AsyncHandler = Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]


def _text(message: AnyMessage) -> str:
    content: Any = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            typed = cast(dict[str, Any], block)
            if typed.get("type") == "text":
                parts.append(str(typed.get("text", "")))
    # parts are blocks of their own (text, an image, more text): kept apart
    return "\n".join(p for p in parts if p)


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable(text: str) -> str:
    """``text`` with what Postgres cannot hold (NUL, a lone surrogate) replaced by U+FFFD:
    a chat message may carry either, and recall or recording must not fail the run."""
    return _UNSTORABLE.sub("\ufffd", text)


def _last_user_text(messages: Sequence[AnyMessage]) -> str | None:
    """The last user message as a recall query: storable, and its last ``MAX_QUERY_CHARS``
    characters when it is longer (a long paste usually ends with the question)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            text = _storable(_text(message)).strip()[-MAX_QUERY_CHARS:].strip()
            return text or None
    return None


def _exchange(messages: Sequence[AnyMessage]) -> str | None:
    """The last user turn and the answers after it, as ``User:``/``Assistant:`` lines,
    within ``MAX_DOCUMENT_CHARS``: a longer user message keeps its end (a long paste
    usually ends with the question), after ``…``."""
    start = None
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            start = i
            break
    if start is None:
        return None
    lines: list[str] = []
    for message in messages[start:]:
        text = _storable(_text(message)).strip()
        if not text:
            continue
        if isinstance(message, HumanMessage):
            lines.append(f"User: {text}")
        elif isinstance(message, AIMessage):
            lines.append(f"Assistant: {text}")
    if len(lines) < 2:
        return None
    over = sum(map(len, lines)) + len(lines) - 1 - MAX_DOCUMENT_CHARS
    if over > 0 and lines[0].startswith("User: "):
        user = lines[0].removeprefix("User: ")
        lines[0] = "User: …" + user[over + 1 :]
    # answers longer than a document on their own: their end
    return "\n".join(lines)[-MAX_DOCUMENT_CHARS:]


# what the evidence comes with in the system message; counted in ``token_budget``
_LABEL = "Long-term memory (Timestone):\n"
_SEPARATOR = "\n\n"


class TimestoneMemoryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Long-term memory for ``create_agent``: recall before the model, record after the agent.

    ``memory``: a ``timestone.Memory`` or ``AsyncMemory``; ``group_id``: the tenant whose
    memory this agent reads and writes. ``token_budget``: how much to add to the system
    message, the evidence's label included (the rest is ``Memory.context``'s budget).
    ``record=False`` makes it read-only. ``conversation``: what the exchanges are
    recorded under (``<conversation>:<hash>``), storable text of at most
    ``MAX_CONVERSATION_CHARS`` characters. Each setting is checked here, before a run.
    """

    def __init__(
        self,
        memory: timestone.Memory | timestone.AsyncMemory,
        group_id: str,
        *,
        token_budget: int = 800,
        record: bool = True,
        conversation: str = "conversation",
    ) -> None:
        super().__init__()
        self.memory, self.group_id = check_tool_settings(
            "TimestoneMemoryMiddleware",
            memory,
            group_id,
            valid_at=None,
            as_of=None,
            token_budget=token_budget,
        )
        given = cast(object, record)
        if not isinstance(given, bool):
            raise TypeError(f"record must be True or False, got {given!r:.80}")
        label = len(_SEPARATOR + _LABEL)
        if token_budget - label < MIN_TOKEN_BUDGET:
            raise InvalidInput(
                f"TimestoneMemoryMiddleware: token_budget must be at least "
                f"{MIN_TOKEN_BUDGET + label} ({label} go to the evidence's label), got "
                f"{token_budget}"
            )
        self.token_budget = token_budget
        self.record = record
        self.conversation = check_text(
            conversation, "conversation", max_chars=MAX_CONVERSATION_CHARS
        )

    # -- recall ----------------------------------------------------------------------

    @property
    def _evidence_budget(self) -> int:
        """The budget less what the evidence comes with (its label, the break before it):
        ASCII, at most a token a character in any tokenizer."""
        return self.token_budget - len(_SEPARATOR + _LABEL)

    def _with_evidence(self, request: ModelRequest[Any], evidence: str) -> ModelRequest[Any]:
        """The request with the evidence after its system message: a block of its own when
        the system message is blocks (theirs kept as given, a cache mark included)."""
        base = request.system_message
        added = _LABEL + evidence
        if base is None:
            return request.override(system_message=SystemMessage(content=added))
        content: Any = base.content
        if isinstance(content, str):
            merged: str | list[str | dict[str, Any]] = content + _SEPARATOR + added
        else:
            merged = [*cast(list[str | dict[str, Any]], content), {"type": "text", "text": added}]
        return request.override(system_message=SystemMessage(content=merged))

    def _recall(self, request: ModelRequest[Any]) -> str | None:
        mem = self.memory
        query = _last_user_text(request.messages)
        if query is None:
            return None
        if not isinstance(mem, timestone.Memory):
            raise TypeError(
                "this middleware wraps an AsyncMemory: run the agent with ainvoke/astream, or "
                "pass a timestone.Memory"
            )
        ctx = mem.context(self.group_id, query, token_budget=self._evidence_budget)
        return ctx.as_prompt() if len(ctx) else None

    async def _arecall(self, request: ModelRequest[Any]) -> str | None:
        mem = self.memory
        query = _last_user_text(request.messages)
        if query is None:
            return None
        if isinstance(mem, timestone.Memory):
            return await asyncio.to_thread(self._recall, request)
        ctx = await mem.context(self.group_id, query, token_budget=self._evidence_budget)
        return ctx.as_prompt() if len(ctx) else None

    def wrap_model_call(self, request: ModelRequest[Any], handler: Handler) -> ModelResponse[Any]:
        """Recall before the model: ``context()`` for the last user message, under
        ``token_budget``, added to the request (unchanged when memory holds nothing)."""
        evidence = self._recall(request)
        return handler(self._with_evidence(request, evidence) if evidence else request)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: AsyncHandler
    ) -> ModelResponse[Any]:
        """``wrap_model_call``, awaited."""
        evidence = await self._arecall(request)
        return await handler(self._with_evidence(request, evidence) if evidence else request)

    # -- record ----------------------------------------------------------------------

    def _episode(self, state: AgentState[Any]) -> tuple[str, str] | None:
        if not self.record:
            return None
        text = _exchange(state["messages"])
        if text is None:
            return None
        digest = hashlib.sha256(text.encode()).hexdigest()[:_DIGEST_CHARS]
        return f"{self.conversation}:{digest}", text

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record after the agent: the last user turn and the answers after it, as a
        message episode through the memory's model, or as a document when it has none or
        the text is longer than one extraction takes; nothing without a user turn."""
        mem = self.memory
        episode = self._episode(state)
        if episode is None:
            return None
        if not isinstance(mem, timestone.Memory):
            raise TypeError(
                "this middleware wraps an AsyncMemory: run the agent with ainvoke/astream, or "
                "pass a timestone.Memory"
            )
        uri, text = episode
        now = datetime.now(UTC)
        if mem.llm is not None and len(text) <= MAX_EPISODE_CHARS:
            try:
                mem.add_episode(
                    self.group_id,
                    text,
                    reference_time=now,
                    name=uri,
                    source="message",
                    idempotency_key=uri,
                )
                return None
            except LLMError as exc:
                _model_failed(uri, exc)
                mem.add_document(
                    self.group_id, uri, text, title=uri, reference_time=now, extract=False
                )
                return None
        mem.add_document(self.group_id, uri, text, title=uri, reference_time=now)
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """``after_agent``, awaited."""
        mem = self.memory
        episode = self._episode(state)
        if episode is None:
            return None
        if isinstance(mem, timestone.Memory):
            return await asyncio.to_thread(self.after_agent, state, runtime)
        uri, text = episode
        now = datetime.now(UTC)
        if mem.llm is not None and len(text) <= MAX_EPISODE_CHARS:  # else chunked, as a document
            try:
                await mem.add_episode(
                    self.group_id,
                    text,
                    reference_time=now,
                    name=uri,
                    source="message",
                    idempotency_key=uri,
                )
                return None
            except LLMError as exc:
                _model_failed(uri, exc)
                await mem.add_document(
                    self.group_id, uri, text, title=uri, reference_time=now, extract=False
                )
                return None
        await mem.add_document(self.group_id, uri, text, title=uri, reference_time=now)
        return None


def _model_failed(uri: str, exc: LLMError) -> None:
    """The answer is given: a model that fails to extract the exchange does not fail the
    run. The exchange is kept as a conversation passage instead (as without a model)."""
    _log.warning("recording %s through the memory's model failed (%s): kept as a passage", uri, exc)
