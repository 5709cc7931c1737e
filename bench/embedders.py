"""Embedders on documents: WordLlama against a contextual model, late against naive chunking.

    .venv/bin/python -m bench.embedders                       # 150 claims over 600 abstracts
    .venv/bin/python -m bench.embedders --queries 505 --docs 5183   # everything (hours on ONNX)

The data: SciFact's training claims over its abstracts, read from
``../shared/data/documents-dev.json`` relative to the project root (``--data``
overrides it) and never copied into the project (its licence is non-commercial); the
benchmark stops with a message when the file is missing.

A transformer encodes a few hundred tokens a second on a loaded CPU, so by default the
corpus is a subset chosen without looking at any result: the first ``--queries`` claims
in file order, every abstract relevant to one of them, and abstracts drawn at random
(seed 0) from the rest up to ``--docs``.

The protocol is the documents benchmark's: each abstract is stored with
``add_document(group, uri=id, content=abstract, title=title)`` (chunks of at most 1,500
characters); each claim is asked through ``search(group, claim, scopes=("episodes",),
valid_at=None, limit=20)``; chunks are folded to their document, the list cut at 10;
recall@10 and nDCG@10 (binary relevance) are averaged over the claims. Beside
Timestone's search (dense and full text fused), in the same run: dense alone (exact
cosine over the very vectors stored, folded the same way), Okapi BM25 over the chunks
(k1 1.2, b 0.75) and reciprocal rank fusion (k = 60) of BM25 and dense.

The configurations: WordLlama (the default), and the ONNX model (``--onnx``, default the
packaged all-MiniLM-L6-v2) with naive chunking (each chunk embedded alone) and with late
chunking (each abstract embedded once, each chunk's vector pooled from its tokens). The
ONNX model runs once per abstract: a one-chunk abstract's naive vector is the pooled
vector of that same pass (the chunk is the whole abstract), and only the chunks of the
longer abstracts go through the model again. Encode time per 1,000 chunks is the model's
time alone; search p50 is end to end. The figures are printed, and written as JSON to
``--out`` when given (a subset's figures are not the documents benchmark's result).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

import timestone
from timestone.embedders import OnnxEmbedder, WordLlamaEmbedder, embed_rows
from timestone.write._chunks import Chunk, chunk_text

from ._common import machine, percentiles, scratch_data_dir
from .conversations import BM25, rrf

if TYPE_CHECKING:
    import numpy.typing as npt

    Rows = npt.NDArray[np.float32]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "documents-dev.json"
GROUP = "scifact"
WHEN = datetime(2024, 1, 1, tzinfo=UTC)
CUT = 10
BATCH = 16  # abstracts through the model at once


@dataclass
class Corpus:
    ids: list[str]
    titles: list[str]
    texts: list[str]
    chunks: list[list[Chunk]]
    queries: list[tuple[str, set[str]]]


@dataclass
class Vectors:
    """One configuration's chunk vectors, by document, and what they cost."""

    name: str
    model: Any
    late: bool
    by_doc: list[Rows]
    encode_s: float
    size_mb: float


def load_corpus(path: Path, queries: int, docs: int) -> Corpus:
    data: dict[str, Any] = json.loads(path.read_text())
    corpus: list[dict[str, str]] = data["corpus"]
    asked = [(str(q["text"]), {str(r) for r in q["relevant"]}) for q in data["queries"]][:queries]
    wanted: set[str] = set[str]().union(*(rel for _, rel in asked))
    rest = [d for d in corpus if d["id"] not in wanted]
    random.Random(0).shuffle(rest)
    chosen = [d for d in corpus if d["id"] in wanted] + rest[: max(0, docs - len(wanted))]
    texts = [d["text"] for d in chosen]
    return Corpus(
        ids=[d["id"] for d in chosen],
        titles=[d["title"] for d in chosen],
        texts=texts,
        chunks=[chunk_text(t, max_chars=1500) for t in texts],
        queries=asked,
    )


