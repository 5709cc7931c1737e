"""What a question says of time, read without a model.

A question that names a time ("What did Maria donate in December 2023?", "Who did
Maria have dinner with on May 3, 2023?", "What did she do last year?") asks about what
was true or told then: ``time_window`` turns it into a window of world time, the day,
week, month, season or year it names. The episodes scope gives the candidates told in
that window a share of the best score (``timestone.search._episodes_sql``), the facts scope
the facts true in it (``timestone.search._window``): a preference, not a filter, since an
episode may tell of a date other than its own.

Two kinds of time words; a written date wins, else the first relative phrase:

- **A date written out with its year** ("May 3, 2023", "3 June, 2023", "July 2023",
  "in 2023") or in numbers ("2023-05-08", "2023/05/08", "05/08/2023", "05-08-2023"),
  found by a pattern and read by ``dateutil``. A date in numbers that starts with its
  year is read year, month, day (ISO 8601); one that ends with it is read month first
  (05/08/2023 is 8 May, the order of the United States and of ``dateutil``), unless
  its first number cannot be a month (13/05/2023 is 13 May). A date that does not
  exist (31/02/2023) is none; dots ("8.5.2023") are left alone, being read day first
  in much of the world and as version numbers too. When a question writes one,
  it wins over any relative word ("two weeks before August 11, 2023" favours what was
  told on August 11: that is where a conversation tells of the two weeks before).
- **Relative words**, read against a reference moment: the search's ``valid_at`` when
  it names one, else the moment of the call. "yesterday", "today", "last/this/next
  week|month|year", "two weeks ago", "last Friday", "in May" (the latest May up to
  the reference) are read by ``dateparser`` (its date and the period it names, snapped
  to that calendar day, week from Monday, month or year); "last weekend" (Saturday and
  Sunday before the reference's week) and the seasons ("last summer", "in summer
  2021": meteorological seasons of the northern hemisphere, winter from December to
  February) have no reading there and are computed here.

The words are found by the patterns below, not by ``dateparser``'s own search, which
reads the "May" of "May I ask" as a month. A number alone is no date ("the
2 kids of Maria in 2023" names the year, not February), nor is a modal "may" or a
verb "march" (a month with no year must be capitalised and follow "in", "during" or
"since"), nor an ordinal "second".

Words relative to an event ("before she moved", "after the road trip") name no date
of their own: ``event_of`` finds the event and its side, and the search looks the
event up in the group (``timestone.search._run``) before it opens the window.
"""

# why: docs/decisions/019-time-words-and-question-rewrite.md

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dateparser.date import DateData

__all__ = ["event_of", "event_window", "names_in", "time_window", "without_names"]

Window = tuple[datetime, datetime]

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"(?:[0-3]?\d(?:st|nd|rd|th)?)"
_YEAR = r"(?:1[6-9]\d\d|2\d\d\d)"
# a date as a question writes it: "May 3, 2023", "3 June, 2023", "the 3rd of June 2023",
# "July 2023", "in 2023" (a bare year only after "in", "of", "during" or "since")
_DATE = re.compile(
    rf"(?<![\w/.-])(?:(?P<iso>{_YEAR}([-/])[01]?\d\2[0-3]?\d(?:T[\d:.]+(?:Z|[+-][\d:]+)?)?)"
    rf"|(?P<num>[0-3]?\d([/-])[0-3]?\d\4{_YEAR})"
    rf"|(?P<md>{_MONTH}\s+{_DAY},?\s+{_YEAR})"
    rf"|(?P<dm>{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR})"
    rf"|(?P<m>{_MONTH},?\s+(?:of\s+)?{_YEAR})"
    rf"|(?:(?:in|of|during|since|throughout)\s+)(?P<y>{_YEAR}))(?![\w/-]|\.\d)",
    re.IGNORECASE,
)
_DATE_KINDS = ("iso", "num", "md", "dm", "m", "y")
_ORDINAL = re.compile(r"(?<=\d)(?:st|nd|rd|th)\b|\bof\b", re.IGNORECASE)

