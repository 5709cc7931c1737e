"""SQLModel table classes that mirror the migrated schema (schema ``timestone``).

For typed records and for users who want to query the graph with SQLModel or
SQLAlchemy. They describe the tables; they never create them: the numbered
migrations do (a test checks that both agree).

The DSN's user (``Memory.dsn``) owns the schema, and row level security does not
bind the owner: a session on it sees every group. ``group_session`` gives a session
each of whose transactions runs as the library role with one group set, as the
library's own transactions do; row level security then shows that group's rows
alone and refuses writes to any other (docs/sql.md)::

    from sqlmodel import select
    from timestone.models import FactRow, engine, group_session

    with group_session(engine(mem.dsn), "acme") as session:
        facts = session.exec(select(FactRow).where(FactRow.expired_at.is_(None))).all()

For plain SQL, ``Memory.connection(group_id)`` lends a psycopg connection of the
memory's pool bound the same way.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, ClassVar, cast

import psycopg
import sqlalchemy
from pgvector.sqlalchemy import Vector  # pyright: ignore[reportMissingTypeStubs]
from sqlalchemy import BigInteger, Boolean, Column, DateTime, Integer, Interval, Text, event
from sqlalchemy.dialects.postgresql import ARRAY, JSON, JSONB, TSVECTOR, UUID
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import SessionTransaction
from sqlmodel import Field, Session, SQLModel  # pyright: ignore[reportUnknownVariableType]

from ._groups import check_group
from .db._database_async import TENANT_SETTINGS
from .errors import InvalidInput

__all__ = [
    "AssertionRow",
    "CommunityRow",
    "EntityRow",
    "EpisodeRow",
    "FactRow",
    "ItemRow",
    "MentionRow",
    "MetaRow",
    "PurgeRow",
    "TimestoneModel",
    "engine",
    "group_session",
]

SCHEMA = "timestone"


def _tz(nullable: bool = False) -> Any:
    return Field(sa_column=Column(DateTime(timezone=True), nullable=nullable))


def _text(nullable: bool = False, default: str | None = None) -> Any:
    return Field(default=default, sa_column=Column(Text, nullable=nullable))


def _jsonb() -> Any:
    return Field(default_factory=dict, sa_column=Column(JSONB, nullable=False))


def _vector() -> Any:
    return Field(default=None, sa_column=Column(Vector(), nullable=True))


def _tsvector() -> Any:
    return Field(default=None, sa_column=Column(TSVECTOR, nullable=True))


def _int(nullable: bool = True) -> Any:
    return Field(default=None, sa_column=Column(Integer, nullable=nullable))


class TimestoneModel(SQLModel):
    """Base of the mirrored tables."""

    __table_args__: ClassVar[dict[str, Any]] = {"schema": SCHEMA}


class MetaRow(TimestoneModel, table=True):
    __tablename__: ClassVar[str] = "meta"  # pyright: ignore[reportIncompatibleVariableOverride]

    key: str = Field(sa_column=Column(Text, primary_key=True))
    value: Any = Field(sa_column=Column(JSONB, nullable=False))


class EpisodeRow(TimestoneModel, table=True):
    __tablename__: ClassVar[str] = "episodes"  # pyright: ignore[reportIncompatibleVariableOverride]

    group_id: str = Field(sa_column=Column(Text, primary_key=True))
    version_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    name: str = _text()
    content: str = _text()
    source: str = _text()
    source_description: str = _text(default="")
    reference_time: datetime = _tz()
    saga: str | None = _text(nullable=True)
    idempotency_key: str = _text()
    actor: str | None = _text(nullable=True)
    document_uri: str | None = _text(nullable=True)
    document_version: int | None = _int()
    chunk_index: int | None = _int()
    char_start: int | None = _int()
    char_end: int | None = _int()
    metadata_: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column("metadata", JSONB, nullable=False)
    )
    llm_calls: int = _int(nullable=False)
    llm_tokens: int = _int(nullable=False)
    recorded_at: datetime = _tz()
    embedding: Any = _vector()
    fts: Any = _tsvector()
    fts_words: int | None = _int()  # generated: the words of ``fts`` (BM25's length)
    created_at: datetime = _tz()
    expired_at: datetime | None = _tz(nullable=True)


class EntityRow(TimestoneModel, table=True):
    __tablename__: ClassVar[str] = "entities"  # pyright: ignore[reportIncompatibleVariableOverride]

    group_id: str = Field(sa_column=Column(Text, primary_key=True))
    version_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    name: str = _text()
    norm_name: str = _text()
    entity_type: str = _text()
    labels: list[str] = Field(default_factory=list, sa_column=Column(ARRAY(Text), nullable=False))
    attributes: dict[str, Any] = _jsonb()
    summary: str = _text(default="")
    name_embedding: Any = _vector()
    fts: Any = _tsvector()
    created_at: datetime = _tz()
    expired_at: datetime | None = _tz(nullable=True)
    fold_name: str | None = _text(nullable=True)


class MentionRow(TimestoneModel, table=True):
    __tablename__: ClassVar[str] = "mentions"  # pyright: ignore[reportIncompatibleVariableOverride]

    group_id: str = Field(sa_column=Column(Text, primary_key=True))
    version_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    episode_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    entity_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    name: str = _text()
    labels: list[str] = Field(default_factory=list, sa_column=Column(ARRAY(Text), nullable=False))
    attributes: dict[str, Any] = _jsonb()
    summary: str | None = _text(nullable=True)
    position: int = _int(nullable=False)
    recorded_at: datetime = _tz()
    created_at: datetime = _tz()
    expired_at: datetime | None = _tz(nullable=True)


class AssertionRow(TimestoneModel, table=True):
    __tablename__: ClassVar[str] = "assertions"  # pyright: ignore[reportIncompatibleVariableOverride]

    group_id: str = Field(sa_column=Column(Text, primary_key=True))
    version_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    episode_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    position: int = _int(nullable=False)
    source_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    relation: str = _text()
    target_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    cardinality: str = _text()
    fact: str = _text()
    attributes: dict[str, Any] = _jsonb()
    valid_at: datetime = _tz()
    invalid_at: datetime | None = _tz(nullable=True)
    recorded_at: datetime = _tz()
    created_at: datetime = _tz()
    expired_at: datetime | None = _tz(nullable=True)


class FactRow(TimestoneModel, table=True):
    __tablename__: ClassVar[str] = "facts"  # pyright: ignore[reportIncompatibleVariableOverride]

    group_id: str = Field(sa_column=Column(Text, primary_key=True))
    version_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    source_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    relation: str = _text()
    target_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    cardinality: str = _text()
    fact: str = _text()
    attributes: dict[str, Any] = _jsonb()
    episodes: list[uuid.UUID] = Field(
        default_factory=list, sa_column=Column(ARRAY(UUID(as_uuid=True)), nullable=False)
    )
    valid_at: datetime = _tz()
    invalid_at: datetime | None = _tz(nullable=True)
    embedding: Any = _vector()
    fts: Any = _tsvector()
    created_at: datetime = _tz()
    expired_at: datetime | None = _tz(nullable=True)


class PurgeRow(TimestoneModel, table=True):
    __tablename__: ClassVar[str] = "purges"  # pyright: ignore[reportIncompatibleVariableOverride]

    group_id: str = Field(sa_column=Column(Text, primary_key=True))
    id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    episode_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    purged_at: datetime = _tz()
    rows_erased: int = _int(nullable=False)


class ItemRow(TimestoneModel, table=True):
    """A version of a key-value item (migration 0005): JSON under a namespace and a key."""

    __tablename__: ClassVar[str] = "items"  # pyright: ignore[reportIncompatibleVariableOverride]

    group_id: str = Field(sa_column=Column(Text, primary_key=True))
    version_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    namespace: list[str] = Field(
        default_factory=list, sa_column=Column(ARRAY(Text), nullable=False)
    )
    key: str = _text()
    value: dict[str, Any] = _jsonb()
    item_created_at: datetime = _tz()
    embedding: Any = _vector()
    created_at: datetime = _tz()
    expired_at: datetime | None = _tz(nullable=True)
    # migration 0032: the vectors of an item indexed by several texts, and the JSON text
    # of a value that jsonb would change (-0.0)
    field_embeddings: Any = Field(default=None, sa_column=Column(ARRAY(Vector()), nullable=True))
    value_exact: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    # migration 0043: the texts the item's vectors were embedded from (empty: its JSON)
    index_texts: list[str] | None = Field(
        default=None, sa_column=Column(ARRAY(Text), nullable=True)
    )


class CommunityRow(TimestoneModel, table=True):
    __tablename__: ClassVar[str] = "communities"  # pyright: ignore[reportIncompatibleVariableOverride]

    group_id: str = Field(sa_column=Column(Text, primary_key=True))
    version_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), nullable=False))
    name: str = _text()
    summary: str = _text(default="")
    basis: str = _text(default="")
    members: list[uuid.UUID] = Field(
        default_factory=list, sa_column=Column(ARRAY(UUID(as_uuid=True)), nullable=False)
    )
    fact_count: int = _int(nullable=False)
    name_embedding: Any = _vector()
    fts: Any = _tsvector()
    created_at: datetime = _tz()
    expired_at: datetime | None = _tz(nullable=True)


class LLMBudgetRow(TimestoneModel, table=True):
    __tablename__: ClassVar[str] = "llm_budgets"  # pyright: ignore[reportIncompatibleVariableOverride]

    group_id: str = Field(sa_column=Column(Text, primary_key=True))
    version_id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    max_calls: int | None = _int()
    max_tokens: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    period: timedelta = Field(sa_column=Column(Interval, nullable=False))
    created_at: datetime = _tz()
    expired_at: datetime | None = _tz(nullable=True)


class TermStatsRow(TimestoneModel, table=True):
    """Per group and kind, deltas of how many current rows hold a lexeme (lexeme ''
    : the rows and their total length); a lexeme's count is the sum of its rows
    (migration 0036). Read and written only by the database's own functions."""

    __tablename__: ClassVar[str] = "term_stats"  # pyright: ignore[reportIncompatibleVariableOverride]

    id: int = Field(sa_column=Column(BigInteger, primary_key=True))
    group_id: str = _text()
    kind: str = _text()
    lexeme: str = _text()
    docs: int = Field(sa_column=Column(BigInteger, nullable=False))
    length: int = Field(sa_column=Column(BigInteger, nullable=False))


