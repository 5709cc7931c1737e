"""Names in a question (``timestone.search._question.names_in``): the episodes scope ranks its
vector list by the question without them (decision 018); facts and entities keep the
whole question."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import timestone
from timestone.db._database import Database
from timestone.embedders import HashEmbedder
from timestone.search._question import names_in, without_names
from timestone.search._request import prepare_search
from timestone.search._run import search_hits

T0 = datetime(2023, 5, 8, tzinfo=UTC)


class _Recording(HashEmbedder):
    """A hash embedder that keeps every text it is asked to embed."""

    def __init__(self) -> None:
        super().__init__(16)
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return super().embed(texts)

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return await super().aembed(texts)


def test_the_names_a_question_writes() -> None:
    assert names_in("When did Caroline go to the LGBTQ support group?") == ["Caroline", "LGBTQ"]
    assert names_in("What did Melanie's kids paint? Did Caroline see it?") == [
        "Melanie",
        "Caroline",
    ]
    assert names_in("Caroline said what?") == []  # a sentence's first word is no name
    assert names_in("what did they do? I wonder") == []  # "I" is no name
    assert without_names("When did Caroline go to the LGBTQ support group?") == (
        "When did   go to the   support group?"
    )
    assert without_names("What is Caroline's identity?") == "What is   identity?"
    assert without_names("what did they do?") is None  # no name: the question as it is
    assert without_names("And Caroline?") is not None
    assert without_names("Caroline? Melanie?") is None  # nothing but names


def test_the_episodes_vector_leaves_the_names_out(fresh_dsn: str, group: str) -> None:
    """The episodes statement is sent the vector of the question without its names;
    a search of facts only embeds the whole question, and a question that names no one
    is embedded once."""
    embedder = _Recording()
    with timestone.Memory.open(fresh_dsn, embedder=embedder) as memory:
        memory.add_document(group, "t1", "Caroline: I went to a support group.", reference_time=T0)
        question = "When did Caroline go to the support group?"
        embedder.texts.clear()
        found = memory.search(group, question, scopes=("episodes",), valid_at=None)
        assert embedder.texts == [question, "When did   go to the support group?"]
        assert [e.document_uri for e in found.episodes] == ["t1"]
        # ranked by the vector of the question without the name, to the bit
        db = memory._db  # pyright: ignore[reportPrivateUsage]
        (named,) = _distances(memory, db, group, question)
        (unnamed,) = _distances(memory, db, group, "When did   go to the support group?")
        (whole,) = _distances(memory, db, group, question, scopes=("facts", "episodes"))
        assert named == unnamed == whole
        embedder.texts.clear()
        memory.search(group, question, scopes=("facts", "entities"), valid_at=None)
        assert embedder.texts == [question]
        embedder.texts.clear()
        memory.search(group, "what did they do?", scopes=("episodes",), valid_at=None)
        assert embedder.texts == ["what did they do?"]


def _distances(
    memory: timestone.Memory,
    db: Database,
    group: str,
    question: str,
    scopes: tuple[str, ...] = ("episodes",),
) -> list[float]:
    """The vector distance of each episode hit, as the episodes statement computed it."""
    req = prepare_search(question, scopes=scopes, valid_at=None)
    rows = search_hits(db, memory.embedder, group, req)["episodes"].rows.values()
    return [float(r["distance"]) for r in rows]


def test_only_the_names_the_group_knows_leave_the_vector(fresh_dsn: str, group: str) -> None:
    """A word written with a capital is a name only if the group knows it: a speaker
    ("Caroline: ..."), or the name of one of its entities. "LGBTQ", "UK", "PrP" and
    "BRCA1" are terms of what is asked, and stay in the question's vector."""
    embedder = _Recording()
    with timestone.Memory.open(fresh_dsn, embedder=embedder) as memory:
        memory.add_document(
            group, "t1", "Caroline: I went to a LGBTQ support group.", reference_time=T0
        )
        memory.add_document(
            group,
            "a1",
            "Abnormal PrP was found in the UK samples.",
            title="Prion survey",
            reference_time=T0,
        )
        memory.add_facts(
            group,
            [timestone.FactInput("Ada Lovelace", "STUDIES", "Gene expression")],
            reference_time=T0,
        )

        def embedded(question: str) -> list[str]:
            embedder.texts.clear()
            memory.search(group, question, scopes=("episodes",), valid_at=None)
            return list(embedder.texts)

        question = "When did Caroline go to the LGBTQ support group?"
        assert embedded(question) == [question, "When did   go to the LGBTQ support group?"]
        claim = "1 in 5 million in UK have abnormal PrP positivity."
        assert embedded(claim) == [claim]  # no name the group knows: embedded once
        question = "What did Lovelace find about BRCA1?"
        assert embedded(question) == [question, "What did   find about BRCA1?"]


def test_the_names_another_group_knows_are_not_known_here(fresh_dsn: str, group: str) -> None:
    """The lookup reads the asking group's speakers and entities only: a speaker and an
    entity of another group leave the question whole. A name with a hyphen is matched
    as written ("Jean-Luc:" starts a line)."""
    embedder = _Recording()
    other = group + "-b"
    with timestone.Memory.open(fresh_dsn, embedder=embedder) as memory:
        memory.add_document(other, "m1", "Melanie: I painted a lake.", reference_time=T0)
        memory.add_facts(
            other, [timestone.FactInput("Grace Hopper", "WROTE", "Compiler")], reference_time=T0
        )
        memory.add_document(
            group, "t1", "Jean-Luc: Melanie painted. Hopper too.", reference_time=T0
        )

        def embedded(g: str, question: str) -> list[str]:
            embedder.texts.clear()
            memory.search(g, question, scopes=("episodes",), valid_at=None)
            return list(embedder.texts)

        question = "What did Melanie and Hopper paint?"
        assert embedded(group, question) == [question]
        assert embedded(other, question) == [question, "What did   and   paint?"]
        question = "What did Jean-Luc say?"
        assert embedded(group, question) == [question, "What did   say?"]
        assert embedded(other, question) == [question]
