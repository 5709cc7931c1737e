"""Embedders: text to vectors, in batches.

An embedder has a ``name`` and a ``dimension`` (the database records both and
refuses to open with another), and two methods, ``embed`` (blocking, used by
``Memory``) and ``aembed`` (used by ``AsyncMemory``), each taking a batch.
An embedder may also have ``embed_array`` / ``aembed_array``, returning the
batch as one ``(texts, dimension)`` numpy array: Timestone then uses it, and
the vectors reach the database without a round trip through Python lists.
An embedder that computes in this process, with no I/O and in well under a
millisecond for a query, may say so with ``in_process = True``: a search then
embeds its query while the database already ranks the full text, on the
connection the search holds. Any other embedder (a service) is called before
a connection is taken, so that no connection waits on it. An embedder with a
model to load may have ``warm()``: ``Memory.open`` calls it on a worker thread
while it starts the server and migrates, so that the first write or search does
not pay the load (WordLlama: about 0.9 s, importing and loading its weights).
An embedder with token-level output may have ``embed_spans(text, spans)`` (one
vector per ``(start, end)`` character span, pooled from one pass over ``text``) and
``late_chunking = True``: ``add_document`` then embeds each document once and takes
its chunks' vectors from it (late chunking) instead of embedding each chunk alone.

- ``WordLlamaEmbedder``: the default; local and offline (the weights ship in
  the wheel), 256 dimensions, fast on a CPU.
- ``OpenAICompatibleEmbedder``: any OpenAI-compatible embeddings endpoint
  (OpenAI, Azure, Ollama, vLLM) through the ``openai`` SDK.
- ``OnnxEmbedder``: a small transformer (all-MiniLM-L6-v2 by default) on ONNX
  Runtime, with token-level output: ``add_document`` embeds a document once and
  pools each chunk's vector from it (late chunking). ``pip install 'timestone[onnx]'``.
- ``HashEmbedder``: a deterministic test double (feature hashing of words),
  public so that users can test their own agents offline.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast, runtime_checkable

from ._onnx import PACKAGED_MODEL, OnnxEmbedder
from ._tokenizing import encode_all
from .errors import EmbedderError, InvalidInput, TimestoneError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import openai

    Rows = npt.NDArray[np.float32]

__all__ = [
    "PACKAGED_MODEL",
    "Embedder",
    "HashEmbedder",
    "OnnxEmbedder",
    "OpenAICompatibleEmbedder",
    "WordLlamaEmbedder",
    "aembed_rows",
    "aembed_vectors",
    "check_embedder",
    "check_rows",
    "embed_rows",
    "embed_vectors",
    "embedder_failed",
]

Vector = list[float]


@runtime_checkable
class Embedder(Protocol):
    """What Timestone needs of an embedder."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector of ``dimension`` floats per text, in order (blocking)."""
        ...

    async def aembed(self, texts: Sequence[str]) -> list[Vector]:
        """``embed``, awaited."""
        ...


def check_embedder(value: object) -> Embedder:
    """``value`` when it is an embedder: a non-empty ``name``, an integer ``dimension`` the
    HNSW indexes can hold (1 to ``MAX_DIMENSION``), ``embed`` and ``aembed``; anything
    else is refused naming what it lacks, before the database is touched."""
    from ._vectors import MAX_DIMENSION

    if isinstance(value, type):
        raise InvalidInput(
            f"embedder must be an Embedder instance, got the class {value.__name__:.80}; "
            f"pass an instance: {value.__name__:.80}()"
        )
    kind = type(value).__name__
    lacking = [m for m in ("embed", "aembed") if not callable(getattr(value, m, None))]
    name: object = getattr(value, "name", None)
    if lacking or not isinstance(name, str) or not name.strip():
        what = ", ".join(lacking) if lacking else "a name (a non-empty string)"
        raise InvalidInput(
            f"embedder must be an Embedder (a name, a dimension, embed and aembed), got "
            f"{kind} without {what}"
        )
    dimension: object = getattr(value, "dimension", None)
    if not isinstance(dimension, int) or isinstance(dimension, bool) or dimension < 1:
        raise InvalidInput(
            f"embedder {name!r:.80} declares dimension {dimension!r:.80}; a positive integer "
            "is needed"
        )
    if dimension > MAX_DIMENSION:
        raise InvalidInput(
            f"embedder {name!r:.80} declares {dimension:,} dimensions; the vector indexes hold "
            f"at most {MAX_DIMENSION:,} (pgvector indexes half-precision vectors of up to 4,000 "
            "dimensions, 8 of them the group's key): ask the model for fewer (OpenAI's "
            "text-embedding-3 models take a dimensions parameter)"
        )
    return cast(Embedder, value)


