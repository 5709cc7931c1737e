"""Opening the store from the command line: DSN, data dir, embedder, the stored ontology, dates.

The ontology a command line user declares (``init --ontology FILE``) lives in
the database itself, in ``timestone.meta`` under the key ``ontology``, so a
data dir (or an export) carries everything a later command needs. The
embedder is read from the database too: the one it was built with, unless
``--embedder`` names another.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._jsontext import check_depth
from ..db._conninfo import redact
from ..errors import ConnectionFailed, DatabaseError, EmbedderError, InvalidInput
from ._files import Limits, decode_utf8, read_file

if TYPE_CHECKING:  # imported where used: --help loads no database driver or model
    from ..embedders import Embedder
    from ..ontology import Ontology

__all__ = [
    "DEFAULT_GROUP",
    "check_dsn",
    "checked_embedder",
    "decode_utf8",
    "load_ontology_file",
    "ontology_document",
    "ontology_from_document",
    "other_groups",
    "read_text_file",
    "resolve_dsn",
    "resolve_group",
    "save_ontology",
    "stored_meta",
]

DEFAULT_GROUP = "default"
ONTOLOGY_KEY = "ontology"


def resolve_group(group: str | None) -> str:
    """``--group`` as given (an empty one is refused where it is used, not taken for the
    default), else ``TIMESTONE_GROUP``, else ``default``."""
    if group is not None:
        return group
    return os.environ.get("TIMESTONE_GROUP") or DEFAULT_GROUP


def check_dsn(dsn: str, named: str) -> str:
    """``dsn`` when libpq can read it; else invalid input naming the setting that gave it
    (``named``), its password never shown."""
    from psycopg import Error
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(dsn)
    except Error as exc:
        raise InvalidInput(
            f"{named} is not a connection string (postgresql://USER@HOST/DATABASE or "
            f"host=HOST dbname=DATABASE): {redact(str(exc).strip(), dsn)}"
        ) from None
    return dsn


def resolve_dsn(dsn: str | None, data_dir: Path | None, named: str = "--dsn") -> str:
    """The DSN to use: ``dsn`` (given by the setting ``named``) once libpq can read it, or
    with None the embedded server in the data dir, started here: check the settings
    before."""
    if dsn is not None:
        return check_dsn(dsn, named)
    from ..db import _embedded

    return _embedded.embedded_dsn(data_dir)


def stored_meta(dsn: str, key: str, *, named: str | None = None) -> Any:
    """A value of ``timestone.meta``; ``None`` when absent or the schema is not there yet.
    A DSN that does not connect is said to, with the setting that gave it (``named``)."""
    import psycopg

    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        source = f" (from {named})" if named else ""
        why = re.sub(r"\s*\n\s*", " ", str(exc).strip())  # libpq's hint: on the same line
        raise ConnectionFailed(
            f"cannot connect to {redact(dsn, dsn)}{source}: {redact(why, dsn)}"
        ) from exc
    try:
        with conn:
            found = conn.execute("SELECT to_regclass('timestone.meta') IS NOT NULL").fetchone()
            if not found or not found[0]:
                return None
            row = conn.execute("SELECT value FROM timestone.meta WHERE key = %s", (key,)).fetchone()
            return row[0] if row is not None else None
    except psycopg.Error as exc:
        raise DatabaseError(f"reading the stored {key}: {str(exc).strip()}") from exc


_LISTED_GROUPS = 1000


def other_groups(dsn: str, group_id: str) -> list[str] | None:
    """None when ``group_id`` holds episodes or items; else the groups that do (the first
    thousand by name), each table read by a walk of its primary key from one group to the
    next. Read as the DSN's user, the schema owner, whom row level security does not
    bind; None too when that user may not read them."""
    import psycopg
    from psycopg import sql

    walk = sql.SQL(
        "WITH RECURSIVE g(id) AS ("
        " SELECT min(group_id) FROM timestone.{t}"
        " UNION ALL SELECT (SELECT min(group_id) FROM timestone.{t} WHERE group_id > g.id)"
        " FROM g WHERE g.id IS NOT NULL)"
        " SELECT id FROM g WHERE id IS NOT NULL LIMIT {n}"
    )
    names: set[str] = set()
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for table in ("episodes", "items"):
                t = sql.Identifier(table)
                held = conn.execute(
                    sql.SQL("SELECT EXISTS (SELECT FROM timestone.{t} WHERE group_id = %s)").format(
                        t=t
                    ),
                    (group_id,),
                ).fetchone()
                if held and held[0]:
                    return None
                rows = conn.execute(walk.format(t=t, n=sql.Literal(_LISTED_GROUPS)))
                names.update(str(r[0]) for r in rows.fetchall())
    except psycopg.Error:
        return None
    return sorted(names)[:_LISTED_GROUPS]


def save_ontology(dsn: str, document: Mapping[str, Any]) -> None:
    """Store the ontology document in ``timestone.meta`` (as the schema owner)."""
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO timestone.meta (key, value) VALUES (%s, %s)"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (ONTOLOGY_KEY, json.dumps(document)),
            )
    except psycopg.Error as exc:
        raise DatabaseError(f"storing the ontology: {str(exc).strip()}") from exc


def embedder_for(
    spec: str | None, stored: Mapping[str, Any] | None, *, named: str = "--embedder"
) -> Embedder:
    """``--embedder`` (``wordllama[:DIM]``, ``hash[:DIM]``, ``onnx[:MODEL]``,
    ``openai:MODEL:DIM``), else the stored one, else WordLlama. OpenAI-compatible embedders
    take their server from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``. A spec is refused
    naming the setting that gave it (``named``); only a missing ``:DIM`` means the
    default dimension."""
    from ..embedders import (
        PACKAGED_MODEL,
        HashEmbedder,
        OnnxEmbedder,
        OpenAICompatibleEmbedder,
        WordLlamaEmbedder,
    )

    if spec:
        name, _, rest = spec.partition(":")
        if name == "openai":
            model, _, dim = rest.rpartition(":")  # a model name may hold ':' (Ollama tags)
            if not model or not _DIGITS.fullmatch(dim) or int(dim) < 1:
                raise InvalidInput(
                    f"{named} {spec!r:.80}: write openai:MODEL:DIMENSION, "
                    "e.g. openai:text-embedding-3-small:1536"
                )
            return OpenAICompatibleEmbedder.from_env(model, int(dim))
        if name == "onnx":
            return OnnxEmbedder(rest or PACKAGED_MODEL)
        if name not in ("wordllama", "hash"):
            raise InvalidInput(
                f"{named} {spec!r:.80}: use wordllama[:64|128|256], hash[:DIM], "
                "onnx[:FOLDER_OR_MODEL_ID] or openai:MODEL:DIMENSION (other embedders are "
                "chosen in Python with Memory.open(embedder=...))"
            )
        return _local_embedder(spec, named)
    if stored is not None:
        name, dimension = str(stored.get("name")), int(stored.get("dimension", 0))
        if name == "hash":
            return HashEmbedder(dimension)
        if name.startswith("wordllama"):
            return WordLlamaEmbedder(dimension)
        if name.startswith("onnx/"):
            return OnnxEmbedder(name.removeprefix("onnx/"))
        if name.startswith("openai/"):
            return OpenAICompatibleEmbedder.from_env(name.removeprefix("openai/"), dimension)
        raise InvalidInput(
            f"this database was built with the embedder {name} ({dimension} dimensions), "
            "which the command line cannot construct; use the Python API"
        )
    return WordLlamaEmbedder()


_DIGITS = re.compile(r"[0-9]+")


def _local_embedder(spec: str, named: str) -> Embedder:
    """``wordllama[:DIM]`` or ``hash[:DIM]``: a dimension the embedder takes, or none for
    its default (an empty or zero one is refused, not taken for the default)."""
    from ..embedders import HashEmbedder, WordLlamaEmbedder

    name, colon, rest = spec.partition(":")
    if not colon:
        return WordLlamaEmbedder() if name == "wordllama" else HashEmbedder()
    if not _DIGITS.fullmatch(rest):
        raise InvalidInput(f"{named} {spec!r:.80}: the dimension must be a positive integer")
    dimension = int(rest)
    if name == "wordllama":
        if dimension not in (64, 128, 256):
            raise InvalidInput(f"{named} {spec!r:.80}: the dimension must be 64, 128 or 256")
        return WordLlamaEmbedder(dimension)
    if dimension < 2:
        raise InvalidInput(f"{named} {spec!r:.80}: the dimension must be at least 2")
    return HashEmbedder(dimension)


def checked_embedder(spec: str, named: str) -> Embedder:
    """The embedder of a spec given by the setting ``named``, built (a model loads) and
    checked before anything is opened: any refusal is invalid input naming the setting."""
    from ..embedders import check_embedder

    try:
        return check_embedder(embedder_for(spec, None, named=named))
    except EmbedderError as exc:  # a model that cannot be built from the spec
        raise InvalidInput(f"{named} {spec!r:.80}: {exc}") from exc
    except InvalidInput as exc:
        if str(exc).startswith(named):
            raise
        raise InvalidInput(f"{named} {spec!r:.80}: {exc}") from exc


# -- the ontology file -------------------------------------------------------------------


def _strings(value: object, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items: list[Any] = value if isinstance(value, list) else []  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in items):
        raise InvalidInput(f"{what} must be a list of strings")
    return tuple(str(v) for v in items)


def ontology_from_document(document: Mapping[str, Any], where: str = "ontology") -> Ontology:
    """An ``Ontology`` from its JSON/TOML shape; refuse anything unknown, naming it."""
    from ..ontology import EdgeType, EntityType, Ontology

    known = {"closed", "entity_types", "edge_types"}
    extra = set(document) - known
    if extra:
        raise InvalidInput(
            f"{where}: unknown key(s) {', '.join(sorted(extra))}; use {sorted(known)}"
        )
    closed = document.get("closed", False)
    if not isinstance(closed, bool):
        raise InvalidInput(f"{where}: closed must be true or false")
    edges: list[EdgeType] = []
    for i, item in enumerate(_items(document.get("edge_types"), f"{where}: edge_types")):
        what = f"{where}: edge_types[{i}]"
        _only(item, {"name", "cardinality", "description", "source_types", "target_types"}, what)
        edges.append(
            EdgeType(
                name=_name(item, what),
                cardinality=item.get("cardinality", "many"),
                description=str(item.get("description", "")),
                source_types=_strings(item.get("source_types"), f"{what}.source_types"),
                target_types=_strings(item.get("target_types"), f"{what}.target_types"),
            )
        )
    entities: list[EntityType] = []
    for i, item in enumerate(_items(document.get("entity_types"), f"{where}: entity_types")):
        what = f"{where}: entity_types[{i}]"
        _only(item, {"name", "description"}, what)
        entities.append(
            EntityType(name=_name(item, what), description=str(item.get("description", "")))
        )
    return Ontology(entity_types=entities, edge_types=edges, closed=closed)


def _items(value: object, what: str) -> list[Mapping[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):  # pyright: ignore[reportUnknownVariableType]
        raise InvalidInput(f"{what} must be a list of tables/objects")
    return list(value)  # pyright: ignore[reportUnknownArgumentType]


def _only(item: Mapping[str, Any], allowed: set[str], what: str) -> None:
    extra = set(item) - allowed
    if extra:
        raise InvalidInput(f"{what}: unknown key(s) {', '.join(sorted(extra))}")


def _name(item: Mapping[str, Any], what: str) -> str:
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"{what}: needs a name")
    return name


def ontology_document(ontology: Ontology) -> dict[str, Any]:
    """The JSON shape of an ontology (names, cardinalities, descriptions, endpoint types)."""
    return {
        "closed": ontology.closed,
        "entity_types": [
            {"name": t.name, "description": t.description} for t in ontology.entity_types
        ],
        "edge_types": [
            {
                "name": t.name,
                "cardinality": t.cardinality,
                "description": t.description,
                "source_types": list(t.source_types),
                "target_types": list(t.target_types),
            }
            for t in ontology.edge_types
        ],
    }


def read_text_file(
    path: Path, what: str, limits: Limits | None = None, *, lines: bool = False
) -> str:
    """The UTF-8 text of a file the user named, or ``InvalidInput`` saying why not: no such
    file, not a regular file, a symbolic link, too large, unreadable, not UTF-8 (never a
    bare ``OSError`` or decoding error); ``lines``: each line within the line limit."""
    return read_file(path, what, limits or Limits(), lines=lines)


def load_ontology_file(path: Path, limits: Limits | None = None) -> dict[str, Any]:
    """Read and check an ontology file (``.toml`` or JSON); return its normalized document."""
    text = read_text_file(path, "the ontology file", limits)
    check_depth(text, f"the ontology file {path}")
    try:
        if path.suffix.lower() == ".toml":
            raw: Any = tomllib.loads(text)
        else:
            raw = json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"the ontology file {path} is malformed: {exc}") from exc
    if not isinstance(raw, dict):
        raise InvalidInput(f"the ontology file {path} must hold an object/table at the top")
    ontology = ontology_from_document(raw, where=str(path))  # pyright: ignore[reportUnknownArgumentType]
    return ontology_document(ontology)


# -- dates --------------------------------------------------------------------------------
