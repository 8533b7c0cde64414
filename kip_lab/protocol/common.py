"""Building blocks shared by requests, responses and records."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field


class Message(BaseModel):
    """Base of every request, response and record: typed, immutable, no unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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


def from_topic_partitions(items: Sequence[TopicPartitions] | None) -> dict[str, frozenset[int]]:
    """The wire's list back to topic id -> partitions (an absent list is empty)."""
    out: dict[str, frozenset[int]] = {}
    for item in items or ():
        out[item.topic_id] = out.get(item.topic_id, frozenset()) | frozenset(item.partitions)
    return out
