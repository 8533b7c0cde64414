"""Cluster metadata as the coordinator sees it: topics with ids and partition counts.

Tests and scenarios change it (create, add partitions, delete, recreate) and the
coordinator compares it with each group's stored partition metadata. Topic ids are Kafka
style (22 characters of URL-safe base64 of a 128-bit UUID) but derived from the topic
name and an incarnation counter, so a run is reproducible: recreating ``foo`` gives a new
id, and the same script always gives the same ids.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Topic:
    topic_id: str
    name: str
    num_partitions: int


def make_topic_id(name: str, incarnation: int) -> str:
    hashed = hashlib.sha256(f"{name}\x00{incarnation}".encode()).digest()[:16]
    return base64.urlsafe_b64encode(hashed).rstrip(b"=").decode()


class ClusterMetadata:
    """Mutable topic metadata with a version number that moves on every change."""

    def __init__(self) -> None:
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[str, Topic] = {}
        self._incarnations: dict[str, int] = {}
        self.version = 0

    # -- changes --------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int) -> str:
        """Create ``name`` with ``partitions`` partitions; returns its topic id."""
        if not name:
            raise ValueError("topic name must be non-empty")
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {partitions}")
        if name in self._by_name:
            raise ValueError(f"topic {name!r} already exists")
        incarnation = self._incarnations.get(name, 0)
        self._incarnations[name] = incarnation + 1
        topic = Topic(make_topic_id(name, incarnation), name, partitions)
        self._by_name[name] = topic
        self._by_id[topic.topic_id] = topic
        self.version += 1
        return topic.topic_id

    def add_partitions(self, name: str, count: int) -> int:
        """Add ``count`` partitions to ``name``; returns the new partition count."""
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        topic = self.topic(name)
        grown = Topic(topic.topic_id, name, topic.num_partitions + count)
        self._by_name[name] = grown
        self._by_id[topic.topic_id] = grown
        self.version += 1
        return grown.num_partitions

    def delete_topic(self, name: str) -> str:
        """Delete ``name``; returns the id it had."""
        topic = self.topic(name)
        del self._by_name[name]
        del self._by_id[topic.topic_id]
        self.version += 1
        return topic.topic_id

    def recreate_topic(self, name: str, partitions: int | None = None) -> str:
        """Delete and create ``name`` again (same or new partition count); returns the new id."""
        count = self.topic(name).num_partitions if partitions is None else partitions
        self.delete_topic(name)
        return self.create_topic(name, count)

    # -- lookups --------------------------------------------------------------------
    def topic(self, name: str) -> Topic:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"unknown topic {name!r}") from None

    def topic_by_id(self, topic_id: str) -> Topic | None:
        return self._by_id.get(topic_id)

    def topic_id(self, name: str) -> str | None:
        topic = self._by_name.get(name)
        return topic.topic_id if topic else None

    def topic_names(self) -> list[str]:
        return sorted(self._by_name)

    def topics(self) -> list[Topic]:
        return [self._by_name[name] for name in sorted(self._by_name)]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name
