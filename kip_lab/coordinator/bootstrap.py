"""Start a scenario from a known group state by writing the records that describe it.

The KIP's later case studies begin mid-life ("group epoch 21, A owns foo-0..2"). Rather
than poke at in-memory state, we write the records a coordinator would have written and
let replay build the group — the same path failover takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kip_lab.cluster import ClusterMetadata
from kip_lab.protocol.common import TopicPartitions
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kip_lab.protocol.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    PartitionMetadataTopic,
)
from kip_lab.runtime.log import PartitionLog, Record


def stable_group_log(
    cluster: ClusterMetadata,
    group_id: str,
    epoch: int,
    assignment: Mapping[str, Mapping[str, Sequence[int]]],
    *,
    rebalance_timeout_ms: int = 300_000,
    log: PartitionLog | None = None,
) -> PartitionLog:
    """Records of a Stable group at ``epoch``: each member subscribes to the topics it is
    listed with and owns exactly its target (``assignment``: member id -> topic name ->
    partitions, in target order).
    """
    log = log if log is not None else PartitionLog()
    log.append(_membership_batch(cluster, group_id, epoch, assignment, rebalance_timeout_ms))

    def partitions(member_id: str) -> list[TopicPartitions]:
        return [
            TopicPartitions(topic_id=cluster.topic(name).topic_id, partitions=list(parts))
            for name, parts in sorted(assignment[member_id].items(), key=lambda kv: cluster.topic(kv[0]).topic_id)
            if parts
        ]

    target = [
        Record(
            ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
            ConsumerGroupTargetAssignmentMemberValue(topic_partitions=partitions(member_id)),
        )
        for member_id in sorted(assignment)
    ]
    target.append(
        Record(
            ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id),
            ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch),
        )
    )
    log.append(target)
    log.append(
        [
            Record(
                ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id),
                ConsumerGroupCurrentMemberAssignmentValue(
                    member_epoch=epoch,
                    previous_member_epoch=epoch - 1,
                    topic_partitions=[
                        TopicPartitions(topic_id=tp.topic_id, partitions=sorted(tp.partitions))
                        for tp in partitions(member_id)
                    ],
                ),
            )
            for member_id in sorted(assignment)
        ]
    )
    return log


def _membership_batch(
    cluster: ClusterMetadata,
    group_id: str,
    epoch: int,
    assignment: Mapping[str, Mapping[str, Sequence[int]]],
    rebalance_timeout_ms: int,
) -> list[Record]:
    """The members' metadata, the group's partition metadata, then the group epoch."""
    topic_names = sorted({name for topics in assignment.values() for name in topics})
    topics = [cluster.topic(name) for name in topic_names]
    membership: list[Record] = []
    for member_id in sorted(assignment):
        membership.append(
            Record(
                ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id),
                ConsumerGroupMemberMetadataValue(
                    group_epoch=epoch,
                    subscribed_topic_names=sorted(assignment[member_id]),
                    rebalance_timeout_ms=rebalance_timeout_ms,
                ),
            )
        )
    membership.append(
        Record(
            ConsumerGroupPartitionMetadataKey(group_id=group_id),
            ConsumerGroupPartitionMetadataValue(
                epoch=epoch,
                topics=[
                    PartitionMetadataTopic(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.num_partitions)
                    for t in topics
                ],
            ),
        )
    )
    membership.append(Record(ConsumerGroupMetadataKey(group_id=group_id), ConsumerGroupMetadataValue(epoch=epoch)))
    return membership


def stable_classic_group_log(
    cluster: ClusterMetadata,
    group_id: str,
    generation: int,
    assignment: Mapping[str, Mapping[str, Sequence[int]]],
    *,
    protocol: str = "range",
    instance_ids: Mapping[str, str] | None = None,
    consumer_protocol_version: int = 3,
    session_timeout_ms: int = 45_000,
    rebalance_timeout_ms: int = 300_000,
    log: PartitionLog | None = None,
) -> PartitionLog:
    """The ``GroupMetadataValue`` of a Stable classic group at ``generation``: each member (embedded
    consumer protocol ``consumer_protocol_version``; static when ``instance_ids`` names it)
    subscribes to the topics it is listed with and was assigned exactly its partitions; the
    smallest member id leads.
    """
    log = log if log is not None else PartitionLog()
    for topics in assignment.values():
        for name in topics:
            cluster.topic(name)  # an unknown topic is a mistake in the scenario, not a silent drop
    members = [
        MemberMetadata(
            member_id=member_id,
            group_instance_id=(instance_ids or {}).get(member_id),
            client_id=member_id,
            rebalance_timeout=rebalance_timeout_ms,
            session_timeout=session_timeout_ms,
            subscription=ConsumerProtocolSubscription(
                version=consumer_protocol_version, topics=sorted(assignment[member_id]), generation_id=generation
            ).encode(),
            assignment=ConsumerProtocolAssignment(
                version=consumer_protocol_version,
                assigned_partitions=[(t, p) for t, parts in assignment[member_id].items() for p in parts],
            ).encode(),
        )
        for member_id in sorted(assignment)
    ]
    value = GroupMetadataValue(
        protocol_type="consumer", generation=generation, protocol=protocol, leader=min(assignment), members=members
    )
    log.append((Record(GroupMetadataKey(group=group_id), value),))
    return log
