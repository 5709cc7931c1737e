"""What an export must hold before an import writes a row of it.

The lines (``read_line``): each a JSON object whose numbers Python holds (no
``NaN`` or ``Infinity``, no integer of more than 4,300 digits). The header
(``check_header``): every field there, of its type. The counts
(``check_counts``): the header's count of each table is the file's.

The rows (``check_rows``), column by column as the database's catalog
describes the table: a value of the column's type (a JSON object for a JSON
column, as every one of the schema holds), text Postgres can store (no NUL,
no lone surrogate), integers in their range, times with their UTC offset
(``_time.aware``: never read in a guessed zone), UUIDs and times in their
canonical text. No row twice (``check_rows``); every reference to an entity or
an episode names a row of the file (``check_references``); no system time after
this database's clock (``check_system_times``); relations that
``check_relation`` takes, stored in its normal form (``normal_relations``).
What these leave to the database (a table's rules, a type read only there) it
refuses at the insert, and the import names the line of it.

Every refusal names the line, the table and the column, and shows the value
in at most 80 characters.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from .._groups import check_group
from .._jsontext import check_depth
from .._names import stored_relation
from .._records import check_relation
from .._time import parse_datetime
from ..errors import InvalidGroup, InvalidInput, NaiveDatetime
from ..graph._nodes import GRAPH_LINKS, link_key

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ColumnType",
    "Table",
    "brief",
    "check_counts",
    "check_facts_record",
    "check_header",
    "check_references",
    "check_rows",
    "check_system_times",
    "header_group",
    "normal_relations",
    "read_line",
]

FORMAT = "timestone-export"
FORMAT_VERSION = 1

_TEXT = frozenset({"text", "varchar", "bpchar", "name"})
_INTEGER_BITS = {"int2": 16, "int4": 32, "int8": 64}
_NUMBERS = frozenset({"float4", "float8", "numeric"})
_FLOAT32_MAX = 3.4028234663852886e38
# the relations an earlier version stored that have no normal form (``_2nd``): an upgraded
# database keeps them as they are (``_names.stored_relation``), and so does an import
_KEPT_RELATION = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_ONE = {"entities": "entity", "episodes": "episode"}
# (table, column, table whose ids it names): what the reads join
_REFERENCES = (
    ("mentions", "episode_id", "episodes"),
    ("mentions", "entity_id", "entities"),
    ("assertions", "episode_id", "episodes"),
    ("assertions", "source_id", "entities"),
    ("assertions", "target_id", "entities"),
    ("facts", "source_id", "entities"),
    ("facts", "target_id", "entities"),
    ("facts", "episodes", "episodes"),
    ("communities", "members", "entities"),
)


@dataclasses.dataclass(frozen=True, slots=True)
class ColumnType:
    """A stored column of a group table, as the catalog describes it."""

    name: str
    kind: str  # the type's name in the catalog (the element's, for an array)
    array: bool
    dimension: int  # a vector column's dimension; 0 when the column fixes none
    required: bool  # NOT NULL


@dataclasses.dataclass(frozen=True, slots=True)
class Table:
    """A table of the schema keyed by ``group_id``: its stored columns, sort key and
    primary key (without ``group_id``)."""

    name: str
    columns: tuple[str, ...]
    generated: tuple[str, ...]
    order: tuple[str, ...]
    key: tuple[str, ...]
    types: tuple[ColumnType, ...]

    @property
    def versioned(self) -> bool:
        return "expired_at" in self.columns


def brief(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _got(value: object) -> str:
    """What a JSON value is, for a refusal: ``null``, ``the string '5'``, ``an array``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, (int, float)):
        return f"the number {brief(value)}"
    if isinstance(value, str):
        return f"the string {brief(value)}"
    if isinstance(value, (list, dict)):
        kind = "array" if isinstance(value, list) else "object"
        return f"the {kind} {brief(cast(object, value))}"
    return type(value).__name__


def _plain(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name) else brief(name)


# -- lines and the header ------------------------------------------------------------


class _BadNumber(Exception):
    """A number of a line that Python cannot hold (raised from ``json.loads``'s hooks)."""


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        limit = sys.get_int_max_str_digits()
        raise _BadNumber(
            f"a number of more than {limit:,} digits ({text[:20]}…, {len(text):,} digits)"
        ) from None


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _BadNumber(f"the number {text[:40]} is too large for a float")
    return value


def _constant(text: str) -> float:
    raise _BadNumber(f"{text} is not a JSON number")


