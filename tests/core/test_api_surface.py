"""The public surface: pinned names, and two real twins with the same methods."""

from __future__ import annotations

import inspect

import timestone
from timestone import errors

PUBLIC = {
    "AsyncMemory", "Community", "CommunityReport", "Context", "ContextItem", "DocumentResult",
    "EdgeType", "Embedder", "Entity", "EntityInput", "EntityType", "Episode", "Fact", "FactInput",
    "GraphChunk", "GraphEdge", "GraphNodes", "GraphRelation", "GraphWrite",
    "HTTPReranker", "HashEmbedder", "IngestResult", "Item", "LLM", "LLMBudget", "LLMReply",
    "LLMRequest", "LLMUsage", "Memory", "NOW", "Ontology", "OpenAICompatibleEmbedder",
    "OpenAICompatibleLLM", "OverlapReranker", "RemovalReport", "Reranker", "RollbackReport",
    "SearchResults", "TimestoneError", "WordLlamaEmbedder", "errors", "toolkit",
}  # fmt: skip

CONTRACT = {  # API.md: the methods adapters, the CLI and outside checks are written against
    "open", "close", "dsn", "add_episode", "add_facts", "add_document", "facts", "timeline",
    "get_entity", "search", "context", "remove_episode", "purge_episode", "rollback",
}  # fmt: skip


def test_all_is_pinned() -> None:
    assert set(timestone.__all__) == PUBLIC
    for name in timestone.__all__:
        assert hasattr(timestone, name), name


def _methods(cls: type) -> dict[str, inspect.Signature | None]:
    out: dict[str, inspect.Signature | None] = {}
    for name, member in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        out[name] = inspect.signature(member) if callable(member) else None
    return out


def test_twins_have_the_same_methods_and_signatures() -> None:
    sync, aio = _methods(timestone.Memory), _methods(timestone.AsyncMemory)
    assert set(sync) >= CONTRACT
    assert set(sync) == set(aio)
    for name, signature in sync.items():
        other = aio[name]
        if signature is None or other is None:
            assert signature is other, name
            continue
        assert list(signature.parameters) == list(other.parameters), name


def test_async_twin_is_async_and_sync_twin_is_not() -> None:
    for name in CONTRACT - {"dsn"}:
        assert inspect.iscoroutinefunction(getattr(timestone.AsyncMemory, name)), name
        assert not inspect.iscoroutinefunction(getattr(timestone.Memory, name)), name


def test_every_error_derives_from_the_root() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, Exception):
            assert issubclass(cls, errors.TimestoneError) or name == "ExtractionWarning", name
