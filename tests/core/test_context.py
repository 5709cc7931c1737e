from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

import timestone
from timestone import FactInput as F
from timestone._arrays import register_arrays
from timestone._tokenizing import SERIAL_TOKENIZE_CHARS
from timestone.errors import InvalidInput
from timestone.search import _context as sync_context
from timestone.search._context_async import MAX_EPISODE_CHARS, edge_order
from timestone.search._ranked_lists_sql import EXACT_BELOW, search_params
from timestone.search._request import SearchRequest, prepare_search
from timestone.search._run import _settings_of, search, search_hits  # pyright: ignore[reportPrivateUsage]
from timestone.search._sql import statement
from timestone.search._tokens import default_counter

T2015 = datetime(2015, 1, 1, tzinfo=UTC)


def test_edge_order_puts_the_strongest_at_both_ends() -> None:
    assert edge_order([1, 2, 3, 4, 5]) == [1, 3, 5, 4, 2]
    assert edge_order([]) == []


def test_the_tokenizer_is_real_and_offline() -> None:
    counter = default_counter()
    assert counter.count("") == 0
    assert counter.count("hello") == 1
    assert counter.count("Mira directs Château Sud since 2023.") > 6
    assert counter.count_many(["a b", "hello world"]) == [2, 2]


def test_many_texts_are_counted_as_each_alone_few_or_many() -> None:
    """A few short texts are tokenized one by one, more go to the tokenizer's batch call
    (``_tokenizing.encode_all``): either way each count is the text's own."""
    counter = default_counter()
    texts = [f"Mira met Ådne at the café on day {i}; they talked of Łódź." for i in range(200)]
    few = texts[:5]
    assert sum(map(len, few)) < SERIAL_TOKENIZE_CHARS <= sum(map(len, texts))
    assert counter.count_many(few) == [counter.count(t) for t in few]
    assert counter.count_many(texts) == [counter.count(t) for t in texts]


def test_fan_out_relevant_low_degree_fact_reaches_the_context(
    memory: timestone.Memory, group: str
) -> None:
    """A busy entity with 500 neighbours: the one fact that answers the question is
    ranked by relevance, not drowned by degree or a stored weight."""
    for start in range(0, 500, 250):
        memory.add_facts(
            group,
            [
                F(f"Employee {i}", "WORKS_AT", "Acme", fact=f"Employee {i} works at Acme.")
                for i in range(start, start + 250)
            ],
            reference_time=T2015,
        )
    memory.add_facts(
        group,
        [F("Acme", "FOUNDED_BY", "Grace Hopper", fact="Acme was founded by Grace Hopper.")],
        reference_time=T2015,
    )
    ctx = memory.context(group, "Who founded Acme?", token_budget=300)
    texts = [item.text for item in ctx.items]
    assert "Acme was founded by Grace Hopper." in texts
    assert ctx.items[0].text == "Acme was founded by Grace Hopper."  # strongest first
    assert default_counter().count(ctx.as_prompt()) <= 300
    assert ctx.tokens == default_counter().count(ctx.as_prompt())


def test_the_edge_a_question_follows_reaches_the_fact_one_hop_out(
    memory: timestone.Memory, group: str, heron_facts: Callable[[int], list[F]]
) -> None:
    """The answer is a neighbour's fact, reached through the one edge of the named
    entity the question is about, among 60 others whose neighbours have facts of
    their own: the walk follows the named entity's most relevant edges."""
    memory.add_facts(group, heron_facts(60), reference_time=T2015)
    ctx = memory.context(group, "May Project Heron ship lithium batteries?", token_budget=300)
    texts = [item.text for item in ctx.items]
    assert "Project Heron ships all of its freight through Ada Logistics." in texts
    assert "Ada Logistics may no longer carry lithium batteries after the 2024 audit." in texts


