"""A share group's in-memory state at the group coordinator, changed only by replaying records.

``ShareGroup.replay`` is the single entry point. Share groups are looser than consumer
groups: a member moves to its target in one step (no revocation barrier, partitions may be
shared), so the group is Stable as soon as it has a member and Empty when it has none
(KIP-932 "Share group states"). ``initialized`` and ``deleting`` mirror the
ShareGroupStatePartitionMetadata record: which share-partitions have persistent state on the
share coordinator and may therefore be assigned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from kip_lab.machines import StateMachine
from kip_lab.protocol.common import Message, from_topic_partitions, target_from_topic_partitions
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.records import (
    RecordKey,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupPartitionMetadataKey,
    ShareGroupPartitionMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)
from kip_lab.runtime.counts import add_count

Assignment = dict[str, frozenset[int]]  # topic id -> partitions


class ShareGroupState(StrEnum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


SHARE_GROUP_STATE_MACHINE = StateMachine.from_table(
    "share group state",
    [s.value for s in ShareGroupState],
    ShareGroupState.EMPTY.value,
    [
        ("Empty", "first member joins", "Stable"),
        ("Stable", "last member leaves or is removed", "Empty"),
        ("Empty", "group deleted (no share state left)", "Dead"),
        ("Empty", "coordinator unloaded", "Dead"),
        ("Stable", "coordinator unloaded", "Dead"),
    ],
    description="Derived after every record batch: Stable with at least one member, else Empty (KIP-932).",
)


def check_share_group_transition(source: ShareGroupState, target: ShareGroupState) -> None:
    if source is not target:
        SHARE_GROUP_STATE_MACHINE.require_edge(source.value, target.value)


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    # ShareGroupMemberMetadata
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    # ShareGroupCurrentMemberAssignment
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        # derived: topic name -> members subscribing to it (Kafka ``ModernGroup.subscribedTopicNames``)
        self.subscribed_topic_names: Counter[str] = Counter()
        self.subscription_metadata: dict[str, tuple[str, int]] = {}  # topic name -> (topic id, partitions)
        self.target: dict[str, dict[str, tuple[int, ...]]] = {}
        self.initialized: dict[str, tuple[str, frozenset[int]]] = {}  # topic id -> (name, partitions)
        self.deleting: dict[str, tuple[str, frozenset[int]]] = {}  # topic id -> (name, partitions)
        self.dead = False

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def member(self, member_id: str) -> ShareGroupMember:
        found = self.members.get(member_id)
        if found is None:
            raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}.")
        return found

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, member_epoch: int, api_version: int
    ) -> None:
        """Kafka ``ShareGroup.validateOffsetCommit``: a share group keeps no committed offsets."""
        raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is not a consumer group.")

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Kafka ``ShareGroup.validateOffsetFetch``: answered as for a group that does not exist."""
        raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is not a consumer group.")

    def target_of(self, member_id: str) -> Assignment:
        return {t: frozenset(p) for t, p in self.target.get(member_id, {}).items()}

    def topic_name_of(self, topic_id: str) -> str | None:
        for name, (tid, _) in self.subscription_metadata.items():
            if tid == topic_id:
                return name
        entry = self.initialized.get(topic_id)
        entry = entry or self.deleting.get(topic_id)
        return entry[0] if entry else None

    def subscribed_topic_names_with(self, old: ShareGroupMember | None, new: ShareGroupMember | None) -> Counter[str]:
        """The subscription counts as they would be with ``old`` replaced by ``new`` (either may be None), from
        the kept counts and the one member (Kafka ``ModernGroup.computeSubscribedTopicNames``)."""
        counts = Counter(self.subscribed_topic_names)
        _count_topic_names(counts, old, new)
        return counts

    # -- replay ---------------------------------------------------------------------
    def replay(self, key: RecordKey, value: Message | None) -> None:
        """Apply one record (a None value is its tombstone), as Kafka's ``GroupMetadataManager.replay``
        overloads do for each share group record type."""
        replayer = _REPLAYERS.get(type(key))
        if replayer is None:
            raise TypeError(f"not a share group record key: {type(key).__name__}")
        replayer(self, key, value)

    def _replay_metadata(self, key: ShareGroupMetadataKey, value: ShareGroupMetadataValue | None) -> None:
        if value is None:
            self.dead = True
        else:
            self.group_epoch = value.epoch

    def _replay_partition_metadata(
        self, key: ShareGroupPartitionMetadataKey, value: ShareGroupPartitionMetadataValue | None
    ) -> None:
        self.subscription_metadata = (
            {} if value is None else {t.topic_name: (t.topic_id, t.num_partitions) for t in value.topics}
        )

    def _replay_member_metadata(
        self, key: ShareGroupMemberMetadataKey, value: ShareGroupMemberMetadataValue | None
    ) -> None:
        old = self.members.get(key.member_id)
        if value is None:
            if old is not None:
                del self.members[key.member_id]
                _count_topic_names(self.subscribed_topic_names, old, None)
            return
        member = replace(
            old or ShareGroupMember(key.member_id),
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=tuple(value.subscribed_topic_names),
        )
        self.members[key.member_id] = member
        _count_topic_names(self.subscribed_topic_names, old, member)

    def _replay_target_metadata(
        self, key: ShareGroupTargetAssignmentMetadataKey, value: ShareGroupTargetAssignmentMetadataValue | None
    ) -> None:
        if value is not None:
            self.assignment_epoch = value.assignment_epoch

    def _replay_target_member(
        self, key: ShareGroupTargetAssignmentMemberKey, value: ShareGroupTargetAssignmentMemberValue | None
    ) -> None:
        if value is None:
            self.target.pop(key.member_id, None)
        else:
            self.target[key.member_id] = target_from_topic_partitions(value.topic_partitions)

    def _replay_current_assignment(
        self, key: ShareGroupCurrentMemberAssignmentKey, value: ShareGroupCurrentMemberAssignmentValue | None
    ) -> None:
        member = self.members.get(key.member_id)
        if member is None:
            return  # the member's metadata tombstone came first
        if value is None:
            self.members[key.member_id] = replace(member, member_epoch=0, previous_member_epoch=-1, assigned={})
        else:
            self.members[key.member_id] = replace(
                member,
                member_epoch=value.member_epoch,
                previous_member_epoch=value.previous_member_epoch,
                assigned=from_topic_partitions(value.assigned_partitions),
            )

    def _replay_state_partition_metadata(
        self, key: ShareGroupStatePartitionMetadataKey, value: ShareGroupStatePartitionMetadataValue | None
    ) -> None:
        if value is None:
            self.initialized, self.deleting = {}, {}
        else:
            self.initialized = {t.topic_id: (t.topic_name, frozenset(t.partitions)) for t in value.initialized_topics}
            self.deleting = {t.topic_id: (t.topic_name, frozenset(t.partitions)) for t in value.deleting_topics}


