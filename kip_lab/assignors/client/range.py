"""Kafka's ``RangeAssignor`` ("range"): consecutive partition ranges, topic by topic.

For each topic, its subscribers in member-id order split the partitions into consecutive
ranges: ``P // N`` each and one more for the first ``P % N``. Nothing is sticky, and with
several topics the first members in id order collect the extra partitions of every topic.
Kafka's rack-aware variant (KIP-881) is omitted, and so is its ordering of static members
by instance id: the embedded subscription does not carry the instance id.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat

from kip_lab.assignors.client.api import ConsumerPartitionAssignor, MemberPartitions
from kip_lab.protocol.consumer_protocol import ConsumerProtocolSubscription


class RangeAssignor(ConsumerPartitionAssignor):
    name = "range"

    def _assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: Mapping[str, ConsumerProtocolSubscription]
    ) -> MemberPartitions:
        assignment: MemberPartitions = {member_id: [] for member_id in subscriptions}
        subscribers: dict[str, list[str]] = {topic: [] for topic in partitions_per_topic}
        for member_id in sorted(subscriptions):
            for topic in subscriptions[member_id].topics:
                if topic in subscribers:
                    subscribers[topic].append(member_id)
        for topic, members in subscribers.items():
            per_member, extra = divmod(partitions_per_topic[topic], len(members))
            start = 0
            for position, member_id in enumerate(members):
                length = per_member + (1 if position < extra else 0)
                assignment[member_id].extend(zip(repeat(topic, length), range(start, start + length), strict=True))
                start += length
        return assignment
