"""``timestone serve mcp`` and ``timestone ui``: servers over the store.

A signal stops them cleanly (see ``timestone.cli._signals``). Over HTTP off the
loopback interface the MCP server needs a bearer token (see
``timestone.mcp_server.check_exposure``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import InvalidInput, TimestoneError
from ._options import DataDir, Dsn, EmbedderOpt, Group, fail, guard, open_store, resolve_store
from ._output import err_console
from ._signals import serving, stop_by
from ._stdio import stdin_until_stopped
from ._store import resolve_group

if TYPE_CHECKING:
    from .._memory_async import AsyncMemory

__all__ = ["serve_app", "ui"]

serve_app = typer.Typer(help="Run a server over the store.", no_args_is_help=True)


@serve_app.command("mcp")
def serve_mcp(
    transport: Annotated[
        str, typer.Option("--transport", help="stdio, or http (streamable HTTP).")
    ] = "stdio",
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8765,
    any_group: Annotated[
        bool,
        typer.Option(
            "--any-group",
            help="Let each tool call name its group (default: every call is in --group).",
        ),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="TIMESTONE_MCP_TOKEN",
            show_envvar=True,
            help="With http: the bearer token every request must carry (401 otherwise); "
            "required off loopback. Prefer the variable: a command line is visible in ps.",
        ),
    ] = None,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
) -> None:
    """Serve the store to agents over the Model Context Protocol.

    Over http on any address but loopback it needs a token (TIMESTONE_MCP_TOKEN), and
    belongs behind a TLS proxy: see docs/cli.md."""
    from ..mcp_server import build_server, check_exposure, check_port

    serving()
    if transport not in ("stdio", "http"):
        raise fail(InvalidInput(f"--transport must be stdio or http, got {transport!r:.80}"))
    if transport == "http":
        token = guard(lambda: check_exposure(host, token))
        guard(lambda: check_port(host, port))
    else:
        token = None  # stdio: the client started this process; there is no one else to ask
    g = resolve_group(group)
    try:
        target, chosen, ontology = resolve_store(dsn, data_dir, embedder)
    except TimestoneError as exc:
        raise fail(exc) from exc

    from .._memory_async import AsyncMemory

    async def opener() -> AsyncMemory:
        return await AsyncMemory.open(target, embedder=chosen, ontology=ontology)

    server = build_server(opener, group_id=None if any_group else g, token=token)
    if transport == "stdio":
        with stdin_until_stopped() as end_input, stop_by(end_input):
            server.run("stdio")
    else:
        guarded = "bearer token required" if token else "loopback only, no token"
        err_console.print(f"MCP over streamable HTTP on http://{host}:{port}/mcp ({guarded})")
        server.run("streamable-http", host=host, port=port)


def ui(
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8766,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
) -> None:
    """A small local web view: the graph of current facts, with an as-of slider."""
    from ..viz.web import serve

    g = resolve_group(group)
    serving()
    with open_store(dsn, data_dir, embedder, embeds=True) as mem:
        guard(lambda: serve(mem, g, host=host, port=port, announce=err_console.print))
