"""An entity's current version is the fold of its current mentions in recording order.

Writes continue the fold from the current version when they only add later mentions;
removal folds from the start. Both are checked against a model written here: the
first spelling is the name, labels are the ordered union, attributes are updated in
turn, and the explicit summary is the last non-empty one.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timestone
from timestone import EntityInput, FactInput

REF = datetime(2024, 1, 1, tzinfo=UTC)

Mention = tuple[str, tuple[str, ...], dict[str, Any], str | None]

mention = st.tuples(
    st.sampled_from(["Ada Lovelace", "ada lovelace", "ADA  Lovelace"]),
    st.lists(st.sampled_from(["Engineer", "Author", "Parent"]), unique=True, max_size=3).map(
        lambda extra: ("Person", *extra)
    ),
    st.dictionaries(
        st.sampled_from(["born", "city", "rank"]),
        st.one_of(st.integers(-5, 5), st.sampled_from(["x", "y"]), st.floats(0.5, 2.5)),
        max_size=3,
    ),
    st.one_of(st.none(), st.sampled_from(["", "Mathematician.", "Wrote the first program."])),
)


def _model(mentions: list[Mention]) -> dict[str, Any]:
    labels: list[str] = []
    attributes: dict[str, Any] = {}
    summary = ""
    for _, extra, attrs, note in mentions:
        labels.extend(label for label in extra if label not in labels)
        attributes.update(attrs)
        if note:
            summary = note
    return {
        "name": mentions[0][0],
        "labels": labels,
        "attributes": attributes,
        "summary": summary,
    }


def _stored(dsn: str, group: str) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT name, labels, attributes, summary FROM timestone.entities"
            " WHERE group_id = %s AND norm_name = 'ada lovelace' AND expired_at IS NULL",
            (group,),
        ).fetchone()
    assert row is not None
    name, labels, attributes, summary = row
    return {"name": name, "labels": labels, "attributes": attributes, "summary": summary}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(episodes=st.lists(mention, min_size=1, max_size=5), removed=st.integers(0, 4))
def test_entity_version_is_the_fold_of_its_mentions(
    memory: timestone.Memory, dsn: str, episodes: list[Mention], removed: int
) -> None:
    group = "fold-" + uuid.uuid4().hex[:10]
    ids: list[uuid.UUID] = []
    for i, (name, labels, attributes, summary) in enumerate(episodes):
        ada = EntityInput(name, labels=labels, attributes=attributes, summary=summary)
        res = memory.add_facts(
            group,
            [FactInput(ada, "KNOWS", f"Friend {i}")],
            reference_time=REF + timedelta(days=i),
        )
        ids.append(res.episode.id)
        assert _stored(dsn, group) == _model(episodes[: i + 1])
    if len(episodes) > 1:
        gone = removed % len(episodes)
        memory.remove_episode(group, ids[gone])
        rest = [m for k, m in enumerate(episodes) if k != gone]
        assert _stored(dsn, group) == _model(rest)


def test_a_mention_recorded_after_the_writes_clock_is_folded_in_its_place(
    memory: timestone.Memory, dsn: str
) -> None:
    # a writer whose clock is behind a mention already stored (two writers that meet on
    # one entity under different spellings, each holding its own name's lock) folds the
    # entity from the start in recording order, not on top of its current version
    group = "fold-" + uuid.uuid4().hex[:10]

    def ada(rank: str) -> EntityInput:
        return EntityInput("Ada Lovelace", labels=("Person",), attributes={"rank": rank})

    first = memory.add_facts(group, [FactInput(ada("a"), "KNOWS", "Friend 1")], reference_time=REF)
    later = memory.add_facts(group, [FactInput(ada("c"), "KNOWS", "Friend 2")], reference_time=REF)
    with psycopg.connect(dsn) as conn:  # the second one recorded a day ahead of the clock
        conn.execute(
            "UPDATE timestone.mentions SET recorded_at = recorded_at + interval '1 day'"
            " WHERE group_id = %s AND episode_id = %s",
            (group, later.episode.id),
        )
    assert first.episode.id != later.episode.id
    assert _stored(dsn, group)["attributes"] == {"rank": "c"}
    memory.add_facts(group, [FactInput(ada("b"), "KNOWS", "Friend 3")], reference_time=REF)
    # in recording order: a, then b (now), then c (a day ahead): c stands
    assert _stored(dsn, group)["attributes"] == {"rank": "c"}
