"""A group in and out, losslessly, and what it holds.

Export writes every row version of a group, of every table of the schema that
is keyed by ``group_id``, with both clocks as stored: one JSON object per
line. The first line is a header (format, schema version, embedder, the
stored ontology, row counts), the last an end marker, so a truncated file is
refused. Vectors travel as pgvector's text form, which round-trips exactly.

Import reads such a file into an empty group of a database built with the
same embedder, in one transaction: a bad line writes nothing. The whole file
is checked before a row is written (``_import_checks``): a value not of its
column's type or that Postgres cannot hold, a relation name with no normal form, a
time after this database's clock, and a row naming a row the file does not hold,
are refused naming the line, the table and the column; what the database refuses
at the insert is found row by row and named the same way. A value today's write
methods refuse but an earlier version stored (a name with a control character, a
longer sentence) is kept: an import restores what the database held. Reads after an import answer
exactly what they answered before the export, for every ``valid_at`` and
``as_of``.
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
from datetime import UTC, datetime
from typing import Any, Protocol, cast

import psycopg
from psycopg import sql

from .._records import Episode, Fact
from ..errors import EmbedderMismatch, InvalidInput, SchemaTooNew
from ..write._episodes_async import EPISODE_COLUMNS, episode_from_row, idempotency_key
from ..write._facts_async import held_clause, read_facts
from ..write._transaction_async import Write
from ._database_async import Conn
from ._distributed_async import row_inserts
from ._import_checks import (
    FORMAT,
    FORMAT_VERSION,
    ColumnType,
    Table,
    brief,
    check_counts,
    check_facts_record,
    check_header,
    check_references,
    check_rows,
    check_system_times,
    normal_relations,
    read_line,
)

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

_FIRST = ("episodes", "entities", "mentions", "assertions", "facts", "purges")
_BATCH = 500


class LineSink(Protocol):
    """Anything with ``write(str)``: a text file, ``sys.stdout``, an ``io.StringIO``."""

    def write(self, text: str, /) -> Any: ...


async def group_tables(conn: Conn) -> list[Table]:
    """Every table of the ``timestone`` schema that has a ``group_id`` column."""
    cur = await conn.execute(
        "SELECT c.relname AS table_name, a.attname AS column_name, a.attgenerated <> '' AS gen,"
        " coalesce(a.attnum = ANY(i.indkey::int2[]), false) AS in_pk,"
        " coalesce(e.typname, t.typname) AS kind, e.oid IS NOT NULL AS is_array,"
        " a.atttypmod AS typmod, a.attnotnull AS required"
        " FROM pg_class AS c"
        " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
        " JOIN pg_type AS t ON t.oid = a.atttypid"
        " LEFT JOIN pg_type AS e ON e.oid = t.typelem AND t.typcategory = 'A'"
        " LEFT JOIN pg_index AS i ON i.indrelid = c.oid AND i.indisprimary"
        " WHERE n.nspname = 'timestone' AND c.relkind IN ('r', 'p') AND c.relname <> 'meta'"
        "   AND has_table_privilege(c.oid, 'SELECT')"
        " ORDER BY c.relname, a.attnum"
    )
    columns: dict[str, list[str]] = {}
    generated: dict[str, list[str]] = {}
    keys: dict[str, list[str]] = {}
    types: dict[str, list[ColumnType]] = {}
    for row in await cur.fetchall():
        name, column = str(row["table_name"]), str(row["column_name"])
        target = generated if row["gen"] else columns
        target.setdefault(name, []).append(column)
        columns.setdefault(name, [])
        if row["in_pk"]:
            keys.setdefault(name, []).append(column)
        if not row["gen"]:
            kind, typmod = str(row["kind"]), int(row["typmod"])
            dimension = typmod if kind == "vector" and typmod > 0 else 0
            types.setdefault(name, []).append(
                ColumnType(column, kind, bool(row["is_array"]), dimension, bool(row["required"]))
            )
    tables: list[Table] = []
    for name, cols in columns.items():
        if "group_id" not in cols:
            continue
        pk = [c for c in keys.get(name, []) if c != "group_id"] or cols
        order = ["created_at", *pk] if "created_at" in cols else pk
        tables.append(
            Table(
                name,
                tuple(cols),
                tuple(generated.get(name, [])),
                tuple(dict.fromkeys(order)),
                tuple(pk),
                tuple(types.get(name, [])),
            )
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
        # a json column (not jsonb) keeps its text: read through jsonb, -0.0 would be 0.0
        texts = [c.name for c in table.types if c.kind == "json"]
        exact = sql.SQL("json_build_object({})::text").format(
            sql.SQL(", ").join(
                sql.SQL("{}, t.{}").format(sql.Literal(c), sql.Identifier(c)) for c in texts
            )
        )
        query = sql.SQL(
            "SELECT to_jsonb(t) - {generated}::text[] AS row, {exact} AS exact"
            " FROM timestone.{t} AS t WHERE t.group_id = %s ORDER BY {order}"
        ).format(
            generated=sql.Literal(list(table.generated)),
            exact=exact if texts else sql.SQL("NULL::text"),
            t=sql.Identifier(table.name),
            order=sql.SQL(", ").join(sql.Identifier("t", c) for c in table.order),
        )
        n = 0
        async with conn.cursor(name="timestone_export") as rows:
            await rows.execute(query, (group_id,))
            async for item in rows:
                row = item["row"]
                if item["exact"] is not None:
                    row.update(json.loads(item["exact"]))
                out.write(_line({"kind": "row", "table": table.name, "row": row}))
                n += 1
        written[table.name] = n
    out.write(_line({"kind": "end", "rows": sum(written.values())}))
    return written


@dataclasses.dataclass
class Parsed:
    """A checked export: its header, and its rows by table in file order with the line of
    each (``lines``, parallel to ``rows``)."""

    header: dict[str, Any]
    header_line: int
    rows: dict[str, list[dict[str, Any]]]
    lines: dict[str, list[int]]


def _lines(lines: Iterable[str]) -> Iterable[object]:
    given = cast(object, lines)
    if isinstance(given, (str, bytes, Mapping)) or not isinstance(given, Iterable):
        kind = type(given).__name__  # pyright: ignore[reportUnknownArgumentType]
        raise InvalidInput(
            f"lines must be an iterable of text lines (an open file, a list of str), got {kind}"
        )
    return cast(Iterable[object], given)


def parse_export(lines: Iterable[str]) -> Parsed:
    """Read and check an export; refuse it naming the line and what is wrong."""
    header: dict[str, Any] | None = None
    header_line = 0
    rows: dict[str, list[dict[str, Any]]] = {}
    numbers: dict[str, list[int]] = {}
    ended = False
    number = 0
    for number, text in enumerate(_lines(lines), start=1):
        item = read_line(number, text)
        if item is None:
            continue
        if ended:
            raise InvalidInput(f"line {number}: content after the end marker")
        kind = item.get("kind")
        if header is None:
            check_header(number, item)
            header, header_line = item, number
        elif kind == "row":
            table, row = item.get("table"), item.get("row")
            if not isinstance(table, str) or not isinstance(row, dict):
                raise InvalidInput(f"line {number}: a row needs a table name and a row object")
            rows.setdefault(table, []).append(cast(dict[str, Any], row))
            numbers.setdefault(table, []).append(number)
        elif kind == "end":
            total = sum(len(r) for r in rows.values())
            count = item.get("rows")
            if count != total or isinstance(count, bool):
                raise InvalidInput(
                    f"line {number}: the end marker counts {count!r:.80} rows, "
                    f"the file holds {total}"
                )
            ended = True
        else:
            raise InvalidInput(f"line {number}: unknown line kind {kind!r:.80}")
    if header is None:
        raise InvalidInput("the export is empty: no header line")
    if not ended:
        raise InvalidInput(f"the export is truncated after line {number}: no end marker")
    check_counts(header_line, header, rows)
    return Parsed(header=header, header_line=header_line, rows=rows, lines=numbers)


# what the database refuses of a row: a value (class 22), a rule (23), a size (54)
_REFUSED = (
    psycopg.DataError,
    psycopg.IntegrityError,
    psycopg.errors.ProgramLimitExceeded,
)


async def import_rows(w: Write, parsed: Parsed) -> dict[str, int]:
    """Insert an export's rows into the write's (empty) group; refuse anything lossy, and
    anything a write method would refuse, naming the line."""
    conn = w.conn
    header = parsed.header
    version = await _meta(conn, "schema_version")
    exported_version: int = header["schema_version"]
    if isinstance(version, int) and exported_version > version:
        raise SchemaTooNew(
            f"the export was written at schema version {exported_version}; this database is at "
            f"{version}: upgrade the timestone package before importing"
        )
    stored = await _meta(conn, "embedder")
    vectors_in_file = header["embedder"]
    if stored is not None and vectors_in_file != stored:
        raise EmbedderMismatch(
            f"the export's vectors come from the embedder {vectors_in_file!r:.200}, this "
            f"database uses {stored!r}: open the target with the export's embedder, import, "
            "then reembed"
        )
    tables = {t.name: t for t in await group_tables(conn)}
    rows = check_rows(parsed.rows, parsed.lines, tables)
    check_references(rows, parsed.lines)
    check_system_times(rows, parsed.lines, w.now)
    for row, line in zip(rows.get("episodes", []), parsed.lines.get("episodes", []), strict=True):
        if row.get("source") == "facts":
            check_facts_record(row, line)
    renamed = normal_relations(rows, parsed.lines)
    _rekey(rows.get("episodes", []), header.get("group_id"), w.group_id)
    counts = await count_rows(conn, w.group_id)
    held = sum(c["versions"] for c in counts.values())
    if held:
        raise InvalidInput(
            f"the group {w.group_id!r} already holds {held} rows; import into an empty group "
            "(pass another group id)"
        )
    done: dict[str, int] = {}
    for name, table in tables.items():
        given = rows.get(name, [])
        if not given:
            continue
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in table.columns)
        query = sql.SQL(
            "INSERT INTO timestone.{t} ({cols}) SELECT {cols}"
            " FROM json_populate_recordset(NULL::timestone.{t}, %s::json)"
        ).format(t=sql.Identifier(name), cols=cols)  # json: a json column keeps its text
        for start in range(0, len(given), _BATCH):
            batch = [{**row, "group_id": w.group_id} for row in given[start : start + _BATCH]]
            try:
                async with conn.transaction():  # a savepoint: a refused batch is looked into
                    await conn.execute(row_inserts(conn, query), (json.dumps(batch),))
            except _REFUSED as exc:
                at = parsed.lines[name][start : start + _BATCH]
                refusal = await _find_refused(conn, table, query, batch, at, name in renamed)
                if refusal is None:
                    raise
                raise refusal from exc
        done[name] = len(given)
    return done


def _rekey(episodes: list[dict[str, Any]], exported: object, group_id: str) -> None:
    """Episodes imported into another group: a default idempotency key (a hash of the
    group, the content and the reference time) made again for the new group, so that the
    same call repeated there is recognised, as it is in the exported group. A key the
    caller chose is kept."""
    if not isinstance(exported, str) or exported == group_id:
        return
    for row in episodes:
        content, told = row.get("content"), row.get("reference_time")
        if not isinstance(content, str) or not isinstance(told, str):
            continue
        when = datetime.fromisoformat(told).astimezone(UTC)
        if row.get("idempotency_key") == idempotency_key(exported, content, when):
            row["idempotency_key"] = idempotency_key(group_id, content, when)


async def _find_refused(
    conn: Conn,
    table: Table,
    query: sql.Composed,
    batch: list[dict[str, Any]],
    lines: list[int],
    renamed: bool,
) -> InvalidInput | None:
    """Insert a refused batch row by row, each under a savepoint: the refusal of the first
    row the database refuses, naming its line (None if none is refused alone)."""
    for row, line in zip(batch, lines, strict=True):
        try:
            async with conn.transaction():
                await conn.execute(row_inserts(conn, query), (json.dumps([row]),))
        except _REFUSED as exc:
            return await _refusal(conn, table, row, f"line {line}: {table.name} row", exc, renamed)
    return None


def _words(exc: psycopg.Error) -> str:
    """The database's message, its first line cut to 100 characters (it may echo a value)."""
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    return text if len(text) <= 100 else text[:99] + "…"


