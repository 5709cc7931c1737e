"""What a group holds and what its ledger records, for the tests of model calls (a failed
step must write nothing but its ledger rows) and of writes that must leave nothing."""

from __future__ import annotations

import json
from typing import Any

import psycopg

import timestone
from timestone.llm import chat_completion

LedgerRow = tuple[str, str, int, int, bool, bool]


def ledger(dsn: str, group: str) -> list[LedgerRow]:
    """The group's ledger: step, model, tokens, ok, and whether an episode was written."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT step, model, prompt_tokens, completion_tokens, ok, episode_id IS NOT NULL"
            " FROM timestone.llm_ledger WHERE group_id = %s",
            (group,),
        ).fetchall()
    return sorted((str(a), str(b), int(c), int(d), bool(e), bool(f)) for a, b, c, d, e, f in rows)


def row_counts(dsn: str, group: str) -> tuple[int, ...]:
    """The group's rows of every version: episodes, entities, mentions, assertions, facts."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM timestone.episodes WHERE group_id = %(g)s),"
            " (SELECT count(*) FROM timestone.entities WHERE group_id = %(g)s),"
            " (SELECT count(*) FROM timestone.mentions WHERE group_id = %(g)s),"
            " (SELECT count(*) FROM timestone.assertions WHERE group_id = %(g)s),"
            " (SELECT count(*) FROM timestone.facts WHERE group_id = %(g)s)",
            {"g": group},
        ).fetchone()
    assert row is not None
    return tuple(int(str(x)) for x in row)


def stored(mem: timestone.Memory, dsn: str, group: str) -> tuple[object, ...]:
    """Everything the group holds: row counts of every version, and what reads return."""
    return (row_counts(dsn, group), mem.facts(group, valid_at=None), mem.episodes(group))


def spent(step: str, body: dict[str, Any], ok: bool, episode: bool = False) -> LedgerRow:
    """The ledger row of a scripted answer's call."""
    usage = body["usage"]
    return (step, body["model"], usage["prompt_tokens"], usage["completion_tokens"], ok, episode)


def extraction_answer(facts: list[dict[str, Any]]) -> dict[str, Any]:
    """A scripted extraction step (``ReplayTransport``): the facts given, their ends as
    entities of the default type, no dates or attributes but those the facts carry."""
    names = sorted({f[k] for f in facts for k in ("source", "target")})
    blank: dict[str, Any] = {"valid_at": None, "invalid_at": None, "attributes": []}
    reply: dict[str, Any] = {
        "entities": [{"name": n, "type": "Entity", "attributes": []} for n in names],
        "facts": [blank | f for f in facts],
    }
    return {"step": "extraction", "body": chat_completion(json.dumps(reply))}
