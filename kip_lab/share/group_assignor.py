"""The share groups' SimpleAssignor, as Kafka ships it (``fidelity="kafka"``) or as KIP-932 describes it.

Kafka's ``SimpleAssignor.assign`` gives every member every partition of each topic it
subscribes to (homogeneous or not): the share-partition leaders, not the assignment, share out
the records.

The KIP's three steps (``fidelity="kip"``), per subscribed topic:

1. hash each subscriber's member id and map it to one partition (approximately even balance);
2. a partition that got no member in (1) and has no member in the current assignment is
   given members round-robin, so that every partition has at least one;
3. a partition that got members in (1) drops the members it had only from (2).

The KIP gives no hash or mapping. The mapping is ``(hash - 1) mod N`` over the partitions
that may be assigned (those with initialized share state), which is what reproduces the
KIP's example table with its hashes 1, 2, ...; the default hash is CRC-32 of the member id
(deterministic across runs, unlike Python's ``hash``). Step (2) keeps a partition's current
members when it still has subscribers among them, and otherwise hands out the topic's
subscribers in hash order, starting again from the first for every topic (docs/decisions.md SG2).
Racks, lag and throughput are ignored, as the KIP says.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import Literal

from kip_lab.assignors.spec import PartitionAssignorError

# member id -> topic id -> partitions
ShareAssignment = dict[str, dict[str, tuple[int, ...]]]
Fidelity = Literal["kafka", "kip"]


def crc32_hash(member_id: str) -> int:
    return zlib.crc32(member_id.encode())


class SimpleAssignor:
    """The ``simple`` share-group assignor: Kafka's (``fidelity="kafka"``) or the KIP's (``"kip"``)."""

    name = "simple"

    def __init__(self, member_hash: Callable[[str], int] = crc32_hash, *, fidelity: Fidelity = "kafka") -> None:
        if fidelity not in ("kafka", "kip"):
            raise ValueError(f"fidelity must be 'kafka' or 'kip', got {fidelity!r}")
        self.member_hash = member_hash
        self.fidelity = fidelity

    def assign(
        self,
        subscriptions: Mapping[str, frozenset[str]],
        partitions: Mapping[str, tuple[int, ...]],
        current: Mapping[str, Mapping[str, frozenset[int]]],
    ) -> ShareAssignment:
        """The new target.

        ``subscriptions``: member id -> subscribed topic ids; ``partitions``: topic id -> the
        partitions that may be assigned (sorted; empty for a topic whose share state is not
        initialized yet); ``current``: the previous target. Under ``kafka`` a subscribed topic
        missing from ``partitions`` (from the topic metadata) is ``PartitionAssignorError``, as
        Kafka's ``SimpleAssignor.computeTargetPartitions`` throws; the KIP's steps skip it.
        """
        out: ShareAssignment = {member_id: {} for member_id in sorted(subscriptions)}
        if self.fidelity == "kafka":
            for member_id, topics in out.items():
                for topic_id in sorted(subscriptions[member_id]):
                    if topic_id not in partitions:  # Kafka's computeTargetPartitions: numPartitions is -1
                        raise PartitionAssignorError(
                            f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
                        )
                    if partitions[topic_id]:
                        topics[topic_id] = tuple(partitions[topic_id])
            return out
        for topic_id in sorted(partitions):
            subscribers = sorted(
                (m for m, topics in subscriptions.items() if topic_id in topics),
                key=lambda m: (self.member_hash(m), m),
            )
            if not partitions[topic_id] or not subscribers:
                continue
            for p, members in self._kip_topic(topic_id, partitions[topic_id], subscribers, current).items():
                for member_id in members:
                    out[member_id][topic_id] = (*out[member_id].get(topic_id, ()), p)
        return out

    def _kip_topic(
        self,
        topic_id: str,
        available: tuple[int, ...],
        subscribers: list[str],
        current: Mapping[str, Mapping[str, frozenset[int]]],
    ) -> dict[int, list[str]]:
        """The KIP's three steps for one topic: partition -> its members (``subscribers`` in hash order)."""
        hashed: dict[int, list[str]] = {p: [] for p in available}
        for member_id in subscribers:  # (1) hashing
            hashed[available[(self.member_hash(member_id) - 1) % len(available)]].append(member_id)
        chosen: dict[int, list[str]] = {}
        round_robin = 0
        for p in available:
            if hashed[p]:  # (3) a hashed partition keeps only its hashed members
                chosen[p] = hashed[p]
                continue
            kept = [m for m in subscribers if p in current.get(m, {}).get(topic_id, frozenset())]
            if kept:
                chosen[p] = kept
            else:  # (2) round-robin over the subscribers, in hash order
                chosen[p] = [subscribers[round_robin % len(subscribers)]]
                round_robin += 1
        return chosen
