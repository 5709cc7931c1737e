"""The public records: what callers pass in and what reads give back.

All are frozen dataclasses. Inputs check themselves on construction and raise
Timestone's own errors; ``FactInput.parse`` also takes the JSON shape (a dict,
ISO 8601 strings for dates), validated by pydantic.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
import unicodedata
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, TypeVar, cast

import pydantic

from ._names import relation_name
from ._time import aware, optional_aware, parse_datetime
from .errors import InvalidInput, InvalidPeriod

__all__ = [
    "DocumentResult",
    "Entity",
    "EntityInput",
    "Episode",
    "Fact",
    "FactInput",
    "IngestResult",
    "RemovalReport",
    "RollbackReport",
]

MAX_NAME_CHARS = 512
"""The longest name: an entity's, an episode's, a document's title."""
MAX_FACT_CHARS = 10_000
MAX_LABELS = 16
_RELATION = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> bool:
    """Whether Postgres text can hold ``text``: no NUL byte, no lone surrogate (a half of
    a UTF-16 pair, which ``json.loads`` makes of a broken ``\\ud83d`` escape and UTF-8
    cannot encode)."""
    return "\x00" not in text and (text.isascii() or _SURROGATE.search(text) is None)


def check_chars(value: str, what: str) -> str:
    """Refuse a string Postgres text cannot hold (``storable``), naming ``what``."""
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL byte, which Postgres text cannot store")
    if not value.isascii() and (found := _SURROGATE.search(value)) is not None:
        raise InvalidInput(
            f"{what} contains a lone surrogate ({found.group()!r} at character "
            f"{found.start()}), which is not text UTF-8 can encode"
        )
    return value


MAX_JSON_DEPTH = 64
# the JSON text of one attributes mapping, or of a document's metadata: a fact or entity
# row carries its attributes into every version and every search result that holds it
MAX_ATTRIBUTES_CHARS = 100_000
_PATH_CHARS = 120  # of a nested value's path (``what``) in a message


MAX_JSON_INT_DIGITS = 131_072  # Postgres's numeric: digits before the decimal point
# below this, an integer has fewer digits (at most 603) than the lowest limit Python
# allows (sys.set_int_max_str_digits takes 640 or more) and than Postgres's
_PLAIN_INT_BITS = 2_000


def _check_big_int(value: int, what: str) -> None:
    try:
        digits = len(str(abs(value)))
    except ValueError:  # longer than the interpreter writes (sys.set_int_max_str_digits)
        raise InvalidInput(
            f"{what} is an integer of {value.bit_length():,} bits, more digits than Python "
            f"writes ({sys.get_int_max_str_digits():,}): store it as a string"
        ) from None
    if digits > MAX_JSON_INT_DIGITS:
        raise InvalidInput(
            f"{what} is an integer of {digits:,} digits, more than a Postgres number holds "
            f"({MAX_JSON_INT_DIGITS:,}): store it as a string"
        )


def check_json(value: object, what: str, depth: int = 0) -> None:
    """Refuse what a ``jsonb`` column cannot hold, naming where it is: a value other than
    a string, a finite number, a boolean, None, a list (or tuple) or a mapping with string
    keys, a string that is not ``storable``, or nesting deeper than ``MAX_JSON_DEPTH``."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if value.bit_length() > _PLAIN_INT_BITS:
            _check_big_int(value, what)
        return
    if depth > MAX_JSON_DEPTH:
        path = what if len(what) <= _PATH_CHARS else what[: _PATH_CHARS - 3] + "..."
        raise InvalidInput(f"{path} is nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{what} is {value!r}, which JSON cannot hold")
    elif isinstance(value, str):
        check_chars(value, what)
    elif isinstance(value, Mapping):
        for key, item in cast(Mapping[object, object], value).items():
            if not isinstance(key, str):
                raise InvalidInput(f"{what} has a key that is not a string: {key!r:.80}")
            check_chars(key, f"a key of {what}")
            check_json(item, f"{what}[{key!r:.80}]", depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(cast(Sequence[object], value)):
            check_json(item, f"{what}[{i}]", depth + 1)
    else:
        raise InvalidInput(
            f"{what} is a {type(value).__name__}, which JSON cannot hold: use a string, "
            "number, boolean, None, list or dict (or declare the attribute's type in the "
            "ontology, which converts it)"
        )


def check_json_size(value: object, what: str, max_chars: int = MAX_ATTRIBUTES_CHARS) -> str:
    """The JSON text of ``value`` (checked by ``check_json``), refused naming ``what``
    when it is longer than ``max_chars`` (characters as written, not ``\\u`` escapes)."""
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > max_chars:
        raise InvalidInput(
            f"{what} is {len(text):,} characters of JSON; the limit is {max_chars:,}"
        )
    return text


def check_text(value: object, what: str, *, max_chars: int, allow_empty: bool = False) -> str:
    """Refuse non-strings, text Postgres cannot hold (``check_chars``), empty (unless
    allowed) and oversized text, naming ``what``."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}")
    check_chars(value, what)
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{what} is empty")
    if len(value) > max_chars:
        raise InvalidInput(f"{what} has {len(value):,} characters; the limit is {max_chars:,}")
    return value


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def visible(value: str) -> bool:
    """Whether ``value`` has a visible character: a letter, digit, punctuation mark or
    symbol."""
    return any(unicodedata.category(ch)[0] in "LNPS" for ch in value)


