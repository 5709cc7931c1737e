"""What an MCP client may pass the tools: an argument a tool does not take, two memories in
one call, a blank time, an empty entity, and what a tool's schema refuses (a limit out of
its range, a missing or wrongly typed argument) are refused by their tool-argument names,
in the server's own one-line words, and nothing is written. The server runs in this
process, on the session's memory."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client

import timestone
from timestone.mcp_server import build_server

FACT = {"source": "Ada", "relation": "WORKS_AT", "target": "Acme"}


def _refusal(result: Any) -> str:
    assert result.is_error, result.content
    return " ".join(getattr(part, "text", "") for part in result.content)


async def _nothing_written(memory: timestone.AsyncMemory, group: str) -> None:
    stats = await memory.stats(group)
    assert sum(table["versions"] for table in stats.values()) == 0, stats


async def test_add_memory_takes_facts_or_content_not_both(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    async with Client(build_server(amemory, group_id=group)) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert "not both" in (listed["add_memory"].description or "")
        both = await client.call_tool(
            "add_memory", {"facts": [FACT], "content": "Ada is moving to Paris next month."}
        )
        assert _refusal(both) == (
            "Error executing tool add_memory: InvalidInput: add_memory takes facts or content, "
            "not both: one call records one episode; call it once for each"
        )
    await _nothing_written(amemory, group)


async def test_an_argument_the_tool_does_not_take_is_refused_by_name(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    async with Client(build_server(amemory, group_id=group)) as client:
        dated = await client.call_tool(
            "add_memory", {"content": "Ada moved to Berlin.", "valid_at": "2015-06-01"}
        )
        assert _refusal(dated) == (
            "Error executing tool add_memory: InvalidInput: add_memory has no argument "
            "'valid_at'; its arguments are content, facts, reference_time, name"
        )
        past = await client.call_tool("search_facts", {"query": "Ada", "as_of": "2001-01-01"})
        assert _refusal(past) == (
            "Error executing tool search_facts: InvalidInput: search_facts has no argument "
            "'as_of'; its arguments are query, limit, valid_at"
        )
        tenant = await client.call_tool("add_memory", {"facts": [FACT], "group_id": "bob"})
        assert _refusal(tenant) == (
            "Error executing tool add_memory: InvalidInput: add_memory has no argument "
            "'group_id'; its arguments are content, facts, reference_time, name "
            f"(this server works in the memory group {group!r} only)"
        )
        none = await client.call_tool("status", {"verbose": True, "tables": "all"})
        assert _refusal(none) == (
            "Error executing tool status: InvalidInput: status has no argument 'verbose', "
            "'tables'; it takes no arguments"
        )
    await _nothing_written(amemory, group)
    async with Client(build_server(amemory, group_id=None)) as client:
        typo = await client.call_tool("status", {"group_id": group, "group": group})
        assert _refusal(typo) == (
            "Error executing tool status: InvalidInput: status has no argument 'group'; "
            "its arguments are group_id"
        )


async def test_errors_name_the_tool_arguments_and_blank_times_are_refused(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    async with Client(build_server(amemory, group_id=group)) as client:
        timeline = await client.call_tool("entity_timeline", {"entity": ""})
        assert _refusal(timeline) == (
            "Error executing tool entity_timeline: InvalidInput: entity is empty"
        )
        held = await client.call_tool("facts_as_of", {"as_of": "now", "entity": " "})
        assert _refusal(held) == "Error executing tool facts_as_of: InvalidInput: entity is empty"
        blank = await client.call_tool("facts_as_of", {"as_of": "   "})
        assert _refusal(blank) == (
            "Error executing tool facts_as_of: InvalidPeriod: as_of '   ' is not a date; "
            "use ISO 8601 such as 2019-05-01, 2019-05-01T12:00:00Z, 2019-05, 2019, or 'now'"
        )
        world = await client.call_tool("search_facts", {"query": "Ada", "valid_at": " "})
        assert "InvalidPeriod: valid_at ' ' is not a date" in _refusal(world)
        observed = await client.call_tool("add_memory", {"facts": [FACT], "reference_time": "  "})
        assert _refusal(observed) == (
            "Error executing tool add_memory: InvalidPeriod: reference_time '  ' is not a "
            "date; use ISO 8601 such as 2019-05-01, 2019-05-01T12:00:00Z, 2019-05, 2019, "
            "or 'now'"
        )
    await _nothing_written(amemory, group)


REFUSED: list[tuple[str, dict[str, Any], str]] = [  # what the tool's schema refuses, and the server's words for it
    ("search_facts", {"query": "Ada", "limit": 0}, "limit must be an integer from 1 to 100, got 0"),
    ("search_entities", {"query": "Ada", "limit": 101}, "limit must be an integer from 1 to 100, got 101"),
    ("get_episodes", {"limit": "ten"}, 'limit must be an integer from 1 to 100, got "ten"'),
    ("facts_as_of", {"as_of": "now", "limit": 2.5}, "limit must be an integer from 1 to 1000, got 2.5"),
    ("entity_timeline", {"entity": "Ada", "limit": 0}, "limit must be an integer from 1 to 1000, got 0"),
    ("entity_timeline", {"entity": "Ada", "limit": 1001}, "limit must be an integer from 1 to 1000, got 1001"),
    ("facts_as_of", {}, "as_of is required"),
    ("remove_episode", {}, "episode_id is required"),
    ("search_facts", {"query": None}, "query must be a string, got null"),
    ("entity_timeline", {"entity": ["Ada"]}, 'entity must be a string, got the list ["Ada"]'),
    ("add_memory", {"facts": "Ada works at Acme"}, 'facts must be a list, got the string "Ada works at Acme"'),
    ("add_memory", {"facts": FACT}, "facts must be a list, got the object " + json.dumps(FACT)),
    ("add_memory", {"facts": [FACT, 7]}, "facts[1] must be an object, got the number 7"),
    ("get_episodes", {"episode_ids": ["x", 7]}, "episode_ids[1] must be a string, got the number 7"),
    ("search_facts", {"query": 5, "limit": 0}, "query must be a string, got the number 5; limit must be an integer from 1 to 100, got 0"),
]  # fmt: skip


async def test_arguments_the_schema_refuses_are_refused_in_the_servers_words(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    async with Client(build_server(amemory, group_id=group)) as client:
        for tool, arguments, why in REFUSED:
            refused = _refusal(await client.call_tool(tool, arguments))
            assert refused == f"Error executing tool {tool}: InvalidInput: {why}"
            assert "\n" not in refused
    await _nothing_written(amemory, group)
    async with Client(build_server(amemory, group_id=None)) as client:
        missing = await client.call_tool("status", {})
        assert (
            _refusal(missing) == "Error executing tool status: InvalidInput: group_id is required"
        )
        empty = await client.call_tool("add_memory", {"group_id": "", "facts": [FACT]})
        assert _refusal(empty) == "Error executing tool add_memory: InvalidInput: group_id is empty"


async def test_every_limit_has_its_range_in_the_schema(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    async with Client(build_server(amemory, group_id=group)) as client:
        listed = (await client.list_tools()).tools
    ranges: dict[str, tuple[int, int]] = {}
    for tool in listed:
        limit = tool.input_schema["properties"].get("limit")
        if limit is not None:
            [number] = [s for s in limit.get("anyOf", [limit]) if s["type"] == "integer"]
            ranges[tool.name] = (number.get("minimum"), number.get("maximum"))
    assert ranges == {
        "search_facts": (1, 100),
        "search_entities": (1, 100),
        "entity_timeline": (1, 1000),
        "facts_as_of": (1, 1000),
        "get_episodes": (1, 100),
    }
