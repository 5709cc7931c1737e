"""The arguments many methods share: a result limit, the two clocks' points, an entity."""

from __future__ import annotations

import re
import uuid
from datetime import datetime

from ._records import check_text
from ._time import NOW, Now, aware, utcnow
from .errors import InvalidInput

__all__ = ["MAX_LIMIT", "check_as_of", "check_limit", "check_valid_at", "entity_ref"]

MAX_LIMIT = 1000


def check_limit(limit: object) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r:.80}")
    return limit


def check_valid_at(valid_at: datetime | Now | None) -> datetime | None:
    if valid_at is NOW:
        return utcnow()
    return None if valid_at is None else aware(valid_at, "valid_at")


def check_as_of(as_of: object) -> datetime | None:
    if as_of is NOW:
        raise InvalidInput(
            "as_of takes a datetime, or None for what the graph holds now; "
            "NOW is a point of world time, for valid_at"
        )
    return None if as_of is None else aware(as_of, "as_of")


# an id written out as text, in the form ``str(uuid)`` gives (ids read back from JSON,
# a URL or a log); any other text is a name
_ID_TEXT = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}", re.IGNORECASE)


def entity_ref(value: object, what: str) -> str | uuid.UUID:
    """An entity's id, given as a ``UUID`` or as its text, or else its name."""
    if isinstance(value, uuid.UUID):
        return value
    text = check_text(value, what, max_chars=512)
    bare = text.strip()  # an id copied with the line break or spaces around it
    return uuid.UUID(bare) if _ID_TEXT.fullmatch(bare) else text