def check_visible(value: str, what: str) -> str:
    """Refuse text with no visible character (a letter, digit, punctuation mark or symbol):
    text made only of spaces, control, zero-width, format (a byte order mark) or combining
    characters is text nobody can see, type or find."""
    if not visible(value):
        raise InvalidInput(
            f"{what} {value!r:.80} has no visible character (only spaces, control, format "
            "or combining characters)"
        )
    return value


def check_name(value: object, what: str = "entity name") -> str:
    """An entity's name: text (``check_text``) with no control character and at least one
    visible one (``check_visible``): a name made only of zero-width, format or combining
    characters would be an entity nobody can see or type."""
    name = check_text(value, what, max_chars=MAX_NAME_CHARS)
    if (found := _CONTROL.search(name)) is not None:
        raise InvalidInput(
            f"{what} {name!r:.80} contains a control character ({found.group()!r} at "
            f"character {found.start()})"
        )
    if not name.isascii():  # an ASCII name without a control character has a visible one
        check_visible(name, what)
    return name


def check_uuid(value: object, what: str) -> uuid.UUID:
    """A UUID, or its string form; anything else is refused naming ``what``."""
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise InvalidInput(f"{what} must be a UUID, got {value!r:.80}")


def check_list(value: object, what: str, of: str) -> list[object]:
    """``value`` as a list when it is a list, tuple or other iterable of items (``of``
    names them); a string, bytes, a mapping or a single object is refused naming
    ``what``, before anything reads an item."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        kind = type(cast(object, value)).__name__
        raise InvalidInput(f"{what} must be a list of {of}, got {kind}")
    return list(cast(Iterable[object], value))


def check_mapping(value: object, what: str) -> Mapping[str, Any]:
    """``value`` when it is a mapping (a dict); anything else is refused naming ``what``."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{what} must be a mapping (a dict), got {type(value).__name__}")
    return cast(Mapping[str, Any], value)


def check_relation(value: object) -> str:
    """The relation ``value`` names, in its normal form (``_names.relation_name``:
    ``Directs``, ``directs`` and ``DIRECTS`` are ``DIRECTS``; ``worksAt`` is ``WORKS_AT``);
    anything but an identifier is refused."""
    name = relation_name(value) if isinstance(value, str) and _RELATION.fullmatch(value) else None
    if name is None:
        raise InvalidInput(
            f"relation {value!r:.80} must be an identifier of at most 128 characters "
            "(letters, digits and underscores, not starting with a digit), like WORKS_AT"
        )
    return name


def _check_attributes(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{what} must be a mapping, got {type(value).__name__}")
    out: dict[str, Any] = {}
    for key, item in value.items():  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(key, str):
            raise InvalidInput(f"{what} keys must be strings, got {key!r:.80}")
        out[key] = item
    return out


@dataclasses.dataclass(frozen=True)
class EntityInput:
    """An entity as a caller names it: a name, labels (the first is its type), a summary."""

    __pydantic_config__: ClassVar[pydantic.ConfigDict] = pydantic.ConfigDict(extra="forbid")

    name: str
    labels: tuple[str, ...] = ()
    summary: str | None = None
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict[str, Any])

    def __post_init__(self) -> None:
        check_name(self.name)
        given = cast(object, self.labels)  # callers may pass a list, or (wrongly) a string
        if isinstance(given, str) or not isinstance(given, (list, tuple)):
            raise InvalidInput(f"labels of entity {self.name!r} must be a list of strings")
        object.__setattr__(self, "labels", tuple(self.labels))
        if len(self.labels) > MAX_LABELS:
            raise InvalidInput(
                f"entity {self.name!r} has {len(self.labels)} labels; at most {MAX_LABELS}"
            )
        for label in self.labels:
            check_text(label, "entity label", max_chars=128)
        if self.summary is not None:
            check_text(self.summary, "entity summary", max_chars=MAX_FACT_CHARS, allow_empty=True)
        _check_attributes(self.attributes, f"attributes of entity {self.name!r}")

    @property
    def entity_type(self) -> str:
        return self.labels[0] if self.labels else "Entity"