def test_context_items_cite_facts_and_documents_with_dates(
    memory: timestone.Memory, group: str
) -> None:
    memory.add_facts(
        group,
        [
            F("Mira", "DIRECTS", "Château Nord", invalid_at=datetime(2023, 1, 1, tzinfo=UTC)),
            F("Mira", "DIRECTS", "Château Sud", valid_at=datetime(2023, 1, 1, tzinfo=UTC)),
        ],
        reference_time=T2015,
    )
    doc = memory.add_document(
        group,
        "file:///cellar.md",
        "Intro.\n\nChâteau Sud keeps its Cabernet Franc in oak for two winters.",
        reference_time=T2015,
        max_chunk_chars=200,
    )
    ctx = memory.context(group, "What does Mira direct and how is Château Sud's wine aged?")
    by_kind = {item.kind for item in ctx.items}
    assert by_kind == {"fact", "episode"}
    fact = next(i for i in ctx.items if i.text == "Mira directs Château Sud.")
    assert fact.citation == "F-" + str(fact.fact_id).replace("-", "")[-10:]  # its random end
    assert fact.valid_at == datetime(2023, 1, 1, tzinfo=UTC)
    assert all(i.text != "Mira directs Château Nord." for i in ctx.items)  # not valid now
    chunk = next(i for i in ctx.items if i.kind == "episode")
    assert chunk.document_uri == "file:///cellar.md"
    assert chunk.episode_ids[0] in {e.id for e in doc.episodes}
    assert chunk.char_start is not None
    assert chunk.char_end is not None
    prompt = ctx.as_prompt()
    assert f"[{fact.citation}] (2023-01-01 to present) Mira directs Château Sud." in prompt
    assert "(source: file:///cellar.md, chars" in prompt
    assert ctx.cite(fact.citation) == fact
    again = memory.context(group, "Who does Mira work for?")
    assert fact.citation in {i.citation for i in again.items}  # stable across calls
    history = memory.context(group, "What did Mira direct?", valid_at=None)
    assert "(2015-01-01 to 2023-01-01) Mira directs Château Nord." in history.as_prompt()


