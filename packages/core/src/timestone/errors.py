"""Every error Timestone raises, in one place.

The hierarchy::

    TimestoneError
    ├── InvalidInput                 bad input; nothing was written
    │   ├── NaiveDatetime            a datetime without a timezone
    │   ├── InvalidGroup             empty, non-string or malformed group id
    │   ├── InvalidPeriod            invalid_at not after valid_at; a time in the future
    │   ├── OntologyViolation        unknown relation or type, attributes failing their model
    │   ├── ForeignNode              (no longer raised: graph node ids are per group)
    │   └── ToolRefused              a memory tool refused a model's arguments (says which, why)
    ├── NotFound                     no such episode, entity or fact in this group
    │   └── AlreadyRemoved           the episode was removed before
    ├── DatabaseError                the database failed; the original is ``__cause__``
    │   ├── ConnectionFailed         the DSN does not connect
    │   ├── MissingExtension         the server lacks vector, pg_trgm or btree_gist
    │   ├── SchemaTooNew             the database was migrated by a newer Timestone
    │   └── ConflictError            a constraint refused the write (a concurrent writer won)
    │       └── ClockWentBack        the database's clock reads before a version it would close
    ├── EmbeddedServerError          the embedded Postgres could not start in the data dir
    ├── AddressInUse                 the port a server (MCP over HTTP, the web view) is taken
    ├── EmbedderError                the embedder failed or returned bad vectors
    │   └── EmbedderMismatch         the stored embedder differs from the one passed
    ├── LLMError                     no model configured, or the model failed (``step`` says where)
    │   ├── BudgetExceeded           a group's LLM budget refuses the work
    │   └── UnusableAnswer           the model answered with nothing usable: a refusal, a cut-off
    │                                answer (``finish_reason`` "length"), no choices
    └── RerankerError                the cross-encoder reranker failed or answered badly

    ExtractionWarning                (a warning) model output dropped: outside the ontology, etc.
    RewriteWarning                   (a warning) a search's rewrite fell back to the plain search

Database errors raised by psycopg are wrapped, never leaked: the psycopg
exception stays reachable as ``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "AddressInUse",
    "AlreadyRemoved",
    "BudgetExceeded",
    "ClockWentBack",
    "ConflictError",
    "ConnectionFailed",
    "DatabaseError",
    "EmbeddedServerError",
    "EmbedderError",
    "EmbedderMismatch",
    "ExtractionWarning",
    "ForeignNode",
    "InvalidGroup",
    "InvalidInput",
    "InvalidPeriod",
    "LLMError",
    "MissingExtension",
    "NaiveDatetime",
    "NotFound",
    "OntologyViolation",
    "RerankerError",
    "RewriteWarning",
    "SchemaTooNew",
    "TimestoneError",
    "ToolRefused",
    "UnusableAnswer",
]


class TimestoneError(Exception):
    """The root of every error Timestone raises."""


class InvalidInput(TimestoneError, ValueError):
    """The input was refused before anything was written."""


class NaiveDatetime(InvalidInput):
    """A datetime without a timezone: Timestone never guesses one."""


class InvalidGroup(InvalidInput):
    """The group id is empty, not a string, or malformed."""


class InvalidPeriod(InvalidInput):
    """A world period that ends before it starts, or a point in time that is not allowed."""


class OntologyViolation(InvalidInput):
    """An unknown relation or entity type under a closed ontology, or attributes that fail."""


class ForeignNode(InvalidInput):
    """Kept for code that catches it; nothing raises it any more.

    Graph node ids (entity ids, chunk keys) were once global, and a write naming an id
    another group held was refused with it. They are per group now: the same id in two
    groups names two nodes, and no group learns what another holds."""

    def __init__(self, message: str, *, ids: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.ids = ids


class ToolRefused(InvalidInput):
    """A memory tool an agent called (``search_memory``, ``entity_timeline``, ``remember``)
    refused its arguments. The message names the tool and the reason, written for the
    model to read and try again; the library's own error is ``__cause__``."""


class NotFound(TimestoneError, LookupError):
    """No such episode, entity or fact in this group."""


class AlreadyRemoved(NotFound):
    """The episode was removed before; removing it again changes nothing."""


class DatabaseError(TimestoneError):
    """The database refused or failed; the psycopg error is ``__cause__``."""


class ConnectionFailed(DatabaseError):
    """The DSN does not connect, or the connection was lost or refused (the server shut
    down or is starting, too many clients). A statement the server refuses is a
    ``DatabaseError``."""


class MissingExtension(DatabaseError):
    """The server lacks one of the extensions Timestone needs."""


class SchemaTooNew(DatabaseError):
    """The database schema is newer than this version of Timestone."""


class ConflictError(DatabaseError):
    """A database constraint refused the write."""


class ClockWentBack(ConflictError):
    """The database's clock reads earlier than the start of a version the write would close:
    the server's clock went back (a step of the system clock, a failover to a server behind
    it). Nothing was written; the write succeeds once the clock passes that start."""


class EmbeddedServerError(TimestoneError):
    """The embedded Postgres could not be started in the data dir."""


class AddressInUse(TimestoneError):
    """The port a server should listen on is taken."""


class EmbedderError(TimestoneError):
    """The embedder failed, or returned vectors of the wrong shape or with NaN."""


class EmbedderMismatch(EmbedderError):
    """The database was built with another embedder (name or dimension)."""


class LLMError(TimestoneError):
    """No model is configured for a step that needs one, or the model failed.

    ``step`` names the ingestion step that failed (``extraction``, ``entity resolution``,
    ``fact resolution``, ``summary condensation``, ``saga summary``) when there is one.
    """

    def __init__(self, message: str, *, step: str | None = None) -> None:
        super().__init__(message)
        self.step = step


class BudgetExceeded(LLMError):
    """The group's LLM budget refuses the work before it is spent."""


class UnusableAnswer(LLMError):
    """The model answered, but with nothing to use: it refused, its answer was cut off at
    its output limit (``finish_reason`` "length") or filtered, or it sent no choices.

    It is not retried: asked the same, a model refuses or runs out of room again. The call was still
    spent: ``model``, ``prompt_tokens`` and ``completion_tokens`` say what it cost (the
    group's LLM ledger counts it), and ``finish_reason`` is the model's own word, when it
    gave one."""

    def __init__(
        self,
        message: str,
        *,
        step: str | None = None,
        model: str = "",
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        finish_reason: str | None = None,
    ) -> None:
        super().__init__(message, step=step)
        self.model = model
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.finish_reason = finish_reason


class ExtractionWarning(UserWarning):
    """Model output that was dropped, not written: an entity outside the ontology, a fact on
    an unknown entity, an unknown relation, attributes that fail their model, a bad date."""


class RewriteWarning(UserWarning):
    """``search(..., rewrite=True)`` searched the question alone: no model is configured,
    or its answer failed, was refused, cut off or malformed, or the budget refused the
    call. The message says which; nothing but the call's ledger row was written."""


class RerankerError(TimestoneError):
    """The cross-encoder reranker failed, or did not return one score per passage."""