def held_entity(name: str, labels: tuple[str, ...] = ()) -> EntityInput:
    """An entity the graph already holds, by its stored name and labels, not checked again
    (``EntityInput`` checks what a caller gives): a name stored before a rule was added
    stays usable. The library's own, not a way around the checks."""
    held = object.__new__(EntityInput)
    for field, value in (("name", name), ("labels", labels), ("summary", None)):
        object.__setattr__(held, field, value)
    object.__setattr__(held, "attributes", {})
    return held


@dataclasses.dataclass(frozen=True)
class FactInput:
    """One structured assertion: ``source -relation-> target``, true from ``valid_at``."""

    __pydantic_config__: ClassVar[pydantic.ConfigDict] = pydantic.ConfigDict(extra="forbid")

    source: str | EntityInput
    relation: str
    target: str | EntityInput
    fact: str | None = None
    valid_at: datetime | None = None
    invalid_at: datetime | None = None
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict[str, Any])

    def __post_init__(self) -> None:
        ends = cast(tuple[object, object], (self.source, self.target))
        for end in ends:
            if isinstance(end, str):
                check_name(end)
            elif not isinstance(end, EntityInput):
                raise InvalidInput(
                    f"source and target must be names or EntityInput, got {type(end).__name__}"
                )
        object.__setattr__(self, "relation", check_relation(self.relation))
        if self.fact is not None:
            check_text(self.fact, "fact sentence", max_chars=MAX_FACT_CHARS)
        valid_at = optional_aware(self.valid_at, f"valid_at of {self.relation} fact")
        invalid_at = optional_aware(self.invalid_at, f"invalid_at of {self.relation} fact")
        object.__setattr__(self, "valid_at", valid_at)
        object.__setattr__(self, "invalid_at", invalid_at)
        if valid_at is not None and invalid_at is not None and invalid_at <= valid_at:
            raise InvalidPeriod(
                f"{self.relation} fact: invalid_at {invalid_at.isoformat()} is not after "
                f"valid_at {valid_at.isoformat()}"
            )
        _check_attributes(self.attributes, f"attributes of {self.relation} fact")

    @property
    def source_entity(self) -> EntityInput:
        return self.source if isinstance(self.source, EntityInput) else EntityInput(self.source)

    @property
    def target_entity(self) -> EntityInput:
        return self.target if isinstance(self.target, EntityInput) else EntityInput(self.target)

    @classmethod
    def parse(cls, value: FactInput | Mapping[str, Any]) -> FactInput:
        """A ``FactInput`` from itself or from a mapping of its fields (JSON shape)."""
        if isinstance(value, FactInput):
            return value
        if not isinstance(cast(object, value), Mapping):
            raise InvalidInput(
                f"each fact must be a FactInput or a dict of its fields, got "
                f"{type(value).__name__}: {value!r:.80}"
            )
        # The two dates are read here, not by pydantic's lax mode, which takes a number
        # (or a string of digits) for seconds since 1970: ``valid_at: 2020`` would be stored
        # as 1970-01-01T00:33:40Z. A string is ISO 8601 with its offset, as in JSON.
        fields = dict(value)
        relation = fields.get("relation")
        for end in ("valid_at", "invalid_at"):
            when = fields.get(end)
            if when is None or isinstance(when, datetime):
                continue
            what = f"{end} of {relation if isinstance(relation, str) else 'the'} fact"
            fields[end] = parse_datetime(when, what) if isinstance(when, str) else aware(when, what)
        # an end given as a mapping is an EntityInput's fields: read as one, so that a bad
        # field is named (as the union ``str | EntityInput`` its error would be "not a string")
        for end in ("source", "target"):
            given: object = fields.get(end)
            if isinstance(given, Mapping):
                fields[end] = _validated(_ENTITY_ADAPTER, cast(Mapping[str, Any], given), end)
        return _validated(_FACT_ADAPTER, fields, "fact", shown=dict(value))


_T = TypeVar("_T")


