"""The public surface: pinned names, and two real twins with the same methods."""

from __future__ import annotations

import inspect
import uuid

import pytest

import timestone
from timestone import errors, toolkit

PUBLIC = {
    "AsyncMemory", "Community", "CommunityReport", "Context", "ContextItem", "DocumentResult",
    "EdgeType", "Embedder", "Entity", "EntityInput", "EntityType", "Episode", "Fact", "FactInput",
    "GraphChunk", "GraphEdge", "GraphNodes", "GraphRelation", "GraphWrite",
    "HTTPReranker", "HashEmbedder", "IngestResult", "Item", "ItemGet", "ItemNamespaces", "ItemPut",
    "ItemSearch", "LLM", "LLMBudget", "LLMReply",
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


WARNINGS = ("ExtractionWarning", "RewriteWarning")  # warnings, not errors


def test_every_error_derives_from_the_root() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, Exception):
            assert issubclass(cls, errors.TimestoneError) or name in WARNINGS, name


TOOLKIT = {  # timestone.toolkit: what the adapters build on; names may be added, never removed
    "ASYNC_TOOLS", "CITATION_PATTERN", "DEFAULT_RETRIEVER_SCOPES", "DEFAULT_TOKEN_BUDGET",
    "DESCRIPTIONS", "MAX_DOCUMENT_CHARS", "MAX_EPISODE_CHARS", "MAX_NAME_CHARS", "MAX_QUERY_CHARS",
    "MAX_SEARCH_LIMIT", "MIN_TOKEN_BUDGET", "NOW", "RETRIEVER_SCOPES", "TOOLS",
    "TOOL_NAMES", "Found", "Now", "Retrieved", "aentity_timeline", "aremember", "asearch_memory",
    "check_aware", "check_group", "check_list", "check_scopes", "check_text", "check_tool_settings",
    "citation_of", "entity_record", "entity_timeline", "episode_record", "fact_line",
    "fact_record", "parse_when", "ranked_records", "relation_name", "remember", "search_memory",
}  # fmt: skip


def test_toolkit_is_pinned() -> None:
    assert set(toolkit.__all__) == TOOLKIT
    for name in toolkit.__all__:
        assert hasattr(toolkit, name), name


def test_toolkit_tools_come_in_twins_with_a_description_each() -> None:
    assert set(toolkit.TOOLS) == set(toolkit.ASYNC_TOOLS) == set(toolkit.TOOL_NAMES)
    assert set(toolkit.DESCRIPTIONS) == set(toolkit.TOOL_NAMES)
    for name in toolkit.TOOL_NAMES:
        sync, aio = toolkit.TOOLS[name], toolkit.ASYNC_TOOLS[name]
        assert getattr(toolkit, name) is sync
        assert getattr(toolkit, "a" + name) is aio
        assert inspect.iscoroutinefunction(aio)
        assert not inspect.iscoroutinefunction(sync)
        assert list(inspect.signature(sync).parameters) == list(inspect.signature(aio).parameters)
        assert "Args:" in toolkit.DESCRIPTIONS[name]


def test_toolkit_scopes_and_citations() -> None:
    assert toolkit.DEFAULT_RETRIEVER_SCOPES == ("facts", "episodes")
    assert toolkit.check_scopes("episodes") == ("episodes",)
    assert toolkit.check_scopes(["facts", "entities", "facts"]) == ("facts", "entities")
    for bad, says in (((), "at least one"), (("facts", "edges"), "unknown scope"), (3, "scopes")):
        with pytest.raises(errors.InvalidInput, match=says):
            toolkit.check_scopes(bad)
    ident = uuid.UUID("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")
    assert toolkit.citation_of("fact", ident) == "F-" + ident.hex[-10:]
    assert toolkit.CITATION_PATTERN.fullmatch(toolkit.citation_of("episode", ident))
