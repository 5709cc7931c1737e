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

__all__ = ["time_window"]

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