def _validated(
    adapter: pydantic.TypeAdapter[_T], fields: Mapping[str, Any], what: str, shown: object = None
) -> _T:
    """``fields`` read by ``adapter``; our own checks' errors as they are, pydantic's first
    error named by its field."""
    try:
        return adapter.validate_python(fields)
    except pydantic.ValidationError as exc:
        for err in exc.errors():
            original = err.get("ctx", {}).get("error")
            if isinstance(original, InvalidInput):
                raise original from None  # our own check, raised inside validation
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "value"
        given = repr(dict(fields) if shown is None else shown)[:200]
        raise InvalidInput(f"{what} {given} is malformed: {where}: {err['msg']}") from exc


_FACT_ADAPTER: pydantic.TypeAdapter[FactInput] = pydantic.TypeAdapter(FactInput)
_ENTITY_ADAPTER: pydantic.TypeAdapter[EntityInput] = pydantic.TypeAdapter(EntityInput)


def entity_input(value: object, what: str = "entity") -> EntityInput:
    """An ``EntityInput`` from itself or from a mapping of its fields (JSON shape); a key
    it has no field for, or a field of the wrong type, is named."""
    if isinstance(value, EntityInput):
        return value
    if not isinstance(value, Mapping):
        raise InvalidInput(
            f"{what} must be an EntityInput or a dict of its fields, got "
            f"{type(value).__name__}: {value!r:.80}"
        )
    return _validated(_ENTITY_ADAPTER, cast(Mapping[str, Any], value), what)


@dataclasses.dataclass(frozen=True, slots=True)
class Entity:
    """An entity as the graph holds it (at the read's ``as_of``)."""

    id: uuid.UUID
    group_id: str
    name: str
    labels: tuple[str, ...]
    summary: str
    attributes: Mapping[str, Any]
    created_at: datetime
    expired_at: datetime | None
    score: float | None = None

    @property
    def entity_type(self) -> str:
        return self.labels[0] if self.labels else "Entity"


@dataclasses.dataclass(frozen=True, slots=True)
class Fact:
    """One version of a fact with both clocks; ``id`` is stable across versions."""

    id: uuid.UUID
    version_id: uuid.UUID
    group_id: str
    source_id: uuid.UUID
    source: str
    relation: str
    target_id: uuid.UUID
    target: str
    fact: str
    valid_at: datetime
    invalid_at: datetime | None
    created_at: datetime
    expired_at: datetime | None
    episodes: tuple[uuid.UUID, ...]
    attributes: Mapping[str, Any]
    score: float | None = None

    def holds_at(self, when: datetime) -> bool:
        """True when the fact was true in the world at ``when``."""
        return self.valid_at <= when and (self.invalid_at is None or when < self.invalid_at)


@dataclasses.dataclass(frozen=True, slots=True)
class Episode:
    """An ingested episode: the raw content, verbatim, and where it came from."""

    id: uuid.UUID
    group_id: str
    name: str
    content: str
    source: str
    source_description: str
    reference_time: datetime
    saga: str | None
    idempotency_key: str
    created_at: datetime
    expired_at: datetime | None
    document_uri: str | None = None
    chunk_index: int | None = None
    char_start: int | None = None
    char_end: int | None = None
    llm_calls: int = 0
    llm_tokens: int = 0
    score: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class IngestResult:
    """What one write did. ``created`` is False when the idempotency key was already ingested."""

    episode: Episode
    entities: Sequence[Entity]
    facts: Sequence[Fact]
    invalidated: Sequence[Fact]
    created: bool
    recorded_at: datetime
    llm_calls: int = 0
    llm_tokens: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class RemovalReport:
    """What ``remove_episode`` changed in the current graph."""

    episode_id: uuid.UUID
    removed_at: datetime
    facts_expired: int
    facts_created: int
    entities_expired: int
    entities_changed: int


@dataclasses.dataclass(frozen=True, slots=True)
class RollbackReport:
    """What ``rollback`` changed: rows expired and rows restored, per table."""

    to: datetime
    rolled_back_at: datetime
    expired: Mapping[str, int]
    restored: Mapping[str, int]


@dataclasses.dataclass(frozen=True, slots=True)
class DocumentResult:
    """What ``add_document`` did: the chunk episodes of this version of the document."""

    uri: str
    version: int
    episodes: Sequence[Episode]
    entities: Sequence[Entity]
    facts: Sequence[Fact]
    invalidated: Sequence[Fact]
    retracted: Sequence[uuid.UUID]
    created: bool
    recorded_at: datetime
    llm_calls: int = 0
    llm_tokens: int = 0