_NUMBER = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|[1-9]\d?)"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_SEASON = r"(?:spring|summer|autumn|fall|winter)"
# a month with no year: full names only, capitalised (checked after the match), after
# a preposition, so that "may she" and "did they march" are no month
_MONTH_NAME = (
    r"(?:january|february|march|april|may|june|july|august|september|october"
    r"|november|december)"
)
_RELATIVE = re.compile(
    rf"(?<![\w-])(?:(?P<read>{_NUMBER}\s+(?:day|week|month|year)s?\s+ago"
    r"|(?:the\s+day\s+before\s+)?yesterday|today"
    r"|(?:last|this|next)\s+(?:week|month|year)"
    rf"|last\s+{_WEEKDAY})"
    r"|(?P<weekend>(?:last|this)\s+weekend)"
    rf"|(?P<season>(?:last|this)\s+{_SEASON})"
    rf"|(?:(?:in|during)\s+(?:the\s+)?)?(?P<season_year>{_SEASON}\s+(?:of\s+)?{_YEAR})"
    rf"|(?:(?:in|during|since)\s+)(?P<month>{_MONTH_NAME})(?!\s*,?\s*\d))(?![\w-])",
    re.IGNORECASE,
)
# the first month of each season (winter: December, running into the next year)
_SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}


def time_window(question: str, reference: datetime) -> Window | None:
    """The window of world time ``question`` names (start included, end excluded, UTC),
    or None. A date written out with its year wins; relative words are read against
    ``reference`` (aware). A window the calendar cannot hold (a reference in year 1 or
    9999: "this year" from 9999-12-31) is none."""
    try:
        return _written_date(question) or _relative(question, reference.astimezone(UTC))
    except (ValueError, OverflowError):
        return None


def _written_date(question: str) -> Window | None:
    found = _DATE.search(question)
    if found is None:
        return None
    kind = next((k for k in _DATE_KINDS if found.group(k)), None)
    text = _ORDINAL.sub(" ", found.group(kind or 0))
    from dateutil import parser as dateparser

    try:
        # year first in the ISO order (2023-05-08, 2023/05/08); otherwise the month
        # first, as dateutil reads 05/08/2023 (8 May), unless the first number cannot
        # be a month (13/05/2023: 13 May)
        when = dateparser.parse(text, default=datetime(2000, 1, 1), yearfirst=kind == "iso")
    except (ValueError, OverflowError):
        return None
    if kind == "y":
        return _snap(when, "year")
    if kind == "m":
        return _snap(when, "month")
    return _snap(when, "day")


def _relative(question: str, reference: datetime) -> Window | None:
    for found in _RELATIVE.finditer(question):
        kind = found.lastgroup
        text = found.group(kind or 0)
        if kind == "month" and not text[0].isupper():
            continue
        if kind in ("read", "month"):
            window = _read(text, reference)
        elif kind == "weekend":
            window = _weekend(text.split()[0].lower(), reference)
        elif kind == "season":
            which, season = text.lower().split()
            window = _season_near(season, which, reference)
        else:
            words = text.lower().split()
            window = _season(words[0], int(words[-1]))
        if window is not None:
            return window
    return None


def _read(text: str, reference: datetime) -> Window | None:
    # imported by the first question that needs it (a quarter of a second; its first
    # reading loads the English data, a tenth more)
    from dateparser.date import DateDataParser

    parser = DateDataParser(
        languages=["en"],
        settings={
            "RELATIVE_BASE": reference.replace(tzinfo=None),
            "PREFER_DATES_FROM": "past",
            "RETURN_TIME_AS_PERIOD": True,
            "TIMEZONE": "UTC",
            "RETURN_AS_TIMEZONE_AWARE": False,
        },
    )
    data: DateData = parser.get_date_data(text)  # pyright: ignore[reportUnknownMemberType]
    if data.date_obj is None or data.period not in ("day", "week", "month", "year"):
        return None
    return _snap(data.date_obj, str(data.period))


def _snap(when: datetime, period: str) -> Window:
    """The calendar ``period`` (day, week from Monday, month, year) holding ``when``."""
    from dateutil.relativedelta import relativedelta

    day = datetime(when.year, when.month, when.day, tzinfo=UTC)
    if period == "year":
        first = day.replace(month=1, day=1)
        return first, first + relativedelta(years=1)
    if period == "month":
        first = day.replace(day=1)
        return first, first + relativedelta(months=1)
    if period == "week":
        first = day - timedelta(days=day.weekday())
        return first, first + timedelta(days=7)
    return day, day + timedelta(days=1)


def _weekend(which: str, reference: datetime) -> Window:
    """Saturday and Sunday before the reference's week ("last"), or of it ("this")."""
    monday = _snap(reference, "week")[0]
    saturday = monday + timedelta(days=5 if which == "this" else -2)
    return saturday, saturday + timedelta(days=2)


