"""Timestone over the Model Context Protocol: the tools an agent needs to remember and recall.

Run it with ``timestone serve mcp`` (stdio) or ``timestone serve mcp
--transport http`` (streamable HTTP at ``/mcp``). Group scoping is the
server's: by default every call works in the one group the server was started
with, and the tools do not even take a group; with ``--any-group`` each tool
takes a required ``group_id``. In Python::

    from timestone.mcp_server import build_server
    server = build_server(lambda: timestone.AsyncMemory.open(...), group_id="alice")
    server.run("stdio")

Over HTTP (``run_http``), ``token=`` makes every request carry
``Authorization: Bearer <token>`` (the ``mcp`` SDK's bearer authentication,
with a verifier that compares the one fixed token in constant time); a request
without it, or with another, is answered 401. ``check_exposure`` refuses to
serve off the loopback interface without one: whoever reaches the port would
read and write the memory. Every request's ``Host`` and ``Origin`` headers
are checked first (421, 403: ``timestone._local_server``), on every route. The
token travels in clear over plain HTTP: off one machine, put a TLS proxy in
front (``docs/production.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import inspect
import json
import socket
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from ._arguments import entity_ref
from ._local_server import (
    MIN_TOKEN_LENGTH,
    HostGuard,
    check_exposure,
    check_token,
    is_loopback,
    tokens_match,
)
from ._memory_async import AsyncMemory
from ._records import Fact, FactInput
from ._time import NOW, parse_when
from .errors import InvalidInput, InvalidPeriod, NotFound, TimestoneError

__all__ = [
    "INSTRUCTIONS",
    "MIN_TOKEN_LENGTH",
    "build_server",
    "check_exposure",
    "check_port",
    "check_token",
    "http_app",
    "is_loopback",
    "run_http",
]

INSTRUCTIONS = """\
Timestone is a long-term memory that tells time. It stores facts as
source -RELATION-> target, each with the world period it was true in
(valid_at .. invalid_at) and the system period the memory held it
(created_at .. expired_at). Newer world dates supersede older ones for
single-valued relations; nothing is ever lost: ask facts_as_of to see what the
memory believed at an earlier moment. Record what you learn with add_memory
(structured facts when you can: they need no extraction), look things up with
search_facts / search_entities, and use entity_timeline to see how something
changed over time. All times, a fact's valid_at and invalid_at included, are ISO
8601 (2024, 2024-05, 2024-05-01 or 2024-05-01T12:00:00Z; without an offset, UTC)
or now.
"""

Opener = Callable[[], Awaitable[AsyncMemory]]


def check_port(host: str, port: int) -> None:
    """Refuse a port that is already in use, before the server starts, with a clear error."""
    from ._ports import check_port_number
    from .errors import AddressInUse

    check_port_number(port)
    bind = host.strip().removeprefix("[").removesuffix("]")
    with socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bind, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise AddressInUse(
                    f"port {port} on {host} is already in use; pass another --port"
                ) from exc
            raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror}") from exc


class _FixedToken:
    """The ``mcp`` SDK's ``TokenVerifier`` for one shared secret, compared in constant time."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        if not tokens_match(token, self._token):
            return None
        return AccessToken(token=token, client_id="timestone-mcp", scopes=[])


def _auth(token: str | None) -> dict[str, Any]:
    """``MCPServer`` arguments for bearer authentication with ``token``; none without it."""
    if token is None:
        return {}
    from mcp.server.auth.settings import AuthSettings
    from pydantic import AnyHttpUrl

    # The SDK's resource-server mode with no OAuth routes: no authorization server exists
    # (no resource_server_url, so no metadata is published); issuer_url is required by the
    # settings model and only ever appears in those routes.
    settings = AuthSettings(issuer_url=AnyHttpUrl("http://localhost/"), resource_server_url=None)
    return {"auth": settings, "token_verifier": _FixedToken(check_token(token))}


