"""Search filters with values a stored item cannot hold, settled before the database.

A value Timestone stores is JSON that ``jsonb`` holds: no infinity, no NaN, no
text with NUL. A filter may still name such a value, and LangGraph's stores
answer it: equality with it matches nothing, ``$ne`` matches everything, and
``{"$lt": inf}`` matches every number. ``settle`` rewrites a filter into one
Timestone takes with the same answer, or says that nothing can match. ``stand_in``
is what Timestone checks first: the filter's shape (its operators, its nesting),
which such a value does not change, so that a bad one is refused whatever its
values.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any, cast

__all__ = ["NOTHING", "settle", "stand_in"]

NOTHING = object()
"""What ``settle`` returns for a filter no stored item can match."""

_ALWAYS = object()
_MAX = sys.float_info.max


def _storable(value: object) -> bool:
    """Whether a stored value can equal ``value`` (what ``jsonb`` holds)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, Mapping):
        return all(
            isinstance(k, str) and "\x00" not in k and _storable(v)
            for k, v in cast(Mapping[object, object], value).items()
        )
    if isinstance(value, (list, tuple)):
        return all(_storable(v) for v in cast(Sequence[object], value))
    return True


def stand_in(value: object) -> object:
    """``value`` with each value no item can hold put as None, and each NUL of a key as
    U+FFFD: the same shape, in JSON that Timestone's filter check takes."""
    if isinstance(value, Mapping):
        return {
            k.replace("\x00", "\ufffd") if isinstance(k, str) else k: stand_in(v)
            for k, v in cast(Mapping[object, object], value).items()
        }
    if isinstance(value, (list, tuple)):
        return [stand_in(v) for v in cast(Sequence[object], value)]
    return value if _storable(value) else None


def _comparison(op: str, arg: object) -> object:
    """A comparison with a non-finite or NUL-holding argument as one Timestone takes, or
    ``NOTHING`` / ``_ALWAYS``; any other argument unchanged."""
    if op in ("$eq", "$ne"):
        if _storable(arg):
            return arg
        return NOTHING if op == "$eq" else _ALWAYS
    if isinstance(arg, float) and math.isinf(arg):
        upward = (arg > 0) == (op in ("$lt", "$lte"))
        if not upward:
            return NOTHING  # above +inf or below -inf: no number is
        return ("$lte", _MAX) if arg > 0 else ("$gte", -_MAX)  # every number
    if isinstance(arg, float) and math.isnan(arg):
        return NOTHING
    if isinstance(arg, str) and "\x00" in arg:
        return NOTHING  # not a number: a comparison with it holds for no value
    return arg


def _condition(wanted: object) -> object:
    if isinstance(wanted, Mapping):
        conditions = cast(Mapping[str, object], wanted)
        if any(str(k).startswith("$") for k in conditions):
            out: dict[str, object] = {}
            for op, arg in conditions.items():
                got = _comparison(op, arg)
                if got is NOTHING:
                    return NOTHING
                if got is _ALWAYS:
                    continue
                if isinstance(got, tuple):
                    name, bound = cast(tuple[str, float], got)
                    out[name] = bound
                else:
                    out[op] = got
            return out or _ALWAYS
        return _fields(conditions)
    return wanted if _storable(wanted) else NOTHING


def _fields(filter_: Mapping[str, object]) -> object:
    out: dict[str, object] = {}
    for key, wanted in filter_.items():
        got = _condition(wanted)
        if got is NOTHING:
            return NOTHING
        if got is not _ALWAYS:
            out[key] = got
    return out


def settle(filter_: Mapping[str, Any] | None) -> dict[str, Any] | object | None:
    """The filter Timestone runs for ``filter_`` (None: no filter), or ``NOTHING``."""
    if not filter_:
        return None
    got = _fields(filter_)
    if got is NOTHING:
        return NOTHING
    return cast(dict[str, Any], got) or None
