"""The ontology: entity types, edge types and their cardinality.

``cardinality="one"`` makes a relation a slot: a source holds at most one such
fact at any world time, and contradictions are settled by the date fight,
never by a model. ``closed=True`` refuses relations and entity types that are
not declared.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar, cast

import pydantic

from ._names import relation_name
from ._records import check_json, check_json_size, check_list, check_relation, check_text
from .errors import InvalidInput, OntologyViolation

__all__ = ["Cardinality", "EdgeType", "EntityType", "Ontology"]

Cardinality = Literal["one", "many"]
_T = TypeVar("_T", "EntityType", "EdgeType")


@dataclasses.dataclass(frozen=True, slots=True)
class EntityType:
    """A kind of entity; ``attributes`` is a pydantic model that validates its attributes."""

    name: str
    attributes: type[pydantic.BaseModel] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        check_text(self.name, "entity type name", max_chars=128)
        _check_model(self.attributes, f"attributes of entity type {self.name}")
        _check_description(self.description, f"entity type {self.name}")


def _check_model(model: object, what: str) -> None:
    """``model`` is None or a pydantic model class (``BaseModel``'s subclass, not an instance)."""
    if model is not None and not (
        isinstance(model, type) and issubclass(model, pydantic.BaseModel)
    ):
        shown = model.__name__ if isinstance(model, type) else type(model).__name__
        raise InvalidInput(f"{what} must be a pydantic model class or None, got {shown}")


def _check_description(description: object, what: str) -> None:
    if not isinstance(description, str):
        raise InvalidInput(
            f"description of {what} must be a string, got {type(description).__name__}"
        )
    check_text(description, f"description of {what}", max_chars=10_000, allow_empty=True)


def _type_names(value: object, what: str) -> tuple[str, ...]:
    """A list of entity type names as a tuple; a bare string is refused (it is not one name
    but its letters, to ``in``)."""
    names = check_list(value, what, "entity type names")
    for name in names:
        check_text(name, f"an entity type name of {what}", max_chars=128)
    return tuple(str(n) for n in names)


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
        _check_model(self.attributes, f"attributes of edge type {self.name}")
        _check_description(self.description, f"edge type {self.name}")
        for end in ("source_types", "target_types"):
            what = f"{end} of edge type {self.name}"
            object.__setattr__(self, end, _type_names(getattr(self, end), what))


def _validate(
    model: type[pydantic.BaseModel] | None, value: Mapping[str, Any], what: str
) -> dict[str, Any]:
    """The attributes as stored: JSON (``check_json``), through ``model`` when declared."""
    if model is None:
        out = dict(value)
    else:
        given = dict(value)
        try:
            made = model.model_validate(given)
        except pydantic.ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "attributes"
            raise OntologyViolation(f"{what}: {where}: {err['msg']}") from exc
        # the model's lax mode reads a number, or a string of digits, given for a date as
        # seconds since 1970 ("1998" as 1970-01-01T00:33:18Z): refused, naming the attribute
        epoch = date_from_number(given, made, ())
        if epoch is not None:
            where, number, date = epoch
            raise OntologyViolation(
                f"{what}: {'.'.join(where)}: {number!r:.40} is a number, not a date: read as "
                f"seconds since 1970 it would be {date.isoformat()}; write an ISO 8601 date "
                "such as 2019-03-01"
            )
        out = made.model_dump(mode="json", exclude_unset=True)
    if out:
        check_json(out, what)
        check_json_size(out, what)
    return out


def date_from_number(
    given: object, made: object, where: tuple[str, ...]
) -> tuple[tuple[str, ...], object, dt.date] | None:
    """Where ``made`` (what a model validated) holds a date that ``given`` wrote as a
    number or a string of digits: the path, the number and the date; else None."""
    if isinstance(made, dt.date):  # a datetime too; a time of day is no moment since 1970
        return (where, given, made) if _numeric(given) else None
    if isinstance(made, pydantic.BaseModel) and isinstance(given, Mapping):
        fields = cast(Mapping[object, object], given)
        for name, field in type(made).model_fields.items():
            keys = [k for k in _input_keys(name, field) if k in fields]
            if keys and name in made.model_fields_set:
                key = str(keys[0])
                found = date_from_number(fields[key], getattr(made, name), (*where, key))
                if found is not None:
                    return found
    elif isinstance(made, Mapping) and isinstance(given, Mapping):
        inner, items = cast(Mapping[object, object], given), cast(Mapping[object, object], made)
        for key, item in items.items():
            if key in inner:
                found = date_from_number(inner[key], item, (*where, str(key)))
                if found is not None:
                    return found
    elif isinstance(made, (list, tuple)) and isinstance(given, (list, tuple)):
        values, items = cast(Sequence[object], given), cast(Sequence[object], made)
        if len(values) == len(items):
            for n, (value, item) in enumerate(zip(values, items, strict=True)):
                found = date_from_number(value, item, (*where, str(n)))
                if found is not None:
                    return found
    return None


def _input_keys(name: str, field: pydantic.fields.FieldInfo) -> list[str]:
    """The keys of the input a field may be read from, in pydantic's order: its validation
    alias (each of ``AliasChoices``; an ``AliasPath`` of one key), its alias, its name."""
    out: list[str] = []
    for alias in (field.validation_alias, field.alias):
        choices = alias.choices if isinstance(alias, pydantic.AliasChoices) else [alias]
        for choice in choices:
            if isinstance(choice, pydantic.AliasPath) and len(choice.path) == 1:
                choice = choice.path[0]
            if isinstance(choice, str):
                out.append(choice)
    return [*out, name]


def _numeric(value: object) -> bool:
    """A number, or text that reads as one ("1998", " 1.7e9 ")."""
    if isinstance(value, (int, float, decimal.Decimal)):
        return True
    if isinstance(value, (str, bytes)):
        try:
            float(value)
        except ValueError:
            return False
        return True
    return False


def _declared(value: object, what: str, kind: type[_T]) -> list[_T]:
    """The declared types: a list of ``kind`` (a mapping of names to models, the shape
    ``add_episode`` takes, is refused with the way to write it)."""
    items = check_list(value, what, f"{kind.__name__} objects")
    for item in items:
        if not isinstance(item, kind):
            raise InvalidInput(
                f"{what} must be a list of {kind.__name__} objects, got an item of type "
                f"{type(item).__name__}: write {kind.__name__}({item!r:.40}, ...)"
            )
    return cast(list[_T], items)


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
        if not isinstance(cast(object, closed), bool):
            raise InvalidInput(f"closed must be True or False, got {type(closed).__name__}")
        self._entities: dict[str, EntityType] = {}
        for t in _declared(entity_types, "entity_types", EntityType):
            if t.name in self._entities:
                raise InvalidInput(f"two entity types are named {t.name}: declare each type once")
            self._entities[t.name] = t
        self._edges: dict[str, EdgeType] = {}
        for t in _declared(edge_types, "edge_types", EdgeType):
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