class _HostCheck:
    """ASGI middleware: every request passes the local-server guard (``HostGuard``) before
    any route, the SDK's included; a refused one is answered 421 or 403."""

    def __init__(self, app: Any, guard: HostGuard) -> None:
        self._app = app
        self._guard = guard

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
            refused = self._guard.refusal(pairs)
            if refused is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                from starlette.responses import PlainTextResponse

                status, reason = refused
                await PlainTextResponse(reason + "\n", status_code=status)(scope, receive, send)
                return
        await self._app(scope, receive, send)


def http_app(server: Any, *, host: str, allow_hosts: Iterable[str] = ()) -> Any:
    """The ASGI app of ``server`` over streamable HTTP at ``/mcp``, behind the Host and
    Origin check for a server bound to ``host`` (plus the ``allow_hosts`` names). A
    server built without a token is refused on any ``host`` but loopback."""
    from mcp.server.transport_security import TransportSecuritySettings

    if getattr(server.settings, "auth", None) is None:  # built without a token
        check_exposure(host, None)  # loopback only, as the command line allows it
    guard = HostGuard.of(host, allow_hosts)
    # The SDK's own Host check compares strings, turns itself on for three spellings of
    # loopback only and covers /mcp alone; the guard covers every route instead
    # (docs/decisions/031-local-server-guard.md).
    off = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(host=host, transport_security=off)
    return _HostCheck(app, guard)


def run_http(server: Any, *, host: str, port: int, allow_hosts: Iterable[str] = ()) -> None:
    """Serve ``server`` over streamable HTTP on ``host``:``port`` until stopped."""
    import anyio
    import uvicorn

    bind = host.strip().removeprefix("[").removesuffix("]")
    app = http_app(server, host=bind, allow_hosts=allow_hosts)
    level = str(server.settings.log_level).lower()
    config = uvicorn.Config(app, host=bind, port=port, log_level=level)
    anyio.run(uvicorn.Server(config).serve)


def _when(value: str | None, what: str) -> datetime | None:
    """The time an argument gives; None when it is not given. A blank one is refused by
    ``parse_when``, naming the argument: leaving it out is how to ask for the default."""
    return None if value is None else parse_when(value, what)