def _count_topic_names(counts: Counter[str], old: ShareGroupMember | None, new: ShareGroupMember | None) -> None:
    """Move ``counts`` from ``old``'s subscription to ``new``'s, leaving no zero entry behind."""
    for member, sign in ((old, -1), (new, 1)):
        for name in _names(member):
            add_count(counts, name, sign)


def _names(member: ShareGroupMember | None) -> Iterable[str]:
    return () if member is None else dict.fromkeys(member.subscribed_topic_names)


# Which ``ShareGroup`` method replays each share group record key type.
_REPLAYERS: dict[type[RecordKey], Callable[[ShareGroup, Any, Any], None]] = {
    ShareGroupMetadataKey: ShareGroup._replay_metadata,
    ShareGroupPartitionMetadataKey: ShareGroup._replay_partition_metadata,
    ShareGroupMemberMetadataKey: ShareGroup._replay_member_metadata,
    ShareGroupTargetAssignmentMetadataKey: ShareGroup._replay_target_metadata,
    ShareGroupTargetAssignmentMemberKey: ShareGroup._replay_target_member,
    ShareGroupCurrentMemberAssignmentKey: ShareGroup._replay_current_assignment,
    ShareGroupStatePartitionMetadataKey: ShareGroup._replay_state_partition_metadata,
}
