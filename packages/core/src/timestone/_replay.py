"""``ReplayTransport``, the offline test double of ``timestone.llm`` (where it is imported
from): an ``httpx`` transport serving scripted chat completions in order."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import httpx

__all__ = ["ReplayTransport"]


@dataclasses.dataclass
class _Scripted:
    status: int
    body: Any
    headers: dict[str, str]
    step: str | None
    match: str | None = None


class ReplayTransport(httpx.MockTransport):
    """An ``httpx`` transport that serves scripted chat completions, in order.

    Each scripted response is a response body (a dict in the OpenAI shape), or a dict
    ``{"status": 429, "headers": {...}, "body": {...}, "step": "extraction",
    "match": "text"}``; a request is served the first response whose ``step`` (if
    given) is its schema name and whose ``match`` (if given) occurs in its messages,
    so concurrent callers get their own answers. Requests
    that no scripted response fits are answered 599 and listed in ``unexpected``;
    ``check()`` fails when a scripted response went unplayed or an unscripted call was
    made.
    Use with ``openai.OpenAI(http_client=httpx.Client(transport=t))`` or the async twin.
    """

    def __init__(self, responses: Sequence[Mapping[str, Any]] = ()) -> None:
        self._queue: list[_Scripted] = []
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.unexpected: list[dict[str, Any]] = []
        self.extend(responses)
        super().__init__(self._handle)

    @classmethod
    def from_file(cls, path: str | Path) -> ReplayTransport:
        """Scripted responses from a JSON file: a list, or an object with a ``responses``
        list."""
        data: Any = json.loads(Path(path).read_text())
        responses = cast(
            list[dict[str, Any]], data["responses"] if isinstance(data, dict) else data
        )
        return cls(responses)

    def extend(self, responses: Sequence[Mapping[str, Any]]) -> None:
        for rec in responses:
            if "choices" in rec or "body" not in rec:
                self._queue.append(_Scripted(200, dict(rec), {}, None))
            else:
                self._queue.append(
                    _Scripted(
                        int(rec.get("status", 200)),
                        rec["body"],
                        {str(k): str(v) for k, v in dict(rec.get("headers", {})).items()},
                        rec.get("step"),
                        rec.get("match"),
                    )
                )

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        body: dict[str, Any] = json.loads(request.content or b"{}")
        with self._lock:
            self.requests.append(body)
            text = json.dumps(body.get("messages", []), ensure_ascii=False)
            fmt: dict[str, Any] = body.get("response_format") or {}
            schema: dict[str, Any] = fmt.get("json_schema") or {}
            name = schema.get("name")
            chosen = next(
                (
                    i
                    for i, r in enumerate(self._queue)
                    if (r.match is None or json.dumps(r.match, ensure_ascii=False)[1:-1] in text)
                    and (r.step is None or name is None or r.step == name)
                ),
                None,
            )
            if chosen is None:
                self.unexpected.append(body)
                return httpx.Response(
                    599, json={"error": {"message": "no scripted response fits this call"}}
                )
            rec = self._queue.pop(chosen)
        return httpx.Response(rec.status, json=rec.body, headers=rec.headers)

    def check(self) -> None:
        """Raise AssertionError when the replay did not go exactly as scripted."""
        problems: list[str] = []
        if self._queue:
            problems.append(f"{len(self._queue)} scripted response(s) went unplayed")
        if self.unexpected:
            problems.append(f"{len(self.unexpected)} unscripted call(s) were made")
        if problems:
            raise AssertionError("; ".join(problems))
