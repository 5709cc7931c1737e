"""What a question says of time, read without a model.

A question that names a date ("What did Maria donate in December 2023?", "Who did
Maria have dinner with on May 3, 2023?", "How often did she swim in 2022?") asks about
what was told then: ``time_window`` turns the date into a window of world time, the
day, the month or the year it names. The episodes scope gives the candidates told in
that window a share of the best score (``timestone._episodes_sql``): a preference, not
a filter, since an episode may tell of a date other than its own.

The first date written out with its year ("May 3, 2023", "3 June, 2023", "July 2023",
"in 2023") is found by a pattern and read by ``dateutil``. A number alone is no date
("the 2 kids of Maria in 2023" names the year, not February), nor is a modal "may".
Relative words ("last year", "recently") have no anchor in a search that may look at
any time, and open none.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from dateutil import parser as dateparser
from dateutil.relativedelta import relativedelta

__all__ = ["names_in", "time_window", "without_names"]

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"(?:[0-3]?\d(?:st|nd|rd|th)?)"
_YEAR = r"(?:1[6-9]\d\d|2\d\d\d)"
# a date as a question writes it: "May 3, 2023", "3 June, 2023", "the 3rd of June 2023",
# "July 2023", "in 2023" (a bare year only after "in", "of", "during" or "since")
_DATE = re.compile(
    rf"(?<![\w-])(?:(?P<md>{_MONTH}\s+{_DAY},?\s+{_YEAR})"
    rf"|(?P<dm>{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR})"
    rf"|(?P<m>{_MONTH},?\s+{_YEAR})"
    rf"|(?:(?:in|of|during|since|throughout)\s+)(?P<y>{_YEAR}))(?![\w-])",
    re.IGNORECASE,
)
_ORDINAL = re.compile(r"(?<=\d)(?:st|nd|rd|th)\b|\bof\b", re.IGNORECASE)


def time_window(question: str) -> tuple[datetime, datetime] | None:
    """The window of world time ``question`` names (start included, end excluded, UTC),
    or None: the first date it writes out, read by ``dateutil``."""
    found = _DATE.search(question)
    if found is None:
        return None
    kind = found.lastgroup
    text = _ORDINAL.sub(" ", found.group(kind or 0))
    try:
        when = dateparser.parse(text, default=datetime(2000, 1, 1))
    except (ValueError, OverflowError):
        return None
    if kind == "y":
        first = datetime(when.year, 1, 1, tzinfo=UTC)
        return first, first + relativedelta(years=1)
    if kind == "m":
        first = datetime(when.year, when.month, 1, tzinfo=UTC)
        return first, first + relativedelta(months=1)
    day = datetime(when.year, when.month, when.day, tzinfo=UTC)
    return day, day + timedelta(days=1)


# a word written with a capital: a name unless it starts a sentence ("When did Caroline
# go to the LGBTQ support group?": Caroline, LGBTQ)
_CAPITAL = re.compile(r"\b[A-Z][\w'\u2019-]*")
_SENTENCE_END = re.compile(r"(?:^|[.!?:;\"(\n])\s*$")


def names_in(question: str) -> list[str]:
    """The names ``question`` writes: its words that begin with a capital letter and do
    not begin a sentence, each once, without a possessive ("Caroline's": Caroline);
    "I" is no name."""
    out: dict[str, None] = {}
    for m in _CAPITAL.finditer(question):
        word = re.sub(r"['\u2019]s$", "", m.group()).strip("'\u2019-")
        if len(word) < 2 or _SENTENCE_END.search(question[: m.start()]):
            continue
        out.setdefault(word, None)
    return list(out)


def without_names(question: str) -> str | None:
    """``question`` with the names it writes left out (``names_in``), for the vector of
    what it asks about; None when it writes no name, or nothing but names."""
    names = names_in(question)
    if not names:
        return None
    pattern = r"\b(?:" + "|".join(re.escape(n) for n in names) + r")(?:['\u2019]s)?(?!\w)"
    left = re.sub(pattern, " ", question)
    return left if re.search(r"\w", left) else None
