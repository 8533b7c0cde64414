"""KIP-932's SimpleAssignor: every partition of a subscribed topic gets at least one member.

The KIP's three steps, per subscribed topic:

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

# member id -> topic id -> partitions
ShareAssignment = dict[str, dict[str, tuple[int, ...]]]


def crc32_hash(member_id: str) -> int:
    return zlib.crc32(member_id.encode())


class SimpleAssignor:
    """``org.apache.kafka.coordinator.group.share.SimpleAssignor`` as the KIP describes it."""

    name = "simple"

    def __init__(self, member_hash: Callable[[str], int] = crc32_hash) -> None:
        self.member_hash = member_hash

    def assign(
        self,
        subscriptions: Mapping[str, frozenset[str]],
        partitions: Mapping[str, tuple[int, ...]],
        current: Mapping[str, Mapping[str, frozenset[int]]],
    ) -> ShareAssignment:
        """The new target.

        ``subscriptions``: member id -> subscribed topic ids; ``partitions``: topic id -> the
        partitions that may be assigned (sorted); ``current``: the previous target.
        """
        out: ShareAssignment = {member_id: {} for member_id in sorted(subscriptions)}
        for topic_id in sorted(partitions):
            available = partitions[topic_id]
            subscribers = sorted(
                (m for m, topics in subscriptions.items() if topic_id in topics),
                key=lambda m: (self.member_hash(m), m),
            )
            if not available or not subscribers:
                continue
            # (1) hashing
            hashed: dict[int, list[str]] = {p: [] for p in available}
            for member_id in subscribers:
                hashed[available[(self.member_hash(member_id) - 1) % len(available)]].append(member_id)
            chosen: dict[int, list[str]] = {}
            round_robin = 0
            for p in available:
                if hashed[p]:
                    # (3) a hashed partition keeps only its hashed members
                    chosen[p] = hashed[p]
                    continue
                kept = [m for m in subscribers if p in current.get(m, {}).get(topic_id, frozenset())]
                if kept:
                    chosen[p] = kept
                else:
                    # (2) round-robin over the subscribers, in hash order
                    chosen[p] = [subscribers[round_robin % len(subscribers)]]
                    round_robin += 1
            for p, members in chosen.items():
                for member_id in members:
                    topic = out[member_id].setdefault(topic_id, ())
                    out[member_id][topic_id] = (*topic, p)
        return out
