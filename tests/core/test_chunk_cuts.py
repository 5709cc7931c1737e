"""Where a document with no break to cut at is cut: between characters a reader sees as
one (a letter and its accent, an emoji sequence) never, and always at its exact offsets."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime

import pytest

import timestone
from timestone.write._chunks import chunk_text

_ZWJ = "\u200d"
_FAMILY = "\U0001f469" + _ZWJ + "\U0001f469" + _ZWJ + "\U0001f467"  # one emoji, five code points

TEXTS = {
    "accents": "x" + "e\u0301" * 150,
    "stacked marks": "x" + "a\u0301\u0323\u0308" * 90,
    "emoji sequences": "x" + _FAMILY * 60,
    "plain letters": "y" * 350,
}


def _starts_inside_a_character(text: str) -> bool:
    return unicodedata.category(text[0])[0] == "M" or text[0] == _ZWJ


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_a_cut_with_no_break_keeps_characters_whole(name: str) -> None:
    content = TEXTS[name]
    chunks = chunk_text(content, max_chars=100)
    assert len(chunks) > 2
    assert "".join(c.text for c in chunks) == content
    for c in chunks:
        assert content[c.start : c.end] == c.text
        assert 0 < len(c.text) <= 100
        assert not _starts_inside_a_character(c.text), (name, c.index)
        assert not c.text.endswith(_ZWJ)


def test_a_stored_documents_passages_start_on_whole_characters(
    memory: timestone.Memory, group: str
) -> None:
    content = TEXTS["accents"]
    written = memory.add_document(
        group,
        "doc://accents",
        content,
        reference_time=datetime(2020, 1, 1, tzinfo=UTC),
        extract=False,
        max_chunk_chars=100,
    )
    assert [(e.char_start, e.char_end) for e in written.episodes] == [
        (0, 99),
        (99, 199),
        (199, 299),
        (299, 301),
    ]
    assert not any(_starts_inside_a_character(e.content) for e in written.episodes)
