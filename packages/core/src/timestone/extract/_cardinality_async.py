"""The cardinality of relations the ontology does not declare, asked of the model once.

A relation of cardinality ``one`` is a slot: a later fact supersedes an earlier one
by the date fight (docs/time.md). Without an ontology every relation is ``many``
and facts accumulate. With an LLM (``Memory.open(infer_cardinality=True)``, the
default when one is configured), the first write of a group that names a relation
the ontology does not declare asks the model one small question: can a subject
hold several of these at once? The answer is stored in
``timestone.relation_cardinalities`` (per group: one tenant's names do not decide
another's) and read from there ever after, in every process. The call is in the
group's LLM ledger, step ``relation cardinality``, with its tokens.

Writers that meet on a new name serialize on an advisory lock of the group and
name, held while the model answers; the second reads the first's answer and
asks nothing. A declared edge type always wins, and is never asked about. An
answer that is malformed (asked again, at most twice) or unusable (a refusal, a
cut-off) fails the write with an ``LLMError``: nothing is written, and the next
write asks again. Without an LLM, a name with no stored answer is ``many``.

Only structured writes (``add_facts``, ``add_fact_batches``) ask: an extracted
fact already goes to the model's fact resolution, which judges what it
contradicts. Every write (extraction, documents, the property graph store) uses
the stored answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

import pydantic

from .._time import utcnow
from ..db._database_async import Conn, Database
from ..llm import LLM, LLMRequest
from ..ontology import Cardinality, Ontology
from ._calls_async import Ledger, call
from ._extraction_async import read_budget, record_spent, write_ledger

__all__ = ["STEP", "Cardinalities"]

STEP = "relation cardinality"

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"cardinality": {"type": "string", "enum": ["one", "many"]}},
    "required": ["cardinality"],
    "additionalProperties": False,
}

_SYSTEM = (
    "You classify relations of a knowledge graph. A relation links a subject to an "
    "object, e.g. SPOUSE_OF, LIVES_IN, LIKES. Answer 'one' when a subject holds at most "
    "one such relation at any moment (a later one replaces the earlier: a person LIVES_IN "
    "one city at a time), 'many' when a subject can hold several at once (a person LIKES "
    "many things). When unsure, answer 'many'."
)


class _Answer(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    cardinality: Literal["one", "many"]


def _request(relation: str) -> LLMRequest:
    return LLMRequest(
        step=STEP,
        messages=[
            {"role": "system", "content": _SYSTEM},
            {
                "role": "user",
                "content": f"Relation: {relation}\nCan a subject hold several of these at once?",
            },
        ],
        schema_name="relation_cardinality",
        schema=_SCHEMA,
        small=True,
        max_tokens=20,
    )


async def _stored(conn: Conn, group_id: str, relations: list[str]) -> dict[str, Cardinality]:
    cur = await conn.execute(
        "SELECT relation, cardinality FROM timestone.relation_cardinalities"
        " WHERE group_id = %s AND relation = ANY(%s)",
        (group_id, relations),
    )
    return {r["relation"]: r["cardinality"] for r in await cur.fetchall()}


class Cardinalities:
    """The cardinality of undeclared relations of a memory: stored answers, asked once."""

    def __init__(self, db: Database, ontology: Ontology, llm: Callable[[], LLM | None]) -> None:
        self.db = db
        self.ontology = ontology
        self.llm = llm  # the model to ask now; None: nothing is asked (answers are still read)
        self._known: dict[tuple[str, str], Cardinality] = {}  # answers never change

    def _unknown(self, group_id: str, relations: Iterable[str]) -> list[str]:
        """The names of ``relations`` that are not declared and have no answer known here."""
        names = {r for r in relations if self.ontology.edge(r) is None}
        return sorted(r for r in names if (group_id, r) not in self._known)

    async def ask(self, group_id: str, relations: Iterable[str]) -> None:
        """Before a structured write: ask about each undeclared name with no stored answer
        (nothing without a model)."""
        llm = self.llm()
        missing = self._unknown(group_id, relations)
        if llm is None or not missing:
            return
        async with self.db.transaction(group_id, "reading relation cardinalities") as conn:
            found = await _stored(conn, group_id, missing)
        for relation in missing:
            if relation not in found:
                found[relation] = await self._ask(group_id, relation, llm)
        self._known.update(((group_id, r), c) for r, c in found.items())

    async def read(
        self, conn: Conn, group_id: str, relations: Iterable[str]
    ) -> dict[str, Cardinality]:
        """In a write: the answered cardinality of the undeclared names of ``relations``; a
        name missing from the result is ``many``. Answers are read once per process."""
        relations = list(relations)
        missing = self._unknown(group_id, relations)
        if missing:
            found = await _stored(conn, group_id, missing)
            self._known.update(((group_id, r), c) for r, c in found.items())
        return {r: self._known[group_id, r] for r in relations if (group_id, r) in self._known}

    async def _ask(self, group_id: str, relation: str, llm: LLM) -> Cardinality:
        """Ask once, under the lock of the group and name; record the answer and the call."""
        ledger = Ledger()
        try:
            async with self.db.transaction(group_id, "asking a relation's cardinality") as conn:
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    ("timestone-cardinality\x1f" + group_id + "\x1f" + relation,),
                )
                found = await _stored(conn, group_id, [relation])
                if relation in found:
                    return found[relation]
                budget, used = await read_budget(conn, group_id)
                ledger = Ledger(budget=budget, used=used)
                answer = await call(llm, ledger, _request(relation), _Answer)
                await conn.execute(
                    "INSERT INTO timestone.relation_cardinalities"
                    " (group_id, relation, cardinality, model) VALUES (%s, %s, %s, %s)",
                    (group_id, relation, answer.cardinality, ledger.entries[-1].model),
                )
                await write_ledger(conn, group_id, ledger, None, utcnow())
                return answer.cardinality
        except BaseException:
            await record_spent(self.db, group_id, ledger)
            raise
