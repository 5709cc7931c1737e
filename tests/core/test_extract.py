"""LLM ingestion end to end: the real OpenAICompatibleLLM on scripted responses, real Postgres.

Every test serves scripted chat completions (tests/fixtures/llm/*.json, or built with
``chat_completion``: written by hand in the API's shape, not recorded from a model)
through an ``httpx`` transport; a test fails when a scripted response goes unplayed or
an unscripted call is made.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pydantic
import pytest
from llm_rows import ledger, spent, stored

import timestone
from timestone.errors import (
    BudgetExceeded,
    ExtractionWarning,
    InvalidInput,
    LLMError,
    UnusableAnswer,
)
from timestone.llm import ReplayTransport, chat_completion, replay_llm

FIXTURES = Path(__file__).parents[1] / "fixtures" / "llm"
MIRA = Path(__file__).resolve().parents[2] / "examples" / "data" / "mira.jsonl"


def at(year: int, month: int = 1, day: int = 1) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


ONTOLOGY = timestone.Ontology(
    entity_types=[
        timestone.EntityType("Person"),
        timestone.EntityType("Winery"),
        timestone.EntityType("Grape"),
        timestone.EntityType("Organization"),
        timestone.EntityType("Place"),
    ],
    edge_types=[
        timestone.EdgeType("DIRECTS", cardinality="one"),
        timestone.EdgeType("WORKS_AT", cardinality="one"),
        timestone.EdgeType("WORKS_WITH_GRAPE", cardinality="one"),
    ],
)


@pytest.fixture(scope="module")
def module_mem(dsn: str) -> Iterator[timestone.Memory]:
    m = timestone.Memory.open(dsn, ontology=ONTOLOGY)
    yield m
    m.close()


@pytest.fixture
def mem(module_mem: timestone.Memory) -> Iterator[timestone.Memory]:
    """A blocking memory with the test ontology and no model: each test starts from the
    same state whatever ran before it, and sets ``mem.llm`` to its replay."""
    module_mem.llm = None
    yield module_mem
    module_mem.llm = None


class Replay:
    def __init__(self) -> None:
        self.transport = ReplayTransport()

    def load(self, name: str) -> ReplayTransport:
        data = json.loads((FIXTURES / f"{name}.json").read_text())
        self.transport.extend(data["responses"])
        return self.transport

    def llm(self, **options: Any) -> timestone.OpenAICompatibleLLM:
        options.setdefault("backoff", 0.0)
        return replay_llm(self.transport, **options)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.transport.requests


@pytest.fixture
def replay(mem: timestone.Memory) -> Iterator[Replay]:
    r = Replay()
    mem.llm = r.llm()
    yield r
    mem.llm = None
    r.transport.check()


def many(relation: str) -> dict[str, Any]:
    """The answer to the one question an ``add_facts`` with a model asks about a relation
    the ontology does not declare: a subject can hold several at once."""
    return {
        "step": "relation_cardinality",
        "match": f"Relation: {relation}",
        "body": chat_completion({"cardinality": "many"}, model="gpt-4.1-nano-2025-04-14"),
    }


def prompt_of(request: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in request["messages"])


# -- the running example, as text ------------------------------------------------


def test_mira_as_text_one_call_each_and_the_date_fight(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.load("mira")
    lines = [json.loads(line) for line in MIRA.read_text().splitlines() if line.strip()]
    results: list[timestone.IngestResult] = []
    for line in lines:
        ref = datetime.fromisoformat(line["reference_time"].replace("Z", "+00:00"))
        results.append(
            mem.add_episode(group, line["content"], reference_time=ref, name=line["name"])
        )
    assert [r.llm_calls for r in results] == [1, 1, 1]
    assert all(r.llm_tokens > 0 and r.episode.llm_calls == 1 for r in results)
    [now] = mem.facts(group, source="Mira", relation="DIRECTS")
    assert now.target == "Château Sud"
    [then] = mem.facts(group, source="Mira", relation="DIRECTS", valid_at=at(2019, 6))
    assert then.target == "Château Nord"
    [believed] = mem.facts(
        group,
        source="Mira",
        relation="DIRECTS",
        as_of=results[1].recorded_at - timedelta(microseconds=1),
    )
    assert believed.target == "Château Nord"
    # the schema sent constrains entity types to the ontology, and dates were in the prompt
    first = replay.requests[0]
    schema = first["response_format"]["json_schema"]["schema"]
    etype = schema["properties"]["entities"]["items"]["properties"]["type"]
    assert set(etype["enum"]) == {"Person", "Winery", "Grape", "Organization", "Place", "Entity"}
    assert "<REFERENCE_TIME>2015-10-01T00:00:00+00:00" in prompt_of(first)
    assert first["response_format"]["json_schema"]["strict"] is True


# -- fact resolution: contradictions and duplicates --------------------------------


def test_contradiction_closes_the_old_fact_and_removal_reopens_it(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.load("contradiction")
    first = mem.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
    assert first.llm_calls == 1
    second = mem.add_episode(group, "Ada now prefers coffee to tea.", reference_time=at(2024, 3, 5))
    assert second.llm_calls == 2
    assert [f.target for f in second.facts] == ["Coffee"]
    [closed] = second.invalidated
    assert (closed.target, closed.invalid_at) == ("Tea", at(2024, 3))
    assert closed.id == first.facts[0].id  # the same fact, closed, not a new one
    current = {f.target for f in mem.facts(group, source="Ada")}
    assert current == {"Coffee"}
    judged = replay.requests[-1]
    assert judged["response_format"]["json_schema"]["name"] == "fact_resolution"
    assert "Ada likes tea." in prompt_of(judged)

    mem.remove_episode(group, second.episode.id)
    [tea] = mem.facts(group, source="Ada")
    assert (tea.target, tea.invalid_at, tea.id) == ("Tea", None, first.facts[0].id)


def test_a_name_stored_before_the_rules_on_names_stays_usable(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    """A name an earlier version stored with a control character (a name may hold none
    now): a later episode that closes its fact reads it back as it is."""
    replay.load("contradiction")
    mem.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
    with psycopg.connect(mem.dsn) as conn:  # the schema's owner, as an older write left it
        conn.execute(
            "UPDATE timestone.entities SET name = 'Tea' || chr(1)"
            " WHERE group_id = %s AND name = 'Tea'",
            (group,),
        )
    second = mem.add_episode(group, "Ada now prefers coffee to tea.", reference_time=at(2024, 3, 5))
    [closed] = second.invalidated
    assert (closed.target, closed.invalid_at) == ("Tea\x01", at(2024, 3))


def test_duplicate_merges_provenance_on_the_existing_triple(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.load("duplicate")
    first = mem.add_episode(group, "Ada lives in Lisbon.", reference_time=at(2021, 6))
    second = mem.add_episode(group, "Ada has her home in Lisbon.", reference_time=at(2023, 1))
    assert second.llm_calls == 2
    [fact] = mem.facts(group, source="Ada")
    assert fact.relation == "LIVES_IN"
    assert fact.episodes == (first.episode.id, second.episode.id)
    assert fact.fact == "Ada lives in Lisbon."
    mem.remove_episode(group, second.episode.id)
    [fact] = mem.facts(group, source="Ada")
    assert fact.episodes == (first.episode.id,)


# -- entity resolution tier -------------------------------------------------------


def test_ambiguous_entity_goes_to_one_batched_call_three_calls_in_all(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.load("ambiguous")
    first = mem.add_episode(
        group,
        "Katherine Johansson works for Volvo Cars and lives in Gothenburg.",
        reference_time=at(2018, 3),
    )
    second = mem.add_episode(
        group, "Kathy Johansson moved to Stockholm in September.", reference_time=at(2022, 10)
    )
    assert second.llm_calls == 3
    kathy = next(e for e in second.entities if e.name.startswith("Kat"))
    katherine = next(e for e in first.entities if e.name == "Katherine Johansson")
    assert kathy.id == katherine.id
    asked = replay.requests[2]
    assert asked["response_format"]["json_schema"]["name"] == "entity_resolution"
    assert "Kathy Johansson" in prompt_of(asked)
    assert "Katherine Johansson" in prompt_of(asked)
    lives = {f.target for f in mem.facts(group, source=katherine.id, relation="LIVES_IN")}
    assert lives == {"Stockholm"}
    [gothenburg] = [f for f in second.invalidated if f.target == "Gothenburg"]
    assert gothenburg.invalid_at == at(2022, 9)


# -- the ontology -------------------------------------------------------------------


class Person(pydantic.BaseModel):
    """A human being."""

    age: int | None = None


class Organization(pydantic.BaseModel):
    """A company, institution or armed service."""


class ServedIn(pydantic.BaseModel):
    """Military service."""

    rank: str | None = None


def _entity(name: str) -> dict[str, Any]:
    return {"name": name, "type": "Person", "attributes": []}


def _fact(source: str, target: str) -> dict[str, Any]:
    return {
        "source": source,
        "relation": "KNOWS",
        "target": target,
        "fact": f"{source} knows {target}.",
        "valid_at": None,
        "invalid_at": None,
        "attributes": [],
    }


def test_an_entity_the_episode_does_not_name_is_dropped(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    """A small model makes names up; a name that does not occur in what it read (after
    name normalization: case and spacing) is not written, nor are its facts."""
    answer = {
        "entities": [_entity("Priya Natarajan"), _entity("John Doe")],
        "facts": [_fact("Priya Natarajan", "John Doe")],
    }
    replay.transport.extend([chat_completion(answer)])
    with pytest.warns(ExtractionWarning) as caught:
        res = mem.add_episode(group, "PRIYA  NATARAJAN joined the team.", reference_time=at(2021))
    messages = [str(w.message) for w in caught]
    assert "entity 'John Doe' does not occur in the text the model read; dropped" in messages
    assert [e.name for e in res.entities] == ["Priya Natarajan"]
    assert res.facts == []
    assert mem.get_entity(group, "John Doe") is None


@pytest.mark.parametrize(
    ("text", "name", "kept"),
    [
        ("Tomorrow we started at Acme.", "Tom Ted", False),  # pieces of other words
        ("All of us work at Acme.", "Al", False),
        ("Mira's team met at Acme.", "Mira", True),
        ("Posted from #StanfordUniversity at Acme.", "Stanford University", True),
        ("The HTTPServer team at Acme.", "HTTP Server", True),
        ('{"order_id": 1042, "at": "Acme"}', "Order 1042", True),
        ("東京都に住むAcmeの社員", "東京", True),  # a script written without spaces
    ],
)
def test_a_name_is_grounded_by_whole_words(
    mem: timestone.Memory, replay: Replay, group: str, text: str, name: str, kept: bool
) -> None:
    """Each word of a kept name is a word of the text (split at what is not a letter or
    digit, and where a CamelCase word turns), not a piece of another word; in a script
    written without spaces, a piece is all there is."""
    answer = {"entities": [_entity(name), _entity("Acme")], "facts": [_fact(name, "Acme")]}
    replay.transport.extend([chat_completion(answer)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = mem.add_episode(group, text, reference_time=at(2021))
    dropped = f"entity {name!r} does not occur in the text the model read; dropped"
    assert (dropped in [str(w.message) for w in caught]) is not kept
    assert sorted(e.name for e in res.entities) == sorted(["Acme", *([name] if kept else [])])


def test_a_full_name_the_group_already_holds_is_resolution_not_invention(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    """The episode says "Jonas"; the model writes the "Jonas Weber" the graph holds from an
    episode it was not shown (another saga here, or one beyond the previous ones). That name
    is kept and is the same entity; the same answer in a group that never heard of Jonas
    Weber is still dropped, so one tenant's names never ground another's."""
    earlier = {"source": "Jonas Weber", "relation": "WORKS_AT", "target": "Northwind Labs"}
    mem.add_facts(group, [earlier], reference_time=at(2021), saga="staff")
    answer = {"entities": [_entity("Priya"), _entity("Jonas Weber")], "facts": []}
    answer["facts"] = [_fact("Priya", "Jonas Weber")]
    replay.transport.extend([chat_completion(answer)])
    res = mem.add_episode(
        group, "Priya mentors Jonas every Friday.", reference_time=at(2023), saga="chat"
    )
    assert sorted(e.name for e in res.entities) == ["Jonas Weber", "Priya"]
    assert [f.fact for f in res.facts] == ["Priya knows Jonas Weber."]
    held = mem.get_entity(group, "Jonas Weber")
    assert held is not None
    assert res.facts[0].target_id == held.id

    stranger = group + "-other"
    replay.transport.extend([chat_completion(answer)])
    with pytest.warns(ExtractionWarning) as caught:
        res = mem.add_episode(
            stranger, "Priya mentors Jonas every Friday.", reference_time=at(2023)
        )
    dropped = "entity 'Jonas Weber' does not occur in the text the model read; dropped"
    assert dropped in [str(w.message) for w in caught]
    assert [e.name for e in res.entities] == ["Priya"]
    assert mem.get_entity(stranger, "Jonas Weber") is None


def test_names_in_json_are_read_with_their_escapes_decoded(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    answer = {"entities": [_entity("José Ruiz"), _entity("Ana Gil")], "facts": []}
    replay.transport.extend([chat_completion(answer)])
    res = mem.add_episode(
        group,
        '{"guest": "Jos\\u00e9 Ruiz", "host": "Ana Gil"}',
        reference_time=at(2021),
        source="json",
    )
    assert sorted(e.name for e in res.entities) == ["Ana Gil", "José Ruiz"]


def test_output_outside_the_ontology_is_dropped_with_warnings(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.load("ontology")
    with pytest.warns(ExtractionWarning) as caught:
        res = mem.add_episode(
            group,
            "Grace Hopper (1906-1992) served in the US Navy from 1943 to 1986.",
            reference_time=at(1992, 1),
            entity_types={"Person": Person, "Organization": Organization},
            edge_types={"SERVED_IN": ServedIn},
            edge_type_map={("Person", "Organization"): ["SERVED_IN"]},
            excluded_entity_types=["Place"],
            instructions="Only military careers.",
        )
    messages = [str(w.message) for w in caught]
    assert any("USS Hopper" in m and "outside the ontology" in m for m in messages)
    assert any("COBOL" in m and "not an extracted entity" in m for m in messages)
    assert any("EMPLOYS" not in m and "not an extracted entity" in m for m in messages)
    names = {e.name for e in res.entities}
    assert names == {"Grace Hopper", "Navy"}
    assert {(f.relation, f.target) for f in res.facts} == {
        ("SERVED_IN", "Navy"),
        ("EMPLOYS", "Grace Hopper"),
    }
    served = next(f for f in res.facts if f.relation == "SERVED_IN")
    assert served.attributes == {"rank": "Rear Admiral"}
    assert served.invalid_at == at(1986, 8, 14)
    grace = mem.get_entity(group, "Grace Hopper")
    assert grace is not None
    assert grace.attributes == {"age": 85}
    sent = replay.requests[0]
    system = sent["messages"][0]["content"]
    assert "Only military careers." in system
    assert "A human being." in system
    etype = sent["response_format"]["json_schema"]["schema"]["properties"]["entities"]
    assert "Place" not in etype["items"]["properties"]["type"]["enum"]


def test_edge_type_map_refuses_a_relation_between_the_wrong_types(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.transport.extend(
        [
            chat_completion(
                {
                    "entities": [
                        {"name": "Navy", "type": "Organization", "attributes": []},
                        {"name": "Grace Hopper", "type": "Person", "attributes": []},
                    ],
                    "facts": [
                        {
                            "source": "Navy",
                            "relation": "SERVED_IN",
                            "target": "Grace Hopper",
                            "fact": "The Navy served in Grace Hopper.",
                            "valid_at": None,
                            "invalid_at": None,
                            "attributes": [],
                        }
                    ],
                }
            )
        ]
    )
    with pytest.warns(ExtractionWarning, match="SERVED_IN is not allowed from Organization"):
        res = mem.add_episode(
            group,
            "Grace Hopper served in the Navy.",
            reference_time=at(1990),
            entity_types={"Person": Person, "Organization": Organization},
            edge_types={"SERVED_IN": ServedIn},
            edge_type_map={("Person", "Organization"): ["SERVED_IN"]},
        )
    assert res.facts == []
    assert {e.name for e in res.entities} == {"Navy", "Grace Hopper"}


def extraction_reply(entities: list[str], facts: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat completion of the extraction step: untyped entities, and facts with no
    attributes and no dates unless given."""
    blank: dict[str, Any] = {"valid_at": None, "invalid_at": None, "attributes": []}
    return chat_completion(
        json.dumps(
            {
                "entities": [{"name": n, "type": "Entity", "attributes": []} for n in entities],
                "facts": [blank | f for f in facts],
            }
        )
    )


