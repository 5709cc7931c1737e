"""What a search hands Postgres's ``websearch_to_tsquery`` to read.

The web-search syntax reads ``-`` before a word as NOT, and a run of them as one
NOT each (``--x`` is ``!!'x'``). The parser keeps its operators on a stack of 32:
a query with more negations in a row (33 dashes, or 32 after a word) fails with
"tsquery stack too small" instead of matching anything. Such a run is cut to 16
negations or 15, whichever has the run's parity, so the query means what it
meant (two negations cancel); runs of 16 or fewer, and every other query, go
through as they are.

A question may also hold at most ``MAX_ALTERNATIVES`` alternatives (``or``
between words, outside quotes): ranking a row costs ``ts_rank_cd`` more than
linear time in the words of an OR, and a broad OR matches most rows (1,400
alternatives over 2,000 facts took 95 s; 100 took 170 ms). ``check_alternatives``
refuses more, naming the count.

A run of 16 negations or fewer is sent as it is: the parser reads dashes next to
a word and to ``or`` by rules of its own (``cat- - - or cat`` is ``'cat' &
'cat'``, ``cat-  or cat`` is ``'cat' | 'cat'``), so only what must be cut is. A
double negation (``--x``, which means ``x``) then matches as its word but does
not rank (``querytree``, migration 0025, sees no word under it).
"""

from __future__ import annotations

import re

from ..errors import InvalidInput

__all__ = ["MAX_ALTERNATIVES", "MAX_NEGATIONS", "any_words", "check_alternatives", "web_query"]

MAX_NEGATIONS = 16
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
_LONG_RUN = re.compile(f"(?<![^{_IN_CLASS}])(?:{_NEGATION}){{{MAX_NEGATIONS + 1},}}")
_ONE = re.compile(_NEGATION)
_NO_SKIPPED = str.maketrans("", "", _SKIPPED)
# a run of negations where an operand may start, and the operand it negates
_NEGATED = re.compile(f'(?<![^{_IN_CLASS}])((?:{_NEGATION})+)([^{_IN_CLASS}"]*)')


def _cut(run: re.Match[str]) -> str:
    negations = _ONE.findall(run.group())
    kept = MAX_NEGATIONS if len(negations) % 2 == 0 else MAX_NEGATIONS - 1
    return "".join(negations[:kept])


def web_query(text: str) -> str:
    """``text`` with each run of more than ``MAX_NEGATIONS`` negations cut (see above);
    inside double quotes (a phrase) a dash is no operator, and is left alone."""
    if "-" * (MAX_NEGATIONS + 1) not in text.translate(_NO_SKIPPED):
        return text  # no run long enough, whatever is between its dashes
    parts = text.split('"')
    parts[::2] = [_LONG_RUN.sub(_cut, p) for p in parts[::2]]
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


def any_words(text: str) -> tuple[str, str | None]:
    """What the facts' fallback (any word may match,
    ``timestone.search._ranked_lists_sql.facts_fts_sql``) reads of ``text``: the words a row
    may hold, and those it must not (``None``: none), joined by ``or``. A word the
    web-search syntax negates (``-word``, outside quotes; two negations cancel) is one
    the row must not hold, as in the match of every word."""
    if "-" not in text:
        return text, None
    negated: list[str] = []

    def keep(m: re.Match[str]) -> str:
        if len(_ONE.findall(m.group(1))) % 2 == 0:
            return " " + m.group(2)
        if m.group(2):
            negated.append(m.group(2))
        return " "

    parts = text.split('"')
    parts[::2] = [_NEGATED.sub(keep, p) for p in parts[::2]]
    return '"'.join(parts), " or ".join(negated) or None
