"""Kafka's ``RoundRobinAssignor`` ("roundrobin"): deal the partitions out like cards.

All subscribed partitions, sorted by topic and partition, go one at a time to the members
in member-id order, cycling; a member not subscribed to the partition's topic is skipped
and the deal goes on from the member after the one that took it. With equal subscriptions
the counts differ by at most one; nothing is sticky. As for range, static members are not
ordered by instance id (the embedded subscription does not carry it).
"""

from __future__ import annotations

from collections.abc import Mapping

from kip_lab.assignors.client.api import ConsumerPartitionAssignor, MemberPartitions
from kip_lab.protocol.consumer_protocol import ConsumerProtocolSubscription


class RoundRobinAssignor(ConsumerPartitionAssignor):
    name = "roundrobin"

    def _assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: Mapping[str, ConsumerProtocolSubscription]
    ) -> MemberPartitions:
        members = sorted(subscriptions)
        topics_of = [frozenset(subscriptions[member_id].topics) for member_id in members]
        assignment: MemberPartitions = {member_id: [] for member_id in members}
        turn = 0
        for topic in sorted(partitions_per_topic):  # every topic here has a subscriber
            for partition in range(partitions_per_topic[topic]):
                while topic not in topics_of[turn]:
                    turn = (turn + 1) % len(members)
                assignment[members[turn]].append((topic, partition))
                turn = (turn + 1) % len(members)
        return assignment
