"""Fusion and reranking of search candidates: pure functions, no I/O.

Each candidate comes from one or more ranked lists (full text, vector
similarity, graph walk, exact name match). The rerankers order them:

- ``rrf``: reciprocal rank fusion, ``sum(1 / (k + rank))`` over the lists, or the
  score the statement fused when it fused scores (the episodes scope,
  ``timestone.search._episodes_sql``);
- ``mmr``: maximal marginal relevance over the embeddings (relevance to the
  query against similarity to what was already chosen);
- ``node_distance``: fewest hops from the center (or the entities named in
  the query) first, then by fusion;
- ``episode_mentions``: most supporting episodes first, then by fusion.

A cross-encoder (``timestone.rerankers.Reranker``) is applied by the search
module on top of the fused order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:  # imported where vectors are compared: opening a store loads no numpy
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "RERANKERS",
    "RRF_K",
    "Candidate",
    "Embedding",
    "cosine",
    "mmr_order",
    "rerank",
    "rrf_score",
]

RRF_K = 60
# a candidate's embedding: as read from the database, an array of float32
Embedding: TypeAlias = "Sequence[float] | npt.NDArray[np.float32]"
RERANKERS = ("rrf", "mmr", "node_distance", "episode_mentions", "cross_encoder")


@dataclasses.dataclass(slots=True)
class Candidate:
    """One search hit before fusion: its ranks in each list (1-based), and its signals."""

    key: Any
    ranks: Mapping[str, int]
    distance: float | None = None  # cosine distance to the query, 0..2
    hops: int | None = None  # graph distance from the center; None: not reached
    mentions: int = 0
    embedding: Embedding | None = None
    score: float = 0.0
    # the score the statement fused the lists into (the episodes scope fuses scores,
    # not ranks: ``timestone.search._episodes_sql``); None: reciprocal rank fusion of ``ranks``
    fused: float | None = None

    @property
    def similarity(self) -> float:
        return 0.0 if self.distance is None else 1.0 - self.distance


def rrf_score(ranks: Mapping[str, int], k: int = RRF_K) -> float:
    return sum(1.0 / (k + r) for r in ranks.values())


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    import numpy as np

    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb))
    return 0.0 if na == 0 or nb == 0 else float(va @ vb) / (na * nb)


def _unit_rows(vectors: Sequence[Embedding]) -> Any:
    import numpy as np

    m = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


def mmr_order(
    candidates: Sequence[Candidate], limit: int, *, lambda_: float = 0.7
) -> list[Candidate]:
    """Greedy maximal marginal relevance; candidates without an embedding go last."""
    import numpy as np

    pool = [c for c in candidates if c.embedding is not None]
    rest = [c for c in candidates if c.embedding is None]
    if not pool:
        return rest[:limit]
    unit = _unit_rows([c.embedding for c in pool if c.embedding is not None])
    sims = unit @ unit.T
    relevance = np.asarray([c.similarity for c in pool], dtype=np.float64)
    redundancy = np.zeros(len(pool), dtype=np.float64)
    taken = np.zeros(len(pool), dtype=bool)
    chosen: list[Candidate] = []
    while len(chosen) < min(limit, len(pool)):
        values = lambda_ * relevance - (1.0 - lambda_) * redundancy
        values[taken] = -np.inf
        i = int(np.argmax(values))
        taken[i] = True
        pool[i].score = float(values[i])
        chosen.append(pool[i])
        redundancy = np.maximum(redundancy, sims[i])
    return (chosen + rest)[:limit]


def rerank(candidates: Sequence[Candidate], method: str, limit: int) -> list[Candidate]:
    """Order ``candidates`` by ``method`` and keep ``limit``; ``score`` is set on each."""
    for c in candidates:
        c.score = c.fused if c.fused is not None else rrf_score(c.ranks)
    by_rrf = sorted(candidates, key=lambda c: (-c.score, str(c.key)))
    if method in ("rrf", "cross_encoder"):
        return by_rrf[:limit]
    if method == "mmr":
        return mmr_order(by_rrf, limit)
    if method == "node_distance":
        ordered = sorted(
            by_rrf,
            key=lambda c: (c.hops is None, c.hops if c.hops is not None else 0, -c.score),
        )
        for c in ordered:
            c.score = 1.0 / (1 + c.hops) if c.hops is not None else 0.0
        return ordered[:limit]
    if method == "episode_mentions":
        ordered = sorted(by_rrf, key=lambda c: (-c.mentions, -c.score))
        for c in ordered:
            c.score = float(c.mentions)
        return ordered[:limit]
    raise ValueError(f"unknown reranker {method!r}")