async def awarm(embedder: Embedder | None) -> None:
    """The embedder's ``warm()``, if it has one, off the event loop; a failure is left for
    the first use of the embedder to raise, with its own message. None: nothing to do."""
    from ._compat import ato_thread

    fn = getattr(embedder, "warm", None)
    if callable(fn):
        with contextlib.suppress(Exception):  # raised again, in full, where it is used
            await ato_thread(fn)


def warm(embedder: Embedder | None) -> None:
    """The blocking twin of ``awarm``."""
    fn = getattr(embedder, "warm", None)
    if callable(fn):
        with contextlib.suppress(Exception):  # raised again, in full, where it is used
            fn()


def check_rows(embedder: Embedder, texts: Sequence[str], vectors: object) -> Rows:
    """``vectors`` as one ``(len(texts), dimension)`` array of 4-byte floats, the form the
    database stores. Refused: a batch of the wrong length; a vector of the wrong dimension
    or of any shape but one row of numbers (a ``(dimension, 1)`` column); complex values;
    a value that is NaN, infinite or beyond a 4-byte float's range."""
    import numpy as np

    name = embedder.name
    given: object = vectors
    if isinstance(given, np.ndarray) and cast("npt.NDArray[Any]", given).ndim == 2:
        shape = cast("npt.NDArray[Any]", given).shape
        count, widths = shape[0], [shape[1]] * shape[0]
    elif isinstance(given, np.ndarray) and cast("npt.NDArray[Any]", given).size == 0:
        count, widths = 0, []
    elif isinstance(given, Sequence) and all(
        isinstance(v, Sequence | np.ndarray) for v in cast(Sequence[object], given)
    ):
        rows = cast(Sequence[Sequence[float]], given)
        count, widths = len(rows), [_width(name, i, v) for i, v in enumerate(rows)]
    else:
        raise EmbedderError(
            f"embedder {name!r} returned {type(vectors).__name__}, not a list of vectors"
        )
    if count != len(texts):
        raise EmbedderError(f"embedder {name!r} returned {count} vectors for {len(texts)} texts")
    for i, width in enumerate(widths):
        if width != embedder.dimension:
            raise EmbedderError(
                f"embedder {name!r} returned a vector of dimension {width} "
                f"for text {i}; it declares {embedder.dimension}"
            )
    if not count:
        return np.empty((0, embedder.dimension), dtype=np.float32)
    try:
        # read as given first: a cast to float32 would drop an imaginary part silently
        read = np.asarray(cast("npt.ArrayLike", given))
        # complex, dates, durations, raw bytes; or complex numbers among other objects
        not_real = (
            f"vectors of {read.dtype}"
            if read.dtype.kind in "cmMV"
            else "complex values"
            if read.dtype.kind == "O"
            and any(isinstance(v, complex | np.complexfloating) for v in read.flat)
            else ""
        )
        with np.errstate(over="ignore", invalid="ignore"):
            array = read if not_real else read.astype(np.float32, copy=False)
    except (TypeError, ValueError) as exc:
        raise EmbedderError(
            f"embedder {name!r} returned vectors with values that are not numbers: {exc}"
        ) from exc
    if not_real:
        raise EmbedderError(f"embedder {name!r} returned {not_real}; a vector holds real numbers")
    if array.ndim != 2:
        raise EmbedderError(
            f"embedder {name!r} returned vectors of shape {array.shape[1:]}; a vector is one "
            f"row of {embedder.dimension} numbers"
        )
    finite = np.isfinite(array).all(axis=1)
    if not finite.all():
        i = int(np.argmin(finite))
        raise EmbedderError(
            f"embedder {name!r} returned NaN, infinity or a value beyond a 4-byte "
            f"float's range in the vector of text {i}"
        )
    return array


