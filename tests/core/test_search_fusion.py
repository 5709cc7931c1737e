from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from timestone._names import normalize
from timestone.search._fusion import RRF_K, Candidate, mmr_order, rerank, rrf_score
from timestone.search._request import name_ngrams, ngrams_with


def test_rrf_adds_reciprocal_ranks() -> None:
    assert rrf_score({"fts_rank": 1, "vec_rank": 3}) == pytest.approx(
        1 / (RRF_K + 1) + 1 / (RRF_K + 3)
    )
    both = Candidate("both", {"fts_rank": 2, "vec_rank": 2})
    one = Candidate("one", {"vec_rank": 1})
    assert [c.key for c in rerank([one, both], "rrf", 2)] == ["both", "one"]


def test_mmr_prefers_diversity_over_a_near_copy() -> None:
    a = Candidate("a", {"vec_rank": 1}, distance=0.10, embedding=[1.0, 0.0])
    a_copy = Candidate("a'", {"vec_rank": 2}, distance=0.11, embedding=[1.0, 0.01])
    other = Candidate("b", {"vec_rank": 3}, distance=0.30, embedding=[0.0, 1.0])
    assert [c.key for c in mmr_order([a, a_copy, other], 2)] == ["a", "b"]


def test_node_distance_and_mentions_orders() -> None:
    near = Candidate("near", {"vec_rank": 9}, hops=0, mentions=1)
    far = Candidate("far", {"vec_rank": 1}, hops=1, mentions=5)
    unreached = Candidate("none", {"fts_rank": 1}, hops=None, mentions=2)
    assert [c.key for c in rerank([far, unreached, near], "node_distance", 3)] == [
        "near",
        "far",
        "none",
    ]
    assert [c.key for c in rerank([far, unreached, near], "episode_mentions", 3)] == [
        "far",
        "none",
        "near",
    ]
    with pytest.raises(ValueError, match="unknown reranker"):
        rerank([near], "bm25", 1)


def test_name_ngrams_find_names_with_punctuation_and_accents() -> None:
    grams = name_ngrams("Where does Mira work? Ask Château Nord, or O'Brien & Co.")
    assert {"mira", "château nord", "o'brien", "o'brien & co"} <= set(grams)
    assert len(name_ngrams("word " * 5000)) <= 2001


_ASCII_WORDS = st.lists(
    st.one_of(
        st.sampled_from(["Mira", "O'Brien", "ACME", "Co.", "(2019)", "--", "é", "4", ""]),
        st.text(st.characters(max_codepoint=127), max_size=8),
    ),
    max_size=12,
).map(" ".join)


@given(_ASCII_WORDS)
@example("  Where does\tIVO  Grau\r4 work\x0bnow?\x0c ")
@example("\x1c\x1d\x1e\x1f")  # separators str.split takes for white space
def test_name_ngrams_of_ascii_are_the_grams_each_normalized(query: str) -> None:
    """The ASCII path lowers the query once instead of normalizing each gram: the same
    list, in the same order, as normalizing each (any non-ASCII text takes that path)."""
    assert name_ngrams(query) == ngrams_with(query, 5, normalize)


def test_a_score_fused_by_the_statement_leads_the_order() -> None:
    """The episodes statement fuses scores, not ranks (``_episodes_sql``): a strong text
    hit that the vector list missed outranks a candidate both lists hold at low ranks,
    which reciprocal rank fusion would put first."""
    strong = Candidate(key="strong", ranks={"fts_rank": 1}, fused=1.2)
    both = Candidate(key="both", ranks={"fts_rank": 30, "vec_rank": 2}, fused=0.4)
    assert rrf_score(both.ranks) > rrf_score(strong.ranks)
    ordered = rerank([both, strong], "rrf", 2)
    assert [c.key for c in ordered] == ["strong", "both"]
    assert [c.score for c in ordered] == [1.2, 0.4]
    # without a fused score, reciprocal rank fusion as before
    plain = rerank(
        [Candidate(key="a", ranks={"fts_rank": 1}), Candidate(key="b", ranks={})], "rrf", 2
    )
    assert plain[0].key == "a"
    assert plain[0].score == rrf_score({"fts_rank": 1})