class LLMLedgerRow(TimestoneModel, table=True):
    __tablename__: ClassVar[str] = "llm_ledger"  # pyright: ignore[reportIncompatibleVariableOverride]

    group_id: str = Field(sa_column=Column(Text, primary_key=True))
    id: uuid.UUID = Field(sa_column=Column(UUID(as_uuid=True), primary_key=True))
    episode_id: uuid.UUID | None = Field(
        default=None, sa_column=Column(UUID(as_uuid=True), nullable=True)
    )
    step: str = _text()
    model: str = _text()
    prompt_tokens: int = _int(nullable=False)
    completion_tokens: int = _int(nullable=False)
    ok: bool = Field(sa_column=Column(Boolean, nullable=False))
    created_at: datetime = _tz()


class RelationCardinalityRow(TimestoneModel, table=True):
    """A model's answer for a relation the ontology does not declare (``one`` or ``many``)."""

    __tablename__: ClassVar[str] = "relation_cardinalities"  # pyright: ignore[reportIncompatibleVariableOverride]

    group_id: str = Field(sa_column=Column(Text, primary_key=True))
    relation: str = Field(sa_column=Column(Text, primary_key=True))
    cardinality: str = _text()
    model: str = _text()
    created_at: datetime = _tz()


def engine(dsn: str, **kwargs: Any) -> Engine:
    """An SQLAlchemy engine on ``dsn`` (``Memory.dsn``: a URL or ``key=value`` string)
    through psycopg. Its connections act as the DSN's user, the schema's owner, who sees
    every group: bind a session to one with ``group_session``. ``kwargs`` go to
    ``sqlalchemy.create_engine``."""
    given = cast(object, dsn)  # the annotation binds no caller at run time
    if not isinstance(given, str) or not given.strip():
        shown = "an empty string" if isinstance(given, str) else type(given).__name__
        raise InvalidInput(
            f"dsn must be a connection string (postgresql://..., or Memory.dsn), got {shown}"
        )
    return sqlalchemy.create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(dsn), **kwargs
    )


