"""A model object on an OpenAI-compatible server that records every exchange.

``local_llm(base_url, model, **options)`` builds an ``OpenAICompatibleLLM`` with both
clients on ``base_url`` and a ``Recorder`` that keeps, for each request, the body the
library sent, the status, and the body the server answered (its ``usage`` and answer):
what ``tests/model`` compares with the ledger, and what ``bench/extraction.py`` counts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from typing import Any, cast

import httpx
import openai

import timestone

__all__ = ["Exchange", "MakeLLM", "Recorder", "local_llm"]


@dataclasses.dataclass
class Exchange:
    """One request to the server and what came back (``status`` 0: no answer)."""

    request: dict[str, Any]
    status: int = 0
    body: dict[str, Any] = dataclasses.field(default_factory=dict[str, Any])

    @property
    def usage(self) -> tuple[int, int] | None:
        usage = cast(dict[str, Any] | None, self.body.get("usage"))
        if usage is None:
            return None
        return int(usage["prompt_tokens"]), int(usage["completion_tokens"])

    @property
    def response_format(self) -> str:
        return str(self.request.get("response_format", {}).get("type"))


@dataclasses.dataclass
class Recorder:
    """Every exchange of one model object with the server, in order."""

    exchanges: list[Exchange] = dataclasses.field(default_factory=list[Exchange])
    clients: list[httpx.Client | httpx.AsyncClient] = dataclasses.field(
        default_factory=list[httpx.Client | httpx.AsyncClient]
    )

    def on_request(self, request: httpx.Request) -> None:
        self.exchanges.append(Exchange(json.loads(request.content or b"{}")))

    def on_response(self, response: httpx.Response) -> None:
        response.read()
        self._answered(response)

    async def aon_request(self, request: httpx.Request) -> None:
        self.on_request(request)

    async def aon_response(self, response: httpx.Response) -> None:
        await response.aread()
        self._answered(response)

    def _answered(self, response: httpx.Response) -> None:
        exchange = self.exchanges[-1]
        exchange.status = response.status_code
        try:
            exchange.body = cast(dict[str, Any], response.json())
        except ValueError:
            exchange.body = {"text": response.text}

    @property
    def answered(self) -> list[Exchange]:
        """The exchanges the model answered (200): what a ledger counts."""
        return [e for e in self.exchanges if e.status == 200]

    def tokens(self) -> tuple[int, int]:
        """The server's own count: prompt and completion tokens of every answer."""
        usages = [e.usage for e in self.answered]
        assert all(u is not None for u in usages), "the server sent an answer without usage"
        done = [u for u in usages if u is not None]
        return sum(u[0] for u in done), sum(u[1] for u in done)

    def clear(self) -> None:
        self.exchanges.clear()

    def close(self) -> None:
        """Close the HTTP clients of the model object (their pooled connections to the
        server); call it outside a running event loop."""
        for client in self.clients:
            if isinstance(client, httpx.Client):
                client.close()
            elif not client.is_closed:
                asyncio.run(client.aclose())
        self.clients.clear()


MakeLLM = Callable[..., tuple[timestone.OpenAICompatibleLLM, Recorder]]


def local_llm(
    base_url: str,
    model: str,
    *,
    transport: httpx.BaseTransport | None = None,
    api_key: str = "unused",
    **options: Any,
) -> tuple[timestone.OpenAICompatibleLLM, Recorder]:
    """An ``OpenAICompatibleLLM`` on ``base_url`` with both clients, and its recorder
    (``transport``: the blocking client's, e.g. one that alters requests). The recorder
    holds the HTTP clients: ``recorder.close()`` closes them when the model is no longer
    used."""
    recorder = Recorder()
    sync_http = httpx.Client(
        transport=transport,
        event_hooks={"request": [recorder.on_request], "response": [recorder.on_response]},
    )
    async_http = httpx.AsyncClient(
        event_hooks={"request": [recorder.aon_request], "response": [recorder.aon_response]}
    )
    recorder.clients.extend((sync_http, async_http))
    llm = timestone.OpenAICompatibleLLM(
        client=openai.OpenAI(base_url=base_url, api_key=api_key, http_client=cast(Any, sync_http)),
        async_client=openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key, http_client=cast(Any, async_http)
        ),
        model=model,
        **options,
    )
    return llm, recorder