def test_a_broken_surrogate_escape_in_the_reply_is_dropped_with_a_warning(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    """A reply with half of an emoji's escape (``"\\ud83d"`` without its pair; the JSON
    text an API sends, ASCII) decodes to a lone surrogate, which Postgres text cannot
    hold: the entity named with it, and the fact whose sentence holds it, are dropped;
    the rest is written."""
    replay.transport.extend(
        [
            extraction_reply(
                ["Ada", "Bo", "Cy \ud83d"],
                [
                    {"source": "Ada", "relation": "KNOWS", "target": "Bo", "fact": "Ada knows Bo."},
                    {
                        "source": "Bo",
                        "relation": "LIKES",
                        "target": "Ada",
                        "fact": "Bo likes Ada \ud83d.",
                    },
                    {
                        "source": "Ada",
                        "relation": "KNOWS",
                        "target": "Cy \ud83d",
                        "fact": "Ada knows Cy.",
                    },
                ],
            )
        ]
    )
    with pytest.warns(ExtractionWarning) as caught:
        res = mem.add_episode(group, "Ada knows Bo and Cy; Bo likes Ada.", reference_time=at(2020))
    messages = [str(w.message) for w in caught]
    assert any("Bo likes Ada" in m and "lone surrogate" in m for m in messages)
    assert any("Ada knows Cy." in m and "not an extracted entity" in m for m in messages)
    assert [f.fact for f in res.facts] == ["Ada knows Bo."]
    assert {e.name for e in res.entities} == {"Ada", "Bo"}


def test_an_entity_name_with_a_control_character_is_dropped_not_fatal(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    """A model copies a control character of the text into a name: the entity is not
    kept (a name holds none), its fact goes with it, and the rest is written."""
    replay.transport.extend(
        [
            extraction_reply(
                ["Ada", "Bo", "Cy\x01"],
                [
                    {"source": "Ada", "relation": "KNOWS", "target": "Bo", "fact": "Ada knows Bo."},
                    {
                        "source": "Ada",
                        "relation": "KNOWS",
                        "target": "Cy\x01",
                        "fact": "Ada knows Cy.",
                    },
                ],
            )
        ]
    )
    with pytest.warns(ExtractionWarning) as caught:
        res = mem.add_episode(group, "Ada knows Bo and Cy\x01.", reference_time=at(2020))
    assert any("Ada knows Cy." in str(w.message) for w in caught)
    assert [f.fact for f in res.facts] == ["Ada knows Bo."]
    assert {e.name for e in res.entities} == {"Ada", "Bo"}


def test_a_date_past_what_utc_holds_is_dropped_with_a_warning(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    """A model's date that is valid where it is but past year 9999 in UTC (its offset
    carries it over) is dropped with a warning like any unreadable date; the fact stays,
    valid from the episode's reference time."""
    replay.transport.extend(
        [
            extraction_reply(
                ["Ada", "Bo"],
                [
                    {
                        "source": "Ada",
                        "relation": "KNOWS",
                        "target": "Bo",
                        "fact": "Ada knows Bo.",
                        "valid_at": "9999-12-31T23:00:00-05:00",
                    }
                ],
            )
        ]
    )
    with pytest.warns(ExtractionWarning, match="outside the years 1 to 9999 in UTC; dropped"):
        res = mem.add_episode(group, "Ada knows Bo.", reference_time=at(2020))
    assert [(f.fact, f.valid_at) for f in res.facts] == [("Ada knows Bo.", at(2020))]


def test_a_period_told_as_over_with_no_start_ends_the_stored_one(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    """ "Stepped down in April": the model gives an ``invalid_at`` before the episode's
    time and no ``valid_at`` (the prompt's null for an untold date). The fact ends the
    stored period of its triple that held then, taking its start (a correction, which the
    date fight settles); told of a period the graph never held, it is dropped with a
    warning: nothing says when it began."""
    ceo = {"source": "Ada", "relation": "DIRECTS", "target": "Château Nord"}
    replay.transport.extend(
        [
            extraction_reply(
                ["Ada", "Château Nord"], [ceo | {"fact": "Ada directs Château Nord."}]
            ),
            extraction_reply(
                ["Ada", "Château Nord", "Bo", "Château Sud"],
                [
                    ceo | {"fact": "Ada stepped down at Château Nord.", "invalid_at": "2024-04-01"},
                    {
                        "source": "Bo",
                        "relation": "DIRECTS",
                        "target": "Château Sud",
                        "fact": "Bo left Château Sud.",
                        "invalid_at": "2024-05-01",
                    },
                ],
            ),
        ]
    )
    first = mem.add_episode(group, "Ada directs Château Nord.", reference_time=at(2020))
    with pytest.warns(ExtractionWarning) as warned:
        second = mem.add_episode(
            group,
            "Ada stepped down at Château Nord in April. Bo left Château Sud in May.",
            reference_time=at(2024, 6),
        )
    assert [str(w.message) for w in warned] == [
        "fact 'Bo left Château Sud.': told as over by 2024-05-01 with no start, and the graph "
        "holds no period of it then; dropped"
    ]
    [ended] = second.invalidated
    assert ended.id == first.facts[0].id  # the same fact, closed
    assert (ended.valid_at, ended.invalid_at) == (at(2020), at(2024, 4))
    assert ended.episodes == (first.episode.id, second.episode.id)
    assert mem.facts(group, source="Ada") == []  # nobody directs it now
    [held] = mem.facts(group, source="Ada", valid_at=at(2023))
    assert held.id == ended.id
    assert mem.facts(group, source="Bo", valid_at=None) == []
    mem.remove_episode(group, second.episode.id)  # exact: the period is open again
    [again] = mem.facts(group, source="Ada")
    assert (again.id, again.invalid_at) == (first.facts[0].id, None)


def typed_reply(entities: list[tuple[str, str]], facts: list[dict[str, Any]]) -> dict[str, Any]:
    blank: dict[str, Any] = {"valid_at": None, "invalid_at": None, "attributes": []}
    return chat_completion(
        json.dumps(
            {
                "entities": [{"name": n, "type": t, "attributes": []} for n, t in entities],
                "facts": [blank | f for f in facts],
            }
        )
    )


def test_an_entity_type_in_another_case_is_the_declared_one(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    """A model (a server with no schema enforcement) writes "person" for the declared
    Person: the entity is a Person, not dropped as outside the ontology."""
    lives = {"source": "Chloé Dubois", "relation": "LIVES_IN", "target": "Paris"}
    replay.transport.extend(
        [typed_reply([("Chloé Dubois", "person"), ("Paris", "PLACE")], [lives | {"fact": "x"}])]
    )
    res = mem.add_episode(group, "Chloé Dubois lives in Paris.", reference_time=at(2024))
    assert sorted((e.name, e.labels) for e in res.entities) == [
        ("Chloé Dubois", ("Person",)),
        ("Paris", ("Place",)),
    ]
    assert [f.relation for f in res.facts] == ["LIVES_IN"]


NEW_FACT: dict[str, Any] = {"new": 0, "duplicate_of": None, "contradicts": []}


def test_a_type_the_model_writes_in_one_case_is_one_type_in_an_open_ontology(
    dsn: str, group: str
) -> None:
    """With no declared types, the prompt asks for CamelCase types; a model that writes
    "person" once and "Person" next names one entity, not two."""
    transport = ReplayTransport()
    for typed, place in (("Person", "Paris"), ("person", "Lyon"), ("SPORTS_TEAM", "Lyon")):
        name = "Olympique" if typed == "SPORTS_TEAM" else "Chloé Dubois"
        fact = {"source": name, "relation": "LOCATED_IN", "target": place, "fact": "x"}
        transport.extend([typed_reply([(name, typed), (place, "Place")], [fact])])
        if typed != "Person":  # a stored fact on one of its ends: judged new
            transport.extend([chat_completion({"judgements": [NEW_FACT]})])
    llm = replay_llm(transport, backoff=0.0)
    with timestone.Memory.open(dsn, llm=llm, infer_cardinality=False) as open_mem:
        open_mem.add_episode(group, "Chloé Dubois is in Paris.", reference_time=at(2024))
        open_mem.add_episode(group, "Chloé Dubois is in Lyon.", reference_time=at(2024, 2))
        team = open_mem.add_episode(group, "Olympique is in Lyon.", reference_time=at(2024, 3))
        chloe = open_mem.get_entity(group, "Chloé Dubois")
        assert chloe is not None
        assert chloe.labels == ("Person",)
        held = open_mem.facts(group, source="Chloé Dubois")
        assert len(held) == 2
        assert {f.source_id for f in held} == {chloe.id}  # one entity, not two
        assert [e.labels for e in team.entities if e.name == "Olympique"] == [("SportsTeam",)]
        # a type no label may be (a NUL in it): the entity and its fact dropped, warned
        nul = {"source": "Nino", "relation": "LOCATED_IN", "target": "Lyon", "fact": "x"}
        transport.extend([typed_reply([("Nino", "Per\x00son"), ("Lyon", "Place")], [nul])])
        with pytest.warns(ExtractionWarning) as caught:
            dropped = open_mem.add_episode(group, "Nino is in Lyon.", reference_time=at(2024, 4))
        assert str(caught[0].message).startswith("entity 'Nino': entity label contains a NUL")
        assert dropped.facts == []
    transport.check()


class Aged(pydantic.BaseModel):
    """A person with an age."""

    age: int | None = None
    retired: bool | None = None


def test_a_declared_attribute_given_as_a_number_is_read_as_one(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    """The schema asks for each attribute value as a string; a model in JSON mode (no
    schema enforced) writes 34 and true as themselves. They are read, once: not taken as
    malformed output and asked again."""
    said = {"key": "age", "value": 34}
    answer = {
        "entities": [
            {
                "name": "Priya",
                "type": "Person",
                "attributes": [
                    said,
                    {"key": "retired", "value": False},
                    {"key": "x", "value": None},
                ],
            }
        ],
        "facts": [],
    }
    replay.transport.extend([chat_completion(answer)])
    res = mem.add_episode(
        group,
        "Priya is 34 and still works.",
        reference_time=at(2024),
        entity_types={"Person": Aged},
    )
    assert [(e.name, e.attributes) for e in res.entities] == [
        ("Priya", {"age": 34, "retired": False})
    ]
    assert res.llm_calls == 1


def test_what_extraction_drops_of_names_it_says(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    """A name given twice with two types (facts name entities by name: they are the first
    one's), a fact with one entity at both ends, a name past what a name may hold: each
    dropped with a warning that names it, never silently, and never an error of the
    caller's input."""
    long_name = "Georgia " + "x" * 600
    answer: dict[str, Any] = {
        "entities": [
            {"name": "Georgia", "type": "Person", "attributes": []},
            {"name": "Georgia", "type": "Place", "attributes": []},
            {"name": "Tbilisi", "type": "Place", "attributes": []},
            {"name": long_name, "type": "Place", "attributes": []},
        ],
        "facts": [
            {"source": "Georgia", "relation": "VISITED", "target": "Tbilisi", "fact": "a"},
            {"source": "Georgia", "relation": "LOCATED_IN", "target": "Georgia", "fact": "b"},
        ],
    }
    replay.transport.extend([chat_completion(answer)])
    with pytest.warns(ExtractionWarning) as caught:
        res = mem.add_episode(
            group,
            "Georgia visited Tbilisi, in Georgia, with Nino. " + long_name,
            reference_time=at(2024),
        )
    twice, long, loop = [str(w.message) for w in caught]
    assert twice == (
        "entity 'Georgia' of type Place is 'Georgia' of type Person again; its facts are that "
        "entity's"
    )
    assert long.startswith("entity 'Georgia xxx")
    assert long.endswith(": entity name has 608 characters; the limit is 512; dropped")
    assert loop == "fact 'b' has 'Georgia' at both ends; dropped"
    assert [(f.source, f.target) for f in res.facts] == [("Georgia", "Tbilisi")]


def test_the_same_fact_twice_in_one_answer_is_one_assertion(
    mem: timestone.Memory, replay: Replay, group: str, dsn: str
) -> None:
    """A model repeats itself: the same fact twice (same ends, relation, sentence and
    dates) in one answer is recorded once; the same ends in other words stay two."""
    same = _fact("Ada", "Bo")
    answer = {
        "entities": [_entity("Ada"), _entity("Bo")],
        "facts": [same, same, same | {"fact": "Ada has known Bo for years."}],
    }
    replay.transport.extend([chat_completion(answer)])
    res = mem.add_episode(group, "Ada knows Bo; Ada knows Bo.", reference_time=at(2021))
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM timestone.assertions WHERE group_id = %s AND episode_id = %s",
            (group, res.episode.id),
        ).fetchone()
    assert row is not None
    assert row[0] == 2


# -- sources --------------------------------------------------------------------------


def test_message_episode_explains_speakers(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.load("message")
    res = mem.add_episode(
        group,
        "Alice: I moved to Berlin last spring.\nBob: Good for you, Alice!",
        reference_time=at(2025, 1, 15),
        source="message",
    )
    assert res.episode.source == "message"
    assert {e.name for e in res.entities} == {"Alice", "Bob", "Berlin"}
    assert "speaker" in replay.requests[0]["messages"][0]["content"]
    knows = next(f for f in res.facts if f.relation == "KNOWS")
    assert knows.valid_at == at(2025, 1, 15)  # no date given: the reference time


def test_json_episode(mem: timestone.Memory, replay: Replay, group: str) -> None:
    replay.load("json")
    res = mem.add_episode(
        group,
        json.dumps({"order": 1042, "customer": "Acme Corp", "date": "2025-02-03"}),
        reference_time=at(2025, 2, 4),
        source="json",
    )
    assert [f.fact for f in res.facts] == ["Order 1042 was placed by Acme Corp."]
    assert "JSON document" in replay.requests[0]["messages"][0]["content"]


# -- malformed output and failures at each step --------------------------------------


def test_malformed_output_is_asked_again(mem: timestone.Memory, replay: Replay, group: str) -> None:
    replay.load("malformed_then_good")
    res = mem.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
    assert res.llm_calls == 3
    assert [f.fact for f in res.facts] == ["Ada likes tea."]
    assert mem.llm_usage(group).calls == 3


def _nothing_written(mem: timestone.Memory, group: str) -> None:
    assert mem.facts(group, valid_at=None) == []
    assert mem.episodes(group) == []


def test_malformed_three_times_fails_the_step_and_writes_nothing(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.load("malformed")
    with pytest.raises(LLMError, match="extraction: the model returned malformed output") as err:
        mem.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
    assert err.value.step == "extraction"
    _nothing_written(mem, group)
    assert mem.llm_usage(group).calls == 3  # spent calls still count


@pytest.mark.parametrize(
    ("step", "status"),
    [("extraction", 500), ("fact_resolution", 503), ("fact_resolution", 400)],
)
def test_a_failing_step_names_itself_and_writes_nothing(
    mem: timestone.Memory, dsn: str, group: str, step: str, status: int
) -> None:
    replay = Replay()
    data = json.loads((FIXTURES / "contradiction.json").read_text())["responses"]
    replay.transport.extend([data[0]])
    m = timestone.Memory.open(dsn, ontology=ONTOLOGY, llm=replay.llm(max_retries=1))
    try:
        first = m.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
        error = {"error": {"message": "upstream failed", "type": "server_error"}}
        failing = [{"status": status, "body": error}] * (2 if status >= 500 else 1)
        replay.transport.extend([data[1], *failing] if step == "fact_resolution" else failing)
        with pytest.raises(LLMError) as err:
            m.add_episode(group, "Ada now prefers coffee to tea.", reference_time=at(2024, 3, 5))
        expected = step.replace("_", " ")
        assert err.value.step == expected
        assert str(err.value).startswith(f"{expected}: the model server answered {status}")
        [tea] = m.facts(group, valid_at=None)
        assert tea.id == first.facts[0].id
        assert tea.invalid_at is None
        assert [e.id for e in m.episodes(group)] == [first.episode.id]
        replay.transport.check()
    finally:
        m.close()


def test_wrong_api_key_is_one_clear_error_before_any_work(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.transport.extend(
        [
            {
                "status": 401,
                "body": {
                    "error": {
                        "message": "Incorrect API key provided: sk-wrong.",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                },
            }
        ]
    )
    with pytest.raises(LLMError, match="refused the API key") as err:
        mem.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
    assert err.value.step == "extraction"
    assert len(replay.requests) == 1  # not retried
    _nothing_written(mem, group)


# -- bad input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "options", "message"),
    [
        ("   ", {}, "episode content is empty"),
        (
            "\u200b\ufeff\u200d",
            {},
            r"episode content '\\u200b\\ufeff\\u200d' has no visible character",
        ),
        (b"Ada likes tea.", {}, "binary"),
        ("Ada\x00likes tea.", {}, "looks binary"),
        ("Ada likes tea \ud83c.", {}, r"episode content contains a lone surrogate \('\\ud83c'"),
        ("\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f", {}, "looks binary"),
        ("x" * 101, {"max_chars": 100}, "the limit is 100"),
        ("Ada likes tea.", {"source": "email"}, "source must be one of"),
        ("{not json", {"source": "json"}, "not valid JSON"),
        ("Ada", {"reference_time": datetime(2020, 1, 1)}, "timezone"),
        ("Ada likes tea.", {"max_chars": -1}, "max_chars must be a positive integer, got -1"),
        ("Ada likes tea.", {"max_chars": True}, "max_chars must be a positive integer, got True"),
        ("Ada likes tea.", {"max_chars": 10.5}, "max_chars must be a positive integer, got 10.5"),
        ("Ada likes tea.", {"instructions": "Be brief.\x00"}, "instructions contains a NUL"),
        ("Ada likes tea.", {"instructions": "x" * 20_001}, "instructions has 20,001 characters"),
        ("Ada likes tea.", {"instructions": 5}, "instructions must be a string, got int"),
        (
            "Ada likes tea.",
            {"excluded_entity_types": ["Place", 5]},
            "a name of excluded_entity_types must be a string, got int",
        ),
    ],
)
def test_bad_input_is_refused_before_any_call(
    mem: timestone.Memory,
    replay: Replay,
    group: str,
    content: Any,
    options: dict[str, Any],
    message: str,
) -> None:
    options.setdefault("reference_time", at(2020))
    with pytest.raises(InvalidInput, match=message):
        mem.add_episode(group, content, **options)
    assert replay.requests == []
    _nothing_written(mem, group)


def test_no_llm_configured_is_a_clear_error(mem: timestone.Memory, group: str) -> None:
    assert mem.llm is None
    with pytest.raises(LLMError, match="needs an LLM"):
        mem.add_episode(group, "Ada likes tea.", reference_time=at(2020))


def test_same_episode_twice_costs_nothing(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.load("json")
    content = json.dumps({"order": 1042, "customer": "Acme Corp"})
    first = mem.add_episode(group, content, reference_time=at(2025, 2, 4), source="json")
    again = mem.add_episode(group, content, reference_time=at(2025, 2, 4), source="json")
    assert (first.created, again.created) == (True, False)
    assert again.episode.id == first.episode.id
    assert len(replay.requests) == 1


# -- budgets --------------------------------------------------------------------------


def test_call_budget_refuses_work_before_spending_it(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.load("contradiction")
    budget = mem.set_llm_budget(group, max_calls=2, period=timedelta(hours=1))
    assert mem.llm_budget(group) == budget
    mem.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
    with pytest.raises(BudgetExceeded, match="fact resolution: the group's LLM budget of 2 calls"):
        mem.add_episode(group, "Ada now prefers coffee to tea.", reference_time=at(2024, 3, 5))
    assert len(replay.requests) == 2  # the third call was never made
    [tea] = mem.facts(group, valid_at=None)
    assert tea.invalid_at is None
    usage = mem.llm_usage(group)
    assert usage.calls == 2
    assert usage.tokens > 0
    assert mem.set_llm_budget(group) is None  # lifted
    assert mem.llm_budget(group) is None
    coffee = json.loads((FIXTURES / "contradiction.json").read_text())["responses"][1]
    replay.transport.extend([coffee])  # the unplayed judgement answers the second call
    mem.add_episode(group, "Ada now prefers coffee to tea.", reference_time=at(2024, 3, 5))
    assert {f.target for f in mem.facts(group, source="Ada")} == {"Coffee"}
    assert mem.llm_usage(group).calls == 4


def test_token_budget_refuses_the_first_call(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    mem.set_llm_budget(group, max_tokens=50)
    with pytest.raises(BudgetExceeded, match="50 tokens"):
        mem.add_episode(group, "Ada likes tea. " * 20, reference_time=at(2020))
    assert replay.requests == []
    with pytest.raises(InvalidInput, match="period"):
        mem.set_llm_budget(group, max_calls=1, period=timedelta(0))


def test_a_budget_over_a_period_longer_than_the_calendar_counts_every_call(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    # the window would start before the year 1: it is every call the group made
    mem.set_llm_budget(group, max_calls=1, period=timedelta(days=3_650_000))
    replay.load("json")
    content = json.dumps({"order": 1042, "customer": "Acme Corp"})
    mem.add_episode(group, content, reference_time=at(2025, 2, 4), source="json")
    assert mem.llm_budget(group) == timestone.LLMBudget(1, None, timedelta(days=3_650_000))
    with pytest.raises(BudgetExceeded, match="budget of 1 call"):
        mem.add_episode(group, content + " ", reference_time=at(2025, 2, 5), source="json")
    assert len(replay.requests) == 1


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"max_calls": 2**31}, "max_calls must be at most 2,147,483,647, got 2,147,483,648"),
        ({"max_tokens": 10**30}, "max_tokens must be at most 9,223,372,036,854,775,807"),
    ],
)
def test_a_budget_past_what_its_columns_hold_is_refused(
    mem: timestone.Memory, group: str, limits: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        mem.set_llm_budget(group, **limits)
    assert mem.llm_budget(group) is None


# -- summaries -------------------------------------------------------------------------


def test_long_summary_is_condensed_by_the_small_model_and_removal_is_exact(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.load("condense")
    projects = [
        timestone.FactInput(
            "Orla",
            "WORKED_ON",
            f"Project {i}",
            fact=f"Orla worked on project {i}, a long field campaign with many partners "
            f"across the northern coast, documented in report number {i}.",
            valid_at=at(2000 + i),
        )
        for i in range(20)
    ]
    replay.transport.extend([many("WORKED_ON")])
    mem.add_facts(group, projects, reference_time=at(2023))
    before = mem.get_entity(group, "Orla")
    assert before is not None
    res = mem.add_episode(
        group, "Orla founded Harbour Lab in February.", reference_time=at(2024, 3)
    )
    assert res.llm_calls == 3
    condensed = replay.requests[-1]
    assert condensed["model"] == "gpt-4.1-nano"
    assert condensed["response_format"]["json_schema"]["name"] == "summary_condensation"
    orla = mem.get_entity(group, "Orla")
    assert orla is not None
    assert orla.summary.startswith("Orla: marine roboticist")
    assert len(orla.summary) <= 2000
    mem.remove_episode(group, res.episode.id)
    after = mem.get_entity(group, "Orla")
    assert after is not None
    assert after.summary == before.summary


# -- sagas -------------------------------------------------------------------------------


def test_saga_context_order_and_summary(mem: timestone.Memory, replay: Replay, group: str) -> None:
    replay.load("saga")
    mem.add_episode(
        group, "Ben starts renovating the kitchen.", reference_time=at(2025, 1, 10), saga="kitchen"
    )
    mem.add_episode(
        group, "Ben finished the kitchen.", reference_time=at(2025, 3, 2), saga="kitchen"
    )
    assert "Ben starts renovating the kitchen." in prompt_of(replay.requests[1])
    episodes = mem.saga_episodes(group, "kitchen")
    assert [e.reference_time for e in episodes] == [at(2025, 1, 10), at(2025, 3, 2)]
    summary = mem.summarize_saga(group, "kitchen")
    assert summary == "Ben renovated his kitchen from January to March 2025."
    assert replay.requests[-1]["model"] == "gpt-4.1-nano"
    assert mem.llm_usage(group).calls == 4
    [renovating] = mem.facts(group, relation="RENOVATES", valid_at=None)
    assert renovating.invalid_at == at(2025, 3, 2)


# -- bulk, async -------------------------------------------------------------------


async def test_add_episodes_with_bounded_concurrency_and_progress(dsn: str, group: str) -> None:
    replay = Replay()
    replay.load("bulk")
    amem = await timestone.AsyncMemory.open(dsn, ontology=ONTOLOGY, llm=replay.llm())
    seen: list[tuple[int, int]] = []
    try:
        results = await amem.add_episodes(
            group,
            [
                {"content": "Noor joined the chess club.", "reference_time": at(2025, 4)},
                {"content": "Tariq visited Oslo in May.", "reference_time": at(2025, 6)},
                {"content": "Lena plays the violin.", "reference_time": at(2025, 7), "saga": "s"},
            ],
            concurrency=2,
            on_progress=lambda done, total, _: seen.append((done, total)),
        )
        assert [r.facts[0].source for r in results] == ["Noor", "Tariq", "Lena"]
        assert sorted(seen) == [(1, 3), (2, 3), (3, 3)]
        assert all(r.llm_calls == 1 for r in results)
        with pytest.raises(InvalidInput, match="has no 'reference_time'"):
            await amem.add_episodes(group, [{"content": "x"}])
        replay.transport.check()
    finally:
        await amem.close()


# -- documents -----------------------------------------------------------------------


def test_document_chunks_share_entities_and_context(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    replay.load("document")
    text = (
        "Shipping policy. Acme Corp never ships on Sundays; this rule has no general "
        "exception and applies to every warehouse and carrier.\n\n"
        + "Operations. Acme Corp runs its European distribution from a warehouse in Rotterdam, "
        "which handles most of the volume.\n\n"
        + "Seasonal terms. In December, Acme Corp allows Sunday deliveries, as an exception "
        "to the rule above, until the end of the year."
    )
    res = mem.add_document(
        group,
        "doc://policy",
        text,
        title="Acme shipping policy",
        reference_time=at(2025, 1),
        max_chunk_chars=150,
    )
    assert len(res.episodes) == 3
    assert res.llm_calls == 3
    acme = [e for e in res.entities if e.name == "Acme Corp"]
    assert len(acme) == 1
    on_acme = {f.relation for f in res.facts if f.source_id == acme[0].id}
    assert on_acme == {"PROHIBITS", "HAS_WAREHOUSE_IN", "ALLOWS"}
    last = prompt_of(replay.requests[2])
    assert "<KNOWN_ENTITIES>" in last
    assert "Acme Corp" in last
    assert "title: Acme shipping policy" in last
    assert "chunk: 3 of 3" in last
    assert "warehouse in Rotterdam" in last  # the neighbouring chunk
    # the same text under a corrected title: a new version, extracted again with it (not
    # an empty version in place of the facts)
    replay.transport.extend(json.loads((FIXTURES / "document.json").read_text())["responses"])
    # the graph holds the same triples (merged without the model); asked about the rest of
    # each fact's endpoints, the model finds nothing to merge or close
    same: list[dict[str, Any]] = [
        {"new": i, "duplicate_of": None, "contradicts": []} for i in range(3)
    ]
    judged = chat_completion({"judgements": same}, model="gpt-4.1-mini-2025-04-14")
    replay.transport.extend([{"step": "fact_resolution", "body": judged}])
    again = mem.add_document(
        group,
        "doc://policy",
        text,
        title="Acme shipping terms",
        reference_time=at(2025, 1),
        max_chunk_chars=150,
    )
    assert (again.created, again.version, again.llm_calls) == (True, 2, 4)
    assert "title: Acme shipping terms" in prompt_of(replay.requests[5])
    held = {f.relation for f in mem.facts(group, valid_at=None)}
    assert held == {"PROHIBITS", "HAS_WAREHOUSE_IN", "ALLOWS"}


# -- answers a real model gives that cannot be used ----------------------------------------


def _judged(content: str | dict[str, Any] | None, **options: Any) -> dict[str, Any]:
    options.setdefault("prompt_tokens", 671)
    options.setdefault("completion_tokens", 19)
    return {"step": "fact_resolution", "body": chat_completion(content, **options)}


def _truncated(step: str, text: str) -> dict[str, Any]:
    body = chat_completion(text, finish_reason="length", prompt_tokens=690, completion_tokens=16)
    return {"step": step, "body": body}


def _refused(step: str) -> dict[str, Any]:
    body = chat_completion(None, refusal="I'm sorry, I can't help with that request.")
    return {"step": step, "body": body}


def _no_choices(step: str) -> dict[str, Any]:
    body = chat_completion({"judgements": []}, prompt_tokens=670, completion_tokens=0)
    body["choices"] = []
    return {"step": step, "body": body}


BAD_JUDGEMENTS: dict[str, tuple[list[dict[str, Any]], str]] = {
    "a new fact that was not asked about": (
        [_judged({"judgements": [{"new": 3, "duplicate_of": None, "contradicts": []}]})] * 3,
        r"malformed output 3 times \(last: judgements\.0\.new: 3 is not a new fact asked "
        r"about \(0\)\)",
    ),
    "a contradiction of a fact that was not offered": (
        [_judged({"judgements": [{"new": 0, "duplicate_of": None, "contradicts": [0, 5]}]})] * 3,
        r"last: judgements\.0\.contradicts: 5 is not an existing fact offered for new fact 0 "
        r"\(0\)",
    ),
    "a duplicate of a fact that was not offered": (
        [_judged({"judgements": [{"new": 0, "duplicate_of": -1, "contradicts": []}]})] * 3,
        r"last: judgements\.0\.duplicate_of: -1 is not an existing fact offered",
    ),
    "one fact judged twice": (
        [
            _judged(
                {
                    "judgements": [
                        {"new": 0, "duplicate_of": None, "contradicts": [0]},
                        {"new": 0, "duplicate_of": 0, "contradicts": []},
                    ]
                }
            )
        ]
        * 3,
        r"last: judgements\.1\.new: new fact 0 is judged twice",
    ),
    "malformed output": (
        [
            _judged("The new fact contradicts fact 0."),
            _judged({"judgements": [{"new": "first", "contradicts": []}]}),
            _judged('```json\n{"judgements": [{"new": 0, "duplicate_of": null}]}\n```'),
        ],
        r"malformed output 3 times \(last: judgements\.0\.contradicts: Field required\)",
    ),
    "an answer cut off at the output limit": (
        [_truncated("fact_resolution", '{"judgements": [{"new": 0, "duplicate_of": null, "co')],
        r"^fact resolution: the model's answer was cut off at its output limit "
        r"\(finish_reason 'length', 16 completion tokens\)",
    ),
    "a refusal": (
        [_refused("fact_resolution")],
        r"^fact resolution: the model gave no answer \(it refused: I'm sorry",
    ),
    "no choices": (
        [_no_choices("fact_resolution")],
        r"^fact resolution: the model sent no choices",
    ),
}


@pytest.mark.parametrize("case", list(BAD_JUDGEMENTS))
def test_an_unusable_fact_resolution_fails_the_step_and_writes_nothing(
    mem: timestone.Memory, replay: Replay, dsn: str, group: str, case: str
) -> None:
    """Answers that fit the schema but name facts that were not asked about or offered,
    malformed output, a cut-off, a refusal, no choices: each ends in a clear ``LLMError``
    after at most two re-asks; the group's graph is what it was, and its ledger holds
    every answer the model gave, used or not."""
    bad, message = BAD_JUDGEMENTS[case]
    data = json.loads((FIXTURES / "contradiction.json").read_text())["responses"]
    replay.transport.extend([data[0]])
    mem.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
    before, paid = stored(mem, dsn, group), ledger(dsn, group)
    replay.transport.extend([data[1], *bad])
    with pytest.raises(LLMError, match=message) as err:
        mem.add_episode(group, "Ada now prefers coffee to tea.", reference_time=at(2024, 3, 5))
    assert err.value.step == "fact resolution"
    assert "Traceback" not in str(err.value)
    assert stored(mem, dsn, group) == before
    [tea] = mem.facts(group, source="Ada")
    assert (tea.target, tea.invalid_at) == ("Tea", None)
    answered = [spent("fact resolution", b["body"], False) for b in bad]
    assert ledger(dsn, group) == sorted(
        [*paid, spent("extraction", data[1]["body"], True), *answered]
    )
    assert mem.llm_usage(group).calls == 2 + len(bad)


def test_a_judgement_naming_a_fact_not_offered_is_asked_again_then_used(
    mem: timestone.Memory, replay: Replay, dsn: str, group: str
) -> None:
    data = json.loads((FIXTURES / "contradiction.json").read_text())["responses"]
    stray = _judged({"judgements": [{"new": 0, "duplicate_of": None, "contradicts": [2]}]})
    replay.transport.extend([data[0], data[1], stray, data[2]])
    first = mem.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
    second = mem.add_episode(group, "Ada now prefers coffee to tea.", reference_time=at(2024, 3, 5))
    assert second.llm_calls == 3
    [closed] = second.invalidated
    assert (closed.id, closed.target, closed.invalid_at) == (first.facts[0].id, "Tea", at(2024, 3))
    asked = [
        r
        for r in replay.requests
        if r["response_format"]["json_schema"]["name"] == ("fact_resolution")
    ]
    assert len(asked) == 2
    assert asked[0]["messages"] == asked[1]["messages"]
    oks = [row[4] for row in ledger(dsn, group) if row[0] == "fact resolution"]
    assert sorted(oks) == [False, True]


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        ({"item": 0, "match": 7}, r"decisions\.0\.match: 7 is not a candidate of item 0 \(0\)"),
        ({"item": 2, "match": 0}, r"decisions\.0\.item: 2 is not an item asked about \(0 to 0\)"),
    ],
)
def test_an_entity_decision_naming_what_was_not_asked_fails_and_writes_nothing(
    mem: timestone.Memory,
    replay: Replay,
    dsn: str,
    group: str,
    decision: dict[str, Any],
    message: str,
) -> None:
    data = json.loads((FIXTURES / "ambiguous.json").read_text())["responses"]
    replay.transport.extend([data[0]])
    mem.add_episode(
        group,
        "Katherine Johansson works for Volvo Cars and lives in Gothenburg.",
        reference_time=at(2018, 3),
    )
    before, paid = stored(mem, dsn, group), ledger(dsn, group)
    body = chat_completion({"decisions": [decision]}, prompt_tokens=641, completion_tokens=11)
    bad = {"step": "entity_resolution", "body": body}
    replay.transport.extend([data[1], bad, bad, bad])
    with pytest.raises(LLMError, match=f"^entity resolution: .*{message}") as err:
        mem.add_episode(
            group, "Kathy Johansson moved to Stockholm in September.", reference_time=at(2022, 10)
        )
    assert err.value.step == "entity resolution"
    assert stored(mem, dsn, group) == before
    assert mem.get_entity(group, "Kathy Johansson") is None
    assert ledger(dsn, group) == sorted(
        [
            *paid,
            spent("extraction", data[1]["body"], True),
            *[spent("entity resolution", body, False)] * 3,
        ]
    )


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            _truncated("extraction", '{"entities": [{"name": "Ada", "type": "Per'),
            r"^extraction: the model's answer was cut off at its output limit",
        ),
        (_refused("extraction"), r"^extraction: the model gave no answer \(it refused"),
        (_no_choices("extraction"), r"^extraction: the model sent no choices"),
    ],
)
def test_an_unusable_extraction_is_not_asked_again_and_writes_nothing(
    mem: timestone.Memory,
    replay: Replay,
    dsn: str,
    group: str,
    answer: dict[str, Any],
    message: str,
) -> None:
    replay.transport.extend([answer])
    with pytest.raises(UnusableAnswer, match=message) as err:
        mem.add_episode(group, "Ada likes tea.", reference_time=at(2020, 2))
    assert err.value.step == "extraction"
    assert len(replay.requests) == 1  # asked the same, it would answer the same
    _nothing_written(mem, group)
    assert stored(mem, dsn, group)[0] == (0, 0, 0, 0, 0)
    assert ledger(dsn, group) == [spent("extraction", answer["body"], False)]


def test_an_unusable_summary_condensation_writes_nothing(
    mem: timestone.Memory, replay: Replay, dsn: str, group: str
) -> None:
    data = json.loads((FIXTURES / "condense.json").read_text())["responses"]
    projects = [
        timestone.FactInput(
            "Orla",
            "WORKED_ON",
            f"Project {i}",
            fact=f"Orla worked on project {i}, a long field campaign with many partners "
            f"across the northern coast, documented in report number {i}.",
            valid_at=at(2000 + i),
        )
        for i in range(20)
    ]
    replay.transport.extend([many("WORKED_ON")])
    mem.add_facts(group, projects, reference_time=at(2023))
    before = stored(mem, dsn, group)
    stray = {
        "step": "summary_condensation",
        "body": chat_completion(
            {"summaries": [{"item": 1, "summary": "Orla: roboticist."}]},
            model="gpt-4.1-nano-2025-04-14",
        ),
    }
    replay.transport.extend([data[0], data[1], stray, stray, stray])
    with pytest.raises(LLMError, match=r"summaries\.0\.item: 1 is not an item asked about"):
        mem.add_episode(group, "Orla founded Harbour Lab in February.", reference_time=at(2024, 3))
    assert stored(mem, dsn, group) == before
    # the question add_facts asked about WORKED_ON, then the episode's five failed calls
    assert mem.llm_usage(group).calls == 1 + 5


# -- add_episodes: every item checked before the first runs ---------------------------


def test_add_episodes_checks_every_item_before_the_first_runs(
    mem: timestone.Memory, replay: Replay, dsn: str, group: str
) -> None:
    """A bad item anywhere in the list is refused, naming it, before any item is
    extracted: no model call is made and nothing is written."""
    good: list[dict[str, object]] = [
        {"content": f"Note {i}.", "reference_time": at(2020)} for i in range(5)
    ]
    refused: list[tuple[dict[str, object], str]] = [
        ({"saga": 5}, "episodes[3]: saga must be a string, got int"),
        (
            {"saga": "a\x00"},
            "episodes[3]: saga contains a NUL byte, which Postgres text cannot store",
        ),
        ({"name": 5}, "episodes[3]: episode name must be a string, got int"),
        ({"name": ""}, "episodes[3]: episode name is empty"),
        ({"idempotency_key": ""}, "episodes[3]: idempotency_key is empty"),
        ({"idempotency_key": 5}, "episodes[3]: idempotency_key must be a string, got int"),
        (
            {"source_description": None},
            "episodes[3]: source_description must be a string, got NoneType",
        ),
        ({"source": "pdf"}, "episodes[3]: source must be one of text, message, json, got 'pdf'"),
        ({"content": "  "}, "episodes[3]: episode content is empty"),
        (
            {"content": "a\x00"},
            "episodes[3]: episode content looks binary (NUL or control characters); pass text",
        ),
        (
            {"content": "x" * 11},
            "episodes[3]: episode content has 11 characters; the limit is 10 (raise max_chars, "
            "or use add_document, which chunks long text)",
        ),
        (
            {"reference_time": datetime(2020, 1, 1)},
            "episodes[3]: reference_time is a naive datetime (2020-01-01T00:00:00); pass a "
            "timezone-aware one, for example datetime(..., tzinfo=UTC)",
        ),
    ]
    for change, message in refused:
        items = [dict(e) for e in good]
        items[3].update(change)
        with pytest.raises(InvalidInput) as err:
            mem.add_episodes(group, items, max_chars=10)
        assert str(err.value) == message, change
    with pytest.raises(InvalidInput) as err:
        mem.add_episodes(group, good, max_chars=0)
    assert str(err.value) == "max_chars must be a positive integer, got 0"
    assert replay.transport.requests == []
    assert stored(mem, dsn, group)[0] == (0, 0, 0, 0, 0)
    _nothing_written(mem, group)
    assert ledger(dsn, group) == []


def test_add_episodes_refuses_an_on_progress_that_is_not_a_function(
    mem: timestone.Memory, replay: Replay, dsn: str, group: str
) -> None:
    """As ``add_fact_batches`` does, before the first episode is extracted."""
    items = [{"content": f"Note {i}.", "reference_time": at(2020)} for i in range(3)]
    with pytest.raises(InvalidInput) as err:
        mem.add_episodes(group, items, on_progress=5)  # pyright: ignore[reportArgumentType]
    assert str(err.value) == "on_progress must be a function or None, got int"
    assert replay.transport.requests == []
    assert stored(mem, dsn, group)[0] == (0, 0, 0, 0, 0)


def test_llm_usage_names_since(mem: timestone.Memory, group: str) -> None:
    with pytest.raises(InvalidInput) as err:
        mem.llm_usage(group, since=0)  # pyright: ignore[reportArgumentType]
    assert str(err.value) == "since must be a timezone-aware datetime, got int"
    with pytest.raises(InvalidInput) as err:
        mem.llm_usage(group, since=datetime(2020, 1, 1))
    assert str(err.value) == (
        "since is a naive datetime (2020-01-01T00:00:00); pass a timezone-aware one, "
        "for example datetime(..., tzinfo=UTC)"
    )


class _Founded(pydantic.BaseModel):
    """A company."""

    founded: datetime | None = None
    employees: int | None = None


def test_a_year_given_for_a_declared_date_is_dropped_not_read_as_1970(
    mem: timestone.Memory, replay: Replay, group: str
) -> None:
    """The model writes the year, "1998", where the type declares a datetime: lax
    validation would read it as seconds since 1970. That attribute goes, with a warning;
    the entity's other attributes stay."""
    answer = {
        "entities": [
            {
                "name": "Acme",
                "type": "Company",
                "attributes": [
                    {"key": "founded", "value": "1998"},
                    {"key": "employees", "value": "120"},
                ],
            }
        ],
        "facts": [],
    }
    replay.transport.extend([{"step": "extraction", "body": chat_completion(answer)}])
    with pytest.warns(ExtractionWarning, match="founded: '1998' is a number, not a date; dropped"):
        mem.add_episode(
            group,
            "Acme, a company founded in 1998, has 120 employees.",
            reference_time=at(2024, 3, 5),
            entity_types={"Company": _Founded},
        )
    acme = mem.get_entity(group, "Acme")
    assert acme is not None
    assert acme.attributes == {"employees": 120}
