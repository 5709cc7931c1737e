"""A group in and out, losslessly, and what it holds.

Export writes every row version of a group, of every table of the schema that
is keyed by ``group_id``, with both clocks as stored: one JSON object per
line. The first line is a header (format, schema version, embedder, the
stored ontology, row counts), the last an end marker, so a truncated file is
refused. Vectors travel as pgvector's text form, which round-trips exactly.

Import reads such a file into an empty group of a database built with the
same embedder, in one transaction: a bad line writes nothing. Reads after an
import answer exactly what they answered before the export, for every
``valid_at`` and ``as_of``.
The relation names of an export written before they took one normal form are
renamed as the upgrade of a database renames them (docs/upgrading.md).

The inventory: row counts per table (current and every version), the
episodes of a group, and the full history of an entity's facts.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, cast

import psycopg
from psycopg import sql

from .._jsontext import check_depth
from .._names import stored_relation
from .._records import Episode, Fact
from ..errors import EmbedderMismatch, InvalidInput, SchemaTooNew
from ..graph._nodes import GRAPH_LINKS, link_key
from ..write._episodes_async import EPISODE_COLUMNS, episode_from_row
from ..write._facts_async import held_clause, read_facts
from ..write._transaction_async import Write
from ._database_async import Conn
from ._distributed_async import row_inserts

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "LineSink",
    "count_rows",
    "export_rows",
    "fact_history",
    "import_rows",
    "list_episodes",
    "parse_export",
]

FORMAT = "timestone-export"
FORMAT_VERSION = 1
_FIRST = ("episodes", "entities", "mentions", "assertions", "facts", "purges")
_BATCH = 500


class LineSink(Protocol):
    """Anything with ``write(str)``: a text file, ``sys.stdout``, an ``io.StringIO``."""

    def write(self, text: str, /) -> Any: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Table:
    """A table of the schema keyed by ``group_id``: its stored columns and sort key."""

    name: str
    columns: tuple[str, ...]
    generated: tuple[str, ...]
    order: tuple[str, ...]

    @property
    def versioned(self) -> bool:
        return "expired_at" in self.columns


async def group_tables(conn: Conn) -> list[Table]:
    """Every table of the ``timestone`` schema that has a ``group_id`` column."""
    cur = await conn.execute(
        "SELECT c.relname AS table_name, a.attname AS column_name, a.attgenerated <> '' AS gen,"
        " coalesce(a.attnum = ANY(i.indkey::int2[]), false) AS in_pk"
        " FROM pg_class AS c"
        " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
        " LEFT JOIN pg_index AS i ON i.indrelid = c.oid AND i.indisprimary"
        " WHERE n.nspname = 'timestone' AND c.relkind IN ('r', 'p') AND c.relname <> 'meta'"
        "   AND has_table_privilege(c.oid, 'SELECT')"
        " ORDER BY c.relname, a.attnum"
    )
    columns: dict[str, list[str]] = {}
    generated: dict[str, list[str]] = {}
    keys: dict[str, list[str]] = {}
    for row in await cur.fetchall():
        name = str(row["table_name"])
        target = generated if row["gen"] else columns
        target.setdefault(name, []).append(str(row["column_name"]))
        columns.setdefault(name, [])
        if row["in_pk"]:
            keys.setdefault(name, []).append(str(row["column_name"]))
    tables: list[Table] = []
    for name, cols in columns.items():
        if "group_id" not in cols:
            continue
        pk = [c for c in keys.get(name, []) if c != "group_id"] or cols
        order = ["created_at", *pk] if "created_at" in cols else pk
        tables.append(
            Table(name, tuple(cols), tuple(generated.get(name, [])), tuple(dict.fromkeys(order)))
        )
    rank = {name: i for i, name in enumerate(_FIRST)}
    return sorted(tables, key=lambda t: (rank.get(t.name, len(rank)), t.name))


async def _meta(conn: Conn, key: str) -> Any:
    cur = await conn.execute("SELECT value FROM timestone.meta WHERE key = %s", (key,))
    row = await cur.fetchone()
    return row["value"] if row is not None else None


async def count_rows(conn: Conn, group_id: str) -> dict[str, dict[str, int]]:
    """Rows of the group per table: ``current`` (held now) and ``versions`` (every version)."""
    out: dict[str, dict[str, int]] = {}
    for table in await group_tables(conn):
        current = sql.SQL(
            "count(*) FILTER (WHERE expired_at IS NULL)" if table.versioned else "count(*)"
        )
        cur = await conn.execute(
            sql.SQL(
                "SELECT {current} AS current, count(*) AS versions FROM timestone.{t}"
                " WHERE group_id = %s"
            ).format(current=current, t=sql.Identifier(table.name)),
            (group_id,),
        )
        row = await cur.fetchone()
        assert row is not None
        out[table.name] = {"current": int(row["current"]), "versions": int(row["versions"])}
    return out


def _line(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


async def export_rows(conn: Conn, group_id: str, out: LineSink) -> dict[str, int]:
    """Write the header, every row version of every group table, and the end marker."""
    tables = await group_tables(conn)
    counts = await count_rows(conn, group_id)
    cur = await conn.execute("SELECT now() AS now")
    row = await cur.fetchone()
    assert row is not None
    header = {
        "kind": "header",
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "group_id": group_id,
        "exported_at": row["now"].isoformat(),
        "schema_version": await _meta(conn, "schema_version"),
        "embedder": await _meta(conn, "embedder"),
        "ontology": await _meta(conn, "ontology"),
        "rows": {t.name: counts[t.name]["versions"] for t in tables},
    }
    out.write(_line(header))
    written: dict[str, int] = {}
    for table in tables:
        query = sql.SQL(
            "SELECT to_jsonb(t) - {generated}::text[] AS row FROM timestone.{t} AS t"
            " WHERE t.group_id = %s ORDER BY {order}"
        ).format(
            generated=sql.Literal(list(table.generated)),
            t=sql.Identifier(table.name),
            order=sql.SQL(", ").join(sql.Identifier("t", c) for c in table.order),
        )
        n = 0
        async with conn.cursor(name="timestone_export") as rows:
            await rows.execute(query, (group_id,))
            async for item in rows:
                out.write(_line({"kind": "row", "table": table.name, "row": item["row"]}))
                n += 1
        written[table.name] = n
    out.write(_line({"kind": "end", "rows": sum(written.values())}))
    return written


@dataclasses.dataclass
class Parsed:
    """A checked export: its header and its rows by table, in file order."""

    header: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]]


def _lines(lines: Iterable[str]) -> Iterable[object]:
    given = cast(object, lines)
    if isinstance(given, (str, bytes, Mapping)) or not isinstance(given, Iterable):
        kind = type(given).__name__  # pyright: ignore[reportUnknownArgumentType]
        raise InvalidInput(
            f"lines must be an iterable of text lines (an open file, a list of str), got {kind}"
        )
    return cast(Iterable[object], given)


def _line_object(number: int, text: object) -> dict[str, Any] | None:
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
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"line {number}: not JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(obj, dict):
        raise InvalidInput(f"line {number}: expected a JSON object")
    return obj  # pyright: ignore[reportUnknownVariableType]


def _check_header(number: int, item: Mapping[str, Any]) -> None:
    if item.get("kind") != "header" or item.get("format") != FORMAT:
        raise InvalidInput(f"line {number}: not a Timestone export (no {FORMAT} header)")
    if item.get("format_version") != FORMAT_VERSION:
        raise InvalidInput(
            f"line {number}: export format version {item.get('format_version')!r:.80}; "
            f"this Timestone reads version {FORMAT_VERSION}"
        )


def parse_export(lines: Iterable[str]) -> Parsed:
    """Read and check an export; refuse it naming the line and what is wrong."""
    header: dict[str, Any] | None = None
    rows: dict[str, list[dict[str, Any]]] = {}
    ended = False
    number = 0
    for number, text in enumerate(_lines(lines), start=1):
        item = _line_object(number, text)
        if item is None:
            continue
        if ended:
            raise InvalidInput(f"line {number}: content after the end marker")
        kind = item.get("kind")
        if header is None:
            _check_header(number, item)
            header = item
        elif kind == "row":
            table, row = item.get("table"), item.get("row")
            if not isinstance(table, str) or not isinstance(row, dict):
                raise InvalidInput(f"line {number}: a row needs a table name and a row object")
            rows.setdefault(table, []).append(row)  # pyright: ignore[reportUnknownArgumentType]
        elif kind == "end":
            total = sum(len(r) for r in rows.values())
            if item.get("rows") != total:
                raise InvalidInput(
                    f"line {number}: the end marker counts {item.get('rows')!r:.80} rows, "
                    f"the file holds {total}"
                )
            ended = True
        else:
            raise InvalidInput(f"line {number}: unknown line kind {kind!r:.80}")
    if header is None:
        raise InvalidInput("the export is empty: no header line")
    if not ended:
        raise InvalidInput(f"the export is truncated after line {number}: no end marker")
    return Parsed(header=header, rows=rows)


async def import_rows(w: Write, parsed: Parsed) -> dict[str, int]:
    """Insert an export's rows into the write's (empty) group; refuse anything lossy."""
    conn = w.conn
    header = parsed.header
    version = await _meta(conn, "schema_version")
    exported_version = header.get("schema_version")
    if (
        isinstance(exported_version, int)
        and isinstance(version, int)
        and exported_version > version
    ):
        raise SchemaTooNew(
            f"the export was written at schema version {exported_version}; this database is at "
            f"{version}: upgrade the timestone package before importing"
        )
    stored = await _meta(conn, "embedder")
    vectors_in_file = header.get("embedder")
    if vectors_in_file is not None and stored is not None and vectors_in_file != stored:
        raise EmbedderMismatch(
            f"the export's vectors come from the embedder {vectors_in_file!r}, this database "
            f"uses {stored!r}: open the target with the export's embedder, import, then reembed"
        )
    tables = {t.name: t for t in await group_tables(conn)}
    for name, rows in parsed.rows.items():
        table = tables.get(name)
        if table is None:
            raise InvalidInput(
                f"the export has rows of table {name!r:.80}, which this database lacks"
            )
        allowed = set(table.columns)
        for row in rows:
            unknown = set(row) - allowed - set(table.generated)
            if unknown:
                raise InvalidInput(
                    f"the export's {name} rows carry columns this database lacks: "
                    f"{', '.join(sorted(unknown))}"
                )
            if name == "episodes" and row.get("source") == "facts":
                _check_facts_record(row)
    counts = await count_rows(conn, w.group_id)
    held = sum(c["versions"] for c in counts.values())
    if held:
        raise InvalidInput(
            f"the group {w.group_id!r} already holds {held} rows; import into an empty group "
            "(pass another group id)"
        )
    renamed = _normal_relations(parsed.rows)
    done: dict[str, int] = {}
    for name, table in tables.items():
        rows = parsed.rows.get(name, [])
        if not rows:
            continue
        columns = list(table.columns)
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
        query = sql.SQL(
            "INSERT INTO timestone.{t} ({cols}) SELECT {cols}"
            " FROM jsonb_populate_recordset(NULL::timestone.{t}, %s::jsonb)"
        ).format(t=sql.Identifier(name), cols=cols)
        for start in range(0, len(rows), _BATCH):
            batch = [{**row, "group_id": w.group_id} for row in rows[start : start + _BATCH]]
            try:
                await conn.execute(row_inserts(conn, query), (json.dumps(batch),))
            except (psycopg.errors.ExclusionViolation, psycopg.errors.UniqueViolation) as exc:
                if name not in renamed:
                    raise
                raise InvalidInput(
                    f"the export was written before relation names took one normal form; "
                    f"renamed, two current {name} rows of it meet in one slot "
                    f"({exc.diag.message_detail or exc.diag.message_primary}). Import it into "
                    "a database of the Timestone version that wrote it, then open that "
                    "database with this one, which names the way out (docs/upgrading.md)"
                ) from exc
        done[name] = len(rows)
    return done


def _check_facts_record(row: Mapping[str, Any]) -> None:
    """The record of an ``add_facts`` call holds its facts as JSON, from which its
    searchable text is made (migration 0042): any other content is refused by name."""
    content = row.get("content")
    try:
        json.loads(content if isinstance(content, str) else "")
    except ValueError:
        raise InvalidInput(
            f"the export's episodes row {str(row.get('version_id'))!r:.60} is a record of facts "
            "(source 'facts'), whose content must be its facts as JSON; it is not JSON"
        ) from None


def _normal_relations(rows: Mapping[str, list[dict[str, Any]]]) -> set[str]:
    """Rename the relations of an export written before relation names took one normal
    form, as the migration ``relation_names_normal_form`` renames a database's: assertions,
    facts and graph links (keyed again). Returns the tables it renamed rows of."""
    renamed: set[str] = set()
    for table in ("assertions", "facts"):
        for row in rows.get(table, []):
            name = row.get("relation")
            if isinstance(name, str) and stored_relation(name) != name:
                row["relation"] = stored_relation(name)
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


async def list_episodes(
    conn: Conn,
    group_id: str,
    *,
    as_of: datetime | None,
    ids: Sequence[uuid.UUID] | None,
    limit: int,
) -> list[Episode]:
    """Episodes held at ``as_of`` (default: now), newest reference time first."""
    where: list[sql.Composable] = [
        sql.SQL("e.group_id = {}").format(sql.Literal(group_id)),
        held_clause("e", as_of),
    ]
    if ids is not None:
        where.append(sql.SQL("e.id = ANY({})").format(sql.Literal(list(ids))))
    query = sql.SQL(
        "SELECT {cols} FROM timestone.episodes AS e WHERE {where}"
        " ORDER BY e.reference_time DESC, e.created_at DESC, e.id LIMIT {limit}"
    ).format(
        cols=EPISODE_COLUMNS,
        where=sql.SQL(" AND ").join(where),
        limit=sql.Literal(limit),
    )
    cur = await conn.execute(query)
    return [episode_from_row(row) for row in await cur.fetchall()]


async def fact_history(
    conn: Conn, group_id: str, entity: str | uuid.UUID, *, read_time: datetime
) -> list[Fact]:
    """Every version of every fact about ``entity``, superseded ones too, by ``valid_at``."""
    facts = await read_facts(
        conn,
        group_id,
        entity=entity,
        valid_at=None,
        as_of=None,
        read_time=read_time,
        order="timeline",
        limit=None,
        history=True,
    )
    return sorted(facts, key=lambda f: (f.valid_at, f.relation, f.created_at, f.version_id))
