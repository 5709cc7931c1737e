"""``GroundedAnswer``: an answer whose citations the mechanism checks.

Every citation must be an id (``F-`` or ``E-`` and 10 hex digits) that a
memory tool returned in this run. Anything else goes back to the model as
``ModelRetry``, naming the offending citation and what is acceptable.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from pydantic_ai import ModelRetry, RunContext

from ._citations import CITATION, retrieved_citations

__all__ = ["GroundedAnswer", "check_citations"]


class GroundedAnswer(BaseModel):
    """An answer grounded in memory: every claim backed by a cited item."""

    answer: str = Field(description="The answer, in plain words.")
    citations: list[str] = Field(
        default_factory=list[str],
        description=(
            "The ids of the memory items the answer rests on, exactly as the memory tools "
            "showed them in brackets, e.g. F-1a2b3c4d5e. Cite only items retrieved in this run."
        ),
    )


def check_citations(ctx: RunContext[object], output: GroundedAnswer) -> GroundedAnswer:
    """Raise ``ModelRetry`` unless every citation was retrieved by a memory tool in this run.

    Usable on its own as ``agent.output_validator(check_citations)``; the ``TimestoneMemory``
    capability applies it to every ``GroundedAnswer``.
    """
    malformed = [c for c in output.citations if not CITATION.fullmatch(c.strip("[] "))]
    if malformed:
        raise ModelRetry(
            f"citation {malformed[0]!r} is not a citation id: cite the ids shown in brackets in "
            "the memory tools' results, like F-1a2b3c4d5e (a fact) or E-1a2b3c4d5e (a passage)"
        )
    retrieved = retrieved_citations(ctx)
    unknown = [c.strip("[] ") for c in output.citations if c.strip("[] ") not in retrieved]
    if unknown:
        shown = ", ".join(sorted(retrieved)[:20]) or "none yet: call search_memory first"
        raise ModelRetry(
            f"citation {unknown[0]} was not retrieved in this run; cite only items the memory "
            f"tools returned (retrieved so far: {shown})"
        )
    return output
