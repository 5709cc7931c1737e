"""Items: JSON documents under a namespace and a key (the record, validation, filters).

The database work is in ``items/_store_async.py``; what is here does no I/O, so the
async code and its blocking twin share one ``Item`` class.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from .._records import check_json, check_json_size, check_text
from ..errors import InvalidInput

__all__ = [
    "GRAPH_NAMESPACES",
    "MAX_ADDRESS_BYTES",
    "MAX_KEY_CHARS",
    "MAX_NAMESPACE_DEPTH",
    "MAX_OFFSET",
    "Item",
    "check_address",
    "check_filter",
    "check_key",
    "check_namespace",
    "check_value",
    "index_text",
    "index_texts",
    "matches_filter",
    "matches_namespace",
    "negative_zero",
    "value_json",
]

MAX_KEY_CHARS = 1024
MAX_LABEL_CHARS = 256
MAX_NAMESPACE_DEPTH = 32
MAX_ADDRESS_BYTES = 2200
"""The namespace's labels and the key of an item put, in UTF-8 bytes together."""
MAX_VALUE_CHARS = 1_000_000
_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


@dataclasses.dataclass(frozen=True, slots=True)
class Item:
    """One item as the store held it: ``created_at`` is when its key was first put,
    ``updated_at`` when this version was written; ``score`` is set by searches with a query."""

    group_id: str
    namespace: tuple[str, ...]
    key: str
    value: Mapping[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


def check_namespace(
    namespace: object, what: str = "namespace", *, allow_empty: bool
) -> tuple[str, ...]:
    """A tuple of non-empty labels (strings without NUL), at most ``MAX_NAMESPACE_DEPTH``.
    A string (or bytes) is refused, not read as a sequence of one-character labels."""
    if isinstance(namespace, (str, bytes, bytearray)) or not isinstance(namespace, Sequence):
        raise InvalidInput(
            f"{what} must be a tuple of strings, got {type(namespace).__name__}: "
            "write ('users', 'alice'), not 'users/alice'"
        )
    labels = tuple(cast(Sequence[object], namespace))
    if not labels and not allow_empty:
        raise InvalidInput(f"{what} is empty: name at least one label")
    if len(labels) > MAX_NAMESPACE_DEPTH:
        raise InvalidInput(f"{what} has {len(labels)} labels; at most {MAX_NAMESPACE_DEPTH}")
    for label in labels:
        _check_name(label, f"{what} label", MAX_LABEL_CHARS)
    return cast(tuple[str, ...], labels)


def _check_name(value: object, what: str, max_chars: int) -> str:
    """A label or a key: any storable text but ``""`` (spaces are text, as in LangGraph's
    stores)."""
    text = check_text(value, what, max_chars=max_chars, allow_empty=True)
    if not text:
        raise InvalidInput(f"{what} is empty")
    return text


def check_key(key: object) -> str:
    return _check_name(key, "item key", MAX_KEY_CHARS)


# the namespaces the graph keeps its chunks, links and vectors in (``timestone.graph``):
# written through the graph's methods only
GRAPH_NAMESPACES = (("graph", "chunks"), ("graph", "links"), ("graph", "vectors"))


def check_address(namespace: tuple[str, ...], key: str) -> None:
    """Where an item is put or deleted: not in a namespace of the graph's, and its
    namespace's labels and its key share one entry of a database index with the group,
    which Postgres caps (about 2,700 bytes)."""
    if any(namespace[: len(own)] == own for own in GRAPH_NAMESPACES):
        raise InvalidInput(
            f"the namespace {namespace!r:.120} is the graph's own (its chunks, links and "
            "vectors): write them with graph_upsert and graph_retract, or use another namespace"
        )
    size = sum(len(label.encode()) for label in namespace) + len(key.encode())
    if size > MAX_ADDRESS_BYTES:
        raise InvalidInput(
            f"the namespace and the key take {size:,} bytes in UTF-8 together; at most "
            f"{MAX_ADDRESS_BYTES:,} (a database index holds them): shorten the key or a label"
        )


def check_value(value: object, what: str = "item value") -> dict[str, Any]:
    """A JSON object (a mapping with string keys) that ``jsonb`` can hold (``check_json``),
    refused naming ``what``."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{what} must be a JSON object (a dict), got {type(value).__name__}")
    mapping = cast(Mapping[str, Any], value)
    check_json(mapping, what)
    return cast(dict[str, Any], json.loads(check_json_size(mapping, what, MAX_VALUE_CHARS)))


def index_text(value: Mapping[str, Any]) -> str:
    """The default text an item is searched by: its value as JSON."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def check_filter(value: object) -> dict[str, Any] | None:
    """A filter as ``matches_filter`` reads it, refused naming the condition that is not:
    JSON that ``jsonb`` holds, each mapping either operators or nested fields."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInput(f"filter must be a dict, got {type(value).__name__}")
    check_json(cast(Mapping[str, Any], value), "filter")
    out: dict[str, Any] = {}
    for k, v in cast(Mapping[object, Any], value).items():
        if not isinstance(k, str):
            raise InvalidInput(f"filter keys must be strings, got {k!r:.80}")
        _check_condition(v, f"filter[{k!r:.80}]")
        out[k] = v
    return out


def _check_condition(condition: Any, where: str) -> None:
    """``condition`` (checked by ``check_json``: string keys) as ``_compare`` reads it, as
    LangGraph's ``InMemoryStore`` does: a mapping with a key that starts with ``$`` holds
    operators only; a mapping without one matches a nested object field by field, and a
    list element by element, each field or element a condition of its own."""
    if isinstance(condition, Mapping):
        conditions = cast(Mapping[str, Any], condition)
        ops = [k for k in conditions if k.startswith("$")]
        if not ops:
            for k, v in conditions.items():
                _check_condition(v, f"{where}[{k!r:.80}]")
            return
        for k in conditions:
            if k.startswith("$") and k not in _OPERATORS:
                raise InvalidInput(
                    f"{where:.300}: unknown operator {k!r:.80}; "
                    f"use one of {', '.join(sorted(_OPERATORS))}"
                )
            if not k.startswith("$"):
                raise InvalidInput(
                    f"{where:.300} mixes the operator {ops[0]!r:.80} with the plain key "
                    f"{k!r:.80}: a condition holds either operators "
                    f"({', '.join(sorted(_OPERATORS))}) or the fields of a nested object"
                )
    elif isinstance(condition, (list, tuple)):
        for i, v in enumerate(cast(Sequence[Any], condition)):
            _check_condition(v, f"{where}[{i}]")


def matches_filter(value: Mapping[str, Any], filter_: Mapping[str, Any] | None) -> bool:
    """JSONB-like matching, as in LangGraph's ``InMemoryStore``: equal values, nested
    objects field by field, lists element by element, and a mapping whose keys are the
    operators ``$eq $ne $gt $gte $lt $lte`` (``check_filter`` refuses one that mixes them
    with plain keys). The ranges compare numbers exactly, read a text as a float and a
    boolean as 1 or 0 (as ``InMemoryStore``'s ``float()`` does, and as equality already
    holds ``True == 1``); a missing field, or a value that is not a number, satisfies none
    (where ``InMemoryStore`` raises)."""
    if not filter_:
        return True
    return all(_compare(value.get(k), v) for k, v in filter_.items())


def _compare(item_value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        conditions = cast(Mapping[str, Any], wanted)
        if any(k.startswith("$") for k in conditions):
            return all(_operator(item_value, op, arg) for op, arg in conditions.items())
        if not isinstance(item_value, Mapping):
            return False
        inner = cast(Mapping[str, Any], item_value)
        return all(_compare(inner.get(k), v) for k, v in conditions.items())
    if isinstance(wanted, (list, tuple)):
        wanted_items = cast(Sequence[Any], wanted)
        if not isinstance(item_value, (list, tuple)):
            return False
        items = cast(Sequence[Any], item_value)
        return len(items) == len(wanted_items) and all(
            _compare(a, b) for a, b in zip(items, wanted_items, strict=True)
        )
    return bool(item_value == wanted)


def _number(value: Any) -> int | float | None:
    """``value`` as a number a range compares, or None. An int is kept as it is: Python
    compares ints and floats exactly, where ``float()`` overflows on an int of more than
    308 digits (which ``jsonb`` holds). A boolean is 1 or 0, as ``float()`` reads it."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if not isinstance(value, (float, str)):
        return None
    try:
        out = float(value)
    except ValueError:
        return None
    return None if math.isnan(out) else out


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    a, b = _number(value), _number(arg)
    if a is None or b is None:
        return False  # a missing or non-numeric field never satisfies a comparison
    if op == "$gt":
        return a > b
    if op == "$gte":
        return a >= b
    if op == "$lt":
        return a < b
    return a <= b  # $lte: check_filter refused every other operator


def matches_namespace(
    namespace: Sequence[str], prefix: Sequence[str] = (), suffix: Sequence[str] = ()
) -> bool:
    """True when ``namespace`` starts with ``prefix`` and ends with ``suffix``; ``*`` in either
    matches any one label."""
    if len(namespace) < len(prefix) or len(namespace) < len(suffix):
        return False
    head = all(p in ("*", n) for n, p in zip(namespace, prefix, strict=False))
    tail = all(p in ("*", n) for n, p in zip(reversed(namespace), reversed(suffix), strict=False))
    return head and tail


MAX_OFFSET = 2**63 - 1
"""The largest offset: what Postgres's ``bigint`` holds (an ``OFFSET`` is one)."""


def check_offset(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_OFFSET:
        raise InvalidInput(f"offset must be an integer from 0 to {MAX_OFFSET:,}, got {value!r:.80}")
    return value


def check_depth(value: object) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise InvalidInput(f"max_depth must be a positive integer or None, got {value!r:.80}")
    return value


def check_index(value: object) -> bool | str | tuple[str, ...]:
    """True, False, a text, or a list of texts (each its own vector)."""
    if isinstance(value, (list, tuple)):
        texts = tuple(cast(Sequence[object], value))
        for i, text in enumerate(texts):
            check_text(text, f"index text [{i}]", max_chars=MAX_VALUE_CHARS, allow_empty=True)
        return cast(tuple[str, ...], texts)
    if not isinstance(value, (bool, str)):
        raise InvalidInput(
            f"index must be True, False, a text or a list of texts, got {type(value).__name__}"
        )
    if isinstance(value, str):
        check_text(value, "index text", max_chars=MAX_VALUE_CHARS, allow_empty=True)
    return value


def index_texts(value: Mapping[str, Any], index: bool | str | tuple[str, ...]) -> list[str]:
    """The texts embedded for an item: its JSON (True), the text or texts given (empty
    ones dropped), or none (False)."""
    if index is True:
        return [index_text(value)]
    if index is False:
        return []
    return [t for t in ((index,) if isinstance(index, str) else index) if t]


# Postgres's numeric writes a number without its exponent, and keeps the digits after the
# point it was given: 1e+300 reads back as a 301-digit integer. A float from 1e16 up is
# written with all its digits and ".0", which reads back as the same float.
_EXACT_FLOAT = 1e16


def negative_zero(value: Any) -> bool:
    """Whether ``value`` holds -0.0, which ``jsonb`` reads back as 0.0 (migration 0033)."""
    if isinstance(value, float):
        return value == 0.0 and math.copysign(1.0, value) < 0
    if isinstance(value, Mapping):
        return any(negative_zero(v) for v in cast(Mapping[str, Any], value).values())
    if isinstance(value, (list, tuple)):
        return any(negative_zero(v) for v in cast(Sequence[Any], value))
    return False


def value_json(value: Mapping[str, Any]) -> str:
    """The JSON text of a checked value, written so that ``jsonb`` reads back each float
    as a float (see ``_EXACT_FLOAT``)."""
    big: list[str] = []

    def mark(node: Any) -> Any:
        if isinstance(node, float) and abs(node) >= _EXACT_FLOAT:
            big.append(f"{int(node)}.0")
            return f"\x00{len(big) - 1}\x00"  # a checked value holds no NUL
        if isinstance(node, Mapping):
            return {k: mark(v) for k, v in cast(Mapping[str, Any], node).items()}
        if isinstance(node, (list, tuple)):
            return [mark(v) for v in cast(Sequence[Any], node)]
        return node

    text = json.dumps(mark(value))
    for i, digits in enumerate(big):
        text = text.replace(f'"\\u0000{i}\\u0000"', digits, 1)
    return text
