"""A consumer group's in-memory state, changed only by replaying records.

``ConsumerGroup.replay`` is the single entry point: every field below is either written
by a record or derived from fields that are (the partition epochs, the static-member
index, the members as the server-side assignor sees them, the counts of what the members
subscribe to and which assignors they name, the group state).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from kip_lab.assignors.spec import MemberSubscription
from kip_lab.coordinator.member import Assignment, ConsumerGroupMember, ReconciliationState
from kip_lab.machines import StateMachine
from kip_lab.protocol.common import Message, from_topic_partitions, target_from_topic_partitions
from kip_lab.protocol.errors import ApiError, Errors
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
    RecordKey,
)
from kip_lab.regex import compile_subscription
from kip_lab.runtime.counts import add_count

if TYPE_CHECKING:
    from kip_lab.share.group import ShareGroup

# topic id -> partitions in the order the assignor gave them
TargetPartitions = dict[str, tuple[int, ...]]
# topic name -> (topic id, partition count): the group's partition metadata
SubscriptionMetadata = dict[str, tuple[str, int]]


def _check_member_epoch(member: ConsumerGroupMember, received: int) -> None:
    """Kafka ``ConsumerGroup.validateMemberEpoch``: a request's epoch must be the member's;
    a classic member's generation is its epoch, and a mismatch is ILLEGAL_GENERATION for it,
    STALE_MEMBER_EPOCH for a member on the consumer protocol."""
    if received == member.member_epoch:
        return
    if member.uses_classic_protocol:
        raise ApiError(
            Errors.ILLEGAL_GENERATION,
            f"The received generation id {received} does not match the expected member epoch {member.member_epoch}.",
        )
    raise ApiError(
        Errors.STALE_MEMBER_EPOCH,
        f"Member epoch {received} does not match the current epoch {member.member_epoch}.",
    )


def subscribed_topic_ids(member: ConsumerGroupMember, metadata: SubscriptionMetadata) -> frozenset[str]:
    """The ids of the topics in ``metadata`` the member subscribes to, by name or by its regex."""
    ids = {metadata[name][0] for name in member.subscribed_topic_names if name in metadata}
    if member.subscribed_topic_regex:
        compiled = compile_subscription(member.subscribed_topic_regex)
        ids.update(topic_id for name, (topic_id, _) in metadata.items() if compiled.fullmatch(name) is not None)
    return frozenset(ids)


def assignor_input(
    member: ConsumerGroupMember, metadata: SubscriptionMetadata, target: Mapping[str, tuple[int, ...]]
) -> MemberSubscription:
    """The member as the server-side assignor sees it: its subscribed topic ids and its previous target
    (Kafka ``TargetAssignmentBuilder.createMemberSubscriptionAndAssignment``)."""
    return MemberSubscription(
        subscribed_topic_ids=subscribed_topic_ids(member, metadata),
        target_partitions=target,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
    )


@dataclass
class SubscriptionCounts:
    """What a group's members ask for, counted: how many subscribe to each topic name and regex, name
    each server-side assignor, and list each client-side assignor (and at which positions); and how
    many members there are, and how many of them speak the classic protocol.

    The group keeps these up to date as members change (Kafka ``ModernGroup.subscribedTopicNames`` and
    ``ConsumerGroup.serverAssignors``; Kafka 4.0 counts regexes alike), so that the subscription
    metadata and the assignor the group would use after one member's change come from the counts and
    that member alone, at the same cost whatever the group's size (Kafka
    ``ModernGroup.computeSubscribedTopicNames`` and ``ConsumerGroup.computePreferredServerAssignor``).
    A name's entry is gone when no member names it.
    """

    members: int = 0
    classic_members: int = 0  # members speaking the classic protocol (Kafka ``numClassicProtocolMembers``)
    topic_names: Counter[str] = field(default_factory=Counter)
    regexes: Counter[str] = field(default_factory=Counter)
    server_assignors: Counter[str] = field(default_factory=Counter)
    client_assignor_members: int = 0  # members naming at least one client-side assignor
    client_assignors: Counter[str] = field(default_factory=Counter)  # name -> members listing it
    # name -> the sum over members of its first position in their lists
    client_assignor_positions: Counter[str] = field(default_factory=Counter)

    @classmethod
    def of(cls, members: Iterable[ConsumerGroupMember]) -> SubscriptionCounts:
        """The counts of ``members``, from scratch."""
        counts = cls()
        for member in members:
            counts.add(member)
        return counts

    def changed(
        self, removed: Iterable[ConsumerGroupMember] = (), added: Iterable[ConsumerGroupMember] = ()
    ) -> SubscriptionCounts:
        """A copy with ``removed`` taken out and ``added`` put in: the counts of the group as it would be."""
        counts = replace(
            self,
            topic_names=Counter(self.topic_names),
            regexes=Counter(self.regexes),
            server_assignors=Counter(self.server_assignors),
            client_assignors=Counter(self.client_assignors),
            client_assignor_positions=Counter(self.client_assignor_positions),
        )
        for member in removed:
            counts.remove(member)
        for member in added:
            counts.add(member)
        return counts

    def add(self, member: ConsumerGroupMember) -> None:
        self._count(member, 1)

    def remove(self, member: ConsumerGroupMember) -> None:
        self._count(member, -1)

    def _count(self, member: ConsumerGroupMember, sign: int) -> None:
        self.members += sign
        if member.uses_classic_protocol:
            self.classic_members += sign
        for name in dict.fromkeys(member.subscribed_topic_names):
            add_count(self.topic_names, name, sign)
        if member.subscribed_topic_regex:
            add_count(self.regexes, member.subscribed_topic_regex, sign)
        if member.server_assignor:
            add_count(self.server_assignors, member.server_assignor, sign)
        if member.client_assignors:
            self.client_assignor_members += sign
            first: dict[str, int] = {}
            for position, assignor in enumerate(member.client_assignors):
                first.setdefault(assignor.name, position)
            for name, position in first.items():
                add_count(self.client_assignors, name, sign)
                add_count(self.client_assignor_positions, name, sign * position)


class GroupState(StrEnum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


GROUP_STATE_MACHINE = StateMachine.from_table(
    "consumer group state",
    [s.value for s in GroupState],
    GroupState.EMPTY.value,
    [
        ("Empty", "member joins (group epoch bump)", "Assigning"),
        ("Empty", "converted from a classic group (online upgrade)", "Stable"),
        ("Assigning", "target installed, members to reconcile", "Reconciling"),
        ("Assigning", "target installed, all reconciled", "Stable"),
        ("Reconciling", "last member reconciled", "Stable"),
        ("Reconciling", "group epoch bump", "Assigning"),
        ("Stable", "group epoch bump", "Assigning"),
        ("Stable", "member leaves temporarily (static, epoch -2)", "Reconciling"),
        ("Assigning", "last member removed", "Empty"),
        ("Reconciling", "last member removed", "Empty"),
        ("Stable", "last member removed", "Empty"),
        ("Empty", "group deleted or unloaded", "Dead"),
        ("Assigning", "coordinator unloaded", "Dead"),
        ("Reconciling", "coordinator unloaded", "Dead"),
        ("Stable", "coordinator unloaded", "Dead"),
    ],
    description="Derived after every record batch: members, group epoch vs assignment epoch, reconciliation.",
)


def check_group_transition(source: GroupState, target: GroupState) -> None:
    """The derived state may only move along a declared edge (or stay)."""
    if source is not target:
        GROUP_STATE_MACHINE.require_edge(source.value, target.value)


def group_snapshot_head(group: ConsumerGroup | ShareGroup) -> dict[str, Any]:
    """The group-level part of a failover snapshot, the same for consumer and share groups:
    state, both epochs, subscription metadata and target, as plain sorted data."""
    return {
        "state": group.state.value,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "subscription_metadata": dict(sorted(group.subscription_metadata.items())),
        "target": {m: dict(sorted(t.items())) for m, t in sorted(group.target.items())},
    }


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        # topic name -> (topic id, partition count), as last written in partition metadata
        self.subscription_metadata: dict[str, tuple[str, int]] = {}
        self.target: dict[str, TargetPartitions] = {}
        # derived
        self.partition_epochs: dict[str, dict[int, int]] = {}
        self.static_members: dict[str, str] = {}
        # Each member's assignor input under the partition metadata and target above, rebuilt only when
        # a record changes one of them: a target computation reuses the entries of the members it does
        # not see changed (``assignor_members``), as Kafka's group keeps its members' subscriptions.
        self.assignor_inputs: dict[str, MemberSubscription] = {}
        self.subscriptions = SubscriptionCounts()  # what the members subscribe to and which assignors they name
        self.unreconciled: set[str] = set()  # members not reconciled to the assignment epoch
        self.dead = False

    # -- derived views --------------------------------------------------------------
    @property
    def state(self) -> GroupState:
        if self.dead:
            return GroupState.DEAD
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        return GroupState.RECONCILING if self.unreconciled else GroupState.STABLE

    def target_of(self, member_id: str) -> Assignment:
        return {t: frozenset(p) for t, p in self.target.get(member_id, {}).items()}

    def partition_held(self, topic_id: str, partition: int) -> bool:
        return partition in self.partition_epochs.get(topic_id, ())

    def member_at_epoch(self, member_id: str, member_epoch: int) -> ConsumerGroupMember:
        """The member, if it is in the group at ``member_epoch``; otherwise the error to answer.

        Every RPC but the heartbeat answers a wrong epoch with STALE_MEMBER_EPOCH (only the
        heartbeat fences), or ILLEGAL_GENERATION to a member on the classic protocol, whose
        generation is its member epoch (Kafka ``ConsumerGroup.validateMemberEpoch``).
        """
        member = self.member_or_unknown(member_id)
        _check_member_epoch(member, member_epoch)
        return member

    def member_or_unknown(self, member_id: str) -> ConsumerGroupMember:
        """The member, or UNKNOWN_MEMBER_ID (Kafka ``ConsumerGroup.getOrMaybeCreateMember`` without creating)."""
        member = self.members.get(member_id)
        if member is None:
            raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not in group {self.group_id}.")
        return member

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, member_epoch: int, api_version: int
    ) -> None:
        """Kafka ``ConsumerGroup.validateOffsetCommit``: a negative epoch (an admin or manual
        commit) only to a group without members; otherwise a known member (the instance id is
        not looked at), on OffsetCommit v9 or above unless it uses the classic protocol, at its
        current epoch."""
        if member_epoch < 0 and not self.members:
            return
        member = self.member_or_unknown(member_id)
        if not member.uses_classic_protocol and api_version < 9:
            raise ApiError(
                Errors.UNSUPPORTED_VERSION,
                "OffsetCommit version 9 or above must be used by members using the modern group protocol",
            )
        _check_member_epoch(member, member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Kafka ``ConsumerGroup.validateOffsetFetch``: a request naming no member at a negative
        epoch (the admin client, a classic consumer) is accepted; any other must be a member at
        its current epoch."""
        if member_id is None and member_epoch < 0:
            return
        self.member_at_epoch(member_id or "", member_epoch)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members[member_id]

    def topic_name_of(self, topic_id: str) -> str | None:
        for name, (tid, _) in self.subscription_metadata.items():
            if tid == topic_id:
                return name
        return None

    # -- replay ---------------------------------------------------------------------
    def replay(self, key: RecordKey, value: Message | None) -> None:
        """Apply one record (a None value is its tombstone), as Kafka's ``GroupMetadataManager.replay``
        overloads do for each consumer group record type."""
        replayer = _REPLAYERS.get(type(key))
        if replayer is None:
            raise TypeError(f"not a consumer group record key: {type(key).__name__}")
        replayer(self, key, value)

    def _replay_metadata(self, key: ConsumerGroupMetadataKey, value: ConsumerGroupMetadataValue | None) -> None:
        if value is None:
            self.dead = True
        else:
            self.group_epoch = value.epoch

    def _replay_partition_metadata(
        self, key: ConsumerGroupPartitionMetadataKey, value: ConsumerGroupPartitionMetadataValue | None
    ) -> None:
        metadata = {} if value is None else {t.topic_name: (t.topic_id, t.num_partitions) for t in value.topics}
        if metadata != self.subscription_metadata:
            self.subscription_metadata = metadata
            for member_id in self.members:
                self._refresh_assignor_input(member_id)

    def _replay_target_metadata(
        self, key: ConsumerGroupTargetAssignmentMetadataKey, value: ConsumerGroupTargetAssignmentMetadataValue | None
    ) -> None:
        if value is not None and value.assignment_epoch != self.assignment_epoch:
            self.assignment_epoch = value.assignment_epoch
            self.unreconciled = {m for m in self.members if not self._reconciled(m)}

    def _replay_target_member(
        self, key: ConsumerGroupTargetAssignmentMemberKey, value: ConsumerGroupTargetAssignmentMemberValue | None
    ) -> None:
        if value is None:
            self.target.pop(key.member_id, None)
        else:
            self.target[key.member_id] = target_from_topic_partitions(value.topic_partitions)
        entry = self.assignor_inputs.get(key.member_id)
        if entry is not None:  # the same member with its new target
            target = self.target.get(key.member_id, {})
            self.assignor_inputs[key.member_id] = MemberSubscription(
                entry.subscribed_topic_ids, target, entry.instance_id, entry.rack_id
            )

    def _replay_member_metadata(
        self, key: ConsumerGroupMemberMetadataKey, value: ConsumerGroupMemberMetadataValue | None
    ) -> None:
        member_id = key.member_id
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._set_ownership(old, None)
                del self.members[member_id]
                self.subscriptions.remove(old)
                self.assignor_inputs.pop(member_id, None)
                self.unreconciled.discard(member_id)
                if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
                    del self.static_members[old.instance_id]
            return
        base = old or ConsumerGroupMember(member_id)
        member = replace(
            base,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex,
            client_assignors=tuple(value.assignors),
            server_assignor=value.server_assignor,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            classic_member_metadata=value.classic_member_metadata,
        )
        self.members[member_id] = member
        if old is not None:
            self.subscriptions.remove(old)
        self.subscriptions.add(member)
        self._refresh_assignor_input(member_id)
        self._track(member_id)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member_id

    def _replay_current_assignment(
        self, key: ConsumerGroupCurrentMemberAssignmentKey, value: ConsumerGroupCurrentMemberAssignmentValue | None
    ) -> None:
        member_id = key.member_id
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._set_ownership(old, None)
                self.members[member_id] = replace(
                    old,
                    member_epoch=0,
                    previous_member_epoch=-1,
                    state=ReconciliationState.STABLE,
                    assigned={},
                    pending_revocation={},
                )
                self._track(member_id)
            return
        base = old or ConsumerGroupMember(member_id)
        member = replace(
            base,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=ReconciliationState(value.state),
            assigned=from_topic_partitions(value.topic_partitions),
            pending_revocation=from_topic_partitions(value.partitions_pending_revocation),
        )
        self._set_ownership(old, member)
        self.members[member_id] = member
        if old is None:  # a new member, subscribing to nothing yet
            self.subscriptions.add(member)
        self._track(member_id)

    def assignor_members(
        self,
        members: Mapping[str, ConsumerGroupMember],
        metadata: SubscriptionMetadata,
        old_target: Mapping[str, Mapping[str, tuple[int, ...]]],
    ) -> dict[str, MemberSubscription]:
        """``members`` as the server-side assignor sees them under ``metadata`` and ``old_target``, in
        member-id order: the group's own entry wherever it was built from the very same member object,
        partition metadata and target object (every member a heartbeat did not change), else a new one."""
        kept = self.assignor_inputs if metadata == self.subscription_metadata else {}
        inputs = {}
        for member_id in sorted(members):
            member = members[member_id]
            target = old_target.get(member_id) or {}
            entry = kept.get(member_id)
            if entry is None or self.members.get(member_id) is not member or not _same_target(entry, target):
                entry = assignor_input(member, metadata, target)
            inputs[member_id] = entry
        return inputs

    def _refresh_assignor_input(self, member_id: str) -> None:
        member = self.members[member_id]
        target = self.target.get(member_id, {})
        self.assignor_inputs[member_id] = assignor_input(member, self.subscription_metadata, target)

    def _reconciled(self, member_id: str) -> bool:
        return self.members[member_id].is_reconciled_to(self.assignment_epoch)

    def _track(self, member_id: str) -> None:
        """Keep ``unreconciled`` (what makes the state Reconciling rather than Stable) in step."""
        if self._reconciled(member_id):
            self.unreconciled.discard(member_id)
        else:
            self.unreconciled.add(member_id)

    def _set_ownership(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None) -> None:
        """Keep ``partition_epochs`` (who holds what, at which epoch) in step with members."""
        epochs = self.partition_epochs
        if old is not None:
            for topic_id, parts in old.owned().items():
                held = epochs.get(topic_id)
                if held is None:
                    continue
                for p in parts:
                    held.pop(p, None)
                if not held:
                    del epochs[topic_id]
        if new is not None:
            for topic_id, parts in new.owned().items():
                held = epochs.setdefault(topic_id, {})
                for p in parts:
                    if p in held:
                        raise AssertionError(
                            f"partition {topic_id}-{p} given to {new.member_id} while held at epoch {held[p]}"
                        )
                    held[p] = new.member_epoch


