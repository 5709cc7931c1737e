"""An MCP client from the ``mcp`` SDK talks to ``timestone serve mcp`` over stdio."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any, cast

from mcp import Client
from mcp.client.stdio import StdioServerParameters

TOOLS = {
    "add_memory",
    "search_facts",
    "search_entities",
    "entity_timeline",
    "facts_as_of",
    "get_episodes",
    "remove_episode",
    "status",
}


def _server(data_dir: Path, *args: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMESTONE_")}
    env["TIMESTONE_DATA_DIR"] = str(data_dir)
    command = str(Path(sys.executable).parent / "timestone")
    return StdioServerParameters(command=command, args=["serve", "mcp", *args], env=env)


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: Any = result.structured_content
    assert isinstance(content, dict)
    return cast(dict[str, Any], content)


async def test_a_client_adds_a_memory_and_finds_it(data_dir: Path, dsn: str, group: str) -> None:
    del dsn  # keeps the embedded server up for the subprocess
    async with Client(_server(data_dir, "--group", group)) as client:
        listed = await client.list_tools()
        tools = {t.name: t for t in listed.tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert len(tool.description or "") > 30, tool.name
            assert "group_id" not in tool.input_schema.get("properties", {})

        added = _data(
            await client.call_tool(
                "add_memory",
                {
                    "facts": [
                        {
                            "source": "Ada",
                            "relation": "PREFERS_DRINK",
                            "target": "green tea",
                            "fact": "Ada prefers green tea.",
                            "valid_at": "2024-03-01T00:00:00Z",
                        }
                    ],
                    "reference_time": "2024-03-02",
                    "name": "breakfast chat",
                },
            )
        )
        assert added["created"] is True
        found = _data(await client.call_tool("search_facts", {"query": "what tea does Ada drink"}))
        assert [f["fact"] for f in found["facts"]][:1] == ["Ada prefers green tea."]

        timeline = _data(await client.call_tool("entity_timeline", {"entity": "Ada"}))
        assert timeline["facts"][0]["valid_at"].startswith("2024-03-01")
        narrowed = {"entity": "Ada", "until": "2024-03-01", "relation": "PREFERS_DRINK", "limit": 5}
        before = _data(await client.call_tool("entity_timeline", narrowed))
        assert before["facts"] == []  # the period starts on the window's end
        narrowed["until"] = "2024-03-02"
        during = _data(await client.call_tool("entity_timeline", narrowed))
        assert during["facts"] == timeline["facts"]
        bad = await client.call_tool(
            "entity_timeline", {"entity": "Ada", "since": "2025-01-01", "until": "2024-01-01"}
        )
        assert bad.is_error
        assert "must be after since" in str(bad.content)
        episodes = _data(await client.call_tool("get_episodes", {}))
        assert [e["name"] for e in episodes["episodes"]] == ["breakfast chat"]
        status = _data(await client.call_tool("status", {}))
        assert status["group_id"] == group
        assert status["tables"]["facts"]["current"] == 1

        unknown = await client.call_tool("entity_timeline", {"entity": "Nobody"})
        assert unknown.is_error
        assert "unknown entity 'Nobody'" in str(unknown.content)

        removed = _data(
            await client.call_tool("remove_episode", {"episode_id": added["episode_id"]})
        )
        assert removed["facts_expired"] == 1
        gone = _data(await client.call_tool("search_facts", {"query": "Ada tea"}))
        assert gone["facts"] == []


async def test_groups_per_call_when_the_server_allows(data_dir: Path, dsn: str) -> None:
    del dsn
    mine, theirs = ("t-" + uuid.uuid4().hex[:16] for _ in range(2))
    async with Client(_server(data_dir, "--any-group")) as client:
        listed = await client.list_tools()
        for tool in listed.tools:
            assert "group_id" in tool.input_schema["required"], tool.name
        fact = {"source": "Bo", "relation": "OWNS", "target": "a boat", "fact": "Bo owns a boat."}
        _data(await client.call_tool("add_memory", {"group_id": mine, "facts": [fact]}))
        here = _data(await client.call_tool("search_facts", {"group_id": mine, "query": "boat"}))
        there = _data(await client.call_tool("search_facts", {"group_id": theirs, "query": "boat"}))
        assert [f["fact"] for f in here["facts"]] == ["Bo owns a boat."]
        assert there["facts"] == []
        missing = await client.call_tool("status", {})
        assert missing.is_error
