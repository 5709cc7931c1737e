"""What a search hands Postgres's ``websearch_to_tsquery`` to read.

The web-search syntax reads ``-`` before a word as NOT, and a run of them as one
NOT each (``--x`` is ``!!'x'``). Two reasons not to send such a run as it is:
the parser keeps its operators on a stack of 32, so a query with more negations
in a row (33 dashes, or 32 after a word) fails with "tsquery stack too small";
and a double negation hides its word from the part of the query that ranks
(``querytree``, migration 0025), which reads ``!!x`` as no word at all. A run
of two or more negations outside a quoted phrase is cut to what it means: one
negation where it held an odd number, none where it held an even number (two
negations cancel). A single negation, and every other query, goes through as
it is.

A question may also hold at most ``MAX_ALTERNATIVES`` alternatives (``or``
between words, outside quotes): ranking a row costs ``ts_rank_cd`` more than
linear time in the words of an OR, and a broad OR matches most rows (1,400
alternatives over 2,000 facts took 95 s; 100 took 170 ms). ``check_alternatives``
refuses more, naming the count.
"""

from __future__ import annotations

import re

from .errors import InvalidInput

__all__ = ["MAX_ALTERNATIVES", "check_alternatives", "web_query"]

MAX_ALTERNATIVES = 64
# "or" as the web-search syntax reads it: a word of its own, in any case
_OR = re.compile(r"(?<!\S)or(?!\S)", re.IGNORECASE)

# One negation: a dash, then what the parser skips before the next operand (ASCII
# white space and the operator characters of the plain tsquery syntax, which the
# web-search syntax ignores). Other characters end the run: a word, a quote, a comma.
_SKIPPED = " \t\n\r\f\v()!&|<"
_IN_CLASS = re.escape(_SKIPPED)
_NEGATION = f"-[{_IN_CLASS}]*"
# a run where an operand may start (the text's start, or after a skipped character): a
# dash right after a word is part of it ("well-known", "cat---"), and reads as no NOT
_RUN = re.compile(f"(?<![^{_IN_CLASS}])(?:{_NEGATION}){{2,}}")
_ONE = re.compile(_NEGATION)
_NO_SKIPPED = str.maketrans("", "", _SKIPPED)


def _cut(run: re.Match[str]) -> str:
    negations = _ONE.findall(run.group())
    # an even run becomes the skipped characters after its last dash (a separator
    # still), an odd run its last negation
    last = negations[-1]
    return last if len(negations) % 2 else last[1:] or " "


def web_query(text: str) -> str:
    """``text`` with each run of two or more negations cut to its parity (see above);
    inside double quotes (a phrase) a dash is no operator, and is left alone."""
    if "--" not in text.translate(_NO_SKIPPED):
        return text  # no run of two, whatever is between its dashes
    parts = text.split('"')
    parts[::2] = [_RUN.sub(_cut, p) for p in parts[::2]]
    return '"'.join(parts)


def check_alternatives(text: str, what: str = "search query") -> None:
    """Refuse a question of more than ``MAX_ALTERNATIVES`` alternatives (see above)."""
    if len(text) < 4 * MAX_ALTERNATIVES:
        return  # too short to hold that many
    ors = sum(len(_OR.findall(p)) for p in text.split('"')[::2])
    if ors + 1 > MAX_ALTERNATIVES:
        raise InvalidInput(
            f"{what} has {ors + 1:,} alternatives (words joined by 'or'); the limit is "
            f"{MAX_ALTERNATIVES}: ask several questions, or fewer alternatives"
        )