def _shown(value: object) -> str:
    """A value a client sent, as JSON, cut to 80 characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:79] + "…"


_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (str, "the string"),
    ((int, float), "the number"),
    (list, "the list"),
    (dict, "the object"),
)


def _given(value: object) -> str:
    """What a client sent, for a refusal: ``the string "x"``, ``the number 5``, ``null``."""
    if value is None or isinstance(value, bool):
        return _shown(value)
    kind = next((kind for types, kind in _KINDS if isinstance(value, types)), "the value")
    return f"{kind} {_shown(value)}"


def _facts(facts: Sequence[Mapping[str, Any]], reference_time: datetime) -> list[FactInput]:
    """``add_memory``'s facts, their dates read as every other time a tool takes (and as
    ``timestone ingest`` reads a file's facts): ``parse_when``, so a date, a month, a
    year or a datetime without an offset is UTC. A refusal names the fact by its place,
    ``facts[2].valid_at``; nothing is written."""
    read: list[FactInput] = []
    for i, given in enumerate(facts):
        where = f"facts[{i}]"
        fields = dict(given)
        for end in ("valid_at", "invalid_at"):
            value = fields.get(end)
            if isinstance(value, str):
                fields[end] = parse_when(value, f"{where}.{end}")
            elif value is not None:
                raise InvalidPeriod(
                    f"{where}.{end} is not a date: give it as text, such as 2019-05-01 or "
                    f"2019-05-01T12:00:00Z; got {_given(value)}"
                )
        start, end = fields.get("valid_at"), fields.get("invalid_at")
        if isinstance(end, datetime) and end <= (start or reference_time):
            default = "" if start else " (valid_at defaults to reference_time)"
            raise InvalidPeriod(
                f"{where}.invalid_at {end.isoformat()} is not after its valid_at "
                f"{(start or reference_time).isoformat()}{default}"
            )
        try:
            read.append(FactInput.parse(fields))
        except InvalidInput as exc:
            raise type(exc)(f"{where}: {exc}") from exc
    return read


def _world(valid_at: str | None) -> Any:
    """A ``valid_at`` argument: now when it is not given, every period for 'all'."""
    if valid_at is None:
        return NOW
    if valid_at.strip().lower() == "all":
        return None
    return _when(valid_at, "valid_at")


def _fact(f: Fact) -> dict[str, Any]:
    return {
        "id": str(f.id),
        "source": f.source,
        "relation": f.relation,
        "target": f.target,
        "fact": f.fact,
        "valid_at": f.valid_at.isoformat(),
        "invalid_at": f.invalid_at.isoformat() if f.invalid_at else None,
        "recorded_at": f.created_at.isoformat(),
        "superseded_at": f.expired_at.isoformat() if f.expired_at else None,
        "episodes": [str(e) for e in f.episodes],
        **({"score": round(f.score, 4)} if f.score is not None else {}),
    }


class _Tools:
    """The tool bodies; each takes the group first."""

    def __init__(self, opener: Opener) -> None:
        self._opener = opener
        self._memory: AsyncMemory | None = None
        self._lock = asyncio.Lock()

    async def memory(self) -> AsyncMemory:
        async with self._lock:
            if self._memory is None:
                self._memory = await self._opener()
            return self._memory

    async def close(self) -> None:
        if self._memory is not None:
            await self._memory.close()
            self._memory = None

    async def add_memory(
        self,
        group_id: str,
        content: Annotated[
            str | None,
            Field(
                description="Free text to remember (extracted into facts when an LLM is set); "
                "not with facts."
            ),
        ] = None,
        facts: Annotated[
            list[dict[str, Any]] | None,
            Field(
                description=(
                    "Structured facts, preferred: each {source, relation, target, fact?, "
                    "valid_at?, invalid_at?}; relation in UPPER_SNAKE_CASE, e.g. WORKS_AT; "
                    "valid_at is when it became true (default: reference_time), "
                    "invalid_at when it stopped; dates as reference_time takes them. "
                    "Not with content."
                )
            ),
        ] = None,
        reference_time: Annotated[
            str | None,
            Field(description="When the information was observed (ISO 8601; default: now)."),
        ] = None,
        name: Annotated[str | None, Field(description="A short title for this memory.")] = None,
    ) -> dict[str, Any]:
        """Remember something: structured facts, or free text; one or the other, not both
        (one call records one episode: call it once for each). Returns what was recorded."""
        if facts and content:
            raise InvalidInput(
                "add_memory takes facts or content, not both: one call records one episode; "
                "call it once for each"
            )
        when = _when(reference_time, "reference_time") or datetime.now(UTC)
        if facts:
            read = _facts(facts, when)
            mem = await self.memory()
            res = await mem.add_facts(group_id, read, reference_time=when, name=name)
            return {
                "episode_id": str(res.episode.id),
                "created": res.created,
                "facts": [_fact(f) for f in res.facts],
                "closed": [_fact(f) for f in res.invalidated],
            }
        if not content or not content.strip():
            raise InvalidInput("add_memory needs content or facts")
        mem = await self.memory()
        if mem.llm is not None:
            res = await mem.add_episode(group_id, content, reference_time=when, name=name)
            return {
                "episode_id": str(res.episode.id),
                "created": res.created,
                "facts": [_fact(f) for f in res.facts],
                "closed": [_fact(f) for f in res.invalidated],
            }
        uri = "memory:" + uuid.uuid5(uuid.NAMESPACE_URL, content).hex
        doc = await mem.add_document(
            group_id, uri, content, title=name or content[:60], reference_time=when
        )
        return {
            "episode_ids": [str(e.id) for e in doc.episodes],
            "created": doc.created,
            "facts": [],
            "note": "stored as text (no LLM configured to extract facts); pass facts to "
            "record structured facts",
        }

    async def search_facts(
        self,
        group_id: str,
        query: Annotated[str, Field(description="What to look for, in plain words.")],
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        valid_at: Annotated[
            str | None,
            Field(description="World time the facts must be true at (default: now; 'all')."),
        ] = None,
    ) -> dict[str, Any]:
        """Find facts relevant to a question, true now (or at valid_at), best first."""
        mem = await self.memory()
        world = _world(valid_at)
        results = await mem.search(group_id, query, limit=limit, scopes=("facts",), valid_at=world)
        return {"facts": [_fact(f) for f in results.facts]}

    async def search_entities(
        self,
        group_id: str,
        query: Annotated[str, Field(description="A name or description of the entity.")],
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
    ) -> dict[str, Any]:
        """Find entities (people, places, things) by name or description."""
        mem = await self.memory()
        results = await mem.search(group_id, query, limit=limit, scopes=("entities",))
        entities = list(results.entities)
        return {
            "entities": [
                {
                    "id": str(e.id),
                    "name": e.name,
                    "type": e.entity_type,
                    "labels": list(e.labels),
                    "summary": e.summary,
                }
                for e in entities
            ]
        }

    async def entity_timeline(
        self,
        group_id: str,
        entity: Annotated[str, Field(description="The entity's name or id.")],
        as_of: Annotated[
            str | None,
            Field(description="Show the timeline as the memory held it then (default: now)."),
        ] = None,
        relation: Annotated[
            str | None, Field(description="Only this relation (e.g. WORKS_AT).")
        ] = None,
        since: Annotated[
            str | None, Field(description="Only periods that last past this date.")
        ] = None,
        until: Annotated[
            str | None, Field(description="Only periods that start before this date.")
        ] = None,
        limit: Annotated[
            int | None, Field(ge=1, le=1000, description="Only the first periods (1 to 1000).")
        ] = None,
    ) -> dict[str, Any]:
        """Every period of every fact about an entity, oldest first: how it changed over time.
        For an entity with a long history, narrow it by relation, dates or a limit."""
        mem = await self.memory()
        system = _when(as_of, "as_of")
        ref = entity_ref(entity, "entity")
        if await mem.get_entity(group_id, ref, as_of=system) is None:
            raise NotFound(f"unknown entity {entity!r:.80}")
        periods = await mem.timeline(
            group_id,
            ref,
            as_of=system,
            relation=relation,
            since=_when(since, "since"),
            until=_when(until, "until"),
            limit=limit,
        )
        return {"facts": [_fact(f) for f in periods]}

    async def facts_as_of(
        self,
        group_id: str,
        as_of: Annotated[
            str, Field(description="System time: what did the memory believe at this moment?")
        ],
        valid_at: Annotated[
            str | None,
            Field(description="World time the facts are true at (default: now; 'all')."),
        ] = None,
        entity: Annotated[str | None, Field(description="Only facts with this source.")] = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """What the memory held at an earlier moment (before later corrections or news)."""
        mem = await self.memory()
        system = _when(as_of, "as_of")
        world = _world(valid_at)
        source = None if entity is None else entity_ref(entity, "entity")
        found = await mem.facts(group_id, source=source, valid_at=world, as_of=system, limit=limit)
        return {"facts": [_fact(f) for f in found]}

    async def get_episodes(
        self,
        group_id: str,
        episode_ids: Annotated[
            list[str] | None, Field(description="Ids to fetch (default: the latest episodes).")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
    ) -> dict[str, Any]:
        """The recorded episodes (raw memories), newest first, with their content."""
        mem = await self.memory()
        found = await mem.episodes(group_id, ids=episode_ids, limit=limit)
        return {
            "episodes": [
                {
                    "id": str(e.id),
                    "name": e.name,
                    "content": e.content,
                    "source": e.source,
                    "reference_time": e.reference_time.isoformat(),
                    "recorded_at": e.created_at.isoformat(),
                }
                for e in found
            ]
        }

    async def remove_episode(
        self,
        group_id: str,
        episode_id: Annotated[str, Field(description="The id of the episode to forget.")],
    ) -> dict[str, Any]:
        """Forget an episode exactly, as if it had never been recorded (history stays)."""
        mem = await self.memory()
        report = await mem.remove_episode(group_id, episode_id)
        return {
            "episode_id": str(report.episode_id),
            "facts_expired": report.facts_expired,
            "facts_created": report.facts_created,
        }

    async def status(self, group_id: str) -> dict[str, Any]:
        """How much this memory holds: rows per table, now and over all versions."""
        mem = await self.memory()
        return {"group_id": group_id, "tables": await mem.stats(group_id)}


_TOOLS = (
    "add_memory",
    "search_facts",
    "search_entities",
    "entity_timeline",
    "facts_as_of",
    "get_episodes",
    "remove_episode",
    "status",
)
_READ_ONLY = {
    "search_facts",
    "search_entities",
    "entity_timeline",
    "facts_as_of",
    "get_episodes",
    "status",
}


def _bind(method: Callable[..., Awaitable[dict[str, Any]]], group_id: str | None) -> Any:
    """The tool function: the method with the group fixed, or with a required group_id."""
    sig = inspect.signature(method, eval_str=True)
    params = list(sig.parameters.values())

    @functools.wraps(method)
    async def tool(**kwargs: Any) -> dict[str, Any]:
        group = group_id if group_id is not None else kwargs.pop("group_id")
        try:
            return await method(group, **kwargs)
        except TimestoneError as exc:
            from mcp.server.mcpserver.exceptions import ToolError

            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    if group_id is not None:
        params = params[1:]
    else:
        params[0] = params[0].replace(
            annotation=Annotated[
                str, Field(description="The memory group (tenant) to work in.", min_length=1)
            ],
            kind=inspect.Parameter.KEYWORD_ONLY,
        )
    tool.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]
    )
    del tool.__wrapped__  # type: ignore[attr-defined]
    return tool


def _unknown_arguments(
    tool: str, given: Iterable[str], accepted: Sequence[str], group_id: str | None
) -> str | None:
    """Why a call of ``tool`` with the arguments ``given`` is refused: one it does not take
    (the SDK would drop it, and answer as if it were never sent); None when it takes them."""
    unknown = [name for name in given if name not in accepted]
    if not unknown:
        return None
    names = ", ".join(repr(name) for name in unknown)
    takes = f"its arguments are {', '.join(accepted)}" if accepted else "it takes no arguments"
    why = f"{tool} has no argument {names}; {takes}"
    if "group_id" in unknown and group_id is not None:
        why += f" (this server works in the memory group {group_id!r} only)"
    return why


def _bounds(params: Iterable[inspect.Parameter]) -> dict[str, tuple[Any, Any]]:
    """The arguments with a range in the tool's input schema, with their least and most."""
    found: dict[str, tuple[Any, Any]] = {}
    for param in params:
        schema = TypeAdapter(param.annotation).json_schema()
        for branch in (schema, *schema.get("anyOf", ())):
            if "minimum" in branch and "maximum" in branch:
                found[param.name] = (branch["minimum"], branch["maximum"])
    return found


