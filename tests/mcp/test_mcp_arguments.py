"""What an MCP client may pass the tools: an argument a tool does not take, two memories in
one call, a blank time or an empty entity are refused by their tool-argument names, and
nothing is written. The server runs in this process, on the session's memory."""

from __future__ import annotations

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
