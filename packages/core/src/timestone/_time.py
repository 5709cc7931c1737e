"""Points in time: aware UTC datetimes only, and the NOW default of reads."""

from __future__ import annotations

import enum
import re
from datetime import UTC, datetime

from .errors import InvalidPeriod, NaiveDatetime

__all__ = ["NOW", "Now", "aware", "optional_aware", "parse_datetime", "utcnow"]


class Now(enum.Enum):
    """The default of ``valid_at=`` on reads: the moment of the call."""

    NOW = "now"

    def __repr__(self) -> str:
        return "NOW"


NOW = Now.NOW
"""The default of ``valid_at=``: the moment of the read, taken when it runs."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def aware(value: object, what: str) -> datetime:
    """Return ``value`` as an aware UTC datetime, or refuse it naming ``what``."""
    if not isinstance(value, datetime):
        raise NaiveDatetime(f"{what} must be a timezone-aware datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise NaiveDatetime(
            f"{what} is a naive datetime ({value.isoformat()}); pass a timezone-aware one, "
            "for example datetime(..., tzinfo=UTC)"
        )
    try:
        return value.astimezone(UTC)
    except OverflowError:
        # 9999-12-31 23:00-05:00 is in year 10000 in UTC, past what datetime holds
        raise InvalidPeriod(
            f"{what} ({value.isoformat()}) is outside the years 1 to 9999 in UTC"
        ) from None


def optional_aware(value: object, what: str) -> datetime | None:
    return None if value is None else aware(value, what)


def parse_datetime(value: str | datetime, what: str) -> datetime:
    """Parse an ISO 8601 string (``Z`` accepted) or pass a datetime through; aware only."""
    if isinstance(value, datetime):
        return aware(value, what)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, AttributeError) as exc:
        raise InvalidPeriod(f"{what}: cannot read {value!r:.80} as an ISO 8601 datetime") from exc
    return aware(parsed, what)


_YEAR = re.compile(r"\d{4}")
_MONTH = re.compile(r"\d{4}-\d{2}")


def parse_when(text: str, what: str) -> datetime:
    """A point in time given as text (the command line, a model's tool call): ``now``,
    ``2019``, ``2019-05``, ``2019-05-01``, or an ISO 8601 datetime. Without an offset, the
    time is read as UTC."""
    value = text.strip()
    if value.lower() == "now":
        return datetime.now(UTC)
    try:
        if _YEAR.fullmatch(value):
            return datetime(int(value), 1, 1, tzinfo=UTC)
        if _MONTH.fullmatch(value):
            return datetime(int(value[:4]), int(value[5:]), 1, tzinfo=UTC)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise InvalidPeriod(
            f"{what} {text!r:.80} is not a date; use ISO 8601 such as 2019-05-01, "
            "2019-05-01T12:00:00Z, 2019-05, 2019, or 'now'"
        ) from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return aware(parsed, what)
