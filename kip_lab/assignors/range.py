"""The "range" server-side assignor: co-partitions topics (KIP-848).

Follows Kafka's server-side ``RangeAssignor`` as of late 2024, which has no stickiness: the
previous target is ignored, so stale target partitions cannot survive. Members are ordered
static first (by instance id), then dynamic (by member id); each topic's subscribers, in
that order, take consecutive ranges of ``P // N`` partitions, the first ``P % N`` one more.
Members with the same subscriptions therefore get the same partition indexes in every
topic with the same partition count. Kafka leaves ties between equal instance ids to its
input order (its coordinator never has two); here the member id breaks them.

A member subscribed to a topic that is missing from ``spec.topics`` is refused with
``PartitionAssignorError``, as Kafka's ``RangeAssignor`` refuses it.
"""

from __future__ import annotations

from kip_lab.assignors.spec import AssignmentSpec, GroupAssignment, MemberId, PartitionAssignorError, TopicId
from kip_lab.runtime.collector import collector_paused

RANGE_ASSIGNOR_NAME = "range"


class RangeAssignor:
    """Contiguous per-topic ranges in static-then-dynamic member order."""

    name = RANGE_ASSIGNOR_NAME

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        return range_assign(spec)


@collector_paused()  # one list per member and topic, all kept: the collector's passes would find nothing
def range_assign(spec: AssignmentSpec) -> GroupAssignment:
    """Compute the range target assignment; pure and independent of dict order."""
    members = spec.members
    topics = spec.topics

    def range_order(member_id: MemberId) -> tuple[bool, str, str]:
        instance_id = members[member_id].instance_id
        if instance_id is None:
            return (True, member_id, "")
        return (False, instance_id, member_id)

    ordered_ids = sorted(members, key=range_order)

    # Each distinct subscription is filtered and sorted once, however many members share it;
    # sorted so that no member's topic order follows frozenset (hash) order.
    topics_of: dict[frozenset[TopicId], list[TopicId]] = {}
    member_topics = []
    subscriber_counts: dict[TopicId, int] = {}
    for member_id in ordered_ids:
        subscribed = members[member_id].subscribed_topic_ids
        existing = topics_of.get(subscribed)
        if existing is None:
            if not subscribed <= topics.keys():
                missing = min(subscribed - topics.keys())
                raise PartitionAssignorError(f"Member {member_id} is subscribed to a non-existent topic {missing}")
            existing = topics_of[subscribed] = sorted(subscribed)
        member_topics.append(existing)
        for topic_id in existing:
            subscriber_counts[topic_id] = subscriber_counts.get(topic_id, 0) + 1

    # Per topic: [next free partition, base share, members still owed one extra partition].
    cursors = {}
    for topic_id, count in subscriber_counts.items():
        base_share, extra = divmod(topics[topic_id].num_partitions, count)
        cursors[topic_id] = [0, base_share, extra]

    assignment: dict[MemberId, dict[TopicId, list[int]]] = {}
    for member_id, topic_ids in zip(ordered_ids, member_topics, strict=True):
        ranges = {}
        for topic_id in topic_ids:
            cursor = cursors[topic_id]
            start, share, extra = cursor
            if extra:
                share += 1
                cursor[2] = extra - 1
            if share:
                cursor[0] = start + share
                ranges[topic_id] = list(range(start, start + share))
        assignment[member_id] = ranges
    return {member_id: assignment[member_id] for member_id in sorted(assignment)}
