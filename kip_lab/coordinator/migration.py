"""KIP-848 online migration: classic groups become consumer groups and back, members roll one by one.

* Upgrade: the first ConsumerGroupHeartbeat (epoch 0) into a classic group that is not in state
  Empty converts it, if ``group.consumer.migration.policy`` allows. One atomic batch writes the
  classic group's tombstone and the consumer group built from the last completed generation:
  group epoch = target epoch = every member's epoch = the generation, each member's target and
  current assignment = its classic assignment. The joining member's own records follow, as for
  any join; as Kafka writes no partition metadata at conversion, that join bumps the epoch (the
  ``kip`` profile writes it, and a member taking over its own classic identity does not bump).
* Classic members inside the consumer group are served by the consumer-group engine: their
  JoinGroup is a heartbeat carrying the subscription and the owned partitions from the embedded
  consumer protocol (and it reconciles them exactly like any member); the JoinGroup returns the
  member epoch as the generation; SyncGroup returns only what the member may own now (its
  ``assigned`` partitions: those still held by others are withheld, as Kafka does); Heartbeat
  answers REBALANCE_IN_PROGRESS when the member must rejoin. Each member keeps its JoinGroup
  session timeout and protocols (``classic_member_metadata``, Kafka's field). A member that was
  told to rejoin must JoinGroup within its rebalance timeout, and SyncGroup within it after its
  JoinGroup, or it is removed (Kafka's join and sync timeouts).
* Downgrade: when the last consumer-protocol member leaves (or is fenced or times out) and
  classic members remain, the group is converted back, if the policy allows: consumer-group
  tombstones and the classic group's ``GroupMetadataValue`` (generation = group epoch, each
  member's assignment = its target) in one batch; the classic group then rebalances.
"""

from __future__ import annotations

from dataclasses import replace

from kip_lab.assignors.java_hash_order import timeline_hash_map_order
from kip_lab.contract import checked, known
from kip_lab.coordinator.classic_group import ClassicGroup, ClassicGroupMember, ClassicGroupState, ClassicOutbox
from kip_lab.coordinator.group import ConsumerGroup, SubscriptionCounts
from kip_lab.coordinator.host import CoordinatorHost
from kip_lab.coordinator.member import Assignment, ConsumerGroupMember, ReconciliationState, fenced_instance_error
from kip_lab.coordinator.timers import TimerKey, timer_key
from kip_lab.protocol.classic_group import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveGroupResponseMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kip_lab.protocol.common import TopicPartitions
from kip_lab.protocol.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kip_lab.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolError,
    ConsumerProtocolSubscription,
)
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from kip_lab.runtime.log import Record
from kip_lab.runtime.result import CoordinatorResult

# KIP-848, 'Kafka Consumer Migration': members must speak the embedded consumer protocol v3+ (KIP-792).
# Kafka does not check the version; the ``kip`` profile does.
MIGRATION_MIN_CONSUMER_PROTOCOL_VERSION = 3


def decode_subscription(metadata: bytes, error: Errors, context: str) -> ConsumerProtocolSubscription:
    """A classic member's embedded subscription, or ``error`` (Kafka's error for where it is read) naming why not."""
    try:
        return ConsumerProtocolSubscription.decode(metadata)
    except ConsumerProtocolError as exc:
        raise ApiError(error, f"{context}: malformed embedded consumer protocol ({exc}).") from None


