"""Entity names: normalization (the unique key) and the near-identical test.

``normalize`` is what the database's unique index compares: Unicode NFKC,
case-folded, white space collapsed. ``near_identical`` is the fuzzy tier of
resolution, precision first: two names merge only when they differ by accents,
punctuation or spacing, or when their character shingles are almost all shared
and the names carry enough information (an entropy gate) that a one-letter
difference is not a different person. "Anna Berg" and "Anne Berg" stay two.
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter

__all__ = ["fold", "fuzzy_eligible", "near_identical", "normalize", "shingles"]

_MIN_ENTROPY_BITS = 3.0  # Shannon entropy of the folded name, per character
_MIN_FOLDED_CHARS = 8
_JACCARD_THRESHOLD = 0.9


def normalize(name: str) -> str:
    """The unique key of a name within a group and type."""
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def fold(name: str) -> str:
    """A name without accents, punctuation or spaces: what people mean as the same spelling."""
    decomposed = unicodedata.normalize("NFKD", normalize(name))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch) and (ch.isalnum()))


def shingles(text: str, k: int = 3) -> frozenset[str]:
    padded = f" {text} "
    if len(padded) <= k:
        return frozenset({padded})
    return frozenset(padded[i : i + k] for i in range(len(padded) - k + 1))


def _entropy(text: str) -> float:
    counts = Counter(text)
    total = len(text)
    return -sum(c / total * math.log2(c / total) for c in counts.values())


def fuzzy_eligible(name: str) -> bool:
    """Whether a name may merge with a spelling that folds differently: long enough, not
    repetitive, and without digits (numbers identify: "Room 101" is not "Room 102")."""
    folded = fold(name)
    return (
        len(folded) >= _MIN_FOLDED_CHARS
        and _entropy(folded) >= _MIN_ENTROPY_BITS
        and not any(ch.isdigit() for ch in folded)
    )


def near_identical(a: str, b: str) -> bool:
    """True when two names are the same name spelled differently, not two similar names."""
    fa, fb = fold(a), fold(b)
    if not fa or not fb:
        return False
    if fa == fb:
        return True
    # Short or repetitive names never fuzzy-merge: too little signal.
    if not (fuzzy_eligible(a) and fuzzy_eligible(b)):
        return False
    sa, sb = shingles(fa), shingles(fb)
    jaccard = len(sa & sb) / len(sa | sb)
    return jaccard >= _JACCARD_THRESHOLD