def _width(name: str, i: int, vector: object) -> int:
    """The length of one vector of a batch; an array of any shape but one row is refused."""
    import numpy as np

    if isinstance(vector, np.ndarray):
        shape = cast("npt.NDArray[Any]", vector).shape
        if len(shape) != 1:
            raise EmbedderError(
                f"embedder {name!r} returned a vector of shape {shape} for text {i}; a vector "
                "is one row of numbers"
            )
        return shape[0]
    return len(cast(Sequence[object], vector))


def embedder_failed(embedder: object, exc: Exception) -> EmbedderError:
    """An embedder's own exception as the ``EmbedderError`` a caller of Timestone catches
    (raise it ``from exc``: the original stays its cause)."""
    name = getattr(embedder, "name", type(embedder).__name__)
    said = str(exc).strip().splitlines()
    return EmbedderError(
        f"embedder {name!r} failed: {type(exc).__name__}" + (f": {said[0]:.300}" if said else "")
    )


def embed_rows(embedder: Embedder, texts: Sequence[str]) -> Rows:
    """The checked vectors of ``texts``, through the embedder's ``embed_array`` if it has one
    (a numpy array, without the round trip through Python lists). An exception of the
    embedder's own is raised as ``EmbedderError``; Timestone's errors pass as they are."""
    fast = getattr(embedder, "embed_array", None)
    try:
        raw: object = (
            cast(Callable[[Sequence[str]], object], fast)(texts)
            if callable(fast)
            else embedder.embed(texts)
        )
    except TimestoneError:
        raise
    except Exception as exc:
        raise embedder_failed(embedder, exc) from exc
    return check_rows(embedder, texts, raw)


async def aembed_rows(embedder: Embedder, texts: Sequence[str]) -> Rows:
    """``embed_rows`` for ``AsyncMemory``: ``aembed_array`` if the embedder has it."""
    fast = getattr(embedder, "aembed_array", None)
    try:
        raw: object = (
            await cast(Callable[[Sequence[str]], Awaitable[object]], fast)(texts)
            if callable(fast)
            else await embedder.aembed(texts)
        )
    except TimestoneError:
        raise
    except Exception as exc:
        raise embedder_failed(embedder, exc) from exc
    return check_rows(embedder, texts, raw)


def embed_vectors(embedder: Embedder, texts: Sequence[str]) -> list[Vector]:
    """``embed_rows`` as lists of floats."""
    return cast(list[Vector], embed_rows(embedder, texts).tolist())


async def aembed_vectors(embedder: Embedder, texts: Sequence[str]) -> list[Vector]:
    """``embed_vectors`` for ``AsyncMemory``."""
    return cast(list[Vector], (await aembed_rows(embedder, texts)).tolist())


class _WordLlamaModel:
    """WordLlama's tokenizer, without its padding, and its table of token vectors."""

    __slots__ = ("table", "tokenizer")

    def __init__(self, tokenizer: Any, table: Rows) -> None:
        self.tokenizer, self.table = tokenizer, table