class OnlineMigration(CoordinatorHost):
    """Mixed into ``GroupCoordinator``: conversions, and classic members served by the consumer-group engine."""

    # ------------------------------------------------------------------ names <-> ids
    def _partitions_by_id(self, partitions: list[tuple[str, int]]) -> Assignment:
        """Embedded-protocol partitions (topic names) as topic id -> partitions; unknown topics are dropped."""
        out: dict[str, set[int]] = {}
        for name, partition in partitions:
            topic_id = self.cluster.topic_id(name)
            if topic_id is not None:
                out.setdefault(topic_id, set()).add(partition)
        return {t: frozenset(p) for t, p in out.items()}

    def _partitions_by_name(self, assignment: Assignment) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for topic_id, parts in assignment.items():
            topic = self.cluster.topic_by_id(topic_id)
            if topic is not None:
                out.extend((topic.name, p) for p in parts)
        return sorted(out)

    # ------------------------------------------------------------------ upgrade
    def _heartbeat_into_classic_group(self, r: ConsumerGroupHeartbeatRequest) -> CoordinatorResult:
        """A ConsumerGroupHeartbeat naming a classic group: reuse an Empty one's id, convert any other.

        Empty is the classic state, not "no members" (Kafka ``ClassicGroup.isEmpty``): a group whose
        members all left while it rebalances is converted — or refused — like a group with members.
        """
        classic = self.classic_groups[r.group_id]
        if r.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
            raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {r.group_id} is not a consumer group.")
        self._validate_heartbeat(r)
        out = ClassicOutbox()
        if classic.state is ClassicGroupState.EMPTY:
            conversion: tuple[Record, ...] = (classic.tombstone(),)
            result = self._heartbeat(r, group=ConsumerGroup(r.group_id))
        else:
            self._validate_online_upgrade(classic)
            records = self._conversion_records(classic)
            view = ConsumerGroup(r.group_id)
            for record in records:
                view.replay(record.key, record.value)
            result = self._heartbeat(r, group=view)
            conversion = (classic.tombstone(), *records)
            # Parked classic requests will not be answered by this generation: have them rejoin.
            for _, member in sorted(classic.members.items()):
                self._complete_join(
                    out, member, JoinGroupResponse(error_code=Errors.REBALANCE_IN_PROGRESS, member_id=member.member_id)
                )
                self._complete_sync(out, member, SyncGroupResponse(error_code=Errors.REBALANCE_IN_PROGRESS))
        self._cancel_classic_timers(r.group_id)
        converted = replace(
            result,
            batches=(conversion, *result.batches),
            deferred=self._split_responses(out, None, None)[1],
        )
        applied = self._apply(converted)
        group = self.groups[r.group_id]
        for member_id in sorted(classic.members):
            if member_id in group.members:
                self._schedule_session(r.group_id, group.members[member_id])
        return applied

    def _validate_online_upgrade(self, classic: ClassicGroup) -> None:
        """Kafka's ``validateOnlineUpgrade`` (GROUP_ID_NOT_FOUND)."""
        if not self.config.migration_policy.upgrade_enabled:
            raise ApiError(
                Errors.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {classic.group_id}: online upgrade is disabled "
                f"(group.consumer.migration.policy={self.config.migration_policy.value}).",
            )
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise ApiError(
                Errors.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {classic.group_id}: it does not use the consumer protocol.",
            )
        if len(classic.members) > self.config.max_size:
            raise ApiError(
                Errors.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {classic.group_id}: it exceeds the consumer group maximum size.",
            )

    def _require_migratable(self, subscription: ConsumerProtocolSubscription, member_id: str) -> None:
        """The ``kip`` profile's version rule (INVALID_REQUEST); Kafka accepts every version."""
        if self.config.fidelity == "kip" and subscription.version < MIGRATION_MIN_CONSUMER_PROTOCOL_VERSION:
            raise ApiError(
                Errors.INVALID_REQUEST,
                f"Member {member_id} uses consumer protocol v{subscription.version}; online migration needs "
                f"v{MIGRATION_MIN_CONSUMER_PROTOCOL_VERSION} or later.",
            )

    def _conversion_records(self, classic: ClassicGroup) -> list[Record]:
        """The consumer group a classic group becomes, everything at epoch = generation.

        Kafka's order (``ConsumerGroup.createConsumerGroupRecords``): every member's metadata, the
        group epoch, every member's target, the target epoch, every member's current assignment;
        within each kind, members as the new group's ``TimelineHashMap`` iterates them, having been put
        in the classic group's ``HashMap`` order (``ConsumerGroup.fromClassicGroup``).
        Kafka writes no partition metadata, so the joining member's heartbeat computes it and bumps
        the epoch. The ``kip`` profile writes it after the members (the KIP's case study does not
        bump when a member takes over its own classic identity).
        """
        generation = classic.generation_id
        converted: dict[str, ConsumerGroupMember] = {}
        for m in classic.kafka_order():
            member_id = m.member_id
            protocol = classic.protocol_name or m.protocol_names()[0]
            subscription = decode_subscription(
                m.metadata(protocol), Errors.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {classic.group_id}"
            )
            self._require_migratable(subscription, member_id)
            assigned = ConsumerProtocolAssignment.decode(m.assignment).assigned_partitions if m.assignment else []
            converted[member_id] = ConsumerGroupMember(
                member_id,
                instance_id=m.group_instance_id,
                rack_id=subscription.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(subscription.topics),
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                classic_member_metadata=_classic_metadata(m.session_timeout_ms, m.supported_protocols),
                member_epoch=generation,
                previous_member_epoch=generation,
                state=ReconciliationState.STABLE,
                assigned=self._partitions_by_id(assigned),
            )
        gid = classic.group_id
        members = [converted[member_id] for member_id in timeline_hash_map_order(converted)]
        records = [self._member_metadata_record(gid, m, generation) for m in members]
        if self.config.fidelity == "kip":
            metadata = self._subscription_metadata(SubscriptionCounts.of(converted.values()))
            records.append(self._partition_metadata_record(gid, metadata, generation))
        records.append(self._group_epoch_record(gid, generation))
        records += [
            self._target_member_record(gid, m.member_id, {t: tuple(sorted(p)) for t, p in m.assigned.items()})
            for m in members
        ]
        records.append(self._target_epoch_record(gid, generation))
        records += [self._current_assignment_record(gid, m) for m in members]
        return records

    # ------------------------------------------------------------------ downgrade
    def _downgrade_allowed(self, remaining: SubscriptionCounts, leaving: ConsumerGroupMember) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMember``: the last consumer-protocol member
        (``leaving``) goes and classic members remain (``remaining`` counts the members after it, as
        Kafka's ``ConsumerGroup.numClassicProtocolMembers`` does)."""
        return (
            not leaving.uses_classic_protocol
            and remaining.members > 0
            and remaining.classic_members == remaining.members
            and self.config.migration_policy.downgrade_enabled
            and remaining.members <= self.config.classic_max_size
        )

    def _downgrade(
        self, group: ConsumerGroup, leaving: ConsumerGroupMember | None, response, origin: str
    ) -> CoordinatorResult:
        """The consumer group's tombstones and the classic group it becomes (without ``leaving``), in one batch."""
        gid = group.group_id
        classic = ClassicGroup(
            gid,
            state=ClassicGroupState.STABLE,
            generation_id=group.group_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            current_state_timestamp=self.now_ms,
        )
        gone = leaving.member_id if leaving is not None else None
        remaining = {m: v for m, v in sorted(group.members.items()) if m != gone}
        for member_id, m in remaining.items():
            meta = m.classic_member_metadata
            assert meta is not None
            classic.add(
                ClassicGroupMember(
                    member_id=member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=meta.session_timeout_ms,
                    protocol_type=CONSUMER_PROTOCOL_TYPE,
                    supported_protocols=tuple(
                        JoinGroupRequestProtocol(name=p.name, metadata=p.metadata) for p in meta.supported_protocols
                    ),
                )
            )
        classic.protocol_name = classic.select_protocol()
        assignments = {}
        for member_id, classic_member in classic.members.items():
            version = decode_subscription(
                classic_member.metadata(classic.protocol_name),
                Errors.GROUP_ID_NOT_FOUND,
                f"Cannot downgrade group {gid}",
            ).version
            partitions = self._partitions_by_name(group.target_of(member_id))
            assignments[member_id] = ConsumerProtocolAssignment(
                version=version, assigned_partitions=partitions
            ).encode()
        for member_id in group.members:
            self._cancel_member_timers(gid, member_id)
        self._rounds.pop(gid, None)
        records = [*self._consumer_group_tombstones(group), classic.metadata_record(assignments)]
        return CoordinatorResult(response, (tuple(records),), origin=origin)

    def _start_downgraded_group(self, classic: ClassicGroup, rebalance: bool) -> None:
        """After a downgrade batch is replayed: arm the members' sessions and, when a member left,
        rebalance (soft state). A downgrade by a static replacement keeps the generation (Kafka)."""
        for member_id, member in sorted(classic.members.items()):
            self._schedule_classic_session(classic, member_id, member.session_timeout_ms)
        if not rebalance:
            return
        out = ClassicOutbox()
        self._prepare_rebalance(out, classic)
        assert not out.responses and not out.batches  # nobody was parked in a group that did not exist

    def _consumer_group_tombstones(self, group: ConsumerGroup) -> list[Record]:
        """Everything a consumer group wrote, tombstoned, in Kafka's order
        (``ConsumerGroup.createGroupTombstoneRecords``): current assignments, targets, the target
        epoch, member metadata, partition metadata, and the group epoch last (it marks the group dead).

        Targets are tombstoned for the members and for any entry a removed member left behind.
        """
        gid = group.group_id
        members = sorted(group.members)
        records = [Record(ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=m), None) for m in members]
        records += [
            Record(ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=m), None)
            for m in sorted(set(members) | set(group.target))
        ]
        records.append(Record(ConsumerGroupTargetAssignmentMetadataKey(group_id=gid), None))
        records += [Record(ConsumerGroupMemberMetadataKey(group_id=gid, member_id=m), None) for m in members]
        records.append(Record(ConsumerGroupPartitionMetadataKey(group_id=gid), None))
        records.append(Record(ConsumerGroupMetadataKey(group_id=gid), None))
        return records

    # ------------------------------------------------------------------ classic members, consumer group
    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, by_instance_alone: bool = False
    ) -> ConsumerGroupMember:
        """Kafka's ``validateConsumerGroupMember`` + ``throwIfMemberDoesNotUseClassicProtocol``.

        ``by_instance_alone``: a LeaveGroup may name a static member by instance id with an unknown
        member id (an administrator removing it); other requests must name its member id.
        """
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not in group {group.group_id}.")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is not in group {group.group_id}.")
            if member.member_id != member_id and not (by_instance_alone and member_id == UNKNOWN_MEMBER_ID):
                raise fenced_instance_error(member_id, instance_id, member.member_id)
        if not member.uses_classic_protocol:
            raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")
        return member

    def _waiting_on_unreleased(self, group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        """Whether some target partition the member lacks is still held by another member."""
        for topic_id, parts in group.target_of(member.member_id).items():
            for p in parts - member.assigned.get(topic_id, frozenset()):
                if group.partition_held(topic_id, p):
                    return True
        return False

    @staticmethod
    def _behind(epoch: int, member: ConsumerGroupMember) -> bool:
        return member.member_epoch < epoch and member.state is not ReconciliationState.UNREVOKED_PARTITIONS

    def _rejoin_epoch(self, group: ConsumerGroup) -> int:
        """The epoch a classic member must have reached not to be sent back to JoinGroup.

        The group epoch while a JoinGroup could compute the new target; while assignment
        batching holds the target back, the last target's epoch: only a newer target sends
        classic members of a mixed group back (KAFKA-20272), or they would rejoin for nothing.
        """
        return group.group_epoch if self._target_due(group.group_id) else group.assignment_epoch

    def _classic_member_must_rejoin(self, group: ConsumerGroup, member: ConsumerGroupMember, epoch: int) -> bool:
        """Kafka's three reasons to send a classic member back to JoinGroup, behind ``epoch``.

        Behind the group epoch (Kafka) decides the Heartbeat answer: a classic member's JoinGroup
        is what computes its new target. Behind the target epoch decides the state we show
        (docs/decisions.md M3): the KIP triggers a member's rebalance when its new target exists.
        """
        return (
            self._behind(epoch, member)
            or member.state is ReconciliationState.UNREVOKED_PARTITIONS
            or (
                member.state is ReconciliationState.UNRELEASED_PARTITIONS
                and not self._waiting_on_unreleased(group, member)
            )
        )

    @checked
    def classic_member_state(self, group_id: str, member_id: str) -> str | None:
        """The KIP's classic state of a classic member inside a consumer group, or None.

        CompletingRebalance from its JoinGroup until its SyncGroup; PreparingRebalance while it
        must rejoin; Stable otherwise. Derived (Kafka stores no such state), so it is soft.
        """
        known("GroupCoordinator.classic_member_state", "group_id", group_id, self.groups)
        group = self.groups[group_id]
        known("GroupCoordinator.classic_member_state", "member_id", member_id, group.members)
        member = group.members[member_id]
        if not member.uses_classic_protocol:
            return None
        if self.scheduler.deadline(self, timer_key("sync", group_id, member_id)) is not None:
            return ClassicGroupState.COMPLETING_REBALANCE.value
        if self._classic_member_must_rejoin(group, member, group.assignment_epoch):
            return ClassicGroupState.PREPARING_REBALANCE.value
        return ClassicGroupState.STABLE.value

    def _schedule_join_timeout_if_absent(self, group_id: str, member: ConsumerGroupMember) -> None:
        key = timer_key("join", group_id, member.member_id)
        if self.scheduler.deadline(self, key) is None:
            self.scheduler.schedule(self, key, member.rebalance_timeout_ms)

    def _fire_classic_member_timer(self, key: TimerKey) -> CoordinatorResult:
        """A classic member that did not rejoin (join) or sync (sync) in time is removed."""
        kind, group_id, member_id = key
        origin = f"classic {kind} timeout {group_id}/{member_id}"
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group else None
        if group is None or member is None or not member.uses_classic_protocol:
            return CoordinatorResult(None, origin=origin)
        return self._apply(self._remove_member(group, member, None, origin=origin))

    def _classic_join_to_consumer_group(self, group: ConsumerGroup, r: JoinGroupRequest) -> CoordinatorResult:
        try:
            return self._classic_join_consumer(group, r)
        except ApiError as exc:
            return CoordinatorResult(JoinGroupResponse(error_code=exc.error, member_id=r.member_id), origin="JoinGroup")

    def _supports_classic_protocols(self, group: ConsumerGroup, r: JoinGroupRequest) -> bool:
        """Kafka's ``ConsumerGroup.supportsClassicProtocols``: the consumer protocol type, and a
        protocol name every classic member of the group supports (the joining one included)."""
        names = {p.name for p in r.protocols}
        if r.protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        members = group.members.values()
        classic_metadata = [m.classic_member_metadata for m in members if m.classic_member_metadata is not None]
        return any(
            all(name in {p.name for p in metadata.supported_protocols} for metadata in classic_metadata)
            for name in names
        )

    def _classic_join_consumer(self, group: ConsumerGroup, r: JoinGroupRequest) -> CoordinatorResult:
        """Kafka's ``classicGroupJoinToConsumerGroup``, checks in its order, then a heartbeat on the engine."""
        self._check_classic_join(group, r)
        if r.member_id == UNKNOWN_MEMBER_ID and r.group_instance_id is None:
            return CoordinatorResult(
                JoinGroupResponse(error_code=Errors.MEMBER_ID_REQUIRED, member_id=self._new_member_id()),
                origin="JoinGroup",
            )
        known = group.members.get(r.member_id)
        static = group.static_member(r.group_instance_id) if r.group_instance_id is not None else None
        if r.group_instance_id is not None and r.member_id != UNKNOWN_MEMBER_ID:
            # A static member naming its member id must be the instance's current member (Kafka).
            if static is None:
                raise ApiError(
                    Errors.UNKNOWN_MEMBER_ID, f"Instance id {r.group_instance_id} is not in group {group.group_id}."
                )
            if static.member_id != r.member_id:
                raise fenced_instance_error(r.member_id, r.group_instance_id, static.member_id)
        subscription = decode_subscription(
            r.protocols[0].metadata, Errors.UNKNOWN_SERVER_ERROR, f"JoinGroup of member {r.member_id or 'unknown'}"
        )
        self._require_migratable(subscription, r.member_id or str(r.group_instance_id))
        heartbeat = self._classic_join_heartbeat(group.group_id, r, known, subscription)
        classic = _classic_metadata(r.session_timeout_ms, r.protocols)
        applied = self._apply(self._heartbeat(heartbeat, classic=classic))
        answer: ConsumerGroupHeartbeatResponse = applied.response
        if answer.error_code is not Errors.NONE:  # fenced while rejoining: removed
            response = JoinGroupResponse(error_code=answer.error_code, member_id=r.member_id)
            return CoordinatorResult(response, applied.batches, origin="JoinGroup")
        replaced = static if known is None else None
        return self._classic_joined(group.group_id, r, answer.member_id or r.member_id, replaced, applied)

    def _check_classic_join(self, group: ConsumerGroup, r: JoinGroupRequest) -> None:
        """The group has room (Kafka ``throwIfConsumerGroupIsFull``) and speaks the member's protocols."""
        if len(group.members) >= self.config.max_size and r.member_id not in group.members:
            raise ApiError(
                Errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )
        if not self._supports_classic_protocols(group, r):
            raise ApiError(Errors.INCONSISTENT_GROUP_PROTOCOL, f"Member {r.member_id}'s protocols are not supported.")

    def _classic_join_heartbeat(
        self,
        group_id: str,
        r: JoinGroupRequest,
        known: ConsumerGroupMember | None,
        subscription: ConsumerProtocolSubscription,
    ) -> ConsumerGroupHeartbeatRequest:
        """The JoinGroup as the consumer heartbeat it stands for: a join when the member is new, else a
        heartbeat at its epoch owning the partitions its subscription lists."""
        joining = known is None
        owned = self._partitions_by_id(subscription.owned_partitions)
        return ConsumerGroupHeartbeatRequest(
            group_id=group_id,
            member_id=r.member_id,
            member_epoch=JOIN_GROUP_MEMBER_EPOCH if known is None else known.member_epoch,
            instance_id=r.group_instance_id,
            rack_id=subscription.rack_id,
            rebalance_timeout_ms=r.rebalance_timeout_ms if r.rebalance_timeout_ms != -1 else r.session_timeout_ms,
            subscribed_topic_names=subscription.topics,
            topic_partitions=[]
            if joining
            else [TopicPartitions(topic_id=t, partitions=sorted(p)) for t, p in sorted(owned.items())],
            client_id=r.client_id,
            client_host=r.client_host,
        )

    def _classic_joined(
        self,
        group_id: str,
        r: JoinGroupRequest,
        member_id: str,
        replaced: ConsumerGroupMember | None,
        applied: CoordinatorResult,
    ) -> CoordinatorResult:
        """The JoinGroup response after the heartbeat went through; the sync timer starts, or a classic
        member that replaced the last consumer-protocol one turns the group back into a classic group."""
        current = self.groups[group_id]
        member = current.members[member_id]
        response = JoinGroupResponse(
            generation_id=member.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=r.protocols[0].name,
            member_id=member_id,
        )
        self.scheduler.cancel(self, timer_key("join", group_id, member_id))
        if replaced is not None and self._downgrade_allowed(current.subscriptions, replaced):
            # The group's generation goes on without a rebalance (Kafka
            # ``validateOnlineDowngradeWithReplacedMemberId``).
            converted = self._apply(
                self._downgrade(current, None, None, origin="JoinGroup"), rebalance_downgraded=False
            )
            return CoordinatorResult(response, applied.batches + converted.batches, origin="JoinGroup")
        self.scheduler.schedule(self, timer_key("sync", group_id, member_id), member.rebalance_timeout_ms)
        return CoordinatorResult(response, applied.batches, origin="JoinGroup")

    def _classic_sync_to_consumer_group(self, group: ConsumerGroup, r: SyncGroupRequest) -> CoordinatorResult:
        """Kafka's ``classicGroupSyncToConsumerGroup``: the response echoes the request's protocol
        type and name (null stays null) with the member's usable partitions."""
        try:
            member = self._classic_member(group, r.member_id, r.group_instance_id)
            if r.generation_id != member.member_epoch:
                raise ApiError(
                    Errors.ILLEGAL_GENERATION,
                    f"The request generation id {r.generation_id} is not equal to the member epoch "
                    f"{member.member_epoch} of member {member.member_id}.",
                )
            metadata = member.classic_member_metadata
            assert metadata is not None, "_classic_member answers only a member of the classic protocol"
            protocols = metadata.supported_protocols
            if (r.protocol_type is not None and r.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                r.protocol_name is not None and r.protocol_name != protocols[0].name
            ):
                raise ApiError(Errors.INCONSISTENT_GROUP_PROTOCOL)
            if self._behind(self._rejoin_epoch(group), member):
                self._schedule_join_timeout_if_absent(group.group_id, member)
                raise ApiError(Errors.REBALANCE_IN_PROGRESS)
            self.scheduler.cancel(self, timer_key("sync", group.group_id, member.member_id))
            self._schedule_session(group.group_id, member)
            version = ConsumerProtocolSubscription.decode(protocols[0].metadata).version  # checked at JoinGroup
            assignment = ConsumerProtocolAssignment(
                version=version, assigned_partitions=self._partitions_by_name(member.assigned)
            )
            response = SyncGroupResponse(
                protocol_type=r.protocol_type, protocol_name=r.protocol_name, assignment=assignment.encode()
            )
        except ApiError as exc:
            response = SyncGroupResponse(error_code=exc.error)
        return CoordinatorResult(response, origin="SyncGroup")

    def _classic_heartbeat_to_consumer_group(self, group: ConsumerGroup, r: HeartbeatRequest) -> CoordinatorResult:
        member = self._classic_member(group, r.member_id, r.group_instance_id)
        if r.generation_id != member.member_epoch:
            raise ApiError(Errors.ILLEGAL_GENERATION)
        self._schedule_session(group.group_id, member)
        error = Errors.NONE
        if self._classic_member_must_rejoin(group, member, self._rejoin_epoch(group)):
            error = Errors.REBALANCE_IN_PROGRESS
            self._schedule_join_timeout_if_absent(group.group_id, member)
        return CoordinatorResult(HeartbeatResponse(error_code=error), origin="Heartbeat")

    def _classic_leave_to_consumer_group(self, group: ConsumerGroup, r: LeaveGroupRequest) -> CoordinatorResult:
        """Kafka's ``classicGroupLeaveToConsumerGroup``: one batch for the whole request — each
        leaving member's removal records, in request order, then the partition metadata if it
        changed and one group-epoch bump. A classic member leaving never converts the group back
        (only the last consumer-protocol member's departure does)."""
        gid = group.group_id
        answers = []
        records: list[Record] = []
        leaving: dict[str, ConsumerGroupMember] = {}
        for identity in r.members:
            error = Errors.NONE
            member_id = identity.member_id
            try:
                member = self._classic_member(
                    group, identity.member_id, identity.group_instance_id, by_instance_alone=True
                )
                member_id = member.member_id
                records += self._departure_tombstones(gid, member_id)
                self._cancel_member_timers(gid, member_id)
                leaving[member_id] = member
            except ApiError as exc:
                error = exc.error
            answers.append(
                LeaveGroupResponseMember(
                    member_id=member_id, group_instance_id=identity.group_instance_id, error_code=error
                )
            )
        if records:
            remaining = group.subscriptions.changed(removed=[group.members[m] for m in leaving])
            records += self._departure_epoch_bump(group, remaining)
            if gid not in self._rounds and remaining.members and self._client_side_assignor(remaining) is not None:
                self._start_round(gid, {m: v for m, v in group.members.items() if m not in leaving})
        result = CoordinatorResult(LeaveGroupResponse(members=answers), (tuple(records),), origin="LeaveGroup")
        return self._apply(result)


def _classic_metadata(session_timeout_ms: int, protocols) -> ClassicMemberMetadata:
    return ClassicMemberMetadata(
        session_timeout_ms=session_timeout_ms,
        supported_protocols=[ClassicProtocol(name=p.name, metadata=p.metadata) for p in protocols],
    )