def group_session(bind: Engine, group_id: str, **kwargs: Any) -> Session:
    """A SQLModel session on ``bind`` whose every transaction sees only ``group_id``.

    Each transaction the session begins runs first what the library's own do: it sets
    the library role and the group, both local to the transaction, so that row level
    security binds it and nothing outlives it on the pooled connection. A write that
    the policies or the library role's privileges refuse (another group's rows, an
    update in place) raises. A connection in autocommit is refused when the session
    begins. ``kwargs`` go to ``Session``."""
    given = cast(object, bind)
    if not isinstance(given, (Engine, Connection)):
        raise InvalidInput(
            "bind must be a SQLAlchemy Engine (make one with timestone.models.engine(mem.dsn)),"
            f" got {type(given).__name__}"
        )
    group = check_group(group_id)
    session = Session(bind, **kwargs)

    def bind_group(_: Session, transaction: SessionTransaction, connection: Connection) -> None:
        del transaction
        # in autocommit each statement is its own transaction: the settings would end
        # with the first, and the rest run as the owner, who sees every group
        if getattr(connection.connection.driver_connection, "autocommit", False):
            raise InvalidInput(
                "group_session needs transactions: its connection is in AUTOCOMMIT"
                " (isolation_level='AUTOCOMMIT'), where the group it binds would end with"
                " the first statement; use the engine without it"
            )
        connection.exec_driver_sql(TENANT_SETTINGS, (group,))

    event.listen(session, "after_begin", bind_group)
    return session
