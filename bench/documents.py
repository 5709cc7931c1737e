"""Relevance on a document collection: Timestone's search against BM25 and dense.

    .venv/bin/python -m bench.documents                       # the dev claims
    .venv/bin/python -m bench.documents --data PATH           # another copy of the file
    .venv/bin/python -m bench.documents --keep /tmp/docs      # keep (and reuse) the database
    .venv/bin/python -m bench.documents --embedder hash:64    # another embedder
    .venv/bin/python -m bench.documents --chunks 100000       # among 100k chunks (long)

The data: BEIR's SciFact, its training claims over the full corpus (5,183 scientific
abstracts, 505 claims, each with the ids of the abstracts that hold its evidence). It is
read from ``../shared/data/documents-dev.json`` relative to the project root (``--data``
overrides it) and never copied into the project (its licence is non-commercial); the
benchmark stops with a message when the file is missing.

The protocol: every abstract is stored in one group with ``add_document(group, uri=id,
content=abstract, title=title)``; every claim is asked through ``search(group, claim,
scopes=("episodes",), valid_at=None, limit=20)``, its chunks folded to their document
(the first time a document's uri appears), cut at 10. Recall@10 (the share of the
claim's evidence abstracts among the ten) and nDCG@10 (binary relevance) are averaged
over the claims. Baselines, computed here over the same abstracts (title and text):
Okapi BM25 (k1 1.2, b 0.75, lower-cased alphanumeric tokens, common English stop words
dropped) and exact cosine over the same embedder's vectors. ``--embedder`` takes the
command line's specs (``wordllama[:DIM]``, ``hash[:DIM]``, ``openai:MODEL:DIM``); the
default is the default embedder. Search latency p50/p95 end to end. Written to
``bench/results/documents.json`` (``documents-<embedder>.json`` with ``--embedder``).

``--chunks N``: the same claims among about N chunks. Generated documents are stored
beside the abstracts (inside ``Memory.bulk_load``) until the group holds N chunks: each
is made of sentences drawn, with a fixed seed, from abstracts that are no claim's
evidence, so that the words and their frequencies are the corpus's own and no generated
document holds a claim's evidence. The baselines then rank every chunk the group holds
(its name and text, as the group's text index reads them), folded to their document as
Timestone's are; written to ``documents-<N>-chunks.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import timestone
from timestone.cli._store import embedder_for
from timestone.embedders import Embedder

from ._common import cpu_pace_ms, percentiles, scratch_data_dir, write_result
from ._relevance import BM25, Dense, distinct, ndcg, recall

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "documents-dev.json"
GROUP = "scifact"
K = 10
WRITTEN = datetime(2024, 1, 1, tzinfo=UTC)  # one reference time for every abstract
SYSTEMS = {
    "timestone": "Timestone search",
    "bm25": "Okapi BM25 (k1 1.2, b 0.75)",
    "dense": "dense (exact cosine)",
}


class Scores:
    """Recall@10 and nDCG@10 of one system, per claim."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, float]] = []

    def add(self, found: Sequence[str], relevant: Sequence[str]) -> None:
        self.rows.append((recall(found, relevant, K), ndcg(found, relevant, K)))

    def summary(self) -> dict[str, float]:
        n = max(1, len(self.rows))
        return {
            f"R@{K}": round(sum(r for r, _ in self.rows) / n, 3),
            f"nDCG@{K}": round(sum(g for _, g in self.rows) / n, 3),
        }


def load(
    mem: timestone.Memory, corpus: Sequence[dict[str, Any]], log: Callable[[str], None]
) -> None:
    """Store the abstracts as documents. A kept group with at least one chunk episode per
    abstract is complete; a partial one is completed (the same document again is a no-op)."""
    held = mem.stats(GROUP).get("episodes", {}).get("current", 0)
    if held >= len(corpus):
        return
    started = time.perf_counter()
    for n, doc in enumerate(corpus, start=1):
        mem.add_document(
            GROUP, doc["id"], doc["text"], title=doc["title"] or None, reference_time=WRITTEN
        )
        if n % 1000 == 0:
            log(f"{n} abstracts stored ({time.perf_counter() - started:.0f} s)")


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def grow(
    mem: timestone.Memory,
    corpus: Sequence[dict[str, Any]],
    claims: Sequence[dict[str, Any]],
    chunks: int,
    log: Callable[[str], None],
) -> None:
    """Generated documents until the group holds ``chunks`` chunk episodes (see the
    module's docstring); a kept group is completed, never filled twice."""
    held = mem.stats(GROUP).get("episodes", {}).get("current", 0)
    if held >= chunks:
        return
    evidence = {str(r) for c in claims for r in c.get("relevant", [])}
    sentences = [
        s
        for d in corpus
        if str(d["id"]) not in evidence
        for s in _SENTENCE.split(str(d["text"]))
        if len(s) > 20
    ]
    rng = random.Random(20240101)
    started, n = time.perf_counter(), 0
    with mem.bulk_load():
        while held < chunks:
            n += 1
            text = " ".join(rng.sample(sentences, rng.randint(6, 10)))
            res = mem.add_document(
                GROUP, f"generated-{held}", text, title=f"Generated {held}", reference_time=WRITTEN
            )
            held += len(res.episodes) or 1
            if n % 5000 == 0:
                log(f"{held} chunks held ({time.perf_counter() - started:.0f} s)")
    log(f"{held} chunks held; vector indexes built ({time.perf_counter() - started:.0f} s)")