_NOT_AN_INTEGER = {"int_type", "int_parsing", "int_parsing_size", "int_from_float"}
_OUT_OF_RANGE = {"greater_than_equal", "less_than_equal", "greater_than", "less_than"}
_MUST_BE = {
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "an object",
    "bool_type": "true or false",
}


def _argument_error(error: Mapping[str, Any], bounds: Mapping[str, tuple[Any, Any]]) -> str:
    """What is wrong with one argument, by its name (``facts[0]`` for an item of a list),
    from one of the errors of the SDK's validation of the call against the tool's schema."""
    where = ""
    for part in error["loc"]:
        where += f"[{part}]" if isinstance(part, int) else ("." if where else "") + str(part)
    where = where or "the arguments"
    kind, given = error["type"], error["input"]
    if kind == "missing":
        return f"{where} is required"
    if kind == "string_too_short":
        return f"{where} is empty"
    if (kind in _NOT_AN_INTEGER or kind in _OUT_OF_RANGE) and where in bounds:
        least, most = bounds[where]
        return f"{where} must be an integer from {least} to {most}, got {_shown(given)}"
    if kind in _NOT_AN_INTEGER:
        return f"{where} must be an integer, got {_given(given)}"
    if kind in _MUST_BE:
        return f"{where} must be {_MUST_BE[kind]}, got {_given(given)}"
    return f"{where}: {error['msg']}, got {_given(given)}"


