"""Communities: label propagation over the current fact graph, named and searchable.

The graph is the group's facts held now and true now (entities are nodes,
facts are edges; several facts between two entities weigh more). Label
propagation runs in a fixed order (sorted entity ids) until nothing changes,
at most ``MAX_ROUNDS`` rounds; then a member needs at least ``MIN_SUPPORT``
facts into its community to stay, so one stray fact never drags an entity
into a community. Groups of two or more entities are communities.

Each community gets a name (its most connected members) and an extractive
summary (the sentences of its most central facts); with an LLM configured, one
batched call per build names and summarizes the new or changed communities
instead (counted against the group's LLM budget). Should that call fail (the model
down, the budget spent, answers that cannot be used), the build logs a warning and
keeps the extractive names: a community repair that follows a committed write never
fails that write's caller for the model's sake. Its name is embedded,
so ``search(..., scopes=("communities",))`` finds it. Communities are versioned
in system time like facts: a rebuild keeps what did not change, expires what
did, and reuses the id of the old community that shares most members.

``update_communities`` is the incremental form: it re-runs propagation only
on the connected components that contain the given entities (by default,
the entities whose facts changed since the last build). Labels never cross a
component, so the result equals a full rebuild.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, LiteralString

import pydantic
from psycopg import sql

from .._records import storable
from .._results import CommunityReport
from ..db._database_async import Conn, Database
from ..db._distributed_async import HIDDEN_GROUP, ROUTED_GROUP, routed
from ..embedders import Embedder
from ..errors import InvalidInput, LLMError
from ..extract._extraction_async import Ledger, call, read_budget, write_ledger
from ..llm import LLM, LLMRequest
from ..write._ids import new_ids
from ..write._transaction_async import Write, begin_write

__all__ = [
    "MAX_ROUNDS",
    "MAX_UPDATE_ENTITIES",
    "MIN_SUPPORT",
    "build_communities",
    "communities_built",
    "propagate_labels",
    "update_communities",
]

MAX_ROUNDS = 20
MIN_SUPPORT = 2
NAME_MEMBERS = 3
SUMMARY_CHARS = 600
MAX_UPDATE_ENTITIES = 10_000
MAX_LLM_MEMBERS = 12
MAX_LLM_FACTS = 10

Edge = tuple[uuid.UUID, uuid.UUID, str]

_log = logging.getLogger("timestone")


def propagate_labels(edges: Iterable[tuple[Any, Any]]) -> dict[Any, Any]:
    """Label of every node after propagation; a node's initial label is itself.

    Propagation: in a fixed order, a node takes the label most of its facts lead to
    (ties: keep its own if tied, else the smallest label). Then membership needs
    support: a node that has fewer than ``MIN_SUPPORT`` facts into its community is
    taken out (back to its own label), repeatedly, until every member is supported.
    """
    neighbours: dict[Any, list[Any]] = defaultdict(list)
    for s, t in edges:
        if s == t:
            continue
        neighbours[s].append(t)
        neighbours[t].append(s)
    label = {n: n for n in neighbours}
    order = sorted(neighbours, key=str)
    for _ in range(MAX_ROUNDS):
        changed = False
        for node in order:
            votes = Counter(label[m] for m in neighbours[node])
            best = max(votes.values())
            tied = sorted((lab for lab, v in votes.items() if v == best), key=str)
            new = label[node] if label[node] in tied else tied[0]
            if new != label[node]:
                label[node] = new
                changed = True
        if not changed:
            break
    # the members of each label, so that a node leaving costs its community's size at
    # most (when the community was named after it), not a pass over every node
    rank = {n: i for i, n in enumerate(order)}
    members: dict[Any, set[Any]] = defaultdict(set)
    for node in order:
        members[label[node]].add(node)
    pruned = True
    while pruned:
        pruned = False
        for node in order:
            mine = label[node]
            support = sum(1 for m in neighbours[node] if m != node and label[m] == mine)
            if support < MIN_SUPPORT and len(members[mine]) > 1:
                # leave the community; if it was named after this node, the rest take
                # the name of the first of them in the order
                rest = members.pop(mine)
                rest.discard(node)
                if mine == node:
                    first = min(rest, key=rank.__getitem__)
                    for m in rest:
                        label[m] = first
                    members[first] |= rest
                else:
                    members[mine] = rest
                label[node] = node
                members[node].add(node)
                pruned = True
    return label


_NOW = sql.SQL(
    "f.expired_at IS NULL AND f.valid_at <= now()"
    " AND (f.invalid_at IS NULL OR f.invalid_at > now())"
)


# The connected component of some entities (the seeds), then its current facts: each
# entity reached is looked up by key, as a source and as a target. The group's value is
# kept from the planner (an InitPlan): for a group its statistics have not seen, it
# would estimate one row and could walk each step through an index keyed on the group
# alone, reading the whole group for each entity reached.
_COMPONENT_TEXT: LiteralString = (
    "WITH RECURSIVE comp(id) AS (SELECT unnest(%(seeds)s::uuid[])"
    " UNION SELECT x.id FROM comp AS c CROSS JOIN LATERAL ("
    "  SELECT f.target_id FROM timestone.facts AS f"
    "   WHERE f.group_id = (SELECT %(g)s::text) AND f.source_id = c.id AND {now}"
    "  UNION ALL SELECT f.source_id FROM timestone.facts AS f"
    "   WHERE f.group_id = (SELECT %(g)s::text) AND f.target_id = c.id AND {now}"
    " ) AS x(id))"
    " SELECT f.source_id, f.target_id, f.fact FROM timestone.facts AS f"
    " WHERE f.group_id = (SELECT %(g)s::text) AND f.source_id IN (SELECT id FROM comp)"
    " AND {now}"
)
_COMPONENT = sql.SQL(_COMPONENT_TEXT).format(now=_NOW)
# on a distributed database (``_distributed.routed``): the group's value named
_COMPONENT_ROUTED = sql.SQL(_COMPONENT_TEXT.replace(HIDDEN_GROUP, ROUTED_GROUP)).format(now=_NOW)


async def _edges(conn: Conn, group_id: str, seeds: Sequence[uuid.UUID] | None) -> list[Edge]:
    if seeds is None:
        query = sql.SQL(
            "SELECT f.source_id, f.target_id, f.fact FROM timestone.facts AS f"
            " WHERE f.group_id = %(g)s AND {now}"
        ).format(now=_NOW)
    else:
        query = _COMPONENT_ROUTED if routed(conn) else _COMPONENT
    cur = await conn.execute(query, {"seeds": list(seeds or ()), "g": group_id})
    return [(r["source_id"], r["target_id"], r["fact"]) for r in await cur.fetchall()]


def _describe(
    members: Sequence[uuid.UUID], edges: Sequence[Edge], names: Mapping[uuid.UUID, str]
) -> tuple[str, str, int]:
    """Extractive name, summary and fact count of a community. ``edges`` may be the
    whole graph, but a build passes the community's own facts (``_internal``), so that
    describing every community reads each fact once."""
    inside = set(members)
    internal = [e for e in edges if e[0] in inside and e[1] in inside]
    degree = Counter(n for s, t, _ in internal for n in (s, t))
    central = sorted(members, key=lambda m: (-degree[m], names.get(m, ""), str(m)))
    top = [names.get(m, str(m)) for m in central[:NAME_MEMBERS]]
    name = ", ".join(top[:-1]) + " and " + top[-1] if len(top) > 1 else top[0]
    if len(members) > NAME_MEMBERS:
        name += f" (+{len(members) - NAME_MEMBERS})"
    ranked = sorted(internal, key=lambda e: (-(degree[e[0]] + degree[e[1]]), e[2]))
    summary = ""
    for _, _, sentence in ranked:
        candidate = f"{summary} {sentence}".strip()
        if len(candidate) > SUMMARY_CHARS:
            break
        if sentence not in summary:
            summary = candidate
    return name, summary, len(internal)


def _internal(labels: Mapping[Any, Any], edges: Iterable[Edge]) -> dict[Any, list[Edge]]:
    """The facts inside each label's community (both ends carry the label), in the order
    of ``edges``: one pass over the graph instead of one per community."""
    out: dict[Any, list[Edge]] = defaultdict(list)
    for e in edges:
        lab = labels.get(e[0])
        if lab is not None and labels.get(e[1]) == lab:
            out[lab].append(e)
    return out


@dataclasses.dataclass(slots=True)
class _New:
    id: uuid.UUID
    members: list[uuid.UUID]
    name: str
    summary: str
    basis: str
    fact_count: int
    facts: Sequence[Edge] = ()  # the community's own facts, for the naming prompt


class _Named(pydantic.BaseModel):
    index: int
    name: str
    summary: str


class _Names(pydantic.BaseModel):
    communities: list[_Named]


_NAMING_PROMPT = (
    "You name communities of a knowledge graph. For each numbered community you get its "
    "most connected members and facts. Answer with a short name (at most 8 words) that says "
    "what holds the group together, and a summary of one or two sentences that uses only "
    "the facts given. Keep every index."
)


async def _llm_names(
    w: Write, llm: LLM, inserts: list[_New], names: Mapping[uuid.UUID, str]
) -> list[_New]:
    """One batched call names and summarizes every new or changed community; the call is
    checked against the group's LLM budget and recorded in its ledger.

    A failed call (``LLMError``: the model unreachable or refusing, the budget spent,
    malformed answers past the re-asks) leaves the extractive names and summaries, with a
    logged warning: the communities are still rebuilt, and a write whose repair this is
    still returns. What the failed call spent is in the ledger all the same."""
    blocks: list[str] = []
    for i, n in enumerate(inserts):
        sentences = [e[2] for e in n.facts][:MAX_LLM_FACTS]
        members = ", ".join(names.get(m, str(m)) for m in n.members[:MAX_LLM_MEMBERS])
        facts = "\n".join(f"- {s}" for s in sentences)
        blocks.append(f"Community {i}\nmembers: {members}\nfacts:\n{facts}")
    request = LLMRequest(
        step="community naming",
        messages=[
            {"role": "system", "content": _NAMING_PROMPT},
            {"role": "user", "content": "\n\n".join(blocks)},
        ],
        schema_name="community_names",
        schema=_Names.model_json_schema(),
        small=True,
    )
    budget, used = await read_budget(w.conn, w.group_id)
    ledger = Ledger(budget=budget, used=used)
    try:
        answer = await call(llm, ledger, request, _Names)
    except LLMError as exc:
        await write_ledger(w.conn, w.group_id, ledger, None, w.now)
        _log.warning(
            "group %r: the model did not name the new or changed communities (%d), which"
            " keep their extractive names and summaries: %s",
            w.group_id,
            len(inserts),
            str(exc).removesuffix("; nothing was written"),
        )
        return inserts
    await write_ledger(w.conn, w.group_id, ledger, None, w.now)
    out = list(inserts)
    for named in answer.communities:
        name, summary = named.name.strip(), named.summary.strip()
        if 0 <= named.index < len(out) and name and storable(name + summary):
            out[named.index] = dataclasses.replace(
                out[named.index], name=name[:200], summary=summary[: SUMMARY_CHARS * 2]
            )
    return out


async def _rebuild(
    w: Write, embedder: Embedder, llm: LLM | None, seeds: Sequence[uuid.UUID] | None
) -> CommunityReport:
    conn, group_id = w.conn, w.group_id
    edges = await _edges(conn, group_id, seeds)
    labels = propagate_labels((s, t) for s, t, _ in edges)
    groups: dict[Any, list[uuid.UUID]] = defaultdict(list)
    for node, lab in labels.items():
        groups[lab].append(node)
    internal = _internal(labels, edges)
    found = [(lab, sorted(m, key=str)) for lab, m in groups.items() if len(m) >= 2]
    scope = set(labels) | set(seeds or ())
    cur = await conn.execute(
        "SELECT version_id, id, name, summary, basis, members FROM timestone.communities"
        " WHERE group_id = %s AND expired_at IS NULL",
        (group_id,),
    )
    current = [r for r in await cur.fetchall() if seeds is None or scope & set(r["members"])]
    ids = sorted({m for _, members in found for m in members}, key=str)
    cur = await conn.execute(
        "SELECT id, name FROM timestone.entities WHERE group_id = %s AND expired_at IS NULL"
        " AND id = ANY(%s)",
        (group_id, ids),
    )
    names = {r["id"]: r["name"] for r in await cur.fetchall()}
    wanted: list[tuple[list[uuid.UUID], str, str, int, list[Edge]]] = sorted(
        (
            (members, *_describe(members, internal[lab], names), internal[lab])
            for lab, members in found
        ),
        key=lambda c: (c[1], c[2]),
    )
    # the current versions by members and basis: a wanted community that finds one there
    # is unchanged (each version matches once, the first in ``current`` first)
    held: dict[tuple[tuple[uuid.UUID, ...], str], deque[Mapping[str, Any]]] = defaultdict(deque)
    for r in current:
        held[tuple(sorted(r["members"], key=str)), r["basis"]].append(r)
    reuse = _Reuse(current)
    unchanged: set[uuid.UUID] = set()
    inserts: list[_New] = []
    for members, name, summary, fact_count, facts in wanted:
        same = held.get((tuple(members), summary))
        if same:
            r = same.popleft()
            unchanged.add(r["version_id"])
            reuse.taken.add(r["id"])
            continue
        inserts.append(_New(reuse(members), members, name, summary, summary, fact_count, facts))
    if llm is not None and inserts:
        inserts = await _llm_names(w, llm, inserts, names)
    expired = [r["version_id"] for r in current if r["version_id"] not in unchanged]
    if expired:
        await conn.execute(
            "UPDATE timestone.communities SET expired_at = %s"
            " WHERE group_id = %s AND version_id = ANY(%s)",
            (w.now, group_id, expired),
        )
    if inserts:
        vectors = await w.embed(n.name for n in inserts)
        async with conn.cursor() as cur2:
            await cur2.executemany(
                "INSERT INTO timestone.communities (group_id, id, name, summary, basis, members,"
                " fact_count, name_embedding, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s::vector, %s)",
                [
                    (
                        group_id,
                        n.id,
                        n.name,
                        n.summary,
                        n.basis,
                        n.members,
                        n.fact_count,
                        vectors[n.name],
                        w.now,
                    )
                    for n in inserts
                ],
            )
    cur = await conn.execute(
        "SELECT count(*) AS n, coalesce(sum(cardinality(members)), 0) AS m"
        " FROM timestone.communities WHERE group_id = %s AND expired_at IS NULL",
        (group_id,),
    )
    totals = await cur.fetchone()
    assert totals is not None
    return CommunityReport(
        built_at=w.now,
        communities=int(totals["n"]),
        created=len(inserts),
        expired=len(expired),
        entities=int(totals["m"]),
    )


class _Reuse:
    """The id a new community version takes: that of the old community sharing most
    members (at least half of the two together; on a tie, the later in ``current``), else
    a new one. Each id is taken once. Only old communities sharing a member can share
    half, so each lookup reads those, found through an index of members."""

    def __init__(self, current: Sequence[Mapping[str, Any]]) -> None:
        self.current = current
        self.members = [set(r["members"]) for r in current]
        self.by_member: dict[uuid.UUID, list[int]] = defaultdict(list)
        for i, theirs in enumerate(self.members):
            for m in theirs:
                self.by_member[m].append(i)
        self.taken: set[uuid.UUID] = set()

    def __call__(self, members: Sequence[uuid.UUID]) -> uuid.UUID:
        mine = set(members)
        near = sorted({i for m in mine for i in self.by_member.get(m, ())})
        best, best_share = None, 0.5
        for i in near:
            r = self.current[i]
            if r["id"] in self.taken:
                continue
            theirs = self.members[i]
            share = len(mine & theirs) / len(mine | theirs)
            if share >= best_share:
                best, best_share = r["id"], share
        ident = best if best is not None else new_ids(1)[0]
        self.taken.add(ident)
        return ident


async def build_communities(
    db: Database, embedder: Embedder, llm: LLM | None, group_id: str
) -> CommunityReport:
    async with db.transaction(group_id, "building communities") as conn:
        w = await begin_write(conn, group_id, embedder, keys=["communities"])
        return await _rebuild(w, embedder, llm, None)


def _check_ids(entities: object) -> list[uuid.UUID]:
    if isinstance(entities, (str, bytes)) or not isinstance(entities, Iterable):
        raise InvalidInput(f"entities must be a list of entity ids, got {type(entities).__name__}")
    out: list[uuid.UUID] = []
    for e in entities:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(e, uuid.UUID):
            raise InvalidInput(f"entities must hold entity ids (UUID), got {e!r:.80}")
        out.append(e)
    if len(out) > MAX_UPDATE_ENTITIES:
        raise InvalidInput(f"{len(out):,} entities; at most {MAX_UPDATE_ENTITIES:,} per update")
    return out


async def update_communities(
    db: Database,
    embedder: Embedder,
    llm: LLM | None,
    group_id: str,
    entities: Sequence[uuid.UUID] | None,
) -> CommunityReport:
    wanted = None if entities is None else _check_ids(entities)
    async with db.transaction(group_id, "updating communities") as conn:
        w = await begin_write(conn, group_id, embedder, keys=["communities"])
        if wanted is None:
            wanted = await _changed_since_build(conn, group_id)
        if not wanted:
            return await _rebuild(w, embedder, llm, [])
        return await _rebuild(w, embedder, llm, await _with_old_members(conn, group_id, wanted))


async def _with_old_members(
    conn: Conn, group_id: str, entities: Sequence[uuid.UUID]
) -> list[uuid.UUID]:
    """The entities and every member of a current community holding one of them: when an
    entity leaves its community, the members it leaves behind are relabelled too, even if
    no path joins them to it any more."""
    cur = await conn.execute(
        "SELECT DISTINCT m.id FROM timestone.communities AS c, unnest(c.members) AS m(id)"
        " WHERE c.group_id = %s AND c.expired_at IS NULL AND c.members && %s::uuid[]",
        (group_id, list(entities)),
    )
    return list(dict.fromkeys([*entities, *(r["id"] for r in await cur.fetchall())]))


async def communities_built(conn: Conn, group_id: str) -> bool:
    """Whether the group holds communities now (built, and not all removed since)."""
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM timestone.communities"
        " WHERE group_id = %s AND expired_at IS NULL) AS built",
        (group_id,),
    )
    row = await cur.fetchone()
    return row is not None and bool(row["built"])


async def _changed_since_build(conn: Conn, group_id: str) -> list[uuid.UUID]:
    """Endpoints of facts written or expired since the group's last community build
    (every entity of the group if it never had one). The build of the communities held
    now is when each was first held as it is: a rollback restores a community as a new
    version (its own time), which the facts written between that build and the rollback's
    moment did not shape."""
    cur = await conn.execute(
        "WITH held AS (SELECT id, members, name FROM timestone.communities"
        "  WHERE group_id = %(g)s AND expired_at IS NULL),"
        " made AS (SELECT min(v.created_at) AS at FROM held AS h JOIN timestone.communities"
        "  AS v ON v.group_id = %(g)s AND v.id = h.id AND v.members = h.members"
        "  AND v.name = h.name GROUP BY h.id),"
        " last AS (SELECT coalesce((SELECT max(at) FROM made), (SELECT max(created_at)"
        "  FROM timestone.communities WHERE group_id = %(g)s)) AS t)"
        " SELECT DISTINCT x.id FROM timestone.facts AS f, last,"
        " LATERAL (VALUES (f.source_id), (f.target_id)) AS x(id)"
        " WHERE f.group_id = %(g)s AND (last.t IS NULL OR f.created_at > last.t"
        "  OR f.expired_at > last.t)",
        {"g": group_id},
    )
    return [r["id"] for r in await cur.fetchall()]
