"""What a model's answer must be before the mechanism uses it, beyond its JSON schema.

A schema says an answer's shape; it cannot say that a number in it names an item the
question listed. An answer that fits the schema but points at an item that was not
asked about, or at a candidate that was not offered for that item, is malformed like
text that is not JSON: ``call`` asks again, a bounded number of times, then fails the
step with an ``LLMError``, and nothing is written. Each check returns ``None`` for a
usable answer, or says what is wrong (for the error and for the ledger).

``loads`` reads the JSON of an answer as models send it: surrounding whitespace, a byte
order mark, and a Markdown code fence around the object (some servers add one in JSON
mode; the object on the fence's line or the next), are not part of it, and a raw control
character (a line break) inside a string is taken as itself: llama.cpp's grammar for a
JSON schema's strings lets a model write one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import _prompts as P

__all__ = ["check_condensed", "check_entity_decisions", "check_fact_judgements", "loads"]

# a fence: its language tag, then the body on the next line or on the same one
_FENCE = re.compile(
    r"\A```(?:[A-Za-z0-9_-]*[ \t]*\r?\n|[A-Za-z0-9_-]*[ \t]+|)(?P<body>.*?)\r?\n?```\Z", re.DOTALL
)


def loads(text: str) -> Any:
    """The JSON value of an answer; ``ValueError`` when it is not JSON."""
    stripped = text.strip().lstrip("\ufeff").strip()  # a byte order mark is no part of it
    fenced = _FENCE.match(stripped)
    if fenced is not None:
        stripped = fenced.group("body").strip()
    return json.loads(stripped, strict=False)


def _numbers(values: Iterable[int]) -> str:
    shown = sorted(set(values))
    return ", ".join(str(v) for v in shown) if shown else "none"


def check_entity_decisions(
    answer: P.EntityDecisions, candidates: Sequence[Sequence[int]]
) -> str | None:
    """Each decision names an item asked about (``0 <= item < len(candidates)``), once, and
    its match is ``None`` or one of the candidate numbers offered for that item. An item
    with no decision is taken as no match."""
    seen: set[int] = set()
    for n, d in enumerate(answer.decisions):
        where = f"decisions.{n}"
        if not 0 <= d.item < len(candidates):
            return f"{where}.item: {d.item} is not an item asked about (0 to {len(candidates) - 1})"
        if d.item in seen:
            return f"{where}.item: item {d.item} is decided twice"
        seen.add(d.item)
        if d.match is not None and d.match not in candidates[d.item]:
            return (
                f"{where}.match: {d.match} is not a candidate of item {d.item} "
                f"({_numbers(candidates[d.item])})"
            )
    return None


def check_fact_judgements(
    answer: P.FactJudgements, allowed: Mapping[int, Iterable[int]]
) -> str | None:
    """Each judgement names a new fact asked about, once; its ``duplicate_of`` and every
    number it ``contradicts`` are existing facts offered for that new fact. A new fact with
    no judgement is taken as neither a duplicate nor a contradiction."""
    seen: set[int] = set()
    for n, j in enumerate(answer.judgements):
        where = f"judgements.{n}"
        if j.new not in allowed:
            return f"{where}.new: {j.new} is not a new fact asked about ({_numbers(allowed)})"
        if j.new in seen:
            return f"{where}.new: new fact {j.new} is judged twice"
        seen.add(j.new)
        offered = set(allowed[j.new])
        if j.duplicate_of is not None and j.duplicate_of not in offered:
            return (
                f"{where}.duplicate_of: {j.duplicate_of} is not an existing fact offered for "
                f"new fact {j.new} ({_numbers(offered)})"
            )
        stray = [k for k in j.contradicts if k not in offered]
        if stray:
            return (
                f"{where}.contradicts: {stray[0]} is not an existing fact offered for new "
                f"fact {j.new} ({_numbers(offered)})"
            )
    return None


def check_condensed(answer: P.Condensed, items: int) -> str | None:
    """Each summary names an item asked about, once."""
    seen: set[int] = set()
    for n, s in enumerate(answer.summaries):
        if not 0 <= s.item < items:
            return f"summaries.{n}.item: {s.item} is not an item asked about (0 to {items - 1})"
        if s.item in seen:
            return f"summaries.{n}.item: item {s.item} is summarized twice"
        seen.add(s.item)
    return None
