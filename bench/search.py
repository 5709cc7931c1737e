"""Search benchmark: latency, answer recall and ANN recall at 10k, 100k and 1M facts,
and the Graph-RAG question (evidence that needs two facts linked through an entity).

    .venv/bin/python -m bench.search --quick            # 10k facts, a few minutes
    .venv/bin/python -m bench.search --sizes 10000 100000
    .venv/bin/python -m bench.search --sizes 1000000    # long: ingestion dominates

The corpus: people with dated, changing jobs and homes (``WORKS_AT`` and
``LIVES_IN`` are cardinality one, so each change closes the previous period),
plus friendships and skills, ingested with ``add_facts`` in batches of 1,000
facts inside ``Memory.bulk_load`` (the vector indexes are built once at the
end, and the ingestion rate reported includes that build; ``--stream`` builds
with plain ``add_facts`` calls). Each question asks where someone works or
lives now; its answer is one specific current fact, while the person's older
jobs and homes are still in the graph as history. ``--keep DIR`` keeps each
size's database in ``DIR/<size>`` and measures an existing one again instead
of rebuilding it (its recorded ingestion rate is reported).

Measured per size, on the embedded server, with the default embedder:
- p50/p95 of ``search(group, question, limit=10)`` end to end (query embedding included),
  over three passes of different questions spread over the size's run (``timed_pass``);
- recall@10 of the current answer, overall and where exact search finds it (exact:
  the same statement with the facts HNSW index dropped in a transaction that is then
  rolled back, so the vector list is a full scan and every other index still serves);
- ANN recall@10: the HNSW vector list against the exact nearest neighbours, same filters;
- small tenants of the same database, which share its indexes: a group with no facts
  (asked the big group's questions: nothing may come back) and a group of about 300
  facts (p50/p95 and recall@10 of its own answers);
- the big group's questions asked between the writes of another tenant (100 facts a
  call, nothing vacuumed), with the facts' full-text indexes written through
  (migration 0021) and, in turn, taking a pending list as before it; the writer's
  episodes are then purged, and the bench waits for autovacuum to clear their dead
  rows from the indexes (migration 0022) and reports how long that took;
- from 100k facts, tenants past the exact-ranking bound, ranked both ways;
- questions made only of words most facts hold ("work", "since"...), as a search asks
  them (no full-text list, migration 0030) and with every matching fact ranked.

Graph-RAG: documents in which a project depends on a supplier early on, and the
supplier's restriction is stated chunks later without naming the project. The
question names the project; the needed evidence is both statements. Compared:
``context()`` against plain top-k chunk retrieval by the same embedder, under the
same token budget.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import random
import statistics
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import DictRow, dict_row

import timestone
from timestone import EdgeType, FactInput, Ontology
from timestone.db._embedding_async import VECTOR_INDEXES
from timestone.search._request import prepare_search
from timestone.search._run import run_search
from timestone.search._sql import fact_vectors, search_params
from timestone.search._tokens import default_counter

from ._common import (
    cpu_pace_ms,
    percentiles,
    ready_to_time,
    scratch_data_dir,
    wait_for,
    write_result,
)

FIRST = [
    "Alma",
    "Aron",
    "Beda",
    "Cato",
    "Dara",
    "Edda",
    "Elio",
    "Fenna",
    "Gala",
    "Hugo",
    "Ines",
    "Ivo",
    "Jana",
    "Kai",
    "Lena",
    "Lio",
    "Maja",
    "Milo",
    "Nora",
    "Odin",
    "Pia",
    "Rune",
    "Sara",
    "Timo",
    "Ulla",
    "Vera",
    "Wim",
    "Xena",
    "Yara",
    "Zeno",
    "Ada",
    "Bo",
    "Cleo",
    "Dag",
    "Eva",
    "Finn",
    "Greta",
    "Hans",
    "Ida",
    "Jonas",
    "Karin",
    "Lars",
    "Mats",
    "Nils",
    "Olga",
    "Per",
    "Rita",
    "Sven",
    "Tove",
    "Uwe",
]
LAST = [
    "Berg",
    "Dahl",
    "Ek",
    "Falk",
    "Grau",
    "Holm",
    "Iser",
    "Jung",
    "Kohl",
    "Lind",
    "Moor",
    "Nord",
    "Ost",
    "Pohl",
    "Quist",
    "Rask",
    "Sand",
    "Tal",
    "Ulm",
    "Vik",
    "Wald",
    "Xer",
    "Yng",
    "Zorn",
    "Abel",
    "Bauer",
    "Cramer",
    "Diehl",
    "Engel",
    "Fuchs",
    "Gram",
    "Hahn",
    "Imhof",
    "Jahn",
    "Kraus",
    "Lorenz",
    "Mohr",
    "Nagel",
    "Otto",
    "Pape",
    "Quandt",
    "Rau",
    "Seidel",
    "Thiel",
    "Uhl",
    "Voss",
    "Wirth",
    "Zeller",
]
SKILLS = [
    "welding",
    "pottery",
    "accounting",
    "surgery",
    "sailing",
    "baking",
    "carpentry",
    "translation",
    "chemistry",
    "cartography",
    "beekeeping",
    "typesetting",
]
START = datetime(2005, 1, 1, tzinfo=UTC)


def person_name(i: int) -> str:
    suffix = "" if i < len(FIRST) * len(LAST) else f" {i // (len(FIRST) * len(LAST)) + 1}"
    return f"{FIRST[i % len(FIRST)]} {LAST[(i // len(FIRST)) % len(LAST)]}{suffix}"


def person_facts(
    i: int, n_people: int, rng: random.Random
) -> tuple[list[FactInput], dict[str, str]]:
    """About ten facts for person ``i``: two to four jobs and one to three homes over time,
    friends and skills. Returns the facts and the current answer sentences."""
    name = person_name(i)
    facts: list[FactInput] = []
    answers: dict[str, str] = {}
    n_companies = max(20, n_people // 20)
    for relation, count, place in (
        ("WORKS_AT", rng.randint(2, 4), lambda: f"Company {rng.randrange(n_companies)}"),
        ("LIVES_IN", rng.randint(1, 3), lambda: f"City {rng.randrange(400)}"),
    ):
        when = START + timedelta(days=rng.randrange(0, 2000))
        previous = None
        for _ in range(count):
            target = place()
            verb = "works at" if relation == "WORKS_AT" else "lives in"
            sentence = f"{name} {verb} {target} since {when.date().isoformat()}."
            facts.append(FactInput(name, relation, target, fact=sentence, valid_at=when))
            if target != previous:
                # the same target said again continues its period, whose fact is the
                # sentence that opened it (the date fight's merge)
                answers[relation] = sentence
            previous = target
            when += timedelta(days=rng.randrange(200, 1500))
    for _ in range(rng.randint(2, 4)):
        friend = person_name(rng.randrange(n_people))
        if friend != name:
            facts.append(FactInput(name, "KNOWS", friend, fact=f"{name} knows {friend}."))
    for skill in rng.sample(SKILLS, rng.randint(1, 2)):
        facts.append(FactInput(name, "HAS_SKILL", skill, fact=f"{name} is skilled in {skill}."))
    return facts, answers


# room for the HNSW graph of 1M 256-dimension vectors in memory (the machine has 24 GiB)
BUILD_MEMORY = "4GB"
ONTOLOGY = Ontology(
    edge_types=[EdgeType("WORKS_AT", cardinality="one"), EdgeType("LIVES_IN", cardinality="one")]
)


def build(
    mem: timestone.Memory, group: str, n_facts: int, seed: int = 7, *, bulk: bool = True
) -> tuple[list[tuple[str, str]], float, int]:
    """Ingest about ``n_facts`` facts in batches of 1,000 (inside ``bulk_load`` unless
    ``bulk`` is false); returns (question, answer) pairs, the ingestion rate in facts per
    second (the index build at the end of the bulk load included) and the facts written
    (``n_facts // 10`` people with 9 to 10 facts each: a little under ``n_facts``)."""
    started = time.perf_counter()
    if not bulk:
        questions, written = _ingest(mem, group, n_facts, seed, started)
    else:
        with mem.bulk_load(maintenance_work_mem=BUILD_MEMORY):
            questions, written = _ingest(mem, group, n_facts, seed, started)
            print(f"  {written:,} facts written; building the vector indexes ...", flush=True)
    return questions, written / (time.perf_counter() - started), written


def people(n_facts: int, seed: int = 7) -> Iterator[tuple[list[FactInput], list[tuple[str, str]]]]:
    """The corpus of ``build``, person by person: their facts and their two questions
    (where they work now, where they live) with the answer sentence of each."""
    rng = random.Random(seed)
    n_people = max(10, n_facts // 10)
    total = 0
    for i in range(n_people):
        facts, answers = person_facts(i, n_people, rng)
        name = person_name(i)
        yield (
            facts,
            [
                (f"Where does {name} work now?", answers["WORKS_AT"]),
                (f"Where does {name} live?", answers["LIVES_IN"]),
            ],
        )
        total += len(facts)
        if total >= n_facts:
            return


def _ingest(
    mem: timestone.Memory, group: str, n_facts: int, seed: int, started: float
) -> tuple[list[tuple[str, str]], int]:
    questions: list[tuple[str, str]] = []
    batch: list[FactInput] = []
    written = 0
    reference = datetime(2025, 1, 1, tzinfo=UTC)
    for facts, asked in people(n_facts, seed):
        if len(batch) + len(facts) > 1000:
            mem.add_facts(group, batch, reference_time=reference, name=f"batch {written}")
            written += len(batch)
            batch = []
            if written and written % 50_000 < 1000:
                rate = written / (time.perf_counter() - started)
                print(f"  {written:,} facts ({rate:,.0f}/s)", flush=True)
        batch.extend(facts)
        questions.extend(asked)
    if batch:
        mem.add_facts(group, batch, reference_time=reference, name=f"batch {written}")
        written += len(batch)
    return questions, written


def _exact_and_ann(
    dsn: str, group: str, mem: timestone.Memory, questions: Sequence[str]
) -> tuple[list[list[str]], list[float]]:
    """Per question: the fact sentences exact search returns (the same statement with the
    facts HNSW indexes dropped inside a transaction that is rolled back, so the vector list
    is a full scan and every other index still serves), and the ANN recall@10 of the
    search's own vector list (its ten nearest, through the indexes as a search reads them)
    against the exact one."""
    exact_top: list[list[str]] = []
    ann: list[float] = []
    with psycopg.Connection[DictRow].connect(dsn, row_factory=dict_row) as conn:
        register_vector(conn)
        for q in questions:
            vector = mem.embedder.embed([q])[0]
            req = prepare_search(q, limit=10)
            params = search_params(req, group, vector)
            vec_sql = sql.SQL(
                "WITH {} SELECT f.fact FROM vec JOIN timestone.facts AS f"
                " ON f.group_id = %(g)s AND f.version_id = vec.version_id ORDER BY vec.r LIMIT 10"
            ).format(fact_vectors(req, sql.SQL("true"), mem.embedder.dimension))
            with conn.transaction():
                conn.execute("SET LOCAL ROLE timestone_app")
                conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                conn.execute("SET LOCAL hnsw.ef_search = 40")  # as a search of limit 10 sets
                approx = {r["fact"] for r in conn.execute(vec_sql, params).fetchall()}
            exact: list[str] = []
            top: list[str] = []
            with conn.transaction():
                for name, table, *_ in VECTOR_INDEXES:  # as the owner
                    if table == "facts":
                        conn.execute(
                            sql.SQL("DROP INDEX timestone.{}").format(sql.Identifier(name))
                        )
                conn.execute("SET LOCAL ROLE timestone_app")
                conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
                exact = [r["fact"] for r in conn.execute(vec_sql, params).fetchall()]
                hits = run_search(conn, group, req, vector, mem.embedder.dimension)  # pyright: ignore[reportArgumentType]
                top = [hits["facts"].rows[c.key]["fact"] for c in hits["facts"].ranked]
                raise psycopg.Rollback  # the indexes come back
            ann.append(len(approx & set(exact)) / max(1, len(exact)))
            exact_top.append(top)
    return exact_top, ann


def run_size(
    n_facts: int, n_questions: int, *, bulk: bool = True, keep: Path | None = None
) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        if keep is None:
            data_dir = stack.enter_context(scratch_data_dir())
        else:
            data_dir = keep / str(n_facts)
            data_dir.mkdir(parents=True, exist_ok=True)
        mem = timestone.Memory.open(data_dir=data_dir, ontology=ONTOLOGY)
        stack.callback(mem.close)
        built = data_dir / "corpus.json"
        if built.exists():
            corpus = json.loads(built.read_text())
            group, rate, bulk = corpus["group"], corpus["rate"], corpus["bulk"]
            written = corpus["written"]
            # answers from the current generator (a kept corpus may predate a fix to them)
            questions = [qa for _, asked in people(n_facts) for qa in asked]
            if [q for q, _ in questions] != [q for q, _ in corpus["questions"]]:
                raise SystemExit(f"{built} was built from another corpus; remove {data_dir}")
            print(f"measuring the {n_facts:,}-fact corpus built in {data_dir}", flush=True)
        else:
            group = "bench-" + uuid.uuid4().hex[:8]
            print(f"building {n_facts:,} facts ...", flush=True)
            questions, rate, written = build(mem, group, n_facts, bulk=bulk)
            if keep is not None:
                built.write_text(
                    json.dumps(
                        {
                            "group": group,
                            "rate": rate,
                            "bulk": bulk,
                            "written": written,
                            "questions": questions,
                        }
                    )
                )
        stats = mem.stats(group)
        waited = ready_to_time(mem.dsn)
        rng = random.Random(11)
        sample = rng.sample(questions, min(n_questions, len(questions)))
        later = later_passes([q for q, _ in questions], [q for q, _ in sample])
        for q, _ in sample[:20]:  # warm caches
            mem.search(group, q)
        first = timed_pass(mem, group, [q for q, _ in sample])
        answered = first.answered
        found = [a in facts for (_, a), facts in zip(sample, answered, strict=True)]
        as_of = as_of_search(mem, group, sample)
        small = small_groups(mem, group, [q for q, _ in sample])
        timed = [first, *(timed_pass(mem, group, asked) for asked in later[:1])]
        writing = under_writes(mem, group, [q for q, _ in sample])
        vacuumed = autovacuumed(mem.dsn, datetime.now(UTC))
        mid = mid_groups(mem, group) if n_facts >= MID_FROM else None
        common = common_words(mem, group)
        timed.extend(timed_pass(mem, group, asked) for asked in later[1:])
        exact_lists, ann = _exact_and_ann(mem.dsn, group, mem, [q for q, _ in sample])
        exact_hits = [a in top for (_, a), top in zip(sample, exact_lists, strict=True)]
        hits = sum(found)
        both = sum(f and e for f, e in zip(found, exact_hits, strict=True))
        current = stats.get("facts", {}).get("current")
        return {
            "facts_ingested": written,
            "facts_current": current,
            "ingest_facts_per_s": round(rate),
            "ingest": "bulk_load" if bulk else "add_facts",
            "questions": len(sample),
            **percentiles([ms for p in timed for ms in p.latencies]),
            "cpu_pace_ms_before_after": first.pace,
            "latency_passes": [
                {**percentiles(p.latencies), "cpu_pace_ms_before_after": p.pace} for p in timed
            ],
            "settled_after_s": waited,
            "recall_at_10": round(hits / len(sample), 4),
            "recall_at_10_where_exact_finds": round(both / max(1, sum(exact_hits)), 4),
            "exact_recall_at_10": round(sum(exact_hits) / len(sample), 4),
            "ann_recall_at_10": round(statistics.mean(ann), 4),
            "as_of_search": as_of,
            "small_groups": small,
            "under_writes": writing,
            "autovacuum_after_purge_s": vacuumed,
            "mid_groups": mid,
            "common_words": common,
        }


COMMON_QUESTIONS = ("work", "lives", "since", "city", "who works at a company")
COMMON_ASKED = 10  # times each, after two to warm up
RANK_EVERY_MATCH = 10**14  # a timestone.text_common_rows no estimate reaches


def common_words(mem: timestone.Memory, group: str) -> dict[str, Any]:
    """``search(group, question, limit=10)`` for questions made only of words that most of
    the group's facts hold, each ``COMMON_ASKED`` times: as a search asks them (their
    estimated matches reach ``timestone.text_common_rows``, so the facts have no full-text
    list) and, on a second memory whose connections lift that bound, with every fact
    that matches ranked (as before migration 0030)."""
    lifted = make_conninfo(mem.dsn, options=f"-c timestone.text_common_rows={RANK_EVERY_MATCH}")
    out: dict[str, Any] = {}
    with timestone.Memory.open(lifted, ontology=ONTOLOGY) as every:
        for way, m in (("as_searched", mem), ("every_match_ranked", every)):
            took: dict[str, float] = {}
            samples: list[float] = []
            for q in COMMON_QUESTIONS:
                for _ in range(2):
                    m.search(group, q, limit=10)
                each: list[float] = []
                for _ in range(COMMON_ASKED):
                    t0 = time.perf_counter()
                    m.search(group, q, limit=10)
                    each.append((time.perf_counter() - t0) * 1000)
                took[q] = round(statistics.median(each), 3)
                samples.extend(each)
            out[way] = {"p50_ms_by_question": took, **percentiles(samples)}
    return out


LATENCY_PASSES = 3  # of the size's questions, each pass its own


def later_passes(questions: Sequence[str], first: Sequence[str]) -> list[list[str]]:
    """The questions of the timed passes after the first: ``LATENCY_PASSES - 1`` lists as
    long as ``first``, drawn from the other questions (as many as there are; none when
    ``first`` took them all)."""
    asked = set(first)
    rest = [q for q in questions if q not in asked]
    drawn = random.Random(23).sample(rest, min(len(rest), (LATENCY_PASSES - 1) * len(first)))
    chunks = [drawn[i * len(first) : (i + 1) * len(first)] for i in range(LATENCY_PASSES - 1)]
    return [chunk for chunk in chunks if chunk]


@dataclasses.dataclass(frozen=True)
class TimedPass:
    latencies: list[float]
    answered: list[list[str]]
    pace: tuple[float, float]  # ``cpu_pace_ms`` before and after


def timed_pass(mem: timestone.Memory, group: str, questions: Sequence[str]) -> TimedPass:
    """``ask`` between two readings of the machine's pace.

    The search latency of a size is taken over ``LATENCY_PASSES`` passes of different
    questions, the first at the start and the others minutes apart (after the small
    tenants, and at the end). One pass of 500 questions at 100k facts lasts two to three
    seconds, and a spell that slows the shared machine for that long moves its p50: a
    run that timed one pass gave 6.2 ms p50 at 100k, while the same corpus's searches
    later in that run and the same questions asked after it gave 4.6 to 5.3. Each pass
    is reported too (``latency_passes``)."""
    before = cpu_pace_ms()
    latencies, answered = ask(mem, group, questions)
    return TimedPass(latencies, answered, (before, cpu_pace_ms()))


def ask(
    mem: timestone.Memory, group: str, questions: Sequence[str]
) -> tuple[list[float], list[list[str]]]:
    """Each question's ``search(group, question, limit=10)``: its latency end to end in
    milliseconds, and the sentences of the facts it returned."""
    latencies: list[float] = []
    answered: list[list[str]] = []
    for q in questions:
        t0 = time.perf_counter()
        result = mem.search(group, q, limit=10)
        latencies.append((time.perf_counter() - t0) * 1000)
        answered.append([f.fact for f in result.facts])
    return latencies, answered


AS_OF_QUESTIONS = 100  # the first questions of the sample, asked again as of now


def as_of_search(
    mem: timestone.Memory, group: str, sample: Sequence[tuple[str, str]]
) -> dict[str, Any]:
    """``search(group, question, limit=10, as_of=now)``: the facts held now, read as
    history is (the current versions created by the moment through the indexes, the
    versions ended since by key). Latency, and recall@10 of the current answer, which
    must be the present search's."""
    moment = datetime.now(UTC)
    asked = list(sample[:AS_OF_QUESTIONS])
    mem.search(group, asked[0][0], limit=10, as_of=moment)  # warm
    latencies: list[float] = []
    found = 0
    for q, answer in asked:
        t0 = time.perf_counter()
        result = mem.search(group, q, limit=10, as_of=moment)
        latencies.append((time.perf_counter() - t0) * 1000)
        found += answer in [f.fact for f in result.facts]
    early = as_of_early(mem, group, [q for q, _ in asked[:EARLY_QUESTIONS]])
    return {
        **percentiles(latencies),
        "recall_at_10": round(found / len(asked), 4),
        "early_moments": early,
    }


EARLY_MARKS = (1_000, 5_000, 20_000)  # current facts the group had created by the moment
EARLY_QUESTIONS = 50


def as_of_early(
    mem: timestone.Memory, group: str, questions: Sequence[str]
) -> list[dict[str, Any]]:
    """Search as of moments long past: the end of the first write after which the group
    had created ``EARLY_MARKS`` of its current facts (a moment before most of it was
    written, as before a large import). Latency, and the facts it held then. Under
    ``AS_OF_EXACT_BELOW`` those are ranked exactly, above it through the HNSW indexes."""
    with psycopg.connect(mem.dsn) as conn:
        created = conn.execute(
            "SELECT created_at, count(*) FROM timestone.facts WHERE group_id = %s"
            " AND expired_at IS NULL GROUP BY 1 ORDER BY 1",
            (group,),
        ).fetchall()
    out: list[dict[str, Any]] = []
    held = 0
    marks = list(EARLY_MARKS)
    for moment, n in created:
        held += n
        if not marks or held < marks[0]:
            continue
        while marks and held >= marks[0]:
            marks.pop(0)
        mem.search(group, questions[0], limit=10, as_of=moment)  # warm
        latencies: list[float] = []
        for q in questions:
            t0 = time.perf_counter()
            mem.search(group, q, limit=10, as_of=moment)
            latencies.append((time.perf_counter() - t0) * 1000)
        out.append({"current_facts_created_by_then": held, **percentiles(latencies)})
    return out


SMALL_FACTS = 300  # a tenant far below the exact-ranking threshold


def small_groups(
    mem: timestone.Memory, big: str, big_questions: Sequence[str], n_questions: int = 100
) -> dict[str, dict[str, Any]]:
    """Search latency of small tenants that share the database (and its HNSW indexes)
    with the big group: a group with no facts, asked the big group's questions (nothing
    may come back), and a group of about 300 facts about people named like the big
    group's, asked about its own people (recall@10 of its answers). Ingested with plain
    ``add_facts``; on a kept database the calls find their idempotency keys and write
    nothing."""
    empty, few = f"{big}-empty", f"{big}-small"
    questions: list[tuple[str, str]] = []
    batch: list[FactInput] = []
    for facts, asked in people(SMALL_FACTS, seed=13):
        batch.extend(facts)
        questions.extend(asked)
    reference = datetime(2025, 1, 1, tzinfo=UTC)
    for start in range(0, len(batch), 100):
        mem.add_facts(few, batch[start : start + 100], reference_time=reference)
    out: dict[str, dict[str, Any]] = {}
    asked = list(big_questions[:n_questions])
    for q in asked[:10]:  # warm
        mem.search(empty, q)
    latencies, answered = ask(mem, empty, asked)
    out["empty"] = {
        "facts_current": mem.stats(empty).get("facts", {}).get("current", 0),
        **percentiles(latencies),
        "facts_returned": sum(len(facts) for facts in answered),
    }
    sample = random.Random(17).sample(questions, min(n_questions, len(questions)))
    for q, _ in sample[:10]:
        mem.search(few, q)
    latencies, answered = ask(mem, few, [q for q, _ in sample])
    found = [a in facts for (_, a), facts in zip(sample, answered, strict=True)]
    out["small"] = {
        "facts_current": mem.stats(few).get("facts", {}).get("current"),
        **percentiles(latencies),
        "recall_at_10": round(sum(found) / len(found), 4),
    }
    return out


WRITER_CALLS = 15  # add_facts calls of 100 facts by another tenant, per block
QUESTIONS_PER_CALL = 5
PENDING_WAYS = ("written through", "pending list")
PENDING_ROUNDS = 3


def under_writes(
    mem: timestone.Memory, big: str, big_questions: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """The big group's questions asked while another tenant writes: one ``add_facts``
    call of 100 facts, then five questions, in blocks of 1,500 facts, three blocks each
    way in turn. Written through: the facts' full-text indexes as migration 0021 leaves
    them (fastupdate off). Pending list: the same indexes with fastupdate on, as before
    0021, so that new entries wait in a list every lookup reads (from empty to 1,500
    facts' entries in a block). Nothing is vacuumed in between. The writer's rate is
    measured too, each way. The writer's episodes are purged at the end and the indexes
    left written through."""
    writer = f"{big}-writer-{uuid.uuid4().hex[:8]}"
    stream = (facts for facts, _ in people(10**7, seed=29))
    asked = itertools.cycle(big_questions)
    reference = datetime(2025, 1, 1, tzinfo=UTC)
    latencies: dict[str, list[float]] = {way: [] for way in PENDING_WAYS}
    writing: dict[str, float] = dict.fromkeys(PENDING_WAYS, 0.0)
    facts: dict[str, int] = dict.fromkeys(PENDING_WAYS, 0)
    written: list[uuid.UUID] = []
    indexes = ("facts_fts_open", "facts_fts_closed")

    def fastupdate(on: bool) -> None:
        with psycopg.connect(mem.dsn, autocommit=True) as conn:
            for name in indexes:
                conn.execute(
                    sql.SQL("ALTER INDEX timestone.{} SET (fastupdate = {})").format(
                        sql.Identifier(name), sql.SQL("on" if on else "off")
                    )
                )
                conn.execute("SELECT gin_clean_pending_list(%s::regclass)", (f"timestone.{name}",))

    try:
        for way in PENDING_WAYS * PENDING_ROUNDS:
            fastupdate(way == "pending list")
            for _ in range(WRITER_CALLS):
                batch: list[FactInput] = []
                while len(batch) < 100:
                    batch.extend(next(stream))
                t0 = time.perf_counter()
                result = mem.add_facts(writer, batch, reference_time=reference)
                writing[way] += time.perf_counter() - t0
                facts[way] += len(batch)
                written.append(result.episode.id)
                for _ in range(QUESTIONS_PER_CALL):
                    q = next(asked)
                    t0 = time.perf_counter()
                    mem.search(big, q, limit=10)
                    latencies[way].append((time.perf_counter() - t0) * 1000)
    finally:
        fastupdate(False)
        for episode in written:
            mem.purge_episode(writer, episode)
    return {
        way: {
            **percentiles(latencies[way]),
            "writer_facts_per_s": round(facts[way] / writing[way]),
        }
        for way in PENDING_WAYS
    }


AUTOVACUUM_WAIT_S = 900


def autovacuumed(dsn: str, since: datetime) -> float | None:
    """Wait for autovacuum to vacuum facts after ``since`` (the writer's purge, whose dead
    rows stay in the HNSW indexes until then: migration 0022); the seconds waited, or
    None if it did not within ``AUTOVACUUM_WAIT_S``. Later measurements read the
    indexes as a production server's would be once autovacuum has passed."""

    def ready(conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute(
            "SELECT last_autovacuum, n_dead_tup <= 1000 + 0.01 * n_live_tup"
            " FROM pg_stat_user_tables WHERE relid = 'timestone.facts'::regclass"
        ).fetchone()
        return row is not None and row[0] is not None and row[0] > since and bool(row[1])

    return wait_for(dsn, ready, AUTOVACUUM_WAIT_S, 2.0)


MID_FACTS = (1200, 2800, 5800)  # tenants past the exact-ranking bound (1,000 facts)
MID_FROM = 100_000  # the corpus size from which they are written (a tenth of it at most)


def mid_groups(mem: timestone.Memory, big: str, n_questions: int = 100) -> dict[str, Any]:
    """Search latency of mid-sized tenants that share the database with the big group,
    asked about their own people: as a search ranks them (past ``EXACT_BELOW`` current
    facts, through the HNSW indexes keyed by group; the group remembered as large, as it
    is between searches), and exactly (the same search with the bound raised above the
    group, counted each time), each question both ways in turn."""
    from timestone.search import _ranked_lists_sql

    reference = datetime(2025, 1, 1, tzinfo=UTC)
    out: dict[str, Any] = {}
    bound = _ranked_lists_sql.EXACT_BELOW
    large: dict[str, float] = mem._db._large  # pyright: ignore[reportPrivateUsage]
    for n in MID_FACTS:
        group = f"{big}-mid-{n}"
        batch: list[FactInput] = []
        questions: list[tuple[str, str]] = []
        for facts, asked in people(n, seed=n):
            batch.extend(facts)
            questions.extend(asked)
        for start in range(0, len(batch), 1000):
            mem.add_facts(group, batch[start : start + 1000], reference_time=reference)
        sample = random.Random(19).sample(questions, min(n_questions, len(questions)))
        latencies: dict[str, list[float]] = {"index": [], "exact": []}
        found = {"index": 0, "exact": 0}
        try:
            for i, (q, answer) in enumerate([*sample[:10], *sample]):
                for way in ("index", "exact") if i % 2 else ("exact", "index"):
                    _ranked_lists_sql.EXACT_BELOW = bound if way == "index" else 10**9
                    if way == "exact":  # else remembered as large, and not counted
                        large.pop(group, None)
                    t0 = time.perf_counter()
                    result = mem.search(group, q, limit=10)
                    if i >= 10:  # the first ten warm the caches
                        latencies[way].append((time.perf_counter() - t0) * 1000)
                        found[way] += answer in [f.fact for f in result.facts]
        finally:
            _ranked_lists_sql.EXACT_BELOW = bound
        out[str(n)] = {
            "facts_current": mem.stats(group).get("facts", {}).get("current"),
            **{
                way: {**percentiles(latencies[way]), "recall_at_10": found[way] / len(sample)}
                for way in ("index", "exact")
            },
        }
    return out


# -- Graph-RAG ---------------------------------------------------------------------------

PROJECTS = [
    "Falcon",
    "Heron",
    "Osprey",
    "Kestrel",
    "Merlin",
    "Harrier",
    "Condor",
    "Puffin",
    "Plover",
    "Curlew",
]
GOODS = ("cold-chain vaccines", "lithium batteries", "live animals", "explosives", "fresh fish")
FILLER = (
    "The quarterly review covered staffing, office moves and the new badge system.",
    "Meeting rooms on the third floor are booked through the facilities portal.",
    "Travel expenses above the usual limit need a second signature from finance.",
    "The style guide asks for plain language and short paragraphs in every memo.",
    "Laptop refreshes happen every four years unless a device fails earlier.",
    "The cafeteria menu rotates weekly and lists allergens for every dish.",
    "Security training is due each spring and takes about forty minutes.",
    "Parking permits are renewed in January at the front desk.",
)


def graphrag_docs(n_docs: int, rng: random.Random) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for d in range(n_docs):
        project = f"Project {PROJECTS[d % len(PROJECTS)]} {d}"
        supplier = f"{rng.choice(LAST)} Logistics {d}"
        goods = rng.choice(GOODS)
        constraint = f"{project} ships all of its freight through {supplier}."
        exception = f"{supplier} may no longer carry {goods} after the 2024 audit."
        paragraphs = [constraint]
        for _ in range(8):
            paragraphs.append(" ".join(rng.sample(FILLER, 4)))
        paragraphs.append(exception)
        paragraphs.append(" ".join(rng.sample(FILLER, 3)))
        docs.append(
            {
                "uri": f"file:///policies/{d}.md",
                "content": "\n\n".join(paragraphs),
                "project": project,
                "supplier": supplier,
                "constraint": constraint,
                "exception": exception,
                "question": f"Can {project} send {goods}?",
            }
        )
    return docs


def run_graphrag(n_docs: int, budget: int) -> dict[str, Any]:
    rng = random.Random(5)
    docs = graphrag_docs(n_docs, rng)
    counter = default_counter()
    with scratch_data_dir() as data_dir:
        mem = timestone.Memory.open(data_dir=data_dir)
        try:
            group = "graphrag"
            when = datetime(2025, 1, 1, tzinfo=UTC)
            for doc in docs:
                mem.add_document(
                    group, doc["uri"], doc["content"], reference_time=when, max_chunk_chars=400
                )
                # what extraction yields for the two statements (structured: no LLM here)
                mem.add_facts(
                    group,
                    [
                        FactInput(
                            doc["project"], "SHIPS_THROUGH", doc["supplier"], fact=doc["constraint"]
                        ),
                        FactInput(
                            doc["supplier"],
                            "RESTRICTED_FROM",
                            "freight class",
                            fact=doc["exception"],
                        ),
                    ],
                    reference_time=when,
                    source_description=doc["uri"],
                )
            ctx_found, topk_found = 0, 0
            for doc in docs:
                needed = (doc["constraint"], doc["exception"])
                ctx = mem.context(group, doc["question"], token_budget=budget)
                text = "\n".join(i.text for i in ctx.items)
                ctx_found += sum(n in text for n in needed)
                chunks = mem.search(group, doc["question"], scopes=("episodes",), limit=50)
                used, chosen = 0, list[str]()
                for ep in sorted(chunks.episodes, key=lambda e: -(e.score or 0)):
                    if ep.source != "document":
                        continue
                    cost = counter.count(ep.content) + 1
                    if used + cost <= budget:
                        used += cost
                        chosen.append(" ".join(ep.content.split()))
                joined = "\n".join(chosen)
                topk_found += sum(n in joined for n in needed)
            total = 2 * len(docs)
            return {
                "documents": n_docs,
                "token_budget": budget,
                "context_evidence_share": round(ctx_found / total, 4),
                "topk_chunks_evidence_share": round(topk_found / total, 4),
            }
        finally:
            mem.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="10k facts, 200 questions")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--budget", type=int, default=400)
    parser.add_argument(
        "--stream",
        action="store_true",
        help="build with plain add_facts calls instead of inside Memory.bulk_load",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep each size's database in DIR/<size>; measure an existing one again",
    )
    args = parser.parse_args(argv)
    sizes: list[int] = [10_000] if args.quick else args.sizes
    n_questions = 200 if args.quick else args.questions
    rows: list[dict[str, Any]] = []
    for size in sizes:
        row = run_size(size, n_questions, bulk=not args.stream, keep=args.keep)
        print(row, flush=True)
        rows.append(row)
        write_result("search", {"sizes": rows, "graphrag": None})  # a long run keeps each size
    graphrag = run_graphrag(30 if args.quick else args.docs, args.budget)
    path = write_result("search", {"sizes": rows, "graphrag": graphrag})
    print()
    print(
        "| facts | ingest facts/s | p50 ms | p95 ms | p50 ms of each pass | recall@10 "
        "| recall@10 where exact finds | exact recall@10 | ANN recall@10 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        each = ", ".join(str(p["p50_ms"]) for p in r["latency_passes"])
        print(
            f"| {r['facts_ingested']:,} | {r['ingest_facts_per_s']:,} | {r['p50_ms']} | "
            f"{r['p95_ms']} | {each} | {r['recall_at_10']} | "
            f"{r['recall_at_10_where_exact_finds']} | {r['exact_recall_at_10']} | "
            f"{r['ann_recall_at_10']} |"
        )
    print()
    print("| facts | as-of search p50 ms | p95 ms | questions | recall@10 |")
    print("|---|---|---|---|---|")
    for r in rows:
        a = r["as_of_search"]
        print(
            f"| {r['facts_ingested']:,} | {a['p50_ms']} | {a['p95_ms']} | {a['n']} | "
            f"{a['recall_at_10']} |"
        )
    print()
    print("| facts | current facts created by the moment | as-of search p50 ms | p95 ms |")
    print("|---|---|---|---|")
    for r in rows:
        for e in r["as_of_search"]["early_moments"]:
            print(
                f"| {r['facts_ingested']:,} | {e['current_facts_created_by_then']:,} | "
                f"{e['p50_ms']} | {e['p95_ms']} |"
            )
    print()
    print("| facts in the database | tenant | its current facts | p50 ms | p95 ms | recall@10 |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        for kind, g in r["small_groups"].items():
            recall = g.get("recall_at_10", f"nothing found ({g.get('facts_returned')} facts)")
            print(
                f"| {r['facts_ingested']:,} | {kind} | {g['facts_current']:,} | "
                f"{g['p50_ms']} | {g['p95_ms']} | {recall} |"
            )
    print()
    print(
        "| facts | full-text indexes | search p50 ms between another tenant's writes | p95 ms"
        " | the writer's facts/s |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        for way, w in r["under_writes"].items():
            print(
                f"| {r['facts_ingested']:,} | {way} | {w['p50_ms']} | {w['p95_ms']} | "
                f"{w['writer_facts_per_s']:,} |"
            )
    for r in rows:
        waited = r["autovacuum_after_purge_s"]
        print(
            f"{r['facts_ingested']:,} facts: the writer purged, autovacuum cleared facts "
            + (f"{waited} s later" if waited is not None else f"not within {AUTOVACUUM_WAIT_S} s")
        )
    print()
    print(
        "| facts in the database | tenant's current facts | through the index p50 / p95 ms"
        " | ranked exactly p50 / p95 ms | recall@10 (index, exact) |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        mids: dict[str, dict[str, Any]] = r["mid_groups"] or {}
        for m in mids.values():
            ix, ex = m["index"], m["exact"]
            print(
                f"| {r['facts_ingested']:,} | {m['facts_current']:,} | {ix['p50_ms']} / "
                f"{ix['p95_ms']} | {ex['p50_ms']} / {ex['p95_ms']} | "
                f"{ix['recall_at_10']}, {ex['recall_at_10']} |"
            )
    print()
    print("| facts | question | p50 ms as searched | p50 ms with every match ranked |")
    print("|---|---|---|---|")
    for r in rows:
        c = r["common_words"]
        for q in COMMON_QUESTIONS:
            print(
                f"| {r['facts_ingested']:,} | {q} | {c['as_searched']['p50_ms_by_question'][q]} | "
                f"{c['every_match_ranked']['p50_ms_by_question'][q]} |"
            )
    print()
    print("| Graph-RAG documents | token budget | context() evidence | top-k chunks evidence |")
    print("|---|---|---|---|")
    print(
        f"| {graphrag['documents']} | {graphrag['token_budget']} | "
        f"{graphrag['context_evidence_share']} | {graphrag['topk_chunks_evidence_share']} |"
    )
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