async def _rule(conn: Conn, table: str, name: str | None) -> str:
    """A constraint's or a unique index's definition, as the catalog prints it."""
    cur = await conn.execute(
        "SELECT coalesce(("
        "   SELECT pg_get_constraintdef(k.oid) FROM pg_constraint AS k"
        "   WHERE k.conrelid = c.oid AND k.conname = %(name)s),"
        " (SELECT 'UNIQUE ' || substring(pg_get_indexdef(x.indexrelid) FROM ' USING \\w+ (.*)$')"
        "   FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid"
        "   WHERE x.indrelid = c.oid AND i.relname = %(name)s)) AS rule"
        " FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'timestone' AND c.relname = %(table)s",
        {"table": table, "name": name},
    )
    found = await cur.fetchone()
    rule = found["rule"] if found is not None else None
    return f"{name} {rule}" if rule else str(name)


async def _refusal(
    conn: Conn,
    table: Table,
    row: Mapping[str, Any],
    where: str,
    exc: psycopg.Error,
    renamed: bool,
) -> InvalidInput:
    diag = exc.diag
    if isinstance(exc, (psycopg.errors.ExclusionViolation, psycopg.errors.UniqueViolation)):
        if renamed:
            return InvalidInput(
                f"{where}: the export was written before relation names took one normal form; "
                f"renamed, two current {table.name} rows of it meet in one slot "
                f"({_words(exc)}). Import it into "
                "a database of the Timestone version that wrote it, then open that "
                "database with this one, which names the way out (docs/upgrading.md)"
            )
        rule = await _rule(conn, table.name, diag.constraint_name)
        return InvalidInput(f"{where} meets an earlier row of the export in {rule}")
    if isinstance(exc, psycopg.errors.CheckViolation):
        rule = await _rule(conn, table.name, diag.constraint_name)
        return InvalidInput(f"{where} breaks the table's rule {rule}")
    if isinstance(exc, psycopg.errors.NotNullViolation):
        return InvalidInput(
            f"{where}: {diag.column_name} is missing or null; the table requires one"
        )
    for column in table.columns:
        if column == "group_id":
            continue
        try:
            async with conn.transaction():
                await conn.execute(
                    sql.SQL(
                        "SELECT (jsonb_populate_record(NULL::timestone.{t}, %s::jsonb)).{c}"
                    ).format(t=sql.Identifier(table.name), c=sql.Identifier(column)),
                    (json.dumps({column: row.get(column)}),),
                )
        except _REFUSED as bad:
            return InvalidInput(
                f"{where}: {column} {brief(row.get(column))} is refused by the database: "
                f"{_words(bad)}"
            )
    return InvalidInput(f"{where} is refused by the database: {_words(exc)}")


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