def _invalid_arguments(error: ValidationError, bounds: Mapping[str, tuple[Any, Any]]) -> str:
    """Why the SDK's validation refused a call's arguments, one line naming each argument:
    the server's own words, not the validation library's report."""
    reasons: list[str] = []
    for err in error.errors():
        reason = _argument_error(err, bounds)
        if reason not in reasons:
            reasons.append(reason)
    return "; ".join(reasons)


def build_server(
    memory: Opener | AsyncMemory, *, group_id: str | None, token: str | None = None
) -> Any:
    """An ``MCPServer`` with Timestone's tools. ``group_id=None``: each call names its group.
    ``token``: HTTP requests must carry it as a bearer token (401 otherwise)."""
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations

    accepted: dict[str, tuple[str, ...]] = {}
    ranges: dict[str, dict[str, tuple[Any, Any]]] = {}

    class _Server(MCPServer[Mapping[str, Any]]):
        """The SDK's server, but a tool call with an argument the tool does not take is
        refused, naming it, before the SDK's validation drops it; and the arguments that
        validation refuses (a limit out of range, a missing or wrongly typed argument) are
        refused in the server's own words, ``InvalidInput: <argument> ...``."""

        async def call_tool(
            self,
            name: str,
            arguments: dict[str, Any],
            context: Context[Mapping[str, Any], Any] | None = None,
        ) -> CallToolResult | InputRequiredResult:
            if name in accepted:
                why = _unknown_arguments(name, arguments, accepted[name], group_id)
                if why is not None:
                    raise ToolError(f"Error executing tool {name}: InvalidInput: {why}")
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                # The SDK raises its refusal of the arguments as a ToolError caused by the
                # ValidationError (a crash in the tool is an UnexpectedToolError).
                cause = exc.__cause__
                if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                    raise
                why = _invalid_arguments(cause, ranges.get(name, {}))
                raise ToolError(f"Error executing tool {name}: InvalidInput: {why}") from cause

    async def given() -> AsyncMemory:
        assert isinstance(memory, AsyncMemory)
        return memory

    opener: Opener = given if isinstance(memory, AsyncMemory) else memory
    tools = _Tools(opener)

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncGenerator[Mapping[str, Any]]:
        try:
            yield {}
        finally:
            if not isinstance(memory, AsyncMemory):
                await tools.close()

    scope = (
        f" Every call works in the memory group {group_id!r}."
        if group_id is not None
        else " Every call names its memory group in group_id."
    )
    server = _Server(
        name="timestone",
        instructions=INSTRUCTIONS + scope,
        lifespan=lifespan,
        log_level="WARNING",
        **_auth(token),
    )
    for name in _TOOLS:
        method = getattr(tools, name)
        tool = _bind(method, group_id)
        params = inspect.signature(tool).parameters
        accepted[name] = tuple(params)
        ranges[name] = _bounds(params.values())
        server.add_tool(
            tool,
            name=name,
            description=inspect.getdoc(method),
            annotations=ToolAnnotations(
                read_only_hint=name in _READ_ONLY,
                destructive_hint=name == "remove_episode",
                idempotent_hint=name != "add_memory",
            ),
        )
    return server