def _normalised(rows: Rows) -> Rows:
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def onnx_vectors(model: OnnxEmbedder, corpus: Corpus, log: Callable[[str], None]) -> list[Vectors]:
    """Naive and late chunk vectors from one pass of the model per abstract."""
    late: list[Rows] = []
    naive: list[Rows | None] = []
    spent = {"single": 0.0, "multi": 0.0, "naive": 0.0}
    tokenizer: Any = model._model.tokenizer  # pyright: ignore[reportPrivateUsage]
    for start in range(0, len(corpus.texts), BATCH):
        texts = corpus.texts[start : start + BATCH]
        encodings: list[Any] = tokenizer.encode_batch(texts, add_special_tokens=False)
        began = time.perf_counter()
        passes = model._token_vectors([e.ids for e in encodings])  # pyright: ignore[reportPrivateUsage]
        took = time.perf_counter() - began
        for i, (text, enc, (content, specials)) in enumerate(
            zip(texts, encodings, passes, strict=True)
        ):
            chunks = corpus.chunks[start + i]
            offsets = np.array(enc.offsets, dtype=np.int64).reshape(-1, 2)
            rows = [
                content[(offsets[:, 0] >= c.start) & (offsets[:, 1] <= c.end)].mean(axis=0)
                for c in chunks
            ]
            late.append(_normalised(np.stack(rows).astype(np.float32)))
            single = len(chunks) == 1 and chunks[0].text == text.strip()
            share = took * len(content) / max(1, sum(len(p[0]) for p in passes))
            spent["single" if single else "multi"] += share
            if single:
                whole = (content.sum(axis=0) + specials.sum(axis=0)) / (len(content) + 2)
                naive.append(_normalised(whole[None, :].astype(np.float32)))
            else:
                naive.append(None)
        log(f"onnx: {start + len(texts)} of {len(corpus.texts)} abstracts")
    for d, rows in enumerate(naive):
        if rows is None:
            began = time.perf_counter()
            naive[d] = model.embed_array([c.text for c in corpus.chunks[d]])
            spent["naive"] += time.perf_counter() - began
    size = _model_mb(model)
    return [
        Vectors(
            "onnx naive",
            model,
            False,
            cast(list["Rows"], naive),
            spent["single"] + spent["naive"],
            size,
        ),
        Vectors("onnx late", model, True, late, spent["single"] + spent["multi"], size),
    ]


def _model_mb(model: OnnxEmbedder) -> float:
    from timestone._onnx import _packaged_files  # pyright: ignore[reportPrivateUsage]

    if model.name == "onnx/all-MiniLM-L6-v2-int8":
        onnx_file, tokenizer = _packaged_files()
        return (onnx_file.stat().st_size + tokenizer.stat().st_size) / 1e6
    return float("nan")


def wordllama_vectors(corpus: Corpus) -> Vectors:
    model = WordLlamaEmbedder()
    model.warm()
    began = time.perf_counter()
    rows = embed_rows(model, [c.text for chunks in corpus.chunks for c in chunks])
    took = time.perf_counter() - began
    by_doc: list[Rows] = []
    at = 0
    for chunks in corpus.chunks:
        by_doc.append(rows[at : at + len(chunks)])
        at += len(chunks)
    import wordllama

    weights = sum(
        p.stat().st_size
        for p in Path(wordllama.__file__).parent.rglob("*")
        if p.suffix == ".safetensors" and "l2_supercat_256" in p.name
    )
    return Vectors("wordllama", model, False, by_doc, took, weights / 1e6)


class Stored:
    """The configuration's model, answering the chunks and documents from ``Vectors``
    (computed once above) and anything else (the claims) through the model."""

    in_process = False

    def __init__(self, vectors: Vectors, corpus: Corpus) -> None:
        self.vectors, self.late_chunking = vectors, vectors.late
        self._texts: dict[str, Rows] = {}
        self._docs: dict[str, Rows] = {}
        for text, chunks, rows in zip(corpus.texts, corpus.chunks, vectors.by_doc, strict=True):
            self._docs[text] = rows
            for c, row in zip(chunks, rows, strict=True):
                self._texts.setdefault(c.text, row)

    @property
    def name(self) -> str:
        return str(self.vectors.model.name)

    @property
    def dimension(self) -> int:
        return int(self.vectors.model.dimension)

    def embed_array(self, texts: Sequence[str]) -> Rows:
        missing = [t for t in texts if t not in self._texts]
        if missing:
            for t, row in zip(missing, embed_rows(self.vectors.model, missing), strict=True):
                self._texts[t] = row
        return np.stack([self._texts[t] for t in texts]).astype(np.float32)

    def embed_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> Rows:
        return self._docs[text]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return cast(list[list[float]], self.embed_array(texts).tolist())

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)


def scores(found: Sequence[str], relevant: set[str]) -> tuple[float, float]:
    top = list(dict.fromkeys(found))[:CUT]
    hits = [1.0 if d in relevant else 0.0 for d in top]
    dcg = sum(h / math.log2(r + 2) for r, h in enumerate(hits))
    ideal = sum(1.0 / math.log2(r + 2) for r in range(min(len(relevant), CUT)))
    return sum(hits) / len(relevant), dcg / ideal


class Tally:
    def __init__(self) -> None:
        self.recall: list[float] = []
        self.ndcg: list[float] = []

    def add(self, found: Sequence[str], relevant: set[str]) -> None:
        r, n = scores(found, relevant)
        self.recall.append(r)
        self.ndcg.append(n)

    def summary(self) -> dict[str, float]:
        return {
            "R@10": round(sum(self.recall) / len(self.recall), 3),
            "nDCG@10": round(sum(self.ndcg) / len(self.ndcg), 3),
        }