# The files of WordLlama's wheel that ``WordLlama.load(trunc_dim=...)`` reads for
# l2_supercat, and the tensor it takes: read here without importing the package, whose
# import (its configuration's models, an HTTP library for downloads) took as long as
# the load itself; ``tests/core/test_vectors.py`` compares the vectors with the model's.
_WORDLLAMA_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
_WORDLLAMA_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_WORDLLAMA_TENSOR = "embedding.weight"


def _load_wordllama(dimension: int) -> _WordLlamaModel:
    """WordLlama's tokenizer (without padding or truncation) and its token vectors cut
    to ``dimension``, as float32, from the files of its wheel."""
    import importlib.util

    import numpy as np
    from safetensors import safe_open
    from tokenizers import Tokenizer

    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'wordllama'", name="wordllama")
    package = Path(next(iter(spec.submodule_search_locations)))
    tokenizer = Tokenizer.from_file(str(package.joinpath(*_WORDLLAMA_TOKENIZER)))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    weights: Any = safe_open(
        str(package.joinpath(*_WORDLLAMA_WEIGHTS)), framework="np", device="cpu"
    )
    with weights:
        table: Any = weights.get_tensor(_WORDLLAMA_TENSOR)
    return _WordLlamaModel(tokenizer, np.ascontiguousarray(table[:, :dimension], np.float32))


def _shown(value: object) -> str:
    """A value in a message, with its type when it is not an int (``'256'``, a str, reads
    like a valid 256 otherwise)."""
    if type(value) is int:
        return str(value)
    return f"{value!r:.80} (a {type(value).__name__})"