def test_near_duplicates_are_dropped(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(
        group,
        [
            F("Ada", "LIKES", "Tea", fact="Ada likes tea."),
            F("Ada", "ENJOYS", "Tea", fact="Ada likes tea."),
            F("Ada", "DRINKS", "Coffee", fact="Ada drinks coffee in the morning."),
        ],
        reference_time=T2015,
    )
    ctx = memory.context(group, "What does Ada like to drink?")
    texts = [i.text for i in ctx.items]
    assert texts.count("Ada likes tea.") == 1
    assert "Ada drinks coffee in the morning." in texts


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"query": ""}, "empty"),
        ({"query": "x" * 100_000}, "characters"),
        ({"token_budget": 0}, "token_budget"),
        ({"token_budget": 10_000_000}, "token_budget"),
        ({"valid_at": datetime(2020, 1, 1)}, "naive"),
    ],
)
def test_context_bad_input(
    memory: timestone.Memory, group: str, kwargs: dict[str, object], match: str
) -> None:
    args: dict[str, object] = {"query": "Ada"} | kwargs
    query = args.pop("query")
    with pytest.raises(InvalidInput, match=match):
        memory.context(group, query, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", [50, 53])
def test_a_budget_below_the_header_is_refused(
    memory: timestone.Memory, group: str, budget: int
) -> None:
    """With both times the header alone is 54 tokens (the default counter): a budget that
    cannot hold it is refused, naming what it needs, not answered over the budget."""
    memory.add_facts(group, [F("Ada", "WROTE", "Notes")], reference_time=T2015)
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(
        InvalidInput,
        match=rf"token_budget {budget} is less than the context's header takes \(54 tokens,"
        r" with the times it speaks of\); give at least 54",
    ):
        memory.context(group, "Ada", token_budget=budget, valid_at=moment, as_of=moment)
    ctx = memory.context(group, "Ada", token_budget=54, valid_at=moment, as_of=moment)
    assert (ctx.tokens, ctx.items) == (54, [])


async def test_async_context(amemory: timestone.AsyncMemory, group: str) -> None:
    await amemory.add_facts(group, [F("Ada", "WROTE", "Notes")], reference_time=T2015)
    ctx = await amemory.context(group, "What did Ada write?", token_budget=100)
    assert [i.text for i in ctx.items] == ["Ada wrote Notes."]
    assert ctx.as_prompt().startswith("Evidence true at ")


def test_an_episode_is_read_only_as_far_as_the_context_shows_it(
    memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """context() reads an episode's content up to the characters an item shows (and one
    more, to know it was cut): a whole episode can be hundreds of kB (the benchmark
    corpus's are 145 kB). A search reads it whole."""
    asked: list[SearchRequest] = []
    real = search_hits

    def spy(*args: Any) -> Any:
        asked.append(args[3])
        return real(*args)

    monkeypatch.setattr(sync_context, "search_hits", spy)
    sentence = "Château Sud keeps its Cabernet Franc in oak for two winters. "
    text = sentence * 80  # about 4,900 characters, one chunk
    memory.add_document(group, "file:///long.md", text, reference_time=T2015, max_chunk_chars=6000)
    ctx = memory.context(group, "How is Château Sud's Cabernet Franc aged?")
    chunk = next(i for i in ctx.items if i.kind == "episode")
    assert len(chunk.text) == MAX_EPISODE_CHARS
    assert chunk.text.endswith("…")
    assert " ".join(text.split()).startswith(chunk.text[:-1])
    assert [r.content_chars for r in asked] == [MAX_EPISODE_CHARS + 1]
    req = prepare_search("Cabernet Franc", scopes=["episodes"], content_chars=100)
    read = search(memory._db, memory.embedder, group, req)  # pyright: ignore[reportPrivateUsage]
    assert [e.content for e in read.episodes] == [text.strip()[:100]]
    whole = memory.search(group, "Cabernet Franc", scopes=["episodes"])
    assert [e.content for e in whole.episodes] == [text.strip()]
    with pytest.raises(InvalidInput, match="content_chars"):
        prepare_search("Cabernet Franc", content_chars=0)


def test_an_episode_cut_for_the_context_says_so_and_keeps_whole_characters(
    memory: timestone.Memory, group: str
) -> None:
    """A long episode whose first characters hold runs of whitespace (paragraph breaks)
    collapses to fewer than an item shows, but the rest was not read: it ends in "…". A
    cut never parts an emoji's joined parts or a letter from its accent."""
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji of five code points
    paragraph = "Château Sud ages its Cabernet Franc in oak." + " " * 40 + "\n\n"
    text = paragraph * 30 + "The last line says where it is sold."
    memory.add_document(
        group, "file:///spaced.md", text, reference_time=T2015, max_chunk_chars=6000
    )
    joined = "x" * (MAX_EPISODE_CHARS - 3) + family + " and more words after it." * 5
    memory.add_document(
        group, "file:///emoji.md", joined, reference_time=T2015, max_chunk_chars=6000
    )
    ctx = memory.context(group, "How is Château Sud's Cabernet Franc aged?", token_budget=20_000)
    [spaced] = [i for i in ctx.items if i.document_uri == "file:///spaced.md"]
    assert spaced.text.endswith("…")
    assert "sold" not in spaced.text
    ctx = memory.context(group, "xxxx and more words", token_budget=20_000)
    [cut] = [i for i in ctx.items if i.document_uri == "file:///emoji.md"]
    assert cut.text.endswith("…")
    body = cut.text[:-1]
    assert body.endswith(("x", family)), body[-8:]
    assert "\u200d" not in body or family in body


def test_records_of_facts_take_no_place_of_the_episodes_that_tell(
    memory: timestone.Memory, group: str
) -> None:
    """context() searches the episodes that tell something, not the records of
    structured facts (the episode of an ``add_facts`` call): their facts are candidates
    of their own, with dates. Searched with the others and dropped after, more records
    matching the question than the search has candidates (60) pushed the note out."""
    for i in range(64):
        memory.add_facts(
            group,
            [F(f"Mira {i}", "WORKS_AT", "Acme", fact=f"Mira {i} works at Acme in Lyon.")],
            reference_time=T2015,
        )
    note = memory.add_document(
        group,
        "file:///note.md",
        "Mira said the Acme office in Lyon moves to the docks next spring.",
        reference_time=T2015,
    )
    question = "Mira works at Acme in Lyon"
    ctx = memory.context(group, question, token_budget=20_000)  # room for every candidate
    told = [item.episode_ids for item in ctx.items if item.kind == "episode"]
    assert told == [(note.episodes[0].id,)]
    # a search of episodes still returns the records
    found = memory.search(group, question, scopes=["episodes"], limit=100)
    assert sorted(e.source for e in found.episodes) == ["document"] + ["facts"] * 64


def _index_scans(plan: dict[str, Any]) -> Iterator[tuple[str, float]]:
    """Each index scan of a plan run with ANALYZE: its index and the rows it returned."""
    if "Index Name" in plan:
        yield str(plan["Index Name"]), float(plan.get("Actual Rows", 0))
    for child in plan.get("Plans", ()):
        yield from _index_scans(child)


def test_a_group_of_many_told_episodes_is_searched_through_their_own_index(
    fresh_dsn: str,
) -> None:
    """Past ``EXACT_BELOW`` told episodes, the context's episodes are read from the HNSW
    index of told episodes: the index of every episode, filtered, would walk past all
    the records of facts of a group that holds many."""
    group = "many-told"
    with timestone.Memory.open(fresh_dsn) as mem:
        lines = [f"Line {i}: the crew of shift {i} logged the weather." for i in range(1100)]
        lines[700] = "The vault code is kept behind the tapestry in the north tower."
        doc = mem.add_document(
            group, "file:///log.md", "\n\n".join(lines), reference_time=T2015, max_chunk_chars=100
        )
        assert len(doc.episodes) > EXACT_BELOW  # ranked exactly below that
        mem.add_facts(group, [F("Vault", "LOCATED_IN", "North tower")], reference_time=T2015)
        question = "Where is the vault code kept?"
        ctx = mem.context(group, question)
        assert "The vault code is kept behind the tapestry in the north tower." in [
            item.text for item in ctx.items
        ]
        req = prepare_search(
            question,
            limit=60,
            scopes=("episodes",),
            candidates=60,
            embeddings=True,
            content_chars=MAX_EPISODE_CHARS + 1,
            fact_records=False,
        )
        vector = np.asarray(mem.embedder.embed([question])[0], dtype=np.float32)
        params = search_params(req, group, vector)
        text, names = statement("episodes", req, mem.embedder.dimension)
    with psycopg.connect(fresh_dsn, autocommit=True) as owner:
        register_vector(owner)
        register_arrays(owner)
        owner.execute("ANALYZE timestone.episodes")
        with owner.transaction():
            owner.execute(_settings_of(req), (group, "60"))
            with psycopg.RawCursor(owner) as cur:
                cur.execute(b"EXPLAIN (ANALYZE, FORMAT JSON) " + text, [params[n] for n in names])
                row = cast(tuple[Any, ...], cur.fetchone())
    scans = dict(_index_scans(row[0][0]["Plan"]))
    assert scans.get("episodes_told_embedding_hnsw") == 60
    assert "episodes_embedding_hnsw" not in scans


def test_a_context_as_of_a_moment_reads_the_told_episodes_held_then(
    memory: timestone.Memory, group: str
) -> None:
    """As of a moment, the episodes held then (a document's chunk replaced since by its
    next version), told ones only: the records of facts stay out there too."""
    memory.add_document(
        group, "file:///cellar.md", "The cellar holds Gamay in oak.", reference_time=T2015
    )
    memory.add_facts(
        group, [F("Cellar", "HOLDS", "Gamay", fact="The cellar holds Gamay.")], reference_time=T2015
    )
    moment = datetime.now(UTC)
    memory.add_document(
        group, "file:///cellar.md", "The cellar holds Syrah in steel.", reference_time=T2015
    )
    question = "What does the cellar hold?"

    def told(ctx: timestone.Context) -> list[str]:
        return [item.text for item in ctx.items if item.kind == "episode"]

    assert told(memory.context(group, question, as_of=moment)) == ["The cellar holds Gamay in oak."]
    assert told(memory.context(group, question)) == ["The cellar holds Syrah in steel."]
