"""The same server over streamable HTTP, on a loopback port."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from _mcp_ports import free_port, wait_for_port
from mcp import Client


async def test_streamable_http_serves_the_tools(data_dir: Path, dsn: str, group: str) -> None:
    del dsn
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMESTONE_")}
    env.update(TIMESTONE_DATA_DIR=str(data_dir), TIMESTONE_GROUP=group)
    command = [str(Path(sys.executable).parent / "timestone"), "serve", "mcp"]
    proc = await asyncio.create_subprocess_exec(
        *command,
        "--transport",
        "http",
        "--port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_for_port(port, proc)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            listed = await client.list_tools()
            assert "add_memory" in {t.name for t in listed.tools}
            status = await client.call_tool("status", {})
            assert not status.is_error
            assert status.structured_content is not None
            assert status.structured_content["group_id"] == group
        busy = await asyncio.create_subprocess_exec(
            *command,
            "--transport",
            "http",
            "--port",
            str(port),
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(busy.communicate(), timeout=120)
        assert busy.returncode == 9
        assert f"port {port} on 127.0.0.1 is already in use" in err.decode()
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), timeout=30)