def read_line(number: int, text: object) -> dict[str, Any] | None:
    """One line as a JSON object; None for a blank line."""
    if not isinstance(text, str):
        raise InvalidInput(
            f"line {number} is {type(text).__name__}, not text: open the export in text "
            "mode (encoding utf-8)"
        )
    if not text.strip():
        return None
    check_depth(text, f"line {number}")
    try:
        obj = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"line {number}: not JSON ({exc.msg} at column {exc.colno})") from exc
    except _BadNumber as exc:
        raise InvalidInput(f"line {number}: {exc}") from None
    if not isinstance(obj, dict):
        raise InvalidInput(f"line {number}: expected a JSON object")
    return cast(dict[str, Any], obj)


def _field(number: int, header: Mapping[str, Any], name: str, kind: type, what: str) -> Any:
    if name not in header:
        raise InvalidInput(f"line {number}: the header has no {name}")
    value = header[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InvalidInput(f"line {number}: the header's {name} must be {what}, got {_got(value)}")
    return value


def check_header(number: int, header: Mapping[str, Any]) -> None:
    """Refuse a header that is not an export's, or lacks a field, or holds one of another
    type: ``group_id`` (text), ``exported_at`` (a time), ``schema_version``, ``embedder``
    (its name and dimension), ``ontology`` (an object or null), ``rows`` (a count per
    table)."""
    if header.get("kind") != "header" or header.get("format") != FORMAT:
        raise InvalidInput(f"line {number}: not a Timestone export (no {FORMAT} header)")
    version = header.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version != FORMAT_VERSION:
        raise InvalidInput(
            f"line {number}: export format version {version!r:.80}; "
            f"this Timestone reads version {FORMAT_VERSION}"
        )
    _field(number, header, "group_id", str, "a string")
    exported = _field(number, header, "exported_at", str, "a time (ISO 8601 text)")
    parse_datetime(exported, f"line {number}: the header's exported_at")
    schema = _field(number, header, "schema_version", int, "an integer")
    if schema < 1:
        raise InvalidInput(f"line {number}: the header's schema_version {schema} is not one")
    embedder = cast(dict[str, Any], _field(number, header, "embedder", dict, "an object"))
    _field(number, embedder, "name", str, "a string")
    _field(number, embedder, "dimension", int, "an integer")
    if "ontology" not in header:
        raise InvalidInput(f"line {number}: the header has no ontology")
    if header["ontology"] is not None and not isinstance(header["ontology"], dict):
        raise InvalidInput(
            f"line {number}: the header's ontology must be an object or null, "
            f"got {_got(header['ontology'])}"
        )
    rows = cast(dict[str, Any], _field(number, header, "rows", dict, "an object"))
    for table, count in rows.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InvalidInput(
                f"line {number}: the header's count of {_plain(table)} rows must be a "
                f"whole number, got {_got(count)}"
            )


def check_counts(
    number: int, header: Mapping[str, Any], rows: Mapping[str, Sequence[object]]
) -> None:
    """Refuse a file whose rows of a table are not as many as its header counts."""
    counts = cast(Mapping[str, int], header["rows"])
    for table in dict.fromkeys([*counts, *rows]):
        claimed, held = counts.get(table, 0), len(rows.get(table, ()))
        if claimed != held:
            raise InvalidInput(
                f"line {number}: the header counts {claimed} {_plain(table)} rows, "
                f"the file holds {held}"
            )


def header_group(header: Mapping[str, Any], number: int) -> str:
    """The group the header names, when the import is given none."""
    try:
        return check_group(header["group_id"])
    except InvalidGroup as exc:
        raise InvalidGroup(
            f"line {number}: the header's {exc}; name the group to import into "
            "(group_id=, or --group on the command line)"
        ) from None


# -- rows ----------------------------------------------------------------------------


def check_rows(
    rows: Mapping[str, Sequence[Mapping[str, Any]]],
    lines: Mapping[str, Sequence[int]],
    tables: Mapping[str, Table],
) -> dict[str, list[dict[str, Any]]]:
    """Each row's stored columns but ``group_id``, checked against the table and written as
    the insert takes them; refuses a table or column the database lacks, and a row twice."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, given in rows.items():
        table = tables.get(name)
        if table is None:
            raise InvalidInput(
                f"line {lines[name][0]}: the export has rows of table {name!r:.80}, "
                "which this database lacks"
            )
        known = {*table.columns, *table.generated}
        types = [c for c in table.types if c.name != "group_id"]
        seen: dict[str, int] = {}
        checked: list[dict[str, Any]] = []
        for row, line in zip(given, lines[name], strict=True):
            unknown = [c for c in row if c not in known]
            if unknown:
                raise InvalidInput(
                    f"line {line}: the export's {name} row carries columns this database "
                    f"lacks: {', '.join(_plain(c) for c in unknown[:5])}"
                )
            values = {
                c.name: _column(f"line {line}: {name} row: {c.name}", c, row.get(c.name))
                for c in types
            }
            key = json.dumps([values.get(c) for c in table.key])
            first = seen.setdefault(key, line)
            if first != line:
                same = ", ".join(f"{c} {brief(values.get(c), 60)}" for c in table.key)
                raise InvalidInput(f"lines {first} and {line} hold the same {name} row ({same})")
            checked.append(values)
        out[name] = checked
    return out


def _column(where: str, column: ColumnType, value: object) -> Any:
    if value is None:
        if column.required:
            raise InvalidInput(f"{where} is missing or null; the table requires one")
        return None
    if not column.array:
        return _scalar(where, column, value)
    if not isinstance(value, list):
        raise InvalidInput(f"{where} must be a JSON array, got {_got(value)}")
    items = cast(list[object], value)
    return [_scalar(f"{where}[{i}]", column, item) for i, item in enumerate(items)]


def _scalar(where: str, column: ColumnType, value: object) -> Any:
    kind = column.kind
    if kind in _TEXT:
        return _text(where, value, "a string")
    if kind == "uuid":
        text = _text(where, value, "a UUID (text)")
        try:
            return str(uuid.UUID(text))
        except ValueError:
            raise InvalidInput(f"{where} {brief(text)} is not a UUID") from None
    if kind in _INTEGER_BITS:
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidInput(f"{where} must be an integer, got {_got(value)}")
        bits = _INTEGER_BITS[kind]
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise InvalidInput(f"{where} {brief(value)} is out of range of a {bits}-bit integer")
        return value
    if kind in _NUMBERS:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise InvalidInput(f"{where} must be a number, got {_got(value)}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise InvalidInput(f"{where} must be true or false, got {_got(value)}")
        return value
    if kind == "timestamptz":
        return _time(where, value)
    if kind in ("json", "jsonb"):
        if not isinstance(value, dict):
            raise InvalidInput(f"{where} must be a JSON object, got {_got(value)}")
        _storable(where, cast(object, value))
        return cast(object, value)
    if kind == "vector":
        return _vector(where, value, column.dimension)
    _storable(where, value)  # a type only the database reads: it refuses at the insert
    return value


def _text(where: str, value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{where} must be {what}, got {_got(value)}")
    _storable(where, value)
    return value


def _storable(where: str, value: object) -> None:
    """Refuse text Postgres cannot store: a NUL, or a lone surrogate (not UTF-8)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidInput(
                f"{where} {brief(value)} holds a NUL character, which Postgres cannot store"
            )
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidInput(
                    f"{where} {brief(value)} holds a lone surrogate: it is not UTF-8 text"
                ) from None
    elif isinstance(value, dict):
        for key, item in cast(dict[str, object], value).items():
            _storable(f"{where} key", key)
            _storable(f"{where}[{key!r:.40}]", item)
    elif isinstance(value, list):
        for i, item in enumerate(cast(list[object], value)):
            _storable(f"{where}[{i}]", item)


def _time(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidInput(
            f"{where} must be a time (ISO 8601 text with its UTC offset), got {_got(value)}"
        )
    try:
        return parse_datetime(value, where).isoformat()
    except NaiveDatetime:
        raise NaiveDatetime(
            f"{where} {brief(value)} has no UTC offset; an export's times carry one "
            "(as +00:00), and a time without is not read in a guessed zone"
        ) from None


def _vector_numbers(value: object) -> list[float] | None:
    if not isinstance(value, str) or not (value.startswith("[") and value.endswith("]")):
        return None
    if "_" in value:  # float() reads 1_0; pgvector does not
        return None
    try:
        return [float(x) for x in value[1:-1].split(",")]
    except ValueError:
        return None


def _vector(where: str, value: object, dimension: int) -> object:
    """A vector in pgvector's text form, ``[0.5,-1.25e-05]``, of finite 4-byte floats."""
    numbers = _vector_numbers(value)
    if numbers is None:
        raise InvalidInput(
            f"{where} must be a vector in pgvector's text form ([0.5,-1.25]), got {_got(value)}"
        )
    if not all(math.isfinite(x) and abs(x) <= _FLOAT32_MAX for x in numbers):
        raise InvalidInput(
            f"{where} {brief(value)} holds a number that is not finite or is beyond a 4-byte float"
        )
    if dimension and len(numbers) != dimension:
        raise InvalidInput(
            f"{where} holds {len(numbers)} numbers; this database's vectors hold {dimension}"
        )
    return value


# -- the rows together ---------------------------------------------------------------


def check_system_times(
    rows: Mapping[str, Sequence[Mapping[str, Any]]],
    lines: Mapping[str, Sequence[int]],
    now: datetime,
) -> None:
    """Refuse a version held from or until a time after this database's clock ``now``:
    written by a server whose clock ran ahead of this one. Imported, it would be missing
    from every ``as_of`` read until the clock passes it, and a write that closes it would
    be refused (``ClockWentBack``)."""
    for name, given in rows.items():
        for row, line in zip(given, lines[name], strict=True):
            for column in ("created_at", "expired_at"):
                value = row.get(column)
                if isinstance(value, str) and datetime.fromisoformat(value) > now:
                    raise InvalidInput(
                        f"line {line}: {name} row: {column} {value} is after this database's "
                        f"clock ({now.isoformat()}): the server that wrote the export ran "
                        "ahead of this one; import it once this clock passes that time, or "
                        "set the clock that ran ahead right and export again"
                    )


def check_references(
    rows: Mapping[str, Sequence[Mapping[str, Any]]], lines: Mapping[str, Sequence[int]]
) -> None:
    """Refuse a row naming an entity or an episode of which the file holds no row (an
    episode that a purge erased counts as held: the file holds the purge)."""
    held = {
        "entities": {r.get("id") for r in rows.get("entities", ())},
        "episodes": {r.get("id") for r in rows.get("episodes", ())}
        | {r.get("episode_id") for r in rows.get("purges", ())},
    }
    for table, column, target in _REFERENCES:
        for row, line in zip(rows.get(table, ()), lines.get(table, ()), strict=True):
            value = row.get(column)
            named = cast(list[object], value) if isinstance(value, list) else [value]
            for ref in named:
                if ref is not None and ref not in held[target]:
                    raise InvalidInput(
                        f"line {line}: {table} row: {column} names the {_ONE[target]} {ref}, "
                        f"of which the export holds no {target} row"
                        + (" (nor a purge)" if target == "episodes" else "")
                    )


def _relation(where: str, value: object) -> Any:
    try:
        return check_relation(value)
    except InvalidInput as exc:
        if isinstance(value, str) and _KEPT_RELATION.fullmatch(value):
            return value  # an identifier with no normal form, kept as stored
        raise InvalidInput(f"{where}: {exc}") from None


def normal_relations(
    rows: Mapping[str, list[dict[str, Any]]], lines: Mapping[str, Sequence[int]]
) -> set[str]:
    """Store each relation in the normal form ``check_relation`` gives it, and refuse one it
    refuses. An export written before relation names took one normal form is renamed as the
    migration ``relation_names_normal_form`` renames a database: assertions, facts and graph
    links (keyed again). Returns the tables it renamed rows of."""
    renamed: set[str] = set()
    for table in ("assertions", "facts"):
        for row, line in zip(rows.get(table, []), lines.get(table, ()), strict=True):
            name = row.get("relation")
            normal = _relation(f"line {line}: {table} row", name)
            if normal != name:
                row["relation"] = normal
                renamed.add(table)
    for row in rows.get("items", []):
        value = row.get("value")
        if row.get("namespace") != list(GRAPH_LINKS) or not isinstance(value, dict):
            continue
        link = cast(dict[str, Any], value)
        source, name, target = link.get("source"), link.get("relation"), link.get("target")
        if not (isinstance(source, str) and isinstance(name, str) and isinstance(target, str)):
            continue
        if stored_relation(name) != name:
            link["relation"] = stored_relation(name)
            row["key"] = link_key(source, link["relation"], target)
            renamed.add("items")
    return renamed


def check_facts_record(row: Mapping[str, Any], line: int) -> None:
    """The record of an ``add_facts`` call holds its facts as JSON, from which its
    searchable text is made (migration 0042): any other content is refused by name."""
    content = row.get("content")
    text = content if isinstance(content, str) else ""
    check_depth(text, f"line {line}: the episodes row's content")
    try:
        json.loads(text)
    except ValueError:
        raise InvalidInput(
            f"line {line}: the export's episodes row {str(row.get('version_id'))!r:.60} is a "
            "record of facts (source 'facts'), whose content must be its facts as JSON; it is "
            "not JSON"
        ) from None
