"""The model calls of one unit of work: the ledger, checked against the group's budget
before each call, and ``call``, one structured call with bounded re-asks.

A malformed answer (not JSON, the wrong shape, or, per ``check``, numbers that name
items the question did not list: ``timestone.extract._answers``) is asked again at most
``OUTPUT_RETRIES`` times, then the step fails with an ``LLMError``. An answer with
nothing usable (``UnusableAnswer``: a refusal, a cut-off, no choices) fails at once.
Every answer the model gave is in the ledger, used or not, so that the group's usage
counts what was spent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import pydantic

from ..errors import BudgetExceeded, LLMError, UnusableAnswer
from ..llm import LLM, LLMBudget, LLMReply, LLMRequest, LLMUsage
from . import _prompts as P
from ._answers import loads

__all__ = ["OUTPUT_RETRIES", "STEPS", "Ledger", "LedgerEntry", "call", "why"]

OUTPUT_RETRIES = 2

Answer = TypeVar("Answer", bound=pydantic.BaseModel)

STEPS = {
    P.EXTRACTION: "extraction",
    P.ENTITY_RESOLUTION: "entity resolution",
    P.FACT_RESOLUTION: "fact resolution",
    P.CONDENSE: "summary condensation",
    P.SAGA_SUMMARY: "saga summary",
    P.QUESTION_REWRITE: "question rewrite",
}


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerEntry:
    step: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    ok: bool


@dataclasses.dataclass
class Ledger:
    """The calls of one unit of work, checked against the group's budget before each call."""

    budget: LLMBudget | None = None
    used: LLMUsage | None = None
    entries: list[LedgerEntry] = dataclasses.field(default_factory=list[LedgerEntry])
    # when a write's transaction last wrote the entries (its time): if it was interrupted
    # at its commit, the rows of that time say whether it committed them
    held_at: datetime | None = None

    @property
    def calls(self) -> int:
        return len(self.entries)

    @property
    def tokens(self) -> int:
        return sum(e.prompt_tokens + e.completion_tokens for e in self.entries)

    def add(self, reply: LLMReply, step: str, ok: bool) -> None:
        self.entries.append(
            LedgerEntry(step, reply.model, reply.prompt_tokens, reply.completion_tokens, ok)
        )

    def admit(self, request: LLMRequest) -> None:
        """Refuse the call before it is made when the budget cannot cover it."""
        if self.budget is None or self.used is None:
            return
        b, used = self.budget, self.used
        step = STEPS.get(request.schema_name, request.step)
        if b.max_calls is not None and used.calls + self.calls + 1 > b.max_calls:
            raise BudgetExceeded(
                f"{step}: the group's LLM budget of {b.max_calls} calls per {b.period} is "
                f"spent ({used.calls + self.calls} used); nothing was written",
                step=step,
            )
        estimate = sum(len(m.get("content", "")) for m in request.messages) // 4 + 1
        if b.max_tokens is not None and used.tokens + self.tokens + estimate > b.max_tokens:
            raise BudgetExceeded(
                f"{step}: the group's LLM budget of {b.max_tokens} tokens per {b.period} cannot "
                f"cover this call (~{estimate} prompt tokens; {used.tokens + self.tokens} used); "
                "nothing was written",
                step=step,
            )


async def call(
    llm: LLM,
    ledger: Ledger,
    request: LLMRequest,
    answer: type[Answer],
    check: Callable[[Answer], str | None] | None = None,
    retries: int = OUTPUT_RETRIES,
) -> Answer:
    """One structured call: budget check, the model, parse and validate, bounded re-asks.

    ``check`` says what is wrong with an answer that fits the schema but cannot be used
    (``_answers``: a number naming an item that was not asked about), or ``None``; such an
    answer is asked again like malformed output. An answer with nothing usable (a refusal,
    a cut-off) fails at once; every answer is in the ledger. ``retries``: how many times
    a malformed answer is asked again.
    """
    step = request.step
    last = ""
    for _ in range(1 + retries):
        ledger.admit(request)
        try:
            reply = await llm.acomplete(request)
        except UnusableAnswer as exc:
            spent = LLMReply("", exc.model, exc.prompt_tokens, exc.completion_tokens)
            ledger.add(spent, step, ok=False)
            if exc.step is None:
                exc.step = step
            raise
        except LLMError as exc:
            if exc.step is None:
                exc.step = step
            raise
        except Exception as exc:
            raise LLMError(f"{step}: the model call failed: {exc}", step=step) from exc
        try:
            result = answer.model_validate(loads(reply.text))
        except (ValueError, pydantic.ValidationError) as exc:
            ledger.add(reply, step, ok=False)
            last = why(exc)
            continue
        problem = None if check is None else check(result)
        if problem is not None:
            ledger.add(reply, step, ok=False)
            last = problem
            continue
        ledger.add(reply, step, ok=True)
        return result
    raise LLMError(
        f"{step}: the model returned malformed output {1 + retries} "
        f"time{'s' if retries else ''} "
        f"(last: {last}); nothing was written",
        step=step,
    )


def why(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "answer"
        return f"{where}: {err['msg']}"
    return f"not JSON: {exc}"
