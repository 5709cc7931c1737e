"""Cross-encoder rerankers: score (query, passage) pairs after fusion.

A reranker has a ``name`` and two methods, ``rerank`` (blocking, used by
``Memory``) and ``arerank`` (used by ``AsyncMemory``). Each takes the query
and a batch of passages and returns one relevance score per passage, higher
is better. Pass one as ``search(..., reranker=my_reranker)``.

- ``HTTPReranker``: any server with the common ``/rerank`` endpoint (vLLM,
  llama.cpp's server, Infinity, Text Embeddings Inference, Jina, Cohere):
  ``POST {base_url}/rerank`` with ``{"model", "query", "documents"}``,
  answered by ``{"results": [{"index", "relevance_score"}]}``.
- ``OverlapReranker``: a deterministic local reranker (word overlap), public
  so that users can test their own pipelines offline.

A search takes a cross-encoder's scores only when they are one finite number per
passage (``check_scores``): a mapping, a string, a generator, ``None``, an array of
another shape, a value that is not a number, NaN or infinity is refused with a
``RerankerError`` naming the reranker and what it returned, and the search returns
nothing.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from .errors import RerankerError

if TYPE_CHECKING:  # imported where a request is sent: opening a store loads no HTTP client
    import httpx
    import numpy.typing as npt

__all__ = [
    "HTTPReranker",
    "OverlapReranker",
    "Reranker",
    "RerankerError",
    "check_scores",
    "reranker_failed",
]


@runtime_checkable
class Reranker(Protocol):
    """What Timestone needs of a cross-encoder."""

    @property
    def name(self) -> str: ...

    def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage, higher is closer to ``query``."""
        ...

    async def arerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """``rerank``, awaited."""
        ...


def reranker_failed(name: str, exc: Exception) -> RerankerError:
    """A cross-encoder's own exception as the ``RerankerError`` a caller of Timestone
    catches (raise it ``from exc``: the original stays its cause)."""
    said = str(exc).strip().splitlines()
    return RerankerError(
        f"reranker {name!r} failed: {type(exc).__name__}" + (f": {said[0]:.300}" if said else "")
    )


def check_scores(name: str, scores: object, count: int) -> list[float]:
    """``scores`` as one finite float per passage of ``count``: a sequence of numbers, or a
    one-dimensional array (numpy's, or any with ``__array__``). Anything else is refused
    with a ``RerankerError`` naming the reranker ``name`` and what it returned."""
    given: object = scores
    if not isinstance(given, Sequence | Mapping | str | bytes) and hasattr(given, "__array__"):
        import numpy as np

        try:
            array = np.asarray(cast("npt.ArrayLike", given))
        except (TypeError, ValueError, RuntimeError) as exc:  # a GPU tensor, say
            raise RerankerError(
                f"reranker {name!r} returned {type(scores).__name__}, which numpy cannot "
                f"read: {exc}"
            ) from exc
        if array.ndim != 1:
            raise RerankerError(
                f"reranker {name!r} returned an array of shape {array.shape}, not one number "
                "per passage"
            )
        given = cast(list[object], array.tolist())
    if not isinstance(given, Sequence) or isinstance(given, str | bytes):
        what = "None" if scores is None else type(scores).__name__
        raise RerankerError(f"reranker {name!r} returned {what}, not one number per passage")
    values = cast(Sequence[object], given)
    if len(values) != count:
        raise RerankerError(f"reranker {name!r} returned {len(values)} scores for {count} passages")
    out: list[float] = []
    for i, value in enumerate(values):
        if not isinstance(value, numbers.Real):
            raise RerankerError(
                f"reranker {name!r} returned {value!r:.60} for passage {i}, not a number"
            )
        try:
            score = float(value)
        except OverflowError:  # an integer past a float's range
            score = math.inf
        if not math.isfinite(score):
            shown = "NaN" if math.isnan(score) else f"{'' if score > 0 else '-'}infinity"
            raise RerankerError(
                f"reranker {name!r} returned {shown} for passage {i}, not a finite score"
            )
        out.append(score)
    return out


def _scores(payload: Any, count: int, name: str) -> list[float]:
    try:
        results = payload["results"]
        scores = [0.0] * count
        seen: set[int] = set()
        for item in results:
            index = int(item["index"])
            if not 0 <= index < count or index in seen:
                raise ValueError(f"index {index} out of range or repeated")
            seen.add(index)
            scores[index] = float(item["relevance_score"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RerankerError(f"reranker {name!r} answered an unexpected payload: {exc}") from exc
    if len(seen) != count:
        raise RerankerError(f"reranker {name!r} scored {len(seen)} of {count} passages")
    return check_scores(name, scores, count)


def _payload(resp: httpx.Response, name: str) -> object:
    """The JSON of a rerank answer; a body that is not JSON (cut short, a proxy's HTML
    page) is refused, saying briefly what it held."""
    try:
        return resp.json()
    except ValueError as exc:
        kind = resp.headers.get("content-type", "").split(";")[0].strip() or "no content type"
        words = " ".join(re.sub(r"<[^>]*>", " ", resp.text).split()) or "(an empty body)"
        brief = words if len(words) <= 200 else words[:197] + "..."
        raise RerankerError(
            f"reranker {name!r} answered {resp.status_code} with a body that is not JSON "
            f"({kind}): {brief}"
        ) from exc


class HTTPReranker:
    """A cross-encoder behind an HTTP ``/rerank`` endpoint (Jina/Cohere/vLLM shape)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.model = model
        self._url = base_url.rstrip("/") + "/rerank"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._headers = headers
        self._timeout = timeout
        self._transport = transport
        self._async_transport = async_transport

    @property
    def name(self) -> str:
        return self.model

    def _body(self, query: str, passages: Sequence[str]) -> dict[str, Any]:
        return {"model": self.model, "query": query, "documents": list(passages)}

    def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """The endpoint's score for each passage; ``RerankerError`` when the request fails
        or the answer does not hold one score per passage."""
        if not passages:
            return []
        import httpx

        try:
            with httpx.Client(transport=self._transport, timeout=self._timeout) as client:
                resp = client.post(
                    self._url, json=self._body(query, passages), headers=self._headers
                )
                resp.raise_for_status()
                return _scores(_payload(resp, self.name), len(passages), self.name)
        except httpx.HTTPError as exc:
            raise RerankerError(f"reranker {self.name!r} failed: {exc}") from exc

    async def arerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """``rerank``, awaited."""
        if not passages:
            return []
        import httpx

        try:
            async with httpx.AsyncClient(
                transport=self._async_transport, timeout=self._timeout
            ) as client:
                resp = await client.post(
                    self._url, json=self._body(query, passages), headers=self._headers
                )
                resp.raise_for_status()
                return _scores(_payload(resp, self.name), len(passages), self.name)
        except httpx.HTTPError as exc:
            raise RerankerError(f"reranker {self.name!r} failed: {exc}") from exc


_WORD = re.compile(r"\w+")


class OverlapReranker:
    """Scores a passage by the share of the query's words it contains (a test double)."""

    @property
    def name(self) -> str:
        return "overlap"

    def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """The share of the query's words each passage contains, from 0 to 1."""
        words = set(_WORD.findall(query.casefold()))
        if not words:
            return [0.0] * len(passages)
        return [len(words & set(_WORD.findall(p.casefold()))) / len(words) for p in passages]

    async def arerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """``rerank``, awaited."""
        return self.rerank(query, passages)
