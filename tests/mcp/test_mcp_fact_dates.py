"""The dates of the facts an MCP client records are read as every other time a tool takes,
and as ``timestone ingest`` reads the facts of a file: a year, a month, a date or a datetime
without an offset is UTC. A date that cannot be read is refused by the fact's place in the
call (``facts[1].valid_at``), in words for the agent, and nothing is written. The server
runs in this process, on the session's memory."""

from __future__ import annotations

from typing import Any, cast

from mcp import Client

import timestone
from timestone.cli._ingest import parse_episode
from timestone.mcp_server import build_server

FACT = {"source": "Ada", "relation": "WORKS_AT", "target": "Acme"}
USE = "use ISO 8601 such as 2019-05-01, 2019-05-01T12:00:00Z, 2019-05, 2019, or 'now'"  # parse_when's words, the same for every time a tool takes

FORMS = {
    "2019": "2019-01-01T00:00:00+00:00",
    "2019-05": "2019-05-01T00:00:00+00:00",
    "2019-05-01": "2019-05-01T00:00:00+00:00",
    "2019-05-01T12:30:00": "2019-05-01T12:30:00+00:00",
    "2019-05-01T12:30:00Z": "2019-05-01T12:30:00+00:00",
    "2019-05-01T14:30:00+02:00": "2019-05-01T12:30:00+00:00",
}


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: Any = result.structured_content
    assert isinstance(content, dict)
    return cast(dict[str, Any], content)


def _refusal(result: Any) -> str:
    assert result.is_error, result.content
    return " ".join(getattr(part, "text", "") for part in result.content)


async def test_a_facts_dates_are_read_as_reference_time_and_ingest_read_them(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    async with Client(build_server(amemory, group_id=group)) as client:
        for i, (form, expected) in enumerate(FORMS.items()):
            dated = {**FACT, "source": f"Ada {i}", "valid_at": form, "invalid_at": "2021"}
            added = _data(await client.call_tool("add_memory", {"facts": [dated]}))
            [fact] = added["facts"]
            assert (fact["valid_at"], fact["invalid_at"]) == (
                expected,
                "2021-01-01T00:00:00+00:00",
            ), form

            observed = {**FACT, "source": f"Bo {i}"}
            added = _data(
                await client.call_tool("add_memory", {"facts": [observed], "reference_time": form})
            )
            assert added["facts"][0]["valid_at"] == expected, form

            # the command line reads the same date in a file the same way
            line = parse_episode({"reference_time": form, "facts": [dated]}, 1, "key")
            assert line.reference_time.isoformat() == expected
            assert line.facts[0].valid_at is not None
            assert line.facts[0].valid_at.isoformat() == expected


async def test_a_date_that_cannot_be_read_is_refused_by_the_facts_place(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    later = {**FACT, "target": "Globex"}
    async with Client(build_server(amemory, group_id=group)) as client:
        month = await client.call_tool(
            "add_memory", {"facts": [FACT, {**later, "valid_at": "2019-13-01"}]}
        )
        assert _refusal(month) == (
            "Error executing tool add_memory: InvalidPeriod: facts[1].valid_at '2019-13-01' "
            f"is not a date; {USE}"
        )
        blank = await client.call_tool("add_memory", {"facts": [{**FACT, "invalid_at": " "}]})
        assert _refusal(blank) == (
            f"Error executing tool add_memory: InvalidPeriod: facts[0].invalid_at ' ' is not "
            f"a date; {USE}"
        )
        number = await client.call_tool(
            "add_memory", {"facts": [FACT, {**later, "valid_at": 2019}]}
        )
        assert _refusal(number) == (
            "Error executing tool add_memory: InvalidPeriod: facts[1].valid_at is not a date: "
            "give it as text, such as 2019-05-01 or 2019-05-01T12:00:00Z; got the number 2019"
        )
        backwards = await client.call_tool(
            "add_memory", {"facts": [{**FACT, "valid_at": "2020", "invalid_at": "2019-06"}]}
        )
        assert _refusal(backwards) == (
            "Error executing tool add_memory: InvalidPeriod: facts[0].invalid_at "
            "2019-06-01T00:00:00+00:00 is not after its valid_at 2020-01-01T00:00:00+00:00"
        )
        before_observed = await client.call_tool(
            "add_memory",
            {"facts": [FACT, {**later, "invalid_at": "2019"}], "reference_time": "2020-01-01"},
        )
        assert _refusal(before_observed) == (
            "Error executing tool add_memory: InvalidPeriod: facts[1].invalid_at "
            "2019-01-01T00:00:00+00:00 is not after its valid_at 2020-01-01T00:00:00+00:00 "
            "(valid_at defaults to reference_time)"
        )
        relation = await client.call_tool(
            "add_memory", {"facts": [FACT, {**later, "relation": "works at"}]}
        )
        assert _refusal(relation) == (
            "Error executing tool add_memory: InvalidInput: facts[1]: relation 'works at' "
            "must be an identifier of at most 128 characters (letters, digits and "
            "underscores, not starting with a digit), like WORKS_AT"
        )
        for refused in (month, blank, number, backwards, before_observed, relation):
            assert "tzinfo" not in _refusal(refused)
            assert "datetime(" not in _refusal(refused)
    stats = await amemory.stats(group)
    assert sum(table["versions"] for table in stats.values()) == 0, stats
