"""The hand-written episodes, and what must hold after one is ingested whatever the model
said: shared by the tests of this folder."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from psycopg import sql

import timestone
from timestone._names import normalize
from timestone.errors import ExtractionWarning, LLMError
from timestone.extract._calls import OUTPUT_RETRIES
from tools.model.episodes import Episode, load_episodes

__all__ = ["Episode", "load_episodes"]  # re-exported for the tests

# the loopback ports of local model servers the tests may send model requests to
LOCAL_PORTS: set[int] = set()
TABLES = ("episodes", "entities", "facts", "mentions", "assertions")
# extraction, entity resolution, fact resolution: each asked at most 1 + OUTPUT_RETRIES times
STEPS_PER_EPISODE = 3
MAX_REQUESTS = STEPS_PER_EPISODE * (1 + OUTPUT_RETRIES) + 1  # + the one refused json_schema


@dataclass
class Outcome:
    """What ``add_episode`` did: a result, or the ``LLMError`` it raised; the warnings."""

    result: timestone.IngestResult | None
    error: LLMError | None
    warnings: list[str]


def ingest(mem: timestone.Memory, group: str, episode: Episode, **options: Any) -> Outcome:
    """``add_episode`` of ``episode``; an ``LLMError`` is an outcome, anything else raises."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ExtractionWarning)
        try:
            result = mem.add_episode(
                group,
                episode.content,
                reference_time=episode.reference_time,
                source=episode.source,
                **options,
            )
            error = None
        except LLMError as exc:
            result, error = None, exc
    return Outcome(result, error, [str(w.message) for w in caught])


def rows(mem: timestone.Memory, group: str) -> dict[str, int]:
    """Row versions of the group in each table the write fills."""
    counts: dict[str, int] = {}
    with mem.connection(group) as conn:
        for table in TABLES:
            query = sql.SQL("SELECT count(*) AS n FROM timestone.{} WHERE group_id = %s")
            row = conn.execute(query.format(sql.Identifier(table)), (group,)).fetchone()
            assert row is not None
            counts[table] = int(row["n"])
    return counts


def entity_names(mem: timestone.Memory, group: str) -> list[str]:
    with mem.connection(group) as conn:
        found = conn.execute(
            "SELECT DISTINCT name FROM timestone.entities WHERE group_id = %s", (group,)
        ).fetchall()
    return [str(r["name"]) for r in found]


def ledger(mem: timestone.Memory, group: str) -> list[tuple[str, int, int, bool]]:
    with mem.connection(group) as conn:
        found = conn.execute(
            "SELECT step, prompt_tokens, completion_tokens, ok FROM timestone.llm_ledger"
            " WHERE group_id = %s ORDER BY created_at",
            (group,),
        ).fetchall()
    return [
        (str(r["step"]), int(r["prompt_tokens"]), int(r["completion_tokens"]), bool(r["ok"]))
        for r in found
    ]


def ungrounded(names: list[str], text: str) -> list[str]:
    """The names that do not occur in ``text`` after the library's name normalization."""
    read = normalize(text)
    return [n for n in names if normalize(n) not in read]


def check_nothing_written(mem: timestone.Memory, group: str) -> None:
    """No row of the group in any table the write fills, and no model answer spent."""
    written = rows(mem, group)
    assert written == dict.fromkeys(written, 0), written
    assert ledger(mem, group) == []
