"""The tables of docs/benchmarks.md, one function per result file (``bench.report``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"

Result = dict[str, Any]
Lines = list[str]

# Numbers -----------------------------------------------------------------------------


def ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f}"


def count(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def ratio(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def pace(result: Result) -> str:
    """The machine's pace around a run (a fixed CPU loop, ms; 42 to 47 when quiet)."""
    values: list[Any] = result.get("cpu_pace_ms_before_after") or result.get("cpu_pace_ms") or []
    numbers = [float(v) for v in values if v is not None]
    if not numbers:
        return ""
    low, high = min(numbers), max(numbers)
    return f"{low:.0f}" if round(low) == round(high) else f"{low:.0f} to {high:.0f}"


def p50_p95(timing: Result | None) -> str:
    if not timing:
        return ""
    return f"{ms(timing.get('p50_ms'))} / {ms(timing.get('p95_ms'))}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[bool]) -> Lines:
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join("---:" if r else "---" for r in right) + "|")
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def part(result: Result, key: str, empty: Any = None) -> Any:
    """``result[key]``, or an empty dict (``empty``) when the file lacks it or holds null."""
    value: Any = result.get(key)
    return value or ({} if empty is None else empty)


def load(name: str) -> Result | None:
    path = RESULTS / f"{name}.json"
    if not path.exists():
        return None
    data: Result = json.loads(path.read_text())
    return data


def corpus_size(corpus: Result) -> str:
    """A kept corpus, named by its directory (``/tmp/bench-keep/100000``: the 100k corpus)."""
    name = Path(str(corpus.get("data_dir", ""))).name
    if not name.isdigit():
        return name
    size = int(name)
    return f"{size // 1_000_000}M" if size >= 1_000_000 else f"{size // 1000}k"


def duplicates_found(draws: list[list[Result]], groups: int | None = None) -> tuple[int, int]:
    """Lookups that found their probe, and lookups made, at ``groups`` (the last step)."""
    found = total = 0
    for draw in draws:
        step = draw[-1] if groups is None else next(s for s in draw if s["groups"] == groups)
        found += step["found"]
        total += step["copies"]
    return found, total


# The sections of docs/benchmarks.md --------------------------------------------------


def ingest_section(r: Result) -> Lines:
    rows: list[list[str]] = []
    for run in r["runs"]:
        writers = run.get("writers")
        facts = count(run["facts"]) + (f" ({writers} groups)" if writers else "")
        batch = count(run["batch"]) + (", in `bulk_load`" if run.get("bulk_load") else "")
        call = f"`{run['call']}`, {run['order']}" + (f", {writers} loaders" if writers else "")
        rate = count(run["facts_per_second"])
        if run.get("writes_per_second"):
            rate += f" (writes alone {count(run['writes_per_second'])})"
        reads = run.get("reads", {})
        rows.append(
            [facts, batch, call, rate]
            + [p50_p95(reads.get(k)) for k in ("point", "as_of", "timeline")]
            + [pace(run)]
        )
    header = [
        "facts in the group",
        "batch",
        "call, order of the facts",
        "facts/s",
        "point read p50 / p95 ms",
        "as-of read",
        "timeline",
        "pace (ms)",
    ]
    return table(header, rows, [True, True, False, True, True, True, True, False])


def floor_section(r: Result) -> Lines:
    load_ = r["load"]
    rows = [
        [
            "the library's bulk load",
            count(load_["facts_per_second"]),
            ms(load_["writes_s"]),
            ms(load_["build_s"]),
        ]
    ]
    for i, f in enumerate(r["floor"], 1):
        rows.append(
            [
                f"the floor, round {i}",
                count(f["facts_per_second"]),
                ms(f["insert_s"]),
                ms(f["build_s"]),
            ]
        )
    lines = table(
        ["load of 100k facts, each person's together", "facts/s", "writes (s)", "index build (s)"],
        rows,
        [False, True, True, True],
    )
    return [*lines, "", f"Pace {pace(r)} ms."]


def llm_section(r: Result) -> Lines:
    s = r["summary"]
    low, high = s["graphiti_estimate_calls"]
    return table(
        [
            "episodes",
            "facts",
            "calls",
            "calls per episode",
            "most in one episode",
            "tokens",
            "Graphiti by its design (estimate, not measured)",
        ],
        [
            [
                str(s["episodes"]),
                str(s["facts"]),
                str(s["calls"]),
                ratio(s["mean_calls"]),
                str(s["max_calls_up_to_10_facts"]),
                count(s["tokens"]),
                f"{low} to {high} calls",
            ]
        ],
        [True] * 6 + [False],
    )


