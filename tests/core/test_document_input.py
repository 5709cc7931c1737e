"""What ``add_document`` takes: a uri within its size in bytes, content with a visible
character, and a title given once (as ``title=``, or in the metadata as document loaders
put it); the key the library writes in the metadata is refused."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from llm_rows import row_counts

import timestone
from timestone.errors import InvalidInput

T = datetime(2024, 1, 1, tzinfo=UTC)
NOTHING = (0, 0, 0, 0, 0)


def _metadata(dsn: str, group: str) -> list[dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT metadata FROM timestone.episodes WHERE group_id = %s AND expired_at IS NULL",
            (group,),
        ).fetchall()
    return [row[0] for row in rows]


# -- the uri ------------------------------------------------------------------------------

CJK = "".join(chr(0x4E00 + i) for i in range(1000))  # three bytes each
EMOJI = "".join(chr(0x1F300 + i) for i in range(700))  # four bytes each


@pytest.mark.parametrize(
    ("uri", "size"),
    [
        (CJK[:682] + "ab" + "c", 2_049),
        (CJK[:900], 2_700),
        (EMOJI, 2_800),
    ],
)
def test_a_uri_over_its_size_in_bytes_is_refused_by_name(
    memory: timestone.Memory, dsn: str, group: str, uri: str, size: int
) -> None:
    assert len(uri) <= 2048  # within the old limit in characters
    assert len(uri.encode()) == size
    with pytest.raises(InvalidInput) as refused:
        memory.add_document(group, uri, "Otters eat fish.", reference_time=T)
    assert str(refused.value) == (
        f"document uri {uri!r:.80} is {size:,} bytes of UTF-8; the limit is 2,048 bytes "
        "(the uri is part of every chunk's key, which the database indexes)"
    )
    assert row_counts(dsn, group) == NOTHING


def test_a_uri_of_the_limit_is_stored_in_the_longest_group(
    memory: timestone.Memory, dsn: str
) -> None:
    group = ("t-" + uuid.uuid4().hex).ljust(128, "x")
    uri = CJK[:682] + "ab"
    assert len(uri.encode()) == 2_048
    first = memory.add_document(group, uri, "Otters eat fish.", reference_time=T)
    assert (first.created, first.version, first.uri) == (True, 1, uri)
    assert [e.document_uri for e in memory.episodes(group)] == [uri]
    again = memory.add_document(group, uri, "Otters eat fish.", reference_time=T)
    assert (again.created, again.version) == (False, 1)
    newer = memory.add_document(group, uri, "Otters eat crabs.", reference_time=T)
    assert (newer.created, newer.version) == (True, 2)


# -- the content --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content", ["\u200b\u200b", "\ufeff", "\x01\x02", "\u200b \n\u2060", "\u0301\u0301"]
)
def test_content_with_no_visible_character_is_refused_by_name(
    memory: timestone.Memory, dsn: str, group: str, content: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        memory.add_document(group, "doc://u", content, reference_time=T)
    assert str(refused.value) == (
        f"document content {content!r} has no visible character (only spaces, control, "
        "format or combining characters)"
    )
    assert row_counts(dsn, group) == NOTHING


def test_content_with_a_visible_character_among_invisible_ones_is_stored(
    memory: timestone.Memory, group: str
) -> None:
    result = memory.add_document(group, "doc://u", "\ufeff\u200bé", reference_time=T)
    assert [e.content for e in result.episodes] == ["\ufeff\u200bé"]


# -- the title and the metadata ----------------------------------------------------------


def test_the_metadatas_title_is_the_title_when_none_is_given(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    meta = {"title": "Otter facts", "source": "wiki"}
    first = memory.add_document(
        group, "doc://u", "Otters eat fish.", reference_time=T, metadata=meta
    )
    [chunk] = first.episodes
    assert (chunk.name, chunk.source_description) == ("Otter facts [1/1]", "Otter facts")
    digest = hashlib.sha256(b"Otters eat fish.").hexdigest()
    assert _metadata(dsn, group) == [{**meta, "document_sha256": digest}]
    same = memory.add_document(
        group, "doc://u", "Otters eat fish.", reference_time=T, title="Otter facts", metadata=meta
    )
    assert (same.created, same.version) == (False, 1)
    corrected = {"title": "Facts about otters", "source": "wiki"}
    second = memory.add_document(
        group, "doc://u", "Otters eat fish.", reference_time=T, metadata=corrected
    )
    assert (second.created, second.version) == (True, 2)
    assert [e.source_description for e in memory.episodes(group)] == ["Facts about otters"]


@pytest.mark.parametrize("title", [None, "", "  "])
def test_a_metadata_title_of_none_or_blank_is_no_title(
    memory: timestone.Memory, dsn: str, group: str, title: str | None
) -> None:
    result = memory.add_document(
        group, "doc://u", "Otters eat fish.", reference_time=T, metadata={"title": title}
    )
    assert result.episodes[0].source_description == "doc://u"
    assert _metadata(dsn, group)[0]["title"] == "doc://u"


@pytest.mark.parametrize(
    ("title", "metadata", "message"),
    [
        (
            "Otter facts",
            {"title": "Facts about otters"},
            "document title 'Otter facts' and metadata['title'] 'Facts about otters' differ: "
            "the metadata's title is the document's title; give one of them, or the same",
        ),
        (
            None,
            {"title": 7},
            "document metadata['title'] must be a string, got int",
        ),
        (
            None,
            {"document_sha256": "0" * 64},
            "document metadata has the key 'document_sha256', which is reserved: "
            "add_document records the content's SHA-256 under it; name the key otherwise",
        ),
    ],
)
def test_a_title_given_twice_or_the_reserved_key_is_refused_by_name(
    memory: timestone.Memory,
    dsn: str,
    group: str,
    title: str | None,
    metadata: dict[str, Any],
    message: str,
) -> None:
    with pytest.raises(InvalidInput) as refused:
        memory.add_document(
            group, "doc://u", "Otters eat fish.", reference_time=T, title=title, metadata=metadata
        )
    assert str(refused.value) == message
    assert row_counts(dsn, group) == NOTHING
