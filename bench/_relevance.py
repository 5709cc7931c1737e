"""The baselines and measures the relevance benchmarks share: Okapi BM25 computed in
Python, exact cosine over an embedder's vectors, reciprocal rank fusion, recall and
nDCG."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from timestone.embedders import Embedder

BM25_K1, BM25_B = 1.2, 0.75
RRF_K = 60

# common English stop words (the classic list of information retrieval tool kits)
_STOP_WORDS = """a about above after again against all am an and any are aren't as at be because
    been before being below between both but by can can't cannot could couldn't did didn't
    do does doesn't doing don't down during each few for from further had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
    mustn't my myself no nor not of off on once only or other ought our ours ourselves out
    over own same shan't she she'd she'll she's should shouldn't so some such than that
    that's the their theirs them themselves then there there's these they they'd they'll
    they're they've this those through to too under until up very was wasn't we we'd we'll
    we're we've were weren't what what's when when's where where's which while who who's
    whom why why's with won't would wouldn't you you'd you'll you're you've your yours
    yourself yourselves s t d ll m re ve"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOP_WORDS]


class BM25:
    """Okapi BM25 over a fixed list of documents (k1 1.2, b 0.75): a word counts as
    often as it occurs, a document's length is its number of tokens."""

    def __init__(self, docs: Sequence[str]) -> None:
        self.docs = [Counter(tokens(d)) for d in docs]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.avgdl = sum(self.lengths) / max(1, len(self.docs))
        df: Counter[str] = Counter()
        postings: dict[str, list[int]] = {}
        for i, c in enumerate(self.docs):
            df.update(c.keys())
            for t in c:
                postings.setdefault(t, []).append(i)
        self.postings = postings
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def ranking(self, query: str) -> list[int]:
        """The documents holding a word of ``query``, best first (ties by position)."""
        scores: dict[int, float] = {}
        for t in set(tokens(query)):
            for i in self.postings.get(t, ()):
                tf = self.docs[i][t]
                norm = BM25_K1 * (1 - BM25_B + BM25_B * self.lengths[i] / self.avgdl)
                scores[i] = scores.get(i, 0.0) + self.idf[t] * tf * (BM25_K1 + 1) / (tf + norm)
        return sorted((i for i, s in scores.items() if s > 0), key=lambda i: (-scores[i], i))


class Dense:
    """Exact cosine over an embedder's vectors of a fixed list of documents."""

    def __init__(self, embedder: Embedder, docs: Sequence[str], batch: int = 256) -> None:
        self.embedder = embedder
        rows: list[list[float]] = []
        for start in range(0, len(docs), batch):
            rows.extend(embedder.embed(list(docs[start : start + batch])))
        matrix = np.asarray(rows, dtype=np.float64)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        self.matrix = matrix

    def ranking(self, query: str) -> list[int]:
        vector = np.asarray(self.embedder.embed([query])[0], dtype=np.float64)
        vector /= max(float(np.linalg.norm(vector)), 1e-12)
        return [int(i) for i in np.argsort(-(self.matrix @ vector), kind="stable")]


def rrf(lists: Iterable[Sequence[int]], k: int = RRF_K) -> list[int]:
    score: dict[int, float] = {}
    for ranked in lists:
        for r, i in enumerate(ranked, start=1):
            score[i] = score.get(i, 0.0) + 1.0 / (k + r)
    return sorted(score, key=lambda i: (-score[i], i))


def recall(found: Sequence[str], relevant: Iterable[str], k: int) -> float:
    wanted = set(relevant)
    return len(wanted & set(found[:k])) / len(wanted)


def ndcg(found: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """nDCG@k with binary relevance (a relevant document found at rank r adds
    1 / log2(r + 1), divided by the same sum over an ideal ranking)."""
    wanted = set(relevant)
    gain = sum(1.0 / math.log2(r + 1) for r, d in enumerate(found[:k], start=1) if d in wanted)
    ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(k, len(wanted)) + 1))
    return gain / ideal if ideal else 0.0


def distinct(uris: Iterable[str | None]) -> list[str]:
    """Uris in order of first appearance (chunks folded to their document)."""
    seen: dict[str, None] = {}
    for uri in uris:
        if uri is not None and uri not in seen:
            seen[uri] = None
    return list(seen)
