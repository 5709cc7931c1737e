"""Names: entity names (normalization, the unique key, and the near-identical test) and
relation names (one normal form, ``relation_name``).

``normalize`` is what the database's unique index compares: Unicode NFKC,
case-folded, white space collapsed. ``near_identical`` is the fuzzy tier of
resolution, precision first: two names merge only when they differ by accents,
punctuation or spacing, or when their character shingles are almost all shared
and the names carry enough information (an entropy gate) that a one-letter
difference is not a different person. "Anna Berg" and "Anne Berg" stay two.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter

__all__ = [
    "MAX_RELATION_CHARS",
    "fold",
    "fuzzy_eligible",
    "near_identical",
    "normal_relation",
    "normalize",
    "relation_name",
    "shingles",
    "stored_relation",
]

_MIN_ENTROPY_BITS = 3.0  # Shannon entropy of the folded name, per character
_MIN_FOLDED_CHARS = 8
_JACCARD_THRESHOLD = 0.9

MAX_RELATION_CHARS = 128
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")  # worksAt: a word starts at the capital
_NOT_NAME = re.compile(r"[^A-Za-z0-9]+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")  # what check_relation takes


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


def normal_relation(name: str) -> str:
    """The normal form of a relation name: UPPER_SNAKE_CASE. A capital after a lower-case
    letter or a digit starts a word (``worksAt``, ``WorksAt`` → ``WORKS_AT``); then every
    letter is upper-cased, so ``Directs``, ``directs`` and ``DIRECTS`` are one relation.
    ``name`` is an identifier already (``check_relation``); ``relation_name`` maps any label.
    """
    return _CAMEL.sub("_", name).upper()


def relation_name(label: str) -> str | None:
    """The relation a free label names, in the normal form (``normal_relation``): accents
    dropped, each run of other characters than ASCII letters and digits one ``_``
    (``located in``, ``located-in`` → ``LOCATED_IN``). ``None`` when no letter or digit is
    left, the name would start with a digit, or it is longer than 128 characters."""
    decomposed = unicodedata.normalize("NFKD", label)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    name = _NOT_NAME.sub("_", normal_relation(plain.strip())).strip("_")
    name = re.sub("_+", "_", name)
    if not name or name[0].isdigit() or len(name) > MAX_RELATION_CHARS:
        return None
    return name


def stored_relation(name: str) -> str:
    """The name a relation stored by an earlier version takes: the normal form of an
    identifier (what ``check_relation`` makes of it), else ``name`` itself (``_2nd`` has
    none). The migration ``relation_names_normal_form`` renames stored rows by the same
    rule, in SQL (``timestone.normal_relation``)."""
    found = relation_name(name) if _IDENTIFIER.fullmatch(name) else None
    return name if found is None else found
