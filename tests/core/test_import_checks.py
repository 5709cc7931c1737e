"""An import refuses a file a write method would refuse, naming the line, the table and the
column, and writes nothing; a well-formed export still imports exactly."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

import timestone
from timestone import FactInput, GraphChunk, GraphRelation
from timestone.errors import InvalidGroup, InvalidInput, NaiveDatetime, SchemaTooNew
from timestone.write._episodes import idempotency_key

REF = datetime(2020, 1, 1, tzinfo=UTC)
Line = dict[str, Any]


def _export(memory: timestone.Memory, group: str) -> list[Line]:
    """The export of a group holding one fact, as the JSON objects of its lines."""
    memory.add_facts(group, [FactInput("Ada", "WORKS_AT", "Acme")], reference_time=REF)
    out = io.StringIO()
    memory.export_group(group, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _text(objs: list[Line], *, recount: bool = True) -> list[str]:
    """The lines of ``objs``; with ``recount``, the header's counts and the end marker's
    kept true to the rows."""
    rows = [o for o in objs if o["kind"] == "row"]
    if recount:
        counts: dict[str, int] = {}
        for o in rows:
            counts[o["table"]] = counts.get(o["table"], 0) + 1
        objs[0]["rows"] = counts
    objs[-1]["rows"] = len(rows)
    return [json.dumps(o) + "\n" for o in objs]


def _row(objs: list[Line], table: str, n: int = 0) -> tuple[int, dict[str, Any]]:
    """The line number and the row of the ``n``-th row of ``table``."""
    found = [(i + 1, o["row"]) for i, o in enumerate(objs) if o.get("table") == table]
    return found[n]


def _refused(
    memory: timestone.Memory,
    lines: list[str],
    target: str | None,
    message: str,
    error: type[Exception] = InvalidInput,
) -> None:
    with pytest.raises(error) as refused:
        memory.import_group(lines, group_id=target)
    assert str(refused.value) == message
    if target is not None:
        assert sum(c["versions"] for c in memory.stats(target).values()) == 0


def test_rows_naming_rows_the_export_does_not_hold_are_refused(
    memory: timestone.Memory, group: str
) -> None:
    objs = _export(memory, group)
    target = group + "-copy"
    stranger = str(uuid.uuid4())

    changed = json.loads(json.dumps(objs))
    line, fact = _row(changed, "facts")
    fact["source_id"] = stranger
    _refused(
        memory,
        _text(changed),
        target,
        f"line {line}: facts row: source_id names the entity {stranger}, of which the export "
        "holds no entities row",
    )
    changed = json.loads(json.dumps(objs))
    line, fact = _row(changed, "facts")
    fact["episodes"] = [stranger]
    _refused(
        memory,
        _text(changed),
        target,
        f"line {line}: facts row: episodes names the episode {stranger}, of which the export "
        "holds no episodes row (nor a purge)",
    )
    # the entities rows cut out, the counts kept true: the mentions name them
    cut = [o for o in objs if o.get("table") != "entities"]
    line, mention = _row(cut, "mentions")
    _refused(
        memory,
        _text(cut),
        target,
        f"line {line}: mentions row: entity_id names the entity {mention['entity_id']}, of "
        "which the export holds no entities row",
    )


def test_columns_of_another_json_type_are_refused(memory: timestone.Memory, group: str) -> None:
    objs = _export(memory, group)
    target = group + "-copy"
    cases: list[tuple[str, str, object, str]] = [
        ("facts", "attributes", "not an object",
         "attributes must be a JSON object, got the string 'not an object'"),
        ("entities", "attributes", [1, 2], "attributes must be a JSON object, got the array [1, 2]"),
        ("entities", "name", 5, "name must be a string, got the number 5"),
        ("entities", "labels", "Person", "labels must be a JSON array, got the string 'Person'"),
        ("facts", "episodes", ["abc"], "episodes[0] 'abc' is not a UUID"),
        ("mentions", "position", "0", "position must be an integer, got the string '0'"),
    ]  # fmt: skip
    for table, column, value, said in cases:
        changed = json.loads(json.dumps(objs))
        line, row = _row(changed, table)
        row[column] = value
        _refused(memory, _text(changed), target, f"line {line}: {table} row: {said}")


def test_a_header_group_id_that_is_no_group_is_refused(
    memory: timestone.Memory, group: str
) -> None:
    objs = _export(memory, group)
    for value, said in [(None, "null"), (5, "the number 5")]:
        objs[0]["group_id"] = value
        _refused(
            memory, _text(objs), None, f"line 1: the header's group_id must be a string, got {said}"
        )
        assert memory.stats(str(value))["facts"]["versions"] == 0
    objs[0]["group_id"] = "no group"
    _refused(
        memory,
        _text(objs),
        None,
        "line 1: the header's group_id 'no group' is malformed: use 1 to 128 characters of "
        "letters, digits and _ . : @ -, starting with a letter or digit; name the group to "
        "import into (group_id=, or --group on the command line)",
        InvalidGroup,
    )
    # given a group, the header's id is not used
    assert memory.import_group(_text(objs), group_id=group + "-copy")["facts"] == 1


def test_the_header_fields_are_required_typed_and_counted(
    memory: timestone.Memory, group: str
) -> None:
    objs = _export(memory, group)
    target = group + "-copy"
    for value, said in [("999", "the string '999'"), (999.0, "the number 999.0"), (None, "null")]:
        changed = json.loads(json.dumps(objs))
        changed[0]["schema_version"] = value
        _refused(
            memory,
            _text(changed),
            target,
            f"line 1: the header's schema_version must be an integer, got {said}",
        )
    changed = json.loads(json.dumps(objs))
    changed[0]["schema_version"] = 999
    with pytest.raises(SchemaTooNew, match="written at schema version 999"):
        memory.import_group(_text(changed), group_id=target)
    for field in ("schema_version", "embedder", "group_id", "rows", "ontology"):
        changed = json.loads(json.dumps(objs))
        del changed[0][field]
        lines = _text(changed, recount=False)
        _refused(memory, lines, target, f"line 1: the header has no {field}")
    # the counts of the header are the file's: a file cut short, its end marker kept true
    changed = [o for o in objs if o.get("table") != "facts"]
    _refused(
        memory,
        _text(changed, recount=False),
        target,
        "line 1: the header counts 1 facts rows, the file holds 0",
    )


def test_naive_times_and_relations_no_write_takes_are_refused(
    memory: timestone.Memory, group: str
) -> None:
    objs = _export(memory, group)
    target = group + "-copy"
    changed = json.loads(json.dumps(objs))
    line, fact = _row(changed, "facts")
    fact["valid_at"] = "2019-06-01T00:00:00"
    _refused(
        memory,
        _text(changed),
        target,
        f"line {line}: facts row: valid_at '2019-06-01T00:00:00' has no UTC offset; an "
        "export's times carry one (as +00:00), and a time without is not read in a guessed zone",
        NaiveDatetime,
    )
    changed = json.loads(json.dumps(objs))
    line, fact = _row(changed, "facts")
    fact["relation"] = "works at"
    _refused(
        memory,
        _text(changed),
        target,
        f"line {line}: facts row: relation 'works at' must be an identifier of at most 128 "
        "characters (letters, digits and underscores, not starting with a digit), like WORKS_AT",
    )
    # an old spelling is stored in its normal form, as the upgrade of a database stores it
    changed = json.loads(json.dumps(objs))
    _row(changed, "facts")[1]["relation"] = "worksAt"
    _row(changed, "assertions")[1]["relation"] = "worksAt"
    memory.import_group(_text(changed), group_id=target)
    assert [f.relation for f in memory.facts(target, relation="WORKS_AT")] == ["WORKS_AT"]


def test_values_the_database_refuses_are_named_by_line_table_and_column(
    memory: timestone.Memory, group: str
) -> None:
    memory.set_llm_budget(group, max_calls=10)
    objs = _export(memory, group)
    target = group + "-copy"
    big = 10**400
    cases: list[tuple[str, str, object, str]] = [
        ("facts", "id", "abc", "id 'abc' is not a UUID"),
        ("entities", "name", "Ada\x00", "name 'Ada\\x00' holds a NUL character, which "
         "Postgres cannot store"),
        ("entities", "name", "Ada\ud800", "name 'Ada\\ud800' holds a lone surrogate: it is "
         "not UTF-8 text"),
        ("facts", "created_at", 5, "created_at must be a time (ISO 8601 text with its UTC "
         "offset), got the number 5"),
        ("assertions", "position", big, f"position {str(big)[:79]}… is out of range of a "
         "32-bit integer"),
        ("facts", "id", None, "id is missing or null; the table requires one"),
        ("facts", "embedding", "[1,2]", "embedding holds 2 numbers; this database's vectors "
         "hold 256"),
        ("facts", "attributes", {"k": "a\x00"}, "attributes['k'] 'a\\x00' holds a NUL "
         "character, which Postgres cannot store"),
        ("llm_budgets", "period", "abc", "period 'abc' is refused by the database: invalid "
         "input syntax for type interval: \"abc\""),
    ]  # fmt: skip
    for table, column, value, said in cases:
        changed = json.loads(json.dumps(objs))
        line, row = _row(changed, table)
        row[column] = value
        _refused(memory, _text(changed), target, f"line {line}: {table} row: {said}")

    # a rule of the table
    changed = json.loads(json.dumps(objs))
    line, fact = _row(changed, "facts")
    fact["invalid_at"] = "2010-01-01T00:00:00+00:00"
    _refused(
        memory,
        _text(changed),
        target,
        f"line {line}: facts row breaks the table's rule facts_check "
        "CHECK (((invalid_at IS NULL) OR (invalid_at > valid_at)))",
    )
    # a row twice, and two current versions of one entity
    changed = json.loads(json.dumps(objs))
    line, fact = _row(changed, "facts")
    changed.insert(line, {"kind": "row", "table": "facts", "row": fact})
    _refused(
        memory,
        _text(changed),
        target,
        f"lines {line} and {line + 1} hold the same facts row (version_id '{fact['version_id']}')",
    )
    changed = json.loads(json.dumps(objs))
    line, entity = _row(changed, "entities", 1)
    again = {**entity, "version_id": str(uuid.uuid4()), "expired_at": None}
    changed.insert(line, {"kind": "row", "table": "entities", "row": again})
    _refused(
        memory,
        _text(changed),
        target,
        f"line {line + 1}: entities row meets an earlier row of the export in "
        "entities_current_id UNIQUE (group_id, id) WHERE (expired_at IS NULL)",
    )


def test_a_number_past_the_digit_limit_is_refused_by_line(
    memory: timestone.Memory, group: str
) -> None:
    objs = _export(memory, group)
    line, fact = _row(objs, "facts")
    fact["attributes"] = {"n": 0}
    lines = _text(objs)
    lines[line - 1] = lines[line - 1].replace('{"n": 0}', '{"n": ' + "9" * 5000 + "}")
    _refused(
        memory,
        lines,
        group + "-copy",
        f"line {line}: a number of more than 4,300 digits ({'9' * 20}…, 5,000 digits)",
    )
    lines[line - 1] = lines[line - 1].replace("9" * 5000, "NaN")
    _refused(memory, lines, group + "-copy", f"line {line}: NaN is not a JSON number")


def _stored(
    dsn: str, group: str, tables: list[str], skip: tuple[str, ...] = ()
) -> dict[str, list[tuple[object, ...]]]:
    """Every stored column but ``group_id`` (and ``skip``) of every row of the group in
    ``tables``, as text."""
    out: dict[str, list[tuple[object, ...]]] = {}
    with psycopg.connect(dsn) as conn:
        held = conn.execute(
            "SELECT table_name, array_agg(column_name::text ORDER BY column_name) AS cols"
            " FROM information_schema.columns WHERE table_schema = 'timestone'"
            " AND is_generated = 'NEVER' AND column_name <> ALL(%s)"
            " AND table_name = ANY(%s) GROUP BY table_name",
            (["group_id", *skip], tables),
        ).fetchall()
        for table, cols in held:
            query = sql.SQL("SELECT {cols} FROM timestone.{t} WHERE group_id = %s").format(
                cols=sql.SQL(", ").join(
                    sql.SQL("{}::text").format(sql.Identifier(c)) for c in cols
                ),
                t=sql.Identifier(table),
            )
            out[table] = sorted(conn.execute(query, (group,)).fetchall(), key=repr)
    return out


def _keys(dsn: str, group: str) -> list[tuple[uuid.UUID, tuple[str, str, datetime]]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT DISTINCT id, idempotency_key, content, reference_time"
            " FROM timestone.episodes WHERE group_id = %s",
            (group,),
        ).fetchall()
    return [(r[0], (r[1], r[2], r[3].astimezone(UTC))) for r in rows]


def test_an_export_still_imports_exactly(memory: timestone.Memory, dsn: str, group: str) -> None:
    first = memory.add_facts(
        group,
        [FactInput("Ada", "WORKS_AT", "Acme", attributes={"since": 2019, "share": 1.5})],
        reference_time=REF,
    )
    memory.add_facts(group, [FactInput("Bo", "KNOWS", "Ada")], reference_time=REF)
    gone = memory.add_facts(group, [FactInput("Cy", "LIKES", "tea")], reference_time=REF)
    memory.add_document(group, "u://doc", "Ada met Bo.", reference_time=REF, metadata={"k": [1]})
    memory.graph_upsert(
        group,
        entities=[{"name": "Ada", "labels": ["Person"], "attributes": {"age": 3}}],
        chunks=[GraphChunk("c1", "Ada's page")],
        relations=[GraphRelation("c1", "MENTIONS", "Ada", {"a": 1})],
        vectors={"Ada": [0.5, -1.25e-05, 3.0]},
    )
    memory.put_item(group, ["notes"], "k1", {"v": 1, "s": "x"})
    memory.set_llm_budget(group, max_calls=10, period=timedelta(hours=5))
    memory.remove_episode(group, first.episode.id)
    memory.purge_episode(group, gone.episode.id)
    out = io.StringIO()
    written = memory.export_group(group, out)
    assert written["purges"] == 1

    copy = group + "-copy"
    assert memory.import_group(out.getvalue().splitlines(), group_id=copy) == {
        t: n for t, n in written.items() if n
    }
    skip = ("idempotency_key",)
    before, after = _stored(dsn, group, list(written)), _stored(dsn, copy, list(written), skip)
    assert sum(len(rows) for rows in before.values()) == sum(written.values())
    assert after == _stored(dsn, group, list(written), skip)
    # a default idempotency key is made again for the copy's group, a chosen one kept
    keys = {
        group: dict(_keys(dsn, group)),
        copy: dict(_keys(dsn, copy)),
    }
    assert keys[copy].keys() == keys[group].keys()
    for episode, (key, content, told) in keys[group].items():
        default = idempotency_key(group, content, told)
        want = idempotency_key(copy, content, told) if key == default else key
        assert keys[copy][episode][0] == want