def _season(season: str, year: int) -> Window:
    """Meteorological seasons of the northern hemisphere; a winter is named by the year
    of its December."""
    from dateutil.relativedelta import relativedelta

    start = datetime(year, _SEASON_START[season], 1, tzinfo=UTC)
    return start, start + relativedelta(months=3)


def _season_near(season: str, which: str, reference: datetime) -> Window:
    """ "this summer": the latest summer begun by the reference; "last summer": the
    latest one ended by then."""
    year = reference.year
    while _season(season, year)[0] > reference:
        year -= 1
    if which == "last":
        while _season(season, year)[1] > reference:
            year -= 1
    return _season(season, year)


# a word written with a capital, unless it starts a sentence ("When did Caroline go to
# the LGBTQ support group?": Caroline, LGBTQ): a name, if the group knows it
_CAPITAL = re.compile(r"\b[A-Z][\w'\u2019-]*")
_SENTENCE_END = re.compile(r"(?:^|[.!?:;\"(\n])\s*$")


def names_in(question: str) -> list[str]:
    """The words of ``question`` that may be names: those that begin with a capital
    letter and do not begin a sentence, each once, without a possessive ("Caroline's":
    Caroline); "I" is no name. A capital letter alone does not make a name ("UK", "PrP",
    "BRCA1" are terms of what is asked): the search keeps those the group knows
    (``timestone.known_names``)."""
    out: dict[str, None] = {}
    for m in _CAPITAL.finditer(question):
        word = re.sub(r"['\u2019]s$", "", m.group()).strip("'\u2019-")
        if len(word) < 2 or _SENTENCE_END.search(question[: m.start()]):
            continue
        out.setdefault(word, None)
    return list(out)


def without_names(question: str, names: Sequence[str] | None = None) -> str | None:
    """``question`` without ``names`` (default: every word ``names_in`` finds), for the
    vector of what it asks about; None when there is no name to leave out, or nothing
    but names."""
    names = names_in(question) if names is None else list(names)
    if not names:
        return None
    pattern = r"\b(?:" + "|".join(re.escape(n) for n in names) + r")(?:['\u2019]s)?(?!\w)"
    left = re.sub(pattern, " ", question)
    return left if re.search(r"\w", left) else None


# time relative to an event: "after the road trip", "before she moved to Lyon", "since
# starting boot camps"; the event runs to the end of its clause
_EVENT = re.compile(
    r"(?<![\w-])(?P<side>before|after|since|until|till|prior\s+to)\s+(?P<event>[^?!.,;:()\"]+)",
    re.IGNORECASE,
)
# what follows those words and is no event: a question ("After how many weeks ...?"),
# a set phrase ("after all", "before long"), a time ("since then", "until now")
_NO_EVENT = re.compile(
    r"(?:how|what|when|which|who|whom|whose|why|where|all|long|that|then|this|now|ever"
    r"|today|yesterday|tomorrow|last|next|the\s+(?:day|week|month|year|time)s?"
    rf"|{_MONTH_NAME}|{_WEEKDAY})\b|\d",
    re.IGNORECASE,
)
_AFTER = frozenset({"after", "since"})
# the first and last moments a window can name, for the side of an event left open
_EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
_LATEST = datetime(9999, 12, 30, tzinfo=UTC)


def event_of(question: str) -> tuple[str, str] | None:
    """The event ``question``'s time is relative to, and the side it asks of: "When did
    Melanie go on a hike after the road trip?" gives ("after", "the road trip"). "since"
    asks after, "until" and "prior to" before; None when no such words, or they lead
    to no event ("after all", "since then", "After how many weeks ...")."""
    for found in _EVENT.finditer(question):
        event = found.group("event").strip()
        if not re.search(r"[^\W\d_]{2}", event) or _NO_EVENT.match(event):
            continue
        side = "after" if found.group("side").lower() in _AFTER else "before"
        return side, event
    return None


def event_window(side: str, when: datetime) -> Window:
    """The window of world time on ``side`` of an event at ``when``, the event's own day
    included: what was told of it belongs to both sides. An event at the calendar's ends
    (a placeholder date such as 9999-12-31) is read on the last day a window can end."""
    day = _snap(min(max(when.astimezone(UTC), _EARLIEST), _LATEST), "day")
    return (day[0], max(day[1], _LATEST)) if side == "after" else (min(day[0], _EARLIEST), day[1])
