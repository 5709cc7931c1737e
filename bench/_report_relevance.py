"""The table of ``bench.conversations`` (evidence recall on real conversations), for
the README and docs/benchmarks.md."""

from __future__ import annotations

from bench._report_tables import Lines, Result, ms, ratio, table

SYSTEMS = (
    ("timestone", "Timestone `search`"),
    ("bm25", "Okapi BM25 (k1 1.2, b 0.75)"),
    ("dense", "dense: exact cosine, same embedder"),
    ("rrf", "RRF (k = 60) of the two"),
)
COLUMNS = ("R@5", "R@10", "R@20", "multi-hop", "temporal", "open-domain", "single-hop")


def conversations_table(r: Result) -> Lines:
    """Recall of each system, then ``context()``'s recall and the search's latency."""
    rows = [
        [name, *(ratio(r["systems"][key].get(c), 3) for c in COLUMNS)]
        for key, name in SYSTEMS
        if key in r["systems"]
    ]
    out = table(["system", *COLUMNS], rows, [False, *([True] * len(COLUMNS))])
    held = r.get("context_recall", {})
    latency = r.get("search_latency", {})
    out += [
        "",
        f"{r['questions']} questions with evidence (categories 1 to 4, per-category columns at "
        "10). `context(token_budget=N, valid_at=None)` holds "
        + ", ".join(f"{ratio(v, 3)} at {int(k):,} tokens" for k, v in held.items())
        + f" of the evidence; a search took {ms(latency.get('p50_ms'))} / "
        f"{ms(latency.get('p95_ms'))} ms p50 / p95.",
    ]
    return out


DOCUMENT_SYSTEMS = (
    ("timestone", "Timestone `search`"),
    ("bm25", "Okapi BM25 (k1 1.2, b 0.75)"),
    ("dense", "dense: exact cosine, same embedder"),
)
DOCUMENT_COLUMNS = ("R@10", "nDCG@10")


def documents_table(r: Result) -> Lines:
    """Recall@10 and nDCG@10 of each system, then the search's latency."""
    rows = [
        [name, *(ratio(r["systems"][key].get(c), 3) for c in DOCUMENT_COLUMNS)]
        for key, name in DOCUMENT_SYSTEMS
        if key in r["systems"]
    ]
    out = table(["system", *DOCUMENT_COLUMNS], rows, [False, *([True] * len(DOCUMENT_COLUMNS))])
    latency = r.get("search_latency", {})
    out += [
        "",
        f"{r['claims']} claims over {r['abstracts']:,} abstracts, embedder {r['embedder']}; "
        f"a search took {ms(latency.get('p50_ms'))} / {ms(latency.get('p95_ms'))} ms p50 / p95.",
    ]
    return out


def scaled_documents_table(r: Result) -> Lines:
    """The same claims among many chunks (``bench.documents --chunks``), the baselines
    ranking the same chunks."""
    rows = [
        [name, *(ratio(r["systems"][key].get(c), 3) for c in DOCUMENT_COLUMNS)]
        for key, name in DOCUMENT_SYSTEMS
        if key in r["systems"]
    ]
    out = table(["system", *DOCUMENT_COLUMNS], rows, [False, *([True] * len(DOCUMENT_COLUMNS))])
    latency = r.get("search_latency", {})
    out += [
        "",
        f"{r['claims']} claims among {r['chunks']:,} chunks ({r['abstracts']:,} abstracts and "
        f"generated documents; every system ranks every chunk, folded to its document), "
        f"embedder {r['embedder']}; a search took "
        f"{ms(latency.get('p50_ms'))} / {ms(latency.get('p95_ms'))} ms p50 / p95.",
    ]
    return out
