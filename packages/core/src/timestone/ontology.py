"""The ontology: entity types, edge types and their cardinality.

``cardinality="one"`` makes a relation a slot: a source holds at most one such
fact at any world time, and contradictions are settled by the date fight,
never by a model. ``closed=True`` refuses relations and entity types that are
not declared.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import pydantic

from ._names import relation_name
from ._records import check_json, check_json_size, check_relation, check_text
from .errors import InvalidInput, OntologyViolation

__all__ = ["Cardinality", "EdgeType", "EntityType", "Ontology"]

Cardinality = Literal["one", "many"]


@dataclasses.dataclass(frozen=True, slots=True)
class EntityType:
    """A kind of entity; ``attributes`` is a pydantic model that validates its attributes."""

    name: str
    attributes: type[pydantic.BaseModel] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        check_text(self.name, "entity type name", max_chars=128)


@dataclasses.dataclass(frozen=True, slots=True)
class EdgeType:
    """A relation; ``cardinality="one"`` makes (source, relation) a single-valued slot."""

    name: str
    cardinality: Cardinality = "many"
    attributes: type[pydantic.BaseModel] | None = None
    description: str = ""
    source_types: tuple[str, ...] = ()
    target_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", check_relation(self.name))
        if self.cardinality not in ("one", "many"):
            raise InvalidInput(
                f"edge type {self.name}: cardinality must be 'one' or 'many', "
                f"got {self.cardinality!r:.80}"
            )


def _validate(
    model: type[pydantic.BaseModel] | None, value: Mapping[str, Any], what: str
) -> dict[str, Any]:
    """The attributes as stored: JSON (``check_json``), through ``model`` when declared."""
    if model is None:
        out = dict(value)
    else:
        try:
            out = model.model_validate(dict(value)).model_dump(mode="json", exclude_unset=True)
        except pydantic.ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "attributes"
            raise OntologyViolation(f"{what}: {where}: {err['msg']}") from exc
    if out:
        check_json(out, what)
        check_json_size(out, what)
    return out


class Ontology:
    """Declared entity and edge types. The empty ontology accepts everything as ``many``."""

    __slots__ = ("_edges", "_entities", "closed")

    def __init__(
        self,
        entity_types: Iterable[EntityType] = (),
        edge_types: Iterable[EdgeType] = (),
        *,
        closed: bool = False,
    ) -> None:
        self._entities = {t.name: t for t in entity_types}
        self._edges: dict[str, EdgeType] = {}
        for t in edge_types:
            if t.name in self._edges:  # names compare in their normal form: worksAt, WORKS_AT
                raise InvalidInput(f"two edge types are named {t.name}: declare each relation once")
            self._edges[t.name] = t
        self.closed = closed

    @property
    def entity_types(self) -> tuple[EntityType, ...]:
        return tuple(self._entities.values())

    @property
    def edge_types(self) -> tuple[EdgeType, ...]:
        return tuple(self._edges.values())

    def edge(self, relation: str) -> EdgeType | None:
        """The declared edge type of ``relation`` (any spelling of its name), or None."""
        return self._edges.get(relation_name(relation) or relation)

    def cardinality(self, relation: str) -> Cardinality:
        """``"one"`` or ``"many"``: as declared, ``"many"`` for an undeclared relation."""
        edge = self.edge(relation)
        return edge.cardinality if edge is not None else "many"

    def check_relation(
        self,
        relation: str,
        attributes: Mapping[str, Any],
        source_type: str | None,
        target_type: str | None,
    ) -> dict[str, Any]:
        """Validate a relation and its attributes; return the attributes as stored.

        An endpoint type of ``None`` (a bare name, typed later by resolution) is not checked.
        """
        edge = self.edge(relation)
        if edge is None:
            if self.closed:
                known = ", ".join(sorted(self._edges)) or "none"
                raise OntologyViolation(
                    f"relation {relation!r:.80} is not in the closed ontology (declared: {known})"
                )
            return _validate(None, attributes, f"attributes of {relation}")
        if edge.source_types and source_type is not None and source_type not in edge.source_types:
            raise OntologyViolation(
                f"{relation}: source type {source_type!r:.80} is not one of "
                f"{list(edge.source_types)}"
            )
        if edge.target_types and target_type is not None and target_type not in edge.target_types:
            raise OntologyViolation(
                f"{relation}: target type {target_type!r:.80} is not one of "
                f"{list(edge.target_types)}"
            )
        return _validate(edge.attributes, attributes, f"attributes of {relation}")

    def check_entity(
        self, entity_type: str, attributes: Mapping[str, Any], name: str
    ) -> dict[str, Any]:
        """Validate an entity's type and attributes; return the attributes as stored."""
        declared = self._entities.get(entity_type)
        if declared is None:
            if self.closed and entity_type != "Entity":
                known = ", ".join(sorted(self._entities)) or "none"
                raise OntologyViolation(
                    f"entity type {entity_type!r:.80} of {name!r:.80} is not in the closed "
                    "ontology "
                    f"(declared: {known})"
                )
            return _validate(None, attributes, f"attributes of {entity_type} {name!r}")
        return _validate(declared.attributes, attributes, f"attributes of {entity_type} {name!r}")
