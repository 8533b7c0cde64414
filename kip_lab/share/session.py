"""Share sessions (KIP-932 "Share sessions"): what a broker remembers between a member's ShareFetches.

A session is keyed by (group id, member id) and holds its epoch (the epoch the next request
must carry), the share-partitions it fetches (in the order they joined, which the leader
rotates for fairness) and how many times the order has rotated. Epoch 0 opens a session
(replacing an older one), -1 closes it; the epoch after 2**31-1 wraps to 1 (docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kip_lab.protocol.share import INT32_MAX

TopicPartition = tuple[str, int]  # (topic id, partition)
SessionKey = tuple[str, str]  # (group id, member id)

SHARE_SESSION_IDLE_TIMEOUT_MS = 120_000  # fixed by the KIP, not a config


def next_session_epoch(epoch: int) -> int:
    return 1 if epoch == INT32_MAX else epoch + 1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1
    partitions: list[TopicPartition] = field(default_factory=list)
    rotation: int = 0

    @property
    def key(self) -> SessionKey:
        return (self.group_id, self.member_id)

    def add(self, topic_partition: TopicPartition) -> bool:
        """Add a partition; returns whether it was new to the session."""
        if topic_partition in self.partitions:
            return False
        self.partitions.append(topic_partition)
        return True

    def forget(self, topic_partition: TopicPartition) -> None:
        if topic_partition in self.partitions:
            self.partitions.remove(topic_partition)

    def fetch_order(self) -> list[TopicPartition]:
        """The session's partitions starting one further along each time (KIP-932: no partition starves)."""
        if not self.partitions:
            return []
        start = self.rotation % len(self.partitions)
        self.rotation += 1
        return self.partitions[start:] + self.partitions[:start]
