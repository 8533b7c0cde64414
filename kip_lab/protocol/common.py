"""Building blocks shared by requests, responses and records."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from typing import Any, Self, cast

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import core_schema

_set_attribute = object.__setattr__  # how pydantic fills in a model it constructs


class Message(BaseModel):
    """Base of every request, response and record: typed, immutable, no unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Each Message class is checked, and its construction template made, when it is defined."""
        super().__pydantic_init_subclass__(**kwargs)
        _construction(cls)

    # pydantic's mypy plugin gives every model a model_construct typed by its fields (none on this
    # base), which mypy then compares with BaseModel's: this definition is checked by its callers.
    @classmethod
    def model_construct(cls, _fields_set: set[str] | None = None, **values: Any) -> Self:  # type: ignore[override]
        """pydantic's ``model_construct`` — a model from values its caller vouches for, not
        validated — without pydantic's loop over every field in Python: a stable group's clients
        build a request this way at every commit. A Message has no aliases, private attributes
        or post-init for that loop to handle (a class that declares one is refused when defined).
        Stricter than pydantic's: an unknown field or a missing required one is a TypeError."""
        template, required, factories = _construction(cls)
        if not values.keys() <= template.keys() or not required <= values.keys():
            unknown = sorted(values.keys() - template.keys())
            missing = sorted(required - values.keys())
            raise TypeError(f"{cls.__name__}.model_construct: unknown fields {unknown}, missing fields {missing}")
        fields = dict(template)  # every field, in declaration order, at its default
        for name, factory in factories:
            if name not in values:
                fields[name] = factory()
        fields.update(values)
        model = cls.__new__(cls)
        _set_attribute(model, "__dict__", fields)
        _set_attribute(model, "__pydantic_fields_set__", set(values) if _fields_set is None else _fields_set)
        _set_attribute(model, "__pydantic_extra__", None)
        _set_attribute(model, "__pydantic_private__", None)
        return model


@cache
def _construction(
    cls: type[Message],
) -> tuple[dict[str, Any], frozenset[str], tuple[tuple[str, Callable[[], Any]], ...]]:
    """What ``Message.model_construct`` needs of ``cls``: each field at its default (None while
    required or made by a factory), the required fields, the factories (called per model, as
    pydantic does). A TypeError for a class with a field alias, private attributes, a default
    factory of the other fields or a post-init, which a model built from field names alone would
    get wrong."""
    fields = cls.model_fields
    aliased = sorted(name for name, f in fields.items() if f.alias is not None or f.validation_alias is not None)
    data_factories = sorted(name for name, f in fields.items() if f.default_factory_takes_validated_data)
    if aliased or data_factories or cls.__private_attributes__ or cls.__pydantic_post_init__:
        raise TypeError(
            f"{cls.__name__}: a Message has no field aliases ({aliased}), default factories taking the "
            f"other fields ({data_factories}), private attributes ({sorted(cls.__private_attributes__)}) "
            "or post-init: model_construct builds it from field names"
        )
    template = {
        name: None if f.is_required() or f.default_factory is not None else f.get_default()
        for name, f in fields.items()
    }
    required = frozenset(name for name, f in fields.items() if f.is_required())
    # Each factory takes no argument (one taking the other fields is refused above).
    factories = tuple(
        (name, cast(Callable[[], Any], f.default_factory))
        for name, f in fields.items()
        if f.default_factory is not None
    )
    return template, required, factories


def value_fields(value: Any, exclude_defaults: bool = False) -> dict[str, Any]:
    """A NamedTuple value's fields by name: the view ``model_dump`` gives of a ``Message``."""
    fields = value._asdict()
    if exclude_defaults:
        for name, default in value._field_defaults.items():
            if fields[name] == default:
                del fields[name]
    return fields


def dumped_as_fields(cls: type, source: Any, handler: Any) -> core_schema.CoreSchema:
    """``__get_pydantic_core_schema__`` for a NamedTuple held in a ``Message``: validated field by
    field as pydantic does a NamedTuple (from a tuple or a dict, unknown fields refused), dumped
    as a dict of its fields like a ``Message``, not as a list."""
    schema = handler(source)
    schema["serialization"] = core_schema.plain_serializer_function_ser_schema(
        lambda value, info: value_fields(value, info.exclude_defaults), info_arg=True
    )
    return schema


class TopicPartitions(Message):
    """``{TopicId, Partitions}`` — the KIP identifies topics by id, never by name."""

    topic_id: str = Field(min_length=1)
    partitions: list[int]


def to_topic_partitions(assignment: Mapping[str, Iterable[int]]) -> list[TopicPartitions]:
    """topic id -> partitions, as the wire's list, sorted by topic id and partition."""
    return [
        TopicPartitions.model_construct(topic_id=topic_id, partitions=sorted(parts))
        for topic_id, parts in sorted(assignment.items())
        if parts
    ]


def target_from_topic_partitions(items: Sequence[TopicPartitions]) -> dict[str, tuple[int, ...]]:
    """A target assignment record's list as topic id -> partitions, in the order the record lists them
    (the next target computation reads that order); topics with no partitions are left out."""
    return {item.topic_id: tuple(item.partitions) for item in items if item.partitions}


def from_topic_partitions(items: Sequence[TopicPartitions] | None) -> dict[str, frozenset[int]]:
    """The wire's list back to topic id -> partitions (an absent list is empty)."""
    out: dict[str, frozenset[int]] = {}
    for item in items or ():
        out[item.topic_id] = out.get(item.topic_id, frozenset()) | frozenset(item.partitions)
    return out