def search_sections(r: Result) -> Lines:
    sizes: list[Result] = r["sizes"]
    out: Lines = [
        "**Latency and recall** (three passes of the questions, p50 and p95 over all)",
        "",
    ]
    out += table(
        [
            "facts",
            "p50 (ms)",
            "p95 (ms)",
            "p50 of each pass",
            "recall@10 of the answer",
            "where exact search finds it",
            "ANN recall@10 vs exact",
            "built at (facts/s)",
            "pace (ms)",
        ],
        [
            [
                count(s["facts_ingested"]),
                ms(s["p50_ms"]),
                ms(s["p95_ms"]),
                ", ".join(ms(p["p50_ms"]) for p in s.get("latency_passes", [])),
                ratio(s.get("recall_at_10")),
                ratio(s.get("recall_at_10_where_exact_finds")),
                ratio(s.get("ann_recall_at_10"), 3),
                count(s.get("ingest_facts_per_s")),
                pace(s),
            ]
            for s in sizes
        ],
        [True] * 8 + [False],
    )
    out += ["", "**As of the moment of the run** (the answer is the present one)", ""]
    out += table(
        ["facts", "p50 (ms)", "p95 (ms)", "recall@10"],
        [
            [
                count(s["facts_ingested"]),
                ms(s["as_of_search"]["p50_ms"]),
                ms(s["as_of_search"]["p95_ms"]),
                ratio(s["as_of_search"].get("recall_at_10")),
            ]
            for s in sizes
            if "as_of_search" in s
        ],
        [True] * 4,
    )
    out += [
        "",
        "**As of a moment long past** (when the group had created 1,000, 5,000 and 20,000 of "
        "its current facts; [decision 011](decisions/011-as-of-exact-ranking.md))",
        "",
    ]
    out += table(
        ["facts", "current facts created by then", "p50 (ms)", "p95 (ms)"],
        [
            [
                count(s["facts_ingested"]),
                count(m["current_facts_created_by_then"]),
                ms(m["p50_ms"]),
                ms(m["p95_ms"]),
            ]
            for s in sizes
            for m in part(part(s, "as_of_search"), "early_moments", [])
        ],
        [True] * 4,
    )
    out += [
        "",
        "**Small tenants of the same database**, ranked exactly "
        "([decision 002](decisions/002-exact-ranking-below-1000-facts.md))",
        "",
    ]
    rows: list[list[str]] = []
    for s in sizes:
        small: Result = part(s, "small_groups")
        if "empty" in small:
            rows.append(
                [
                    count(s["facts_ingested"]),
                    "no facts",
                    p50_p95(small["empty"]),
                    "nothing returned, as it must",
                ]
            )
        if "small" in small:
            g = small["small"]
            rows.append(
                [
                    count(s["facts_ingested"]),
                    f"{count(g['facts_current'])} facts",
                    p50_p95(g),
                    ratio(g.get("recall_at_10")),
                ]
            )
    out += table(
        ["facts in the database", "tenant", "p50 / p95 (ms)", "recall@10"],
        rows,
        [True, False, True, True],
    )
    out += [
        "",
        "**Between another tenant's writes** (full-text indexes written through, migration "
        "0021, or taking a GIN pending list as before it)",
        "",
    ]
    rows = []
    for s in sizes:
        for way, t in part(s, "under_writes").items():
            rows.append(
                [count(s["facts_ingested"]), way, p50_p95(t), count(t.get("writer_facts_per_s"))]
            )
    out += table(
        ["facts in the database", "full-text indexes", "p50 / p95 (ms)", "the writer's facts/s"],
        rows,
        [True, False, True, True],
    )
    vacuum = [
        f"{s['autovacuum_after_purge_s']:.0f} s"
        for s in sizes
        if s.get("autovacuum_after_purge_s") is not None
    ]
    if vacuum:
        out += ["", f"Autovacuum cleared the writer's purged rows after {', '.join(vacuum)}."]
    out += [
        "",
        "**Tenants past the exact-ranking bound**, each question both ways in turn",
        "",
    ]
    rows = []
    for s in sizes:
        for g in part(s, "mid_groups").values():
            rows.append(
                [
                    count(s["facts_ingested"]),
                    count(g["facts_current"]),
                    p50_p95(g["index"]),
                    p50_p95(g["exact"]),
                    ratio(min(g["index"]["recall_at_10"], g["exact"]["recall_at_10"])),
                ]
            )
    out += table(
        [
            "facts in the database",
            "tenant's current facts",
            "through the index",
            "ranked exactly",
            "recall@10 (both)",
        ],
        rows,
        [True] * 5,
    )
    out += [
        "",
        "**Questions made only of common words**, p50 (ms): as a search asks them, and with "
        "every match ranked as before migration 0030 "
        "([decision 005](decisions/005-no-text-list-for-common-words.md))",
        "",
    ]
    rows = []
    for s in sizes:
        words = s.get("common_words")
        if not words:
            continue
        asked, every = words["as_searched"], words["every_match_ranked"]
        for q, value in asked["p50_ms_by_question"].items():
            rows.append(
                [count(s["facts_ingested"]), q, ms(value), ms(every["p50_ms_by_question"].get(q))]
            )
        rows.append([count(s["facts_ingested"]), "all, p50 / p95", p50_p95(asked), p50_p95(every)])
    out += table(
        ["facts", "question", "as searched", "every match ranked"], rows, [True, False, True, True]
    )
    rag = r.get("graphrag")
    if rag:
        out += [
            "",
            f"**Graph-RAG question**: on {rag['documents']} documents whose answer needs a "
            "constraint stated early and an exception stated later, `context()` returned "
            f"{rag['context_evidence_share']:.1%} of the needed evidence under a "
            f"{rag['token_budget']}-token budget; plain top-k chunk retrieval with the same "
            f"embedder and budget {rag['topk_chunks_evidence_share']:.1%}.",
        ]
    return out