class WordLlamaEmbedder:
    """The default embedder: WordLlama, loaded from its wheel, never from the network.

    A text's vector is the mean of its tokens' vectors, normalized: WordLlama's own
    ``embed``, computed here with one tokenizer call for the whole batch. The model's
    pads and returns each batch of 64 through Python lists: 1.9 to 2.1 s of CPU for
    30 batches of 1,000 short facts and their episode texts here, against 1.2 to 1.4,
    and 180 us for one question, against 90. The vectors are the same, bit for bit
    (``tests/core/test_vectors.py`` compares them with the model's)."""

    _lock = threading.Lock()
    _model_cache: ClassVar[dict[int, _WordLlamaModel]] = {}
    in_process: ClassVar[bool] = True  # a search embeds its query beside the text ranking

    max_chars = 8000

    def __init__(self, dimension: int = 256) -> None:
        if type(dimension) is not int or dimension not in (64, 128, 256):
            raise EmbedderError(
                f"WordLlamaEmbedder dimension must be 64, 128 or 256, got {_shown(dimension)}"
            )
        self._dimension = dimension

    @property
    def name(self) -> str:
        return "wordllama/l2_supercat"

    @property
    def dimension(self) -> int:
        return self._dimension

    def _model(self) -> _WordLlamaModel:
        with self._lock:
            model = self._model_cache.get(self._dimension)
            if model is None:
                model = _load_wordllama(self._dimension)
                self._model_cache[self._dimension] = model
            return model

    def warm(self) -> None:
        """Load the model now (``Memory.open`` does, beside its own start-up)."""
        self._model()

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order (``embed_array`` as lists)."""
        return cast(list[Vector], self.embed_array(texts).tolist())

    async def aembed(self, texts: Sequence[str]) -> list[Vector]:
        """``embed``, awaited."""
        return cast(list[Vector], (await self.aembed_array(texts)).tolist())

    def embed_array(self, texts: Sequence[str]) -> Rows:
        """The vectors of ``texts`` as one ``(len(texts), dimension)`` float32 array. An empty
        text has no tokens to average: it is refused, not given a NaN vector."""
        import numpy as np

        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        if not texts:
            return out
        empty = next((i for i, text in enumerate(texts) if not text), None)
        if empty is not None:
            raise InvalidInput(
                f"WordLlamaEmbedder cannot embed an empty text (text {empty} of {len(texts)})"
            )
        model = self._model()
        table = model.table
        if len(texts) == 1:  # a search's question: 90 us here, against 180 through the model
            ids_: list[int] = model.tokenizer.encode(
                texts[0][: self.max_chars], add_special_tokens=False
            ).ids
            tokens = np.array(ids_, dtype=np.int64)
            np.clip(tokens, 0, table.shape[0] - 1, out=tokens)
            vector = np.add.reduce(table[tokens], axis=0, dtype=np.float32)
            vector /= np.float32(max(len(ids_), 1))
            vector /= np.sqrt(np.add.reduce(vector * vector))
            out[0] = vector
            return out
        encoded = encode_all(model.tokenizer, [text[: self.max_chars] for text in texts])
        ids: list[list[int]] = [e.ids for e in encoded]
        counts = [len(i) for i in ids]
        # Every token's row gathered at once, then each text's rows summed in order by
        # one reduction of its slice: the model's sum, bit for bit, with no padding
        # (``np.add.reduceat`` sums in another order, not the model's).
        tokens = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=sum(counts))
        np.clip(tokens, 0, table.shape[0] - 1, out=tokens)
        rows = table[tokens]
        start = 0
        for i, count in enumerate(counts):
            np.add.reduce(rows[start : start + count], axis=0, out=out[i])
            out[i] /= np.float32(max(count, 1))
            start += count
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    async def aembed_array(self, texts: Sequence[str]) -> Rows:
        """``embed_array``, awaited: a large batch runs in a worker thread."""
        if len(texts) <= 64:
            return self.embed_array(texts)  # microseconds: a thread hop would cost more
        return await asyncio.to_thread(self.embed_array, texts)


class HashEmbedder:
    """A deterministic embedder for tests: hashed word and character features, L2-normalized.

    Texts that share words are close; it needs nothing but the standard library.
    """

    in_process: ClassVar[bool] = True

    def __init__(self, dimension: int = 64) -> None:
        if type(dimension) is not int or dimension < 2:
            raise EmbedderError(
                f"HashEmbedder dimension must be an integer of at least 2, got {_shown(dimension)}"
            )
        self._dimension = dimension

    @property
    def name(self) -> str:
        return "hash"

    @property
    def dimension(self) -> int:
        return self._dimension

    def _one(self, text: str) -> Vector:
        vec = [0.0] * self._dimension
        words = re.findall(r"\w+", text.casefold())
        for word in words:
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self._dimension
            vec[index] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vec))
        if norm == 0.0:
            vec[0] = 1.0
            return vec
        return [x / norm for x in vec]

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order; the same text always gives the same vector."""
        return [self._one(t) for t in texts]

    async def aembed(self, texts: Sequence[str]) -> list[Vector]:
        """``embed``, awaited."""
        return self.embed(texts)


