"""What a search asks: the request, checked before anything is read, and the names a
query may mention (its word n-grams, matched against entity names by the walk)."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import LiteralString, cast

from .._arguments import check_as_of, entity_ref
from .._names import normalize
from .._records import check_relation, check_text, check_uuid
from .._time import NOW, Now, aware, utcnow
from ..errors import InvalidInput
from ..rerankers import Reranker
from ._fulltext import check_alternatives
from ._fusion import RERANKERS
from ._question import event_of, time_window, without_names

__all__ = [
    "CENTER_DEPTH",
    "HOP_FACTS_CAP",
    "HOP_FROM_FACTS",
    "MAX_QUERY_CHARS",
    "MAX_SEARCH_LIMIT",
    "SCOPES",
    "SEED_FACTS_CAP",
    "SPLIT_ROWS",
    "TOLD",
    "WALK_CAP",
    "WALK_DEPTH",
    "SearchRequest",
    "name_ngrams",
    "ngrams_with",
    "prepare_search",
]

SCOPES = ("facts", "entities", "episodes", "communities")
# the episodes that tell something, not the records of structured facts
# (``SearchRequest.fact_records``): the predicate of their indexes (migration 0031,
# ``_db.VECTOR_INDEXES``), which a statement repeats word for word to read them
TOLD: LiteralString = "source <> 'facts'"
MAX_QUERY_CHARS = 10_000
"""The longest query ``search`` and ``context`` take, in characters."""
MAX_SEARCH_LIMIT = 1000
"""The most results one ``search`` returns (its ``limit``)."""
WALK_DEPTH = 1  # from the entities a query names
CENTER_DEPTH = 2  # from an explicit center
WALK_CAP = 5000  # rows the walk may visit
SEED_FACTS_CAP = 5000  # facts read around each named entity (ranked by relevance)
HOP_FACTS_CAP = 50  # facts read around each entity one hop out
HOP_FROM_FACTS = 3  # facts of each named entity, most relevant first, followed one hop out
_MAX_NAME_NGRAMS = 2000
# from this many rows in the facts table (its planner estimate), the facts statement is
# split over two connections when the pool has one idle (``run_search``): below, the
# round trips it adds cost about what the lists read side by side save
SPLIT_ROWS = 500_000
_MAX_FILTER_VALUES = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class SearchRequest:
    """A validated search: every field checked, nothing looked up yet."""

    query: str
    limit: int
    scopes: tuple[str, ...]
    valid_at: datetime | None
    as_of: datetime | None
    reranker: str | Reranker
    center: str | uuid.UUID | None = None
    edge_types: tuple[str, ...] | None = None
    labels: tuple[str, ...] | None = None
    ids: tuple[uuid.UUID, ...] | None = None
    candidates: int = 0
    embeddings: bool = False
    # an episode's content is read up to this many characters (None: whole), for a caller
    # that shows no more of it (``context``): a whole episode can be hundreds of kB
    content_chars: int | None = None
    # whether the records of structured facts (episodes of source ``facts``) are episode
    # candidates; ``context`` leaves them out, their facts being candidates of their own
    fact_records: bool = True
    # the window of world time the question names (``timestone.search._question``), read
    # against ``valid_at`` (else the moment of the call); episodes told in it are favoured
    window: tuple[datetime, datetime] | None = None
    # the names the question writes that the group knows (``_question.names_in``, looked
    # up by ``search_hits``): left out of the episodes' vector
    names: tuple[str, ...] = ()

    @property
    def method(self) -> str:
        return self.reranker if isinstance(self.reranker, str) else "cross_encoder"

    @property
    def meaning(self) -> str | None:
        """What the question asks about, without the names it writes that the group
        knows (``names``), for the episodes' vector (``_question.without_names``); None:
        the whole question serves."""
        return without_names(self.query, self.names) if self.names else None

    @property
    def event(self) -> tuple[str, str] | None:
        """The event the question's time is relative to, and the side it asks of
        (``_question.event_of``); None: no such words."""
        return event_of(self.query)


def _strings(
    value: object,
    what: str,
    check: Callable[[object], str],
    empty: str = "pass None for no filter",
) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Iterable) or isinstance(value, (bytes, bytearray)):
        raise InvalidInput(f"{what} must be a list of strings, got {type(value).__name__}")
    items = tuple(check(v) for v in cast(Iterable[object], value))
    if not items:
        raise InvalidInput(f"{what} is empty: {empty}")
    if len(items) > _MAX_FILTER_VALUES:
        raise InvalidInput(f"{what} has {len(items):,} values; at most {_MAX_FILTER_VALUES:,}")
    return items


def prepare_search(
    query: object,
    *,
    limit: object = 10,
    scopes: object = ("facts",),
    valid_at: datetime | Now | None = NOW,
    as_of: datetime | None = None,
    reranker: object = "rrf",
    center: object = None,
    edge_types: object = None,
    labels: object = None,
    ids: object = None,
    candidates: int | None = None,
    embeddings: bool = False,
    content_chars: int | None = None,
    fact_records: bool = True,
    what: str = "search query",
) -> SearchRequest:
    """Check every argument of ``search`` (no I/O); bad input raises ``InvalidInput``
    (``what``: the query's name in it)."""
    text = check_text(query, what, max_chars=MAX_QUERY_CHARS)
    check_alternatives(text, what)
    if not isinstance(cast(object, fact_records), bool):
        raise InvalidInput(f"fact_records must be True or False, got {fact_records!r:.80}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise InvalidInput(
            f"limit must be an integer from 1 to {MAX_SEARCH_LIMIT}, got {limit!r:.80}"
        )
    wanted = (
        _strings(
            scopes,
            "scopes",
            lambda s: s if isinstance(s, str) else repr(s),
            f"name one or more of {', '.join(SCOPES)} (None searches facts)",
        )
        or ()
    )
    for scope in wanted:
        if scope not in SCOPES:
            raise InvalidInput(
                f"unknown search scope {scope!r:.80}; the scopes are {', '.join(SCOPES)}"
            )
    world = (
        utcnow() if valid_at is NOW else (None if valid_at is None else aware(valid_at, "valid_at"))
    )
    system = check_as_of(as_of)
    if isinstance(reranker, str):
        if reranker not in RERANKERS or reranker == "cross_encoder":
            raise InvalidInput(
                f"unknown reranker {reranker!r:.80}; use one of rrf, mmr, node_distance, "
                "episode_mentions, or pass a timestone.rerankers.Reranker (a cross-encoder)"
            )
        chosen: str | Reranker = reranker
    elif isinstance(reranker, Reranker):
        chosen = reranker
    else:
        raise InvalidInput(
            "reranker must be a name or a timestone.rerankers.Reranker, "
            f"got {type(reranker).__name__}"
        )
    ref = None if center is None else entity_ref(center, "center")
    id_list = _strings(ids, "ids", lambda v: str(check_uuid(v, "each of ids")))
    if content_chars is not None and content_chars < 1:
        raise InvalidInput(f"content_chars must be a positive number, got {content_chars!r:.80}")
    return SearchRequest(
        query=text,
        limit=limit,
        scopes=tuple(dict.fromkeys(wanted)) or ("facts",),
        valid_at=world,
        as_of=system,
        reranker=chosen,
        center=ref,
        edge_types=_strings(edge_types, "edge_types", check_relation),
        labels=_strings(labels, "labels", lambda v: check_text(v, "label", max_chars=128)),
        ids=None if id_list is None else tuple(uuid.UUID(i) for i in id_list),
        candidates=candidates if candidates is not None else max(3 * limit, 30),
        embeddings=embeddings or chosen == "mmr",
        content_chars=content_chars,
        fact_records=fact_records,
        window=time_window(text, world or utcnow()),
    )


# -- the names a query may mention ----------------------------------------------------

_TRIM = " \t\n\"'`.,;:!?()[]{}<>"


def name_ngrams(query: str, longest: int = 5) -> list[str]:
    """Normalized word n-grams of the query: the entity names it may mention, exactly."""
    if query.isascii():
        # An ASCII gram (words joined by one space, its ends trimmed) normalizes to its
        # lower case: NFKC leaves ASCII as it is, its case folding is lower case, and it
        # holds no run of white space. Lowered first, the query's grams need no
        # ``normalize`` each (50 calls for a question of seven words).
        return ngrams_with(query.lower(), longest, _as_is)
    return ngrams_with(query, longest, normalize)


def _as_is(gram: str) -> str:
    return gram


def ngrams_with(query: str, longest: int, norm: Callable[[str], str]) -> list[str]:
    """``name_ngrams`` with ``norm`` the normalization of each gram (the whole query is
    normalized in full)."""
    out: dict[str, None] = {}
    for words in (query.split(), re.findall(r"\w+", query)):
        for n in range(1, longest + 1):
            for i in range(len(words) - n + 1):
                gram = norm(" ".join(words[i : i + n]).strip(_TRIM))
                if gram:
                    out[gram] = None
                if len(out) >= _MAX_NAME_NGRAMS:
                    return list(out)
    whole = normalize(query.strip(_TRIM))
    if whole:
        out[whole] = None
    return list(out)