def measure(vectors: Vectors, corpus: Corpus, log: Callable[[str], None]) -> dict[str, Any]:
    owner = [d for d, chunks in enumerate(corpus.chunks) for _ in chunks]
    matrix = _normalised(np.concatenate(vectors.by_doc)).astype(np.float64)
    bm25 = BM25([c.text for chunks in corpus.chunks for c in chunks])
    stored = Stored(vectors, corpus)
    systems = {k: Tally() for k in ("timestone", "dense", "bm25", "rrf")}
    took: list[float] = []
    with (
        scratch_data_dir() as tmp,
        timestone.Memory.open(data_dir=tmp, llm=None, embedder=stored) as mem,
    ):
        began = time.perf_counter()
        for uri, title, text in zip(corpus.ids, corpus.titles, corpus.texts, strict=True):
            mem.add_document(GROUP, uri, text, title=title, reference_time=WHEN)
        log(f"{vectors.name}: stored in {time.perf_counter() - began:.0f} s")
        for claim, relevant in corpus.queries:
            query = stored.embed_array([claim])[0].astype(np.float64)
            dense = [int(i) for i in np.argsort(-(matrix @ query), kind="stable")[:50]]
            lexical = bm25.ranking(claim)[:50]
            for key, ranked in (
                ("dense", dense),
                ("bm25", lexical),
                ("rrf", rrf([lexical, dense])),
            ):
                systems[key].add([corpus.ids[owner[i]] for i in ranked], relevant)
            start = time.perf_counter()
            res = mem.search(GROUP, claim, scopes=("episodes",), valid_at=None, limit=20)
            took.append((time.perf_counter() - start) * 1000)
            systems["timestone"].add([e.document_uri or "" for e in res.episodes], relevant)
    chunks = sum(len(c) for c in corpus.chunks)
    return {
        "embedder": vectors.name,
        "systems": {k: t.summary() for k, t in systems.items()},
        "encode_s_per_1k_chunks": round(vectors.encode_s / chunks * 1000, 2),
        "model_mb": round(vectors.size_mb, 1),
        "search_latency": percentiles(took),
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        "| embedder | Timestone R@10 | nDCG@10 | dense R@10 | nDCG@10 | BM25 R@10 | nDCG@10 |"
        " RRF R@10 | nDCG@10 | encode s / 1k chunks | model MB | search p50 ms |",
        "|---" * 12 + "|",
    ]
    for run in result["runs"]:
        s = run["systems"]
        cells = [
            f"{s[k]['R@10']:.3f} | {s[k]['nDCG@10']:.3f}"
            for k in ("timestone", "dense", "bm25", "rrf")
        ]
        lines.append(
            f"| {run['embedder']} | "
            + " | ".join(cells)
            + f" | {run['encode_s_per_1k_chunks']:.2f} | {run['model_mb']:.1f}"
            + f" | {run['search_latency']['p50_ms']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the documents file")
    parser.add_argument("--queries", type=int, default=150, help="the first N claims")
    parser.add_argument("--docs", type=int, default=600, help="abstracts in the corpus")
    parser.add_argument("--onnx", default="all-MiniLM-L6-v2-int8", help="the ONNX model")
    parser.add_argument("--max-tokens", type=int, default=256, help="the ONNX model's window")
    parser.add_argument("--out", type=Path, help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    path: Path = args.data
    if not path.is_file():
        raise SystemExit(
            f"{path} not found: this benchmark reads the SciFact claims and abstracts from there"
            " (never copied into the project); pass --data PATH to another copy"
        )

    def log(line: str) -> None:
        print(line, flush=True)

    corpus = load_corpus(path, args.queries, args.docs)
    chunks = sum(len(c) for c in corpus.chunks)
    log(f"{len(corpus.queries)} claims over {len(corpus.texts)} abstracts ({chunks} chunks)")
    configurations = [wordllama_vectors(corpus)]
    configurations += onnx_vectors(OnnxEmbedder(args.onnx, max_tokens=args.max_tokens), corpus, log)
    runs: list[dict[str, Any]] = []
    for vectors in configurations:
        runs.append(measure(vectors, corpus, log))
        log(json.dumps(runs[-1]))
    result: dict[str, Any] = {
        "data": path.name,
        "claims": len(corpus.queries),
        "abstracts": len(corpus.texts),
        "chunks": chunks,
        "runs": runs,
    }
    print(table(result))
    if args.out is not None:
        args.out.write_text(json.dumps({"machine": machine(), **result}, indent=2) + "\n")
        print(f"written to {args.out}")


if __name__ == "__main__":
    main()