def _positive(what: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInput(f"{what} must be a positive integer, got {value!r:.80}")


class OpenAICompatibleEmbedder:
    """Embeddings from any OpenAI-compatible server (``base_url`` for Ollama, vLLM, Azure).

    Pass ``client`` (``openai.OpenAI``) for ``Memory`` and ``async_client``
    (``openai.AsyncOpenAI``) for ``AsyncMemory``; either may be omitted when only
    the other twin is used.

    An embeddings endpoint refuses an input past the model's context (8,191 tokens
    for OpenAI's models) and a request past a total (300,000 tokens for OpenAI's),
    and Timestone embeds long texts: an ``add_facts`` call's episode is every fact
    sentence of the call, an episode up to 100,000 characters. Each text is sent as
    its first ``max_chars`` characters (default 8,000, about 2,000 tokens of English;
    a text of many tokens per character, such as emoji, may need fewer), and a
    request holds at most ``batch_size`` texts and ``max_request_chars`` characters.

    The vectors of an answer are put in the texts' order by each item's ``index``, which
    must be each of ``0..n-1`` once for a request of ``n`` texts; an answer whose items
    carry no index at all is taken in its list's order. Any other answer (another count,
    repeated or missing indexes, a 200 holding an error or an HTML page) is refused with
    an ``EmbedderError`` that says what the server sent.
    """

    def __init__(
        self,
        *,
        model: str,
        dimension: int,
        client: openai.OpenAI | None = None,
        async_client: openai.AsyncOpenAI | None = None,
        batch_size: int = 256,
        max_chars: int = 8_000,
        max_request_chars: int = 200_000,
    ) -> None:
        if client is None and async_client is None:
            raise EmbedderError("OpenAICompatibleEmbedder needs client= or async_client=")
        _positive("batch_size", batch_size)
        _positive("max_chars", max_chars)
        _positive("max_request_chars", max_request_chars)
        self._model = model
        self._dimension = dimension
        self._client = client
        self._async_client = async_client
        self._batch_size = batch_size
        self.max_chars = max_chars
        self._max_request_chars = max(max_request_chars, max_chars)

    def _requests(self, texts: Sequence[str]) -> list[list[str]]:
        """``texts``, each cut to ``max_chars``, in order, grouped into requests."""
        out: list[list[str]] = []
        size = 0
        for text in texts:
            cut = text[: self.max_chars]
            full = len(out[-1]) >= self._batch_size if out else True
            if full or size + len(cut) > self._max_request_chars:
                out.append([])
                size = 0
            out[-1].append(cut)
            size += len(cut)
        return out

    def _refused(self, exc: Exception) -> EmbedderError:
        hint = (
            f" (each text is sent as its first {self.max_chars:,} characters: lower "
            "max_chars if the model's context is smaller)"
            if "token" in str(exc) or "context" in str(exc)
            else ""
        )
        return EmbedderError(f"embedding request to {self._model!r:.80} failed: {exc}{hint}")

    @classmethod
    def from_env(cls, model: str, dimension: int) -> OpenAICompatibleEmbedder:
        """Clients from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` (either suffices: a local
        server ignores the key), as ``OpenAICompatibleLLM.from_env`` makes them; a
        malformed ``OPENAI_BASE_URL`` is refused there, naming it."""
        from .llm import OPENAI_URL, base_url_from_env

        key = os.environ.get("OPENAI_API_KEY")
        base = base_url_from_env(EmbedderError)
        if not key and not base:
            raise EmbedderError(
                f"the embedder openai/{model} needs OPENAI_API_KEY or OPENAI_BASE_URL "
                "(an OpenAI-compatible server such as Ollama or vLLM) in the environment"
            )
        import openai as _openai

        api_key = key or "unused"
        return cls(
            model=model,
            dimension=dimension,
            client=_openai.OpenAI(api_key=api_key, base_url=base or OPENAI_URL),
            async_client=_openai.AsyncOpenAI(api_key=api_key, base_url=base or OPENAI_URL),
        )

    @property
    def name(self) -> str:
        return f"openai/{self._model}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order, from the endpoint, in batches (``EmbedderError``
        when a request fails or its answer is not one vector per text)."""
        if self._client is None:
            raise EmbedderError("this OpenAICompatibleEmbedder has no blocking client= for Memory")
        out: list[Vector] = []
        requests = self._requests(texts)
        for number, batch in enumerate(requests, 1):
            try:
                raw = self._client.embeddings.with_raw_response.create(
                    model=self._model, input=batch
                )
            except Exception as exc:
                raise self._refused(exc) from exc
            out.extend(
                self._vectors(raw.parse, raw.http_response, len(batch), number, len(requests))
            )
        return out

    async def aembed(self, texts: Sequence[str]) -> list[Vector]:
        """``embed``, awaited, with the async client."""
        if self._async_client is None:
            raise EmbedderError(
                "this OpenAICompatibleEmbedder has no async_client= for AsyncMemory"
            )
        out: list[Vector] = []
        requests = self._requests(texts)
        for number, batch in enumerate(requests, 1):
            try:
                raw = await self._async_client.embeddings.with_raw_response.create(
                    model=self._model, input=batch
                )
            except Exception as exc:
                raise self._refused(exc) from exc
            out.extend(
                self._vectors(raw.parse, raw.http_response, len(batch), number, len(requests))
            )
        return out

    def _vectors(
        self, parse: Callable[[], object], answer: _Answer, count: int, number: int, requests: int
    ) -> list[Vector]:
        """The vectors of one request's answer, in the order of its texts: each item's
        ``index`` says which text it is, and must be each of ``0..count-1`` once. An answer
        whose items carry no index at all is taken in its list's order (the API sends the
        items in order; its ``index`` is what Timestone checks when it is there)."""
        where = f" (request {number} of {requests})" if requests > 1 else ""
        try:
            data: object = getattr(parse(), "data", None)
        except Exception as exc:
            raise self._unreadable(answer, count, where, exc) from exc
        if not isinstance(data, list):
            raise self._unreadable(answer, count, where, None)
        items = cast(list[object], data)
        if len(items) != count:
            raise EmbedderError(
                f"embedder {self.name!r} returned {len(items)} vectors for {count} texts{where}"
            )
        indexes: list[object] = [getattr(d, "index", None) for d in items]
        vectors = [cast(Vector, getattr(d, "embedding", None)) for d in items]
        if all(i is None for i in indexes):
            return vectors
        # a bool is an int to Python, not an index
        places = [i if isinstance(i, int) and not isinstance(i, bool) else -1 for i in indexes]
        if sorted(places) != list(range(count)):
            shown = ", ".join(repr(i)[:20] for i in indexes[:10])
            more = ", ..." if len(indexes) > 10 else ""
            raise EmbedderError(
                f"embedder {self.name!r} answered {count} texts with indexes [{shown}{more}]"
                f"{where}; expected each of 0 to {count - 1} once"
            )
        out: list[Vector] = [[] for _ in range(count)]
        for i, vector in zip(places, vectors, strict=True):
            out[i] = vector
        return out

    def _unreadable(
        self, answer: _Answer, count: int, where: str, exc: Exception | None
    ) -> EmbedderError:
        """What the server said, briefly, when its answer is not an embeddings list."""
        head = f"embedder {self.name!r}: the server answered {answer.status_code}{where}"
        try:
            body: object = json.loads(answer.text)
        except ValueError:
            kind = answer.headers.get("content-type", "").split(";")[0].strip()
            kind = kind or "no content type"
            return EmbedderError(
                f"{head} with {kind}, not an embeddings list: {_brief(answer.text)}"
            )
        if isinstance(body, dict):
            fields = cast(dict[str, object], body)
            error = fields.get("error")
            if isinstance(error, dict):
                error = cast(dict[str, object], error).get("message") or cast(object, error)
            if error is not None:
                return EmbedderError(f"{head} with an error: {_brief(str(error))}")
            data = fields.get("data")
            if isinstance(data, list) and len(cast(list[object], data)) != count:
                return EmbedderError(
                    f"embedder {self.name!r} returned {len(cast(list[object], data))} vectors "
                    f"for {count} texts{where}"
                )
        if exc is not None:
            return self._refused(exc)
        return EmbedderError(
            f"{head} with JSON that is not an embeddings list: {_brief(answer.text)}"
        )


class _Answer(Protocol):
    """The HTTP response of the embeddings endpoint, read to say what was wrong with it."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def text(self) -> str: ...


_TAG = re.compile(r"<[^>]*>")


def _brief(text: str, limit: int = 200) -> str:
    """A server's words in one short line: HTML tags and runs of spaces removed, cut."""
    words = " ".join(_TAG.sub(" ", text).split())
    if not words:
        return "(an empty body)"
    return words if len(words) <= limit else words[: limit - 3] + "..."
