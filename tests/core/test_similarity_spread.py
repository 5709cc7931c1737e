"""The episodes statement reads the similarity list by its spread among the candidates
(``timestone.search._episodes_sql``): a list whose scores all sit near its best, as the
cosines of static word vectors do, adds what separates its candidates, not a near
constant that leaves the text list alone in charge."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

import timestone
from timestone.db._database import Database
from timestone.embedders import HashEmbedder
from timestone.search._request import prepare_search
from timestone.search._run import search_hits

QUESTION = "reactor pump"
T0 = datetime(2024, 3, 1, tzinfo=UTC)


class _Spread(HashEmbedder):
    """Vectors chosen by hand: the question on the first axis, every episode at a cosine of
    0.90 to it, the inspection at 0.95."""

    def __init__(self) -> None:
        super().__init__(3)

    def _one(self, text: str) -> list[float]:
        if text == QUESTION:
            return [1.0, 0.0, 0.0]
        cosine = 0.95 if "inspection" in text else 0.90
        return [cosine, math.sqrt(1 - cosine * cosine), 0.0]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]


def test_the_similarity_counts_by_its_spread(fresh_dsn: str, group: str) -> None:
    """The failure names both words of the question, the inspection one: the text list puts
    the failure first, not by much ("pump" is in every log). The similarity list puts the
    inspection first, by 0.05 in cosine, which is the whole of its spread here. Divided by
    its best only, that spread would count 0.35 x 0.05 / 0.95 and the failure would lead;
    read from the least to the best candidate, it counts whole."""
    with timestone.Memory.open(fresh_dsn, embedder=_Spread()) as memory:
        memory.add_document(
            group, "failure", "The reactor pump failed", title="Failure", reference_time=T0
        )
        memory.add_document(
            group, "inspection", "The reactor inspection ran", title="Check", reference_time=T0
        )
        for n in range(10):
            memory.add_document(
                group, f"log-{n}", f"Pump log number {n}", title=f"Log {n}", reference_time=T0
            )
        found = memory.search(group, QUESTION, scopes=("episodes",), valid_at=None, limit=5)
        ranked = [e.document_uri for e in found.episodes]
        assert ranked[:2] == ["inspection", "failure"]
        # the premise: the text list alone ranks the failure first
        db: Database = memory._db  # pyright: ignore[reportPrivateUsage]
        req = prepare_search(QUESTION, scopes=("episodes",), valid_at=None, limit=5)
        rows = search_hits(db, memory.embedder, group, req)["episodes"].rows.values()
        text_ranks = {str(r["document_uri"]): r["fts_rank"] for r in rows}
        assert text_ranks["failure"] == 1
        assert text_ranks["inspection"] == 2