def context_section(r: Result) -> Lines:
    rows = [
        [corpus_size(c), "the corpus's big group (facts)", p50_p95(c), "", pace(c)]
        for c in r.get("corpora", [])
    ]
    rows += [
        [
            corpus_size(t),
            f"{count(t['told_episodes'])} told episodes",
            p50_p95(t),
            f"{t['line_in_context']:.0%}",
            pace(t),
        ]
        for t in r.get("told", [])
    ]
    return table(
        ["corpus", "group", "p50 / p95 (ms)", "the asked line in the context", "pace (ms)"],
        rows,
        [True, False, True, True, False],
    )


def reindex_section(r: Result) -> Lines:
    rows: list[list[str]] = []
    for run in r["runs"]:
        facts = count(run["facts_current"]) + (f", {run['note']}" if run.get("note") else "")
        before, after = run["recall_at_10_before_after"]
        health = run["index_health_before_after"]
        rows.append(
            [
                facts,
                ms(run["total_seconds"]),
                p50_p95(run["before"]),
                p50_p95(run["during"]),
                p50_p95(run["after"]),
                f"{ratio(before)}, {ratio(after)}",
                ratio(run["same_top_10"], 3),
                health_pair(health.get("facts_embedding_hnsw")),
                pace(run),
            ]
        )
    return table(
        [
            "current facts",
            "rebuild (s)",
            "p50 / p95 ms before",
            "during",
            "after",
            "recall@10 before, after",
            "same ten facts after",
            "open facts' index health, before / after",
            "pace (ms)",
        ],
        rows,
        [True, True, True, True, True, True, True, True, False],
    )


def health_pair(pair: list[float | None] | None) -> str:
    if not pair:
        return ""
    return " / ".join(ratio(v, 3) for v in pair)


def wear_section(r: Result) -> Lines:
    rows: list[list[str]] = []
    for rnd in r["rounds"]:
        h = rnd.get("health", {})
        rows.append(
            [
                str(rnd["round"]),
                f"{count(rnd['churned'])} ({rnd.get('churned_share', 0):.2f})",
                ", ".join(
                    ratio(h.get(k), 3)
                    for k in (
                        "facts_embedding_hnsw",
                        "facts_embedding_closed_hnsw",
                        "entities_name_embedding_hnsw",
                    )
                ),
                p50_p95(rnd.get("big")),
                p50_p95(rnd.get("fixed")),
                p50_p95(rnd.get("new")),
            ]
        )
    lines = table(
        [
            "round",
            "written and erased (share of the table)",
            "index health (open facts, closed facts, entity names)",
            "big group p50 / p95 ms",
            "the tenant written first",
            "the round's new tenant",
        ],
        rows,
        [False, True, False, True, True, True],
    )
    return [
        f"`{r['data_dir']}`: {count(r['facts_in_table'])} fact rows, "
        f"{count(r['churn_per_round'])} churned a round, pace {pace(r)} ms.",
        "",
        *lines,
    ]


def duplicates_section(r: Result) -> Lines:
    shared, own = r["shared_sentences"], r["own_sentences"]
    steps = [s["groups"] for s in shared[0] if s["groups"] >= 10]
    rows: list[list[str]] = []
    for groups in steps:
        f1, t1 = duplicates_found(shared, groups)
        f2, t2 = duplicates_found(own, groups)
        lost1 = sum(1 for d in shared if any(s["found"] < s["copies"] for s in d[:groups]))
        lost2 = sum(1 for d in own if any(s["found"] < s["copies"] for s in d[:groups]))
        rows.append([str(groups), f"{f1} of {t1}", str(lost1), f"{f2} of {t2}", str(lost2)])
    lines = table(
        [
            "groups holding the probe",
            "found: the same sentences in every group",
            "draws that lost one",
            "found: each group's own sentences",
            "draws that lost one",
        ],
        rows,
        [True] * 5,
    )
    bare = r.get("bare_table")
    if bare:
        lines += [
            "",
            f"On a bare table of the same server, the shared sentences indexed unkeyed: "
            f"{sum(bare['plain'])} of {14 * len(bare['plain'])} probes found "
            f"(draws: {', '.join(str(v) for v in bare['plain'])}); keyed by group, "
            f"{sum(bare['keyed'])} of {14 * len(bare['keyed'])}.",
        ]
    return lines


