"""``timestone serve mcp`` and ``timestone ui``: servers over the store.

A signal stops them cleanly (see ``timestone.cli._signals``). Both follow the
rules of ``timestone._local_server``: off the loopback interface a token is
required, and every request's Host and Origin must name the server (or a host
given with ``--allow-host``).
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

AllowHost = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        help="A host name the clients use besides the bind address (e.g. the name a reverse "
        "proxy forwards); repeat for several. Requests naming another host get 421.",
    ),
]


def _allowed(hosts: list[str] | None) -> list[str]:
    from .._local_server import check_allowed_host

    return [guard(lambda h=h: check_allowed_host(h)) for h in hosts or []]


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
    allow_host: AllowHost = None,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
) -> None:
    """Serve the store to agents over the Model Context Protocol.

    Over http on any address but loopback it needs a token (TIMESTONE_MCP_TOKEN), and
    belongs behind a TLS proxy: see docs/production.md."""
    from ..mcp_server import build_server, check_exposure, check_port, run_http

    serving()
    if transport not in ("stdio", "http"):
        raise fail(InvalidInput(f"--transport must be stdio or http, got {transport!r:.80}"))
    allowed = _allowed(allow_host)
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
        from .._local_server import url_host

        guarded = "bearer token required" if token else "loopback only, no token"
        err_console.print(
            f"MCP over streamable HTTP on http://{url_host(host)}:{port}/mcp ({guarded})",
            highlight=False,
        )
        run_http(server, host=host, port=port, allow_hosts=allowed)


def ui(
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8766,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="TIMESTONE_UI_TOKEN",
            show_envvar=True,
            help="The token every request must carry (a bearer header, or once ?token= in "
            "the browser, then a cookie); required off loopback. Prefer the variable.",
        ),
    ] = None,
    allow_host: AllowHost = None,
    dsn: Dsn = None,
    data_dir: DataDir = None,
    group: Group = None,
    embedder: EmbedderOpt = None,
) -> None:
    """A small local web view: the graph of current facts, with an as-of slider.

    On any address but loopback it needs a token (TIMESTONE_UI_TOKEN): see
    docs/production.md."""
    from .._local_server import check_exposure
    from ..viz.web import serve

    serving()
    checked = guard(
        lambda: check_exposure(
            host, token, server="the web view", variable="TIMESTONE_UI_TOKEN", access="read"
        )
    )
    allowed = _allowed(allow_host)
    g = resolve_group(group)
    with open_store(dsn, data_dir, embedder, embeds=True) as mem:
        guard(
            lambda: serve(
                mem,
                g,
                host=host,
                port=port,
                token=checked,
                allow_hosts=allowed,
                announce=lambda line: err_console.print(line, highlight=False),
            )
        )
