"""Where text may be cut: never between a character and what joins it to the next."""

from __future__ import annotations

import unicodedata

__all__ = ["joined_back"]

_ZWJ = "\u200d"


def joined_back(content: str, start: int, end: int) -> int:
    """``end``, moved back (but past ``start``) while it would part a character from the
    combining marks or the joiner after it (a letter and its accent, the parts of an emoji
    sequence). The standard library's ``unicodedata`` suffices for those; a full grapheme
    segmentation (``regex``'s ``\\X``) would bring a dependency without type information."""
    cut = end
    while cut > start + 1 and (
        unicodedata.category(content[cut])[0] == "M"
        or content[cut] == _ZWJ
        or content[cut - 1] == _ZWJ
    ):
        cut -= 1
    return cut if cut > start + 1 else end