def baseline_texts(
    mem: timestone.Memory, corpus: Sequence[dict[str, Any]], every_chunk: bool
) -> tuple[list[str], list[str]]:
    """What the baselines rank, with the document each belongs to: the abstracts (title
    and text), or every chunk the group holds (its name and text) when documents were
    generated beside them."""
    if not every_chunk:
        return [d["id"] for d in corpus], [f"{d['title']} {d['text']}" for d in corpus]
    with mem.connection(GROUP) as conn:
        rows = conn.execute(
            "SELECT document_uri, name || ' ' || content AS text FROM timestone.episodes"
            " WHERE expired_at IS NULL ORDER BY document_uri, chunk_index"
        ).fetchall()
    return [str(r["document_uri"]) for r in rows], [str(r["text"]) for r in rows]


def run(
    mem: timestone.Memory,
    data: dict[str, Any],
    log: Callable[[str], None],
    chunks: int | None = None,
) -> dict[str, Any]:
    corpus: list[dict[str, Any]] = data["corpus"]
    claims: list[dict[str, Any]] = [q for q in data["queries"] if q.get("relevant")]
    started = time.perf_counter()
    load(mem, corpus, log)
    log(f"{len(corpus)} abstracts in the group ({time.perf_counter() - started:.0f} s)")
    if chunks is not None:
        grow(mem, corpus, data["queries"], chunks, log)
    ids, texts = baseline_texts(mem, corpus, chunks is not None)
    bm25 = BM25(texts)
    cosine = Dense(mem.embedder, texts)
    systems = {name: Scores() for name in SYSTEMS}
    took: list[float] = []
    pace = [cpu_pace_ms()]
    # the searches are timed in a loop of their own, apart from the baselines' work
    for claim in claims:
        text, relevant = claim["text"], [str(r) for r in claim["relevant"]]
        start = time.perf_counter()
        res = mem.search(GROUP, text, scopes=("episodes",), valid_at=None, limit=20)
        took.append((time.perf_counter() - start) * 1000)
        systems["timestone"].add(distinct(e.document_uri for e in res.episodes)[:K], relevant)
    pace.append(cpu_pace_ms())
    for claim in claims:
        text, relevant = claim["text"], [str(r) for r in claim["relevant"]]
        systems["bm25"].add(distinct(ids[i] for i in bm25.ranking(text))[:K], relevant)
        systems["dense"].add(distinct(ids[i] for i in cosine.ranking(text))[:K], relevant)
    log(f"{len(claims)} claims asked")
    return {
        "abstracts": len(corpus),
        "chunks": mem.stats(GROUP).get("episodes", {}).get("current", 0),
        "claims": len(claims),
        "embedder": mem.embedder.name,
        "systems": {name: s.summary() for name, s in systems.items()},
        "search_latency": percentiles(took),
        "cpu_pace_ms_before_after": pace,
    }


def table(result: dict[str, Any]) -> str:
    cols = [f"R@{K}", f"nDCG@{K}"]
    lines = ["| system | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for key, label in SYSTEMS.items():
        row = result["systems"][key]
        lines.append(f"| {label} | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
    ours, bm25 = result["systems"]["timestone"], result["systems"]["bm25"]
    lat = result["search_latency"]
    lines += [
        "",
        f"Timestone / BM25: R@{K} {ours[cols[0]] / bm25[cols[0]]:.3f}, "
        f"nDCG@{K} {ours[cols[1]] / bm25[cols[1]]:.3f} (embedder {result['embedder']})",
        f"search latency: p50 {lat['p50_ms']:.1f} ms, p95 {lat['p95_ms']:.1f} ms"
        f" (CPU pace {result.get('cpu_pace_ms_before_after')} ms)",
    ]
    return "\n".join(lines)


def result_name(spec: str | None, chunks: int | None = None) -> str:
    name = "documents" if not spec else "documents-" + re.sub(r"[^a-z0-9]+", "-", spec.lower())
    return name if chunks is None else f"{name}-{chunks}-chunks"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=f"the SciFact file (default: {DEFAULT_DATA})",
    )
    parser.add_argument("--keep", type=Path, help="keep the database in this directory (reused)")
    parser.add_argument(
        "--embedder",
        metavar="SPEC",
        help="wordllama[:DIM], hash[:DIM] or openai:MODEL:DIM (default: the default embedder)",
    )
    parser.add_argument("--claims", type=int, help="only the first N claims")
    parser.add_argument(
        "--chunks", type=int, help="among about N chunks: generated documents added (long)"
    )
    args = parser.parse_args(argv)
    if args.chunks is not None and args.chunks < 1:
        parser.error(f"--chunks must be a positive number of chunks, not {args.chunks}")
    path: Path = args.data
    print(f"reading the abstracts and claims from {path}")
    if not path.is_file():
        raise SystemExit(
            f"{path} not found: this benchmark reads SciFact's abstracts and claims from there"
            " (never copied into the project); pass --data PATH to another copy"
        )
    data: dict[str, Any] = json.loads(path.read_text())
    if args.claims is not None:
        data["queries"] = data["queries"][: args.claims]
    embedder: Embedder | None = embedder_for(args.embedder, None) if args.embedder else None

    def log(line: str) -> None:
        print(line, flush=True)

    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        with timestone.Memory.open(data_dir=args.keep, llm=None, embedder=embedder) as mem:
            result = run(mem, data, log, args.chunks)
    else:
        with (
            scratch_data_dir() as tmp,
            timestone.Memory.open(data_dir=tmp, llm=None, embedder=embedder) as mem,
        ):
            result = run(mem, data, log, args.chunks)
    result["data"] = path.name
    out = write_result(result_name(args.embedder, args.chunks), result)
    print(table(result))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
