"""LangGraph's ``IndexConfig`` on Timestone: which texts of an item are embedded, and by what.

``fields`` lists JSON paths; each text found at a path gets its own vector and an
item scores by its best one, as in LangGraph's stores. ``embed`` (a LangChain
``Embeddings``, a function or an async function of a list of texts) becomes the
Timestone embedder of a store built with ``TimestoneStore.from_conn_string``; a
store built on a ``Memory`` embeds with the memory's embedder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.embeddings import Embeddings
from langgraph.store.base import ensure_embeddings, get_text_at_path, tokenize_path

from timestone.errors import InvalidInput

__all__ = ["EmbeddingsEmbedder", "IndexPaths", "check_index_config"]


class EmbeddingsEmbedder:
    """A Timestone embedder (``name``, ``dimension``, ``embed``, ``aembed``) on a LangChain
    ``Embeddings``, or on the function LangGraph's ``IndexConfig["embed"]`` takes."""

    def __init__(self, embed: object, dims: int) -> None:
        self.source = embed
        self.embeddings: Embeddings = ensure_embeddings(cast(Any, embed))
        self.dimension = dims
        inner: object = getattr(self.embeddings, "func", None) or getattr(
            self.embeddings, "afunc", None
        )
        model = getattr(self.embeddings, "model", None) or getattr(
            self.embeddings, "model_name", None
        )
        what = inner if inner is not None else self.embeddings
        kind = getattr(what, "__qualname__", None) or type(what).__qualname__
        self.name = f"langchain:{getattr(what, '__module__', '?')}.{kind}" + (
            f":{model}" if isinstance(model, str) and model else ""
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embeddings.embed_documents(list(texts))

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.embeddings.aembed_documents(list(texts))


def check_index_config(index: object) -> tuple[object | None, int | None, list[str] | None]:
    """(embed, dims, fields) of an ``IndexConfig``, each None when not given."""
    if index is None:
        return None, None, None
    if not isinstance(index, Mapping):
        raise InvalidInput(
            f"index must be a LangGraph IndexConfig (a dict of dims, embed and fields), "
            f"got {type(index).__name__}"
        )
    config = cast(Mapping[str, object], index)
    unknown = sorted(set(config) - {"dims", "embed", "fields"})
    if unknown:
        raise InvalidInput(f"index has unknown keys {unknown}; it takes dims, embed and fields")
    dims = config.get("dims")
    if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or dims < 1):
        raise InvalidInput(f"index dims must be a positive integer, got {dims!r:.80}")
    return config.get("embed"), dims, check_paths(config.get("fields"))


def check_paths(paths: object, what: str = "index fields") -> list[str] | None:
    """A list of JSON paths, or None (the whole value)."""
    if paths is None:
        return None
    if isinstance(paths, str) or not isinstance(paths, Sequence):
        either = "False, None or " if what == "index" else ""
        raise InvalidInput(f"{what} must be {either}a list of field paths, got {paths!r:.80}")
    out = list(cast(Sequence[object], paths))
    for path in out:
        if not isinstance(path, str) or not path:
            raise InvalidInput(f"{what} must hold non-empty strings, got {path!r:.80}")
    return cast(list[str], out)


class IndexPaths:
    """The texts embedded for a value, one per path (one per element under ``[*]``)."""

    __slots__ = ("paths",)

    def __init__(self, paths: list[str] | None) -> None:
        self.paths = paths

    def index_of(self, value: Mapping[str, Any], given: object) -> bool | str | list[str]:
        """The ``index`` argument of ``put_item`` for a put whose ``index`` was ``given``."""
        if given is False:
            return False
        paths = self.paths if given is None else check_paths(given, "index")
        if paths is None or paths == ["$"]:
            return True
        texts: list[str] = []
        for path in paths:
            if path == "$":
                texts.append(json.dumps(value, sort_keys=True, ensure_ascii=False))
            else:
                texts.extend(get_text_at_path(value, tokenize_path(path)))
        texts = [t for t in texts if t.strip()]
        if not texts:
            return False  # nothing at the paths: the item is kept, and left out of ranking
        return texts[0] if len(texts) == 1 else texts