def hostile_section(r: Result) -> Lines:
    before = load("hostile-before") or {}
    old: Result = before.get("reads", {})
    rows = [
        [
            name,
            ms(old[name]["median_ms"]) if name in old else "not run",
            ms(t["median_ms"]),
            ms(t["max_ms"]),
        ]
        for name, t in r["reads"].items()
    ]
    lines = table(
        [
            "read or write",
            f"before the fixes, {before.get('commit', '')} (ms)",
            f"{r.get('commit', 'newest')}: median (ms)",
            "worst (ms)",
        ],
        rows,
        [False, True, True, True],
    )
    return [
        f"{count(r['facts'])} facts: {count(r['people'])} people at one company, and a "
        f"timeline of {count(r['periods'])} periods; the median of {r['repeat']} calls; "
        f"pace {pace(r)} ms (before: {pace(before)}).",
        "",
        *lines,
    ]


def prepared_section(r: Result) -> Lines:
    rows = [
        [
            count(run["facts_written"]),
            p50_p95(run["prepared"]),
            p50_p95(run["unprepared"]),
            "yes" if run.get("same_answers") else "no",
            pace(run),
        ]
        for run in r["runs"]
    ]
    return table(
        ["facts", "prepared statements, p50 / p95 ms", "without", "same answers", "pace (ms)"],
        rows,
        [True, True, True, False, False],
    )


def plans_section(r: Result) -> Lines:
    rows = [
        [
            count(run["facts_rows"]),
            what,
            count(costs["facts"]),
            count(costs["entities"]),
            count(costs["episodes"]),
        ]
        for run in r["runs"]
        for what, costs in run["costs"].items()
    ]
    lines = table(
        ["fact rows", "search", "planner cost: facts", "entities", "episodes"],
        rows,
        [True, False, True, True, True],
    )
    jit = r.get("jit")
    if jit:
        figures = ", ".join(f"{way} {ms(value)} ms" for way, value in jit["p50_ms"].items())
        lines += ["", f"A stand-in of the same shape with JIT, p50: {figures} ({jit['server']})."]
    thresholds: Result = r["runs"][0]["thresholds"] if r["runs"] else {}
    if thresholds:
        lines += [
            "",
            "The server's thresholds: "
            + ", ".join(f"`{k}` {count(v)}" for k, v in thresholds.items())
            + ".",
        ]
    return lines


def search_floor_section(r: Result) -> Lines:
    rows = [
        [str(i), p50_p95(rnd["search"]), p50_p95(rnd["floor"]), f"{rnd['median_gap_ms']:.2f}"]
        for i, rnd in enumerate(r["rounds"], 1)
    ]
    lines = table(
        ["round", "search p50 / p95 (ms)", "floor p50 / p95 (ms)", "median gap (ms)"],
        rows,
        [True, True, True, True],
    )
    server: dict[str, dict[str, float]] = r.get("server_ms") or {}
    if server:
        lines += [
            "",
            "Each statement on the server, p50 over one more pass with every duration logged:",
            "",
            *table(
                ["statement", "bind (ms)", "execute (ms)"],
                [
                    [name, f"{phases.get('bind', 0):.3f}", f"{phases.get('execute', 0):.3f}"]
                    for name, phases in server.items()
                ],
                [False, True, True],
            ),
        ]
    return [
        f"{count(r['facts_written'])} facts, {r['questions']} questions; the same ten facts for "
        f"{r['same_ten']}; pace {pace(r)} ms.",
        "",
        *lines,
    ]


def generic_section(r: Result) -> Lines:
    """The figures of a result file this script has no table for."""
    rows = [[f"`{key}`", value] for key, value in flatten(r) if not key.startswith("machine.")]
    return table(["figure", "value"], rows[:60], [False, True])


def flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        out: list[tuple[str, str]] = []
        for k, v in value.items():  # pyright: ignore[reportUnknownVariableType]
            out += flatten(v, f"{prefix}{k}.")
        return out
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            out += flatten(v, f"{prefix}{i}.")
        return out
    return [(prefix.rstrip("."), json.dumps(value))]
