"""Building blocks shared by requests, responses and records."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ConfigDict, Field
from pydantic_core import core_schema

from kip_lab.contract import Model


class Message(Model):
    """Base of every request, response and record: typed, immutable, no unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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