def _same_target(entry: MemberSubscription, target: Mapping[str, tuple[int, ...]]) -> bool:
    """Whether ``entry`` was built from ``target``: the very object the group holds, or both empty."""
    return entry.target_partitions is target or not (entry.target_partitions or target)


_REPLAYERS: dict[type[RecordKey], Callable[[ConsumerGroup, Any, Any], None]] = {
    ConsumerGroupMetadataKey: ConsumerGroup._replay_metadata,
    ConsumerGroupPartitionMetadataKey: ConsumerGroup._replay_partition_metadata,
    ConsumerGroupMemberMetadataKey: ConsumerGroup._replay_member_metadata,
    ConsumerGroupTargetAssignmentMetadataKey: ConsumerGroup._replay_target_metadata,
    ConsumerGroupTargetAssignmentMemberKey: ConsumerGroup._replay_target_member,
    ConsumerGroupCurrentMemberAssignmentKey: ConsumerGroup._replay_current_assignment,
}


@dataclass
class AssignmentRound:
    """Client-side assignor mode: who was asked to compute the target, and what it saw.

    Not persisted (the KIP keeps the chosen member in memory only); a coordinator that
    fails over starts a fresh round as one of its load duties.
    """

    member_id: str
    notified: bool = False
    excluded: set[str] = field(default_factory=set)
    prepared: dict[int, dict[str, Any]] = field(default_factory=dict)
