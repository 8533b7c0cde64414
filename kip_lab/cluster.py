"""Cluster metadata as the coordinator sees it: topics with ids and partition counts.

Tests and scenarios change it (create, add partitions, delete, recreate) and the
coordinator compares it with each group's stored partition metadata. Topic ids are made as
Kafka makes them (``Uuid.randomUuid``, written as ``Uuid.toString``: a random version-4 UUID in
22 characters of URL-safe base64), from a random generator seeded by the cluster's seed, so the
same script with the same seed always gives the same ids, and recreating ``foo`` gives a new one.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from kip_lab.contract import LONG_MAX, MAX_PARTITIONS, MAX_TOTAL_PARTITIONS, checked, refuse
from kip_lab.errors import UnknownName

TopicName = Annotated[str, Field(min_length=1, max_length=249)]  # Kafka's longest topic name
Partitions = Annotated[int, Field(ge=1, le=MAX_PARTITIONS)]


@dataclass(frozen=True, slots=True)
class Topic:
    topic_id: str
    name: str
    num_partitions: int


def random_topic_id(rng: random.Random) -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 16 random bytes marked as a version-4 UUID, in base64.

    As Kafka, an id whose text starts with "-" is drawn again (the all-zero and one ids Kafka
    reserves cannot occur: the version bits are set).
    """
    while True:
        raw = bytearray(rng.randbytes(16))
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4, as java.util.UUID.randomUUID
        raw[8] = (raw[8] & 0x3F) | 0x80  # IETF variant
        topic_id = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
        if not topic_id.startswith("-"):
            return topic_id


class ClusterMetadata:
    """Mutable topic metadata with a version number that moves on every change.

    ``seed`` seeds the generator of topic ids (the Lab passes its own seed).
    """

    @checked
    def __init__(self, seed: Annotated[int, Field(ge=-LONG_MAX - 1, le=LONG_MAX)] = 0) -> None:
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[str, Topic] = {}
        self._topic_ids = random.Random(seed)
        self.version = 0

    # -- changes --------------------------------------------------------------------
    @checked
    def create_topic(self, name: TopicName, partitions: Partitions) -> str:
        """Create ``name`` with ``partitions`` partitions; returns its topic id."""
        self._check_total("create_topic", partitions)
        if name in self._by_name:
            raise refuse("ClusterMetadata.create_topic", "name", f"topic {name!r} already exists")
        topic = Topic(random_topic_id(self._topic_ids), name, partitions)
        self._by_name[name] = topic
        self._by_id[topic.topic_id] = topic
        self.version += 1
        return topic.topic_id

    @checked
    def add_partitions(self, name: str, count: Partitions) -> int:
        """Add ``count`` partitions to ``name``; returns the new partition count."""
        topic = self.topic(name)
        self._check_total("add_partitions", count)
        grown = Topic(topic.topic_id, name, topic.num_partitions + count)
        self._by_name[name] = grown
        self._by_id[topic.topic_id] = grown
        self.version += 1
        return grown.num_partitions

    @checked
    def delete_topic(self, name: str) -> str:
        """Delete ``name``; returns the id it had."""
        topic = self.topic(name)
        del self._by_name[name]
        del self._by_id[topic.topic_id]
        self.version += 1
        return topic.topic_id

    @checked
    def recreate_topic(self, name: str, partitions: Partitions | None = None) -> str:
        """Delete and create ``name`` again (same or new partition count); returns the new id."""
        old = self.topic(name).num_partitions
        count = old if partitions is None else partitions
        self._check_total("recreate_topic", count - old)
        self.delete_topic(name)
        return self.create_topic(name, count)

    def _check_total(self, call: str, added: int) -> None:
        """At most ``MAX_TOTAL_PARTITIONS`` partitions in all topics, as a scenario file allows."""
        total = sum(topic.num_partitions for topic in self._by_name.values()) + added
        if total > MAX_TOTAL_PARTITIONS:
            raise refuse(
                f"ClusterMetadata.{call}",
                "partitions",
                f"the topics would have {total:,} partitions in all; at most {MAX_TOTAL_PARTITIONS:,}",
            )

    # -- lookups --------------------------------------------------------------------
    @checked
    def topic(self, name: str) -> Topic:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownName(f"unknown topic {name!r}; topics: {sorted(self._by_name)}") from None

    @checked
    def topic_by_id(self, topic_id: str) -> Topic | None:
        return self._by_id.get(topic_id)

    @checked
    def topic_id(self, name: str) -> str | None:
        topic = self._by_name.get(name)
        return topic.topic_id if topic else None

    @checked
    def topic_names(self) -> list[str]:
        return sorted(self._by_name)

    @checked
    def topics(self) -> list[Topic]:
        return [self._by_name[name] for name in sorted(self._by_name)]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name
