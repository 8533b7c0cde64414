"""Share groups (KIP-932) at the group coordinator: ``ShareGroupManager``, held by ``GroupCoordinator``.

Same engine as consumer groups: a handler validates and computes, returns its records, and
only replaying them (``ShareGroup.replay``) changes state. What differs (KIP-932):

* membership: ShareGroupHeartbeat; no static members; a member moves to its target in one
  step (no revocation barrier; partitions may be shared), so a group is Stable with members;
* the SimpleAssignor, over the share-partitions that have persistent state;
* the initialize / delete dance with the share coordinator: a subscribed topic (or added
  partitions) gets InitializeShareGroupState for every new partition and only once all
  succeed does ShareGroupStatePartitionMetadata list it (and the group epoch move, so the
  next target includes it); a deleted topic, deleted offsets or a deleted group go through
  DeletingTopics, DeleteShareGroupState, then the record without them. Every step can be
  retried: the dance runs after each heartbeat, admin call and load.

``share_state_rpc`` is how the coordinator reaches the share coordinator: a function from a
persister request to its response (the Lab routes it to the ``__share_group_state`` leader).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from kip_lab.cluster import ClusterMetadata, Topic
from kip_lab.coordinator.config import CoordinatorConfig
from kip_lab.coordinator.group import group_snapshot_head
from kip_lab.coordinator.target_records import target_assignment_batch
from kip_lab.coordinator.timers import TimerKey, timer_key
from kip_lab.protocol.common import Message, TopicPartitions, to_topic_partitions
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.records import (
    PartitionMetadataTopic,
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
    StatePartitionTopic,
)
from kip_lab.protocol.share import (
    DeleteShareGroupStateRequest,
    DeleteStateData,
    DeleteStatePartition,
    InitializeShareGroupStateRequest,
    InitializeStateData,
    InitializeStatePartition,
    ReadShareGroupStateSummaryRequest,
    ReadStateData,
    ReadStatePartition,
)
from kip_lab.protocol.share_group import (
    SHARE_JOIN_MEMBER_EPOCH,
    SHARE_LEAVE_MEMBER_EPOCH,
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestTopic,
    AlterShareGroupOffsetsResponse,
    DeletedShareGroup,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
    DeleteShareGroupsRequest,
    DeleteShareGroupsResponse,
    DescribedShareGroup,
    DescribedShareMember,
    DescribedShareTopicPartitions,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ListedShareGroup,
    ListShareGroupsRequest,
    ListShareGroupsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatAssignment,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareOffsetsResponsePartition,
    ShareOffsetsResponseTopic,
)
from kip_lab.runtime.log import PartitionLog, Record
from kip_lab.runtime.result import CoordinatorResult
from kip_lab.runtime.scheduler import Scheduler, TimerOwner
from kip_lab.share.group import ShareGroup, ShareGroupMember, ShareGroupState, check_share_group_transition
from kip_lab.share.group_assignor import SimpleAssignor
from kip_lab.share.group_config import ShareGroupConfig

ShareStateRpc = Callable[[Message], Any]  # a persister request -> its response
TopicState = dict[str, tuple[str, frozenset[int]]]  # topic id -> (name, partitions)


def call_share_coordinator(share_coordinator: Any, request: Message) -> CoordinatorResult:
    """Send a persister request to the share coordinator's handler named after its RPC."""
    name = type(request).__name__.removesuffix("Request")
    handler = "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
    return getattr(share_coordinator, handler)(request)


def share_coordinator_rpc(share_coordinator: Any) -> ShareStateRpc:
    """``share_state_rpc`` for one share coordinator (tests; the Lab routes through its world)."""
    return lambda request: call_share_coordinator(share_coordinator, request).response


def _with_request_metadata(member: ShareGroupMember, r: ShareGroupHeartbeatRequest) -> ShareGroupMember:
    """The member with what the heartbeat sets; a field the request leaves null keeps its value."""
    return replace(
        member,
        rack_id=r.rack_id if r.rack_id is not None else member.rack_id,
        client_id=r.client_id or member.client_id,
        client_host=r.client_host or member.client_host,
        subscribed_topic_names=(
            tuple(sorted(set(r.subscribed_topic_names)))
            if r.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
    )


def _share_member_metadata(member: ShareGroupMember) -> tuple[object, ...]:
    """What the ShareGroupMemberMetadata record holds of a member."""
    return (member.rack_id, member.client_id, member.client_host, member.subscribed_topic_names)


def _reconciled_share_member(
    member: ShareGroupMember, target_epoch: int, target: dict[str, tuple[int, ...]]
) -> ShareGroupMember:
    """The member at its target: the target epoch and partitions (the previous epoch moves along)."""
    assigned = {t: frozenset(p) for t, p in target.items()}
    if member.member_epoch == target_epoch and member.assigned == assigned:
        return member
    return replace(member, member_epoch=target_epoch, previous_member_epoch=member.member_epoch, assigned=assigned)


def _initialize_offsets_data(
    topic: AlterShareGroupOffsetsRequestTopic, known: Topic, epoch: int
) -> InitializeStateData:
    """The partitions of ``topic`` that exist, at their new start offsets and the group's new epoch."""
    return InitializeStateData(
        topic_id=known.topic_id,
        partitions=[
            InitializeStatePartition(partition=p.partition_index, state_epoch=epoch, start_offset=p.start_offset)
            for p in topic.partitions
            if p.partition_index < known.num_partitions
        ],
    )


def _altered_offsets_topic(
    topic: AlterShareGroupOffsetsRequestTopic,
    known: Topic | None,
    errors: dict[tuple[str, int], tuple[Errors, str | None]],
) -> ShareOffsetsResponseTopic:
    """One topic of the AlterShareGroupOffsets answer: an unknown topic or partition, else the initialize's error."""
    if known is None:
        return ShareOffsetsResponseTopic(
            topic_name=topic.topic_name,
            partitions=[
                ShareOffsetsResponsePartition(
                    partition_index=p.partition_index, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION
                )
                for p in topic.partitions
            ],
        )
    partitions = []
    for p in topic.partitions:
        if p.partition_index >= known.num_partitions:
            code, message = Errors.UNKNOWN_TOPIC_OR_PARTITION, None
        else:
            code, message = errors.get((known.topic_id, p.partition_index), (Errors.NONE, None))
        partitions.append(
            ShareOffsetsResponsePartition(
                partition_index=p.partition_index, start_offset=p.start_offset, error_code=code, error_message=message
            )
        )
    return ShareOffsetsResponseTopic(topic_name=topic.topic_name, topic_id=known.topic_id, partitions=partitions)


def _described_offsets_partition(partition: int, summary: Any) -> ShareOffsetsResponsePartition:
    """One partition's start offset from its state summary; UNKNOWN_TOPIC_OR_PARTITION where it has none."""
    if summary is None:
        return ShareOffsetsResponsePartition(partition_index=partition, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION)
    return ShareOffsetsResponsePartition(
        partition_index=partition,
        start_offset=summary.start_offset,
        error_code=summary.error_code,
        error_message=summary.error_message,
    )


def _state_topics(topics: TopicState) -> list[StatePartitionTopic]:
    return [
        StatePartitionTopic(topic_id=tid, topic_name=name, partitions=sorted(parts))
        for tid, (name, parts) in sorted(topics.items())
    ]


class ShareGroupManager:
    """Share groups on one ``__consumer_offsets`` shard: their RPCs, records, timers and the dance.

    Its dependencies are given, not reached for: the share groups it replays into, the settings,
    the cluster, the log its records are appended to, the scheduler and the owner its session
    timers are armed for (the coordinator, whose ``fire_timer`` brings them back to
    ``fire_session_timer``), and three things shared with the other kinds of group: which kind
    holds a group id (one namespace), a fresh member id, and the assignment batching clock
    (``target_due``, and ``target_computed_at``, where a computed target is noted). It holds the
    share assignor, ``share_state_rpc`` to the share coordinator and the calls made through it.
    """

    def __init__(
        self,
        share_groups: dict[str, ShareGroup],
        *,
        config: CoordinatorConfig,
        cluster: ClusterMetadata,
        log: PartitionLog,
        scheduler: Scheduler,
        timer_owner: TimerOwner,
        group_kind: Callable[[str], str | None],
        new_member_id: Callable[[], str],
        target_due: Callable[[str, int], bool],
        target_computed_at: dict[str, int],
    ) -> None:
        self.share_groups = share_groups
        self.config = config
        self.cluster = cluster
        self.log = log
        self.scheduler = scheduler
        self.timer_owner = timer_owner
        self.group_kind = group_kind
        self.new_member_id = new_member_id
        self.target_due = target_due
        self.target_computed_at = target_computed_at
        self.share_assignor = SimpleAssignor(fidelity=config.fidelity)
        self.share_state_rpc: ShareStateRpc | None = None
        # (request, response) of every call to the share coordinator, oldest first; the Lab traces them.
        self.share_state_calls: list[tuple[Message, Any]] = []
        self._share_metadata_checked: dict[str, int] = {}

    @property
    def share_config(self) -> ShareGroupConfig:
        """The share-group settings: ``config.share``, so a failover (``from_log``) keeps them."""
        return self.config.share

    # ------------------------------------------------------------------ the engine path
    def _apply_share(self, result: CoordinatorResult) -> CoordinatorResult:
        """Append each batch, replay it, and check each touched group moved along its machine."""
        for batch in result.batches:
            if not batch:
                continue
            touched = sorted({r.key.group_id for r in batch})
            before = {
                g: self.share_groups[g].state if g in self.share_groups else ShareGroupState.EMPTY for g in touched
            }
            self.log.append(batch)
            for key, value in batch:
                self.replay(key, value)
            for g in touched:
                group = self.share_groups[g]
                check_share_group_transition(before[g], group.state)
                if group.dead:
                    del self.share_groups[g]
        return result

    def _write_share_batch(self, *records: Record) -> tuple[Record, ...]:
        """Append one batch and replay it at once: a step the next call to the share coordinator builds on."""
        self._apply_share(CoordinatorResult(None, (records,)))
        return records

    def replay(self, key: Any, value: Any) -> None:
        """A share group's record (``GroupCoordinator._replay`` hands them here, as does ``_apply_share``)."""
        group = self.share_groups.get(key.group_id)
        if group is None:
            group = self.share_groups[key.group_id] = ShareGroup(key.group_id)
        group.replay(key, value)

    def fire_session_timer(self, key: TimerKey) -> CoordinatorResult:
        """A member that did not heartbeat within the share session timeout is removed."""
        _, group_id, member_id = key
        group = self.share_groups.get(group_id)
        if group is None or member_id not in group.members:
            return CoordinatorResult(None, origin=f"share session timeout {group_id}/{member_id}")
        result = self._remove_share_member(group, group.members[member_id], None, f"share session timeout {member_id}")
        return self._apply_share(result)

    def load(self) -> list[CoordinatorResult]:
        """Failover duties: re-arm session timers and retry any unfinished dance; under ``fidelity="kip"``
        also bump the epoch of groups with members (KIP-932, 'Persistence and fail-over': "It will bump
        the group epoch"; Kafka's ``GroupMetadataManager.onLoaded`` does not)."""
        for dead in [g for g, v in self.share_groups.items() if v.dead]:
            del self.share_groups[dead]  # in place: the coordinator and its describer hold this very dict
        results = []
        for group_id in sorted(self.share_groups):
            group = self.share_groups[group_id]
            batches: tuple[tuple[Record, ...], ...] = ()
            for member_id in sorted(group.members):
                self._schedule_share_session(group_id, member_id)
            if group.members and self.config.fidelity == "kip":
                batches = ((self._share_epoch_record(group_id, group.group_epoch + 1),),)
            result = self._apply_share(CoordinatorResult(None, batches, origin=f"load share group {group_id}"))
            results.append(self._with_state_sync(result, group_id))
        return results

    def sync_share_state(self) -> list[CoordinatorResult]:
        """Run the initialize / delete dance for every share group (after ``share_state_rpc`` is set).

        A failover's load runs before the new coordinator can reach the share coordinator; this
        finishes what its predecessor left half done (a deletion in DeletingTopics, a topic not
        yet initialized), which an empty group would otherwise wait for forever (no heartbeats).
        """
        results = []
        for group_id in sorted(self.share_groups):
            result = self._with_state_sync(CoordinatorResult(None, origin=f"share state of {group_id}"), group_id)
            if result.batches:
                results.append(result)
        return results

    def _schedule_share_session(self, group_id: str, member_id: str) -> None:
        self.scheduler.schedule(
            self.timer_owner, timer_key("share-session", group_id, member_id), self.share_config.session_timeout_ms
        )

    def _share_group(self, group_id: str) -> ShareGroup:
        """The share group ``group_id`` or the error Kafka answers (GROUP_ID_NOT_FOUND)."""
        kind = self.group_kind(group_id)
        if kind is None:
            raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if kind != "share":
            raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        return self.share_groups[group_id]

    # ------------------------------------------------------------------ records
    @staticmethod
    def _share_epoch_record(group_id: str, epoch: int) -> Record:
        return Record(ShareGroupMetadataKey(group_id=group_id), ShareGroupMetadataValue(epoch=epoch))

    @staticmethod
    def _share_partition_metadata_record(group_id: str, metadata: dict[str, tuple[str, int]]) -> Record:
        topics = [
            PartitionMetadataTopic(topic_id=tid, topic_name=name, num_partitions=n)
            for name, (tid, n) in sorted(metadata.items())
        ]
        return Record(
            ShareGroupPartitionMetadataKey(group_id=group_id),
            ShareGroupPartitionMetadataValue(epoch=0, topics=topics),
        )

    @staticmethod
    def _share_member_record(group_id: str, member: ShareGroupMember) -> Record:
        return Record(
            ShareGroupMemberMetadataKey(group_id=group_id, member_id=member.member_id),
            ShareGroupMemberMetadataValue(
                rack_id=member.rack_id,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=list(member.subscribed_topic_names),
            ),
        )

    @staticmethod
    def _share_current_assignment_record(group_id: str, member: ShareGroupMember) -> Record:
        return Record(
            ShareGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member.member_id),
            # Built from the coordinator's own state, already valid: not validated again (model_construct).
            ShareGroupCurrentMemberAssignmentValue.model_construct(
                member_epoch=member.member_epoch,
                previous_member_epoch=member.previous_member_epoch,
                assigned_partitions=to_topic_partitions(member.assigned),
            ),
        )

    @staticmethod
    def _share_state_metadata_record(group_id: str, initialized: TopicState, deleting: TopicState) -> Record:
        return Record(
            ShareGroupStatePartitionMetadataKey(group_id=group_id),
            ShareGroupStatePartitionMetadataValue(
                initialized_topics=_state_topics(initialized), deleting_topics=_state_topics(deleting)
            ),
        )

    @staticmethod
    def _share_target_batch(
        group_id: str,
        old: dict[str, dict[str, tuple[int, ...]]],
        new: dict[str, dict[str, tuple[int, ...]]],
        epoch: int,
    ) -> tuple[Record, ...]:
        def member_record(member_id: str, target: dict[str, tuple[int, ...]] | None) -> Record:
            key = ShareGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id)
            if target is None:
                return Record(key, None)
            # The assignor's output, checked when computed: not validated again (model_construct).
            partitions = [
                TopicPartitions.model_construct(topic_id=t, partitions=list(p)) for t, p in sorted(target.items())
            ]
            return Record(key, ShareGroupTargetAssignmentMemberValue.model_construct(topic_partitions=partitions))

        metadata = Record(
            ShareGroupTargetAssignmentMetadataKey(group_id=group_id),
            ShareGroupTargetAssignmentMetadataValue(assignment_epoch=epoch),
        )
        return target_assignment_batch(old, new, member_record, metadata)

    # ------------------------------------------------------------------ heartbeat
    def share_group_heartbeat(
        self, request: ShareGroupHeartbeatRequest
    ) -> CoordinatorResult[ShareGroupHeartbeatResponse]:
        """ShareGroupHeartbeat: join, heartbeat, take the new assignment, leave."""
        try:
            result = self._share_heartbeat(request)
        except ApiError as error:
            response = ShareGroupHeartbeatResponse(
                error_code=error.error, error_message=error.message, member_epoch=request.member_epoch
            )
            return CoordinatorResult(response, origin="ShareGroupHeartbeat")
        return self._with_state_sync(self._apply_share(result), request.group_id)

    @staticmethod
    def _validate_share_heartbeat(r: ShareGroupHeartbeatRequest) -> None:
        """Kafka's ``GroupMetadataManager.throwIfShareGroupHeartbeatRequestIsInvalid`` (blank = empty or spaces)."""
        if not r.group_id.strip():
            raise ApiError(Errors.INVALID_REQUEST, "GroupId can't be empty.")
        if r.rack_id is not None and not r.rack_id.strip():
            raise ApiError(Errors.INVALID_REQUEST, "RackId can't be empty.")
        if r.member_epoch > 0 or r.member_epoch == SHARE_LEAVE_MEMBER_EPOCH:
            if not r.member_id.strip():
                raise ApiError(Errors.INVALID_REQUEST, "MemberId can't be empty.")
        elif r.member_epoch == SHARE_JOIN_MEMBER_EPOCH:
            if not r.subscribed_topic_names:
                raise ApiError(Errors.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        else:
            raise ApiError(Errors.INVALID_REQUEST, "MemberEpoch is invalid.")

    def _share_heartbeat(self, r: ShareGroupHeartbeatRequest) -> CoordinatorResult[ShareGroupHeartbeatResponse]:
        """The phases of Kafka's ``GroupMetadataManager.shareGroupHeartbeat``, each a named step."""
        self._validate_share_heartbeat(r)
        if r.member_epoch == SHARE_LEAVE_MEMBER_EPOCH:
            return self._share_group_leave(r)
        group = self._get_or_maybe_create_share_group(r)
        before, member = self._get_or_maybe_create_share_member(group, r)
        # A member that (re)joins at epoch 0 always bumps the epoch and gets its assignment written and sent.
        joining = r.member_epoch == SHARE_JOIN_MEMBER_EPOCH
        updated = _with_request_metadata(member, r)
        # 1. The member's metadata, the subscription metadata and the group epoch.
        records, group_epoch, metadata = self._share_member_and_epoch_records(group, before, updated, joining)
        batches = [records] if records else []
        # 2. A new target assignment if the group epoch has moved past it and, with batching
        #    (Kafka 4.3), share_assignment_interval_ms has passed since the last one.
        target_epoch, target = group.assignment_epoch, group.target
        due = self.target_due(group.group_id, self.config.share_assignment_interval_ms)
        if group_epoch > group.assignment_epoch and due:
            members = {**group.members, updated.member_id: updated}
            target, target_epoch = self._share_target(group, members, metadata), group_epoch
            batches.append(self._share_target_batch(group.group_id, group.target, target, group_epoch))
            self.target_computed_at[group.group_id] = self.scheduler.now_ms
        # 3. Reconcile: no revocation barrier, the member takes its target in one step (KIP-932).
        reconciled = _reconciled_share_member(updated, target_epoch, target.get(updated.member_id, {}))
        if (
            before is None
            or joining
            or (reconciled.member_epoch, reconciled.assigned) != (before.member_epoch, before.assigned)
        ):
            batches.append((self._share_current_assignment_record(group.group_id, reconciled),))
        self._schedule_share_session(group.group_id, updated.member_id)
        send_assignment = before is None or joining or reconciled.assigned != before.assigned
        response = self._share_heartbeat_response(reconciled, send_assignment)
        return CoordinatorResult(response, tuple(batches), origin="ShareGroupHeartbeat")

    def _share_group_leave(self, r: ShareGroupHeartbeatRequest) -> CoordinatorResult[ShareGroupHeartbeatResponse]:
        """Member epoch -1: the member leaves (Kafka's ``GroupMetadataManager.shareGroupLeave``)."""
        self._require_share_group_id(r.group_id)
        group = self.share_groups.get(r.group_id)
        if group is None:
            raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {r.group_id} not found.")
        member = group.member(r.member_id)
        response = ShareGroupHeartbeatResponse(member_id=r.member_id, member_epoch=SHARE_LEAVE_MEMBER_EPOCH)
        return self._remove_share_member(group, member, response, "ShareGroupHeartbeat")

    def _require_share_group_id(self, group_id: str) -> None:
        """A heartbeat may create a share group, but not take over the id of another kind of group."""
        if self.group_kind(group_id) not in (None, "share"):
            raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")

    def _get_or_maybe_create_share_group(self, r: ShareGroupHeartbeatRequest) -> ShareGroup:
        """The share group, or a new empty one for a joining member (Kafka's ``getOrMaybeCreateShareGroup``).

        A new group exists only once this heartbeat's records are replayed.
        """
        self._require_share_group_id(r.group_id)
        group = self.share_groups.get(r.group_id)
        if group is not None:
            return group
        if r.member_epoch != SHARE_JOIN_MEMBER_EPOCH:
            raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Share group {r.group_id} not found.")
        return ShareGroup(r.group_id)

    def _get_or_maybe_create_share_member(
        self, group: ShareGroup, r: ShareGroupHeartbeatRequest
    ) -> tuple[ShareGroupMember | None, ShareGroupMember]:
        """(the member as the group knows it, or None; the member this heartbeat starts from).

        A join (epoch 0) may not exceed ``max_size``; a join with a known member id is a new
        incarnation of it, with nothing assigned (docs/decisions.md SG4). Any other epoch must be
        the member's current or previous one (Kafka's ``throwIfShareGroupMemberEpochIsInvalid``):
        otherwise FENCED_MEMBER_EPOCH, and the member stays.
        """
        if r.member_epoch == SHARE_JOIN_MEMBER_EPOCH:
            member_id = r.member_id or self.new_member_id()
            known = group.members.get(member_id)
            if known is None and len(group.members) >= self.share_config.max_size:
                raise ApiError(
                    Errors.GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of {self.share_config.max_size} members.",
                )
            if known is None:
                return None, ShareGroupMember(member_id)
            return known, replace(known, member_epoch=0, assigned={})
        member = group.member(r.member_id)
        received, current = r.member_epoch, member.member_epoch
        if received > current or (received < current and received != member.previous_member_epoch):
            side = "greater" if received > current else "smaller"
            raise ApiError(
                Errors.FENCED_MEMBER_EPOCH,
                f"The share group member has a {side} member epoch ({received}) than the one "
                f"known by the group coordinator ({current}). The member must abandon all its partitions "
                "and rejoin.",
            )
        return member, member

    def _share_member_and_epoch_records(
        self,
        group: ShareGroup,
        before: ShareGroupMember | None,
        updated: ShareGroupMember,
        joining: bool,
    ) -> tuple[tuple[Record, ...], int, dict[str, tuple[str, int]]]:
        """Phase 1: (records, the group epoch after them, the subscription metadata).

        The member's metadata record if it is new or changed; the subscription metadata is
        recomputed (from the group's subscription counts with this member's change) when the
        subscriptions changed or the cluster moved since the last check, and written if it differs;
        either bumps the group epoch (Kafka's ``hasMemberSubscriptionChanged``).
        """
        group_id = group.group_id
        records: list[Record] = []
        if before is None or _share_member_metadata(before) != _share_member_metadata(updated):
            records.append(self._share_member_record(group_id, updated))
        bump = before is None or joining or before.subscribed_topic_names != updated.subscribed_topic_names
        metadata = group.subscription_metadata
        if bump or self._share_metadata_checked.get(group_id) != self.cluster.version:
            metadata = self._share_subscription_metadata(group.subscribed_topic_names_with(before, updated))
            if metadata != group.subscription_metadata:
                records.append(self._share_partition_metadata_record(group_id, metadata))
                bump = True
        self._share_metadata_checked[group_id] = self.cluster.version
        group_epoch = group.group_epoch + int(bump)
        if bump:
            records.append(self._share_epoch_record(group_id, group_epoch))
        return tuple(records), group_epoch, metadata

    def _share_heartbeat_response(self, member: ShareGroupMember, send_assignment: bool) -> ShareGroupHeartbeatResponse:
        """The member's id and epoch; its assignment only when it (re)joined or the assignment changed."""
        assignment = None
        if send_assignment:
            assignment = ShareGroupHeartbeatAssignment(topic_partitions=to_topic_partitions(member.assigned))
        return ShareGroupHeartbeatResponse(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.share_config.heartbeat_interval_ms,
            assignment=assignment,
        )

    def _share_subscription_metadata(self, subscribed_topic_names: Iterable[str]) -> dict[str, tuple[str, int]]:
        """The subscribed topics that exist in the cluster, by name."""
        out = {}
        for name in sorted(subscribed_topic_names):
            if name in self.cluster:
                topic = self.cluster.topic(name)
                out[name] = (topic.topic_id, topic.num_partitions)
        return out

    def _share_target(
        self, group: ShareGroup, members: dict[str, ShareGroupMember], metadata: dict[str, tuple[str, int]]
    ) -> dict[str, dict[str, tuple[int, ...]]]:
        """The SimpleAssignor over the subscribed share-partitions that have state (docs/decisions.md SG5)."""
        assignable: dict[str, tuple[int, ...]] = {}
        for _, (topic_id, count) in sorted(metadata.items()):
            entry = group.initialized.get(topic_id)
            assignable[topic_id] = () if entry is None else tuple(p for p in sorted(entry[1]) if p < count)
        subscriptions = {
            m: frozenset(metadata[n][0] for n in member.subscribed_topic_names if n in metadata)
            for m, member in members.items()
        }
        current = {m: group.target_of(m) for m in members}
        return self.share_assignor.assign(subscriptions, assignable, current)

    def _remove_share_member(
        self, group: ShareGroup, member: ShareGroupMember, response: Any, origin: str
    ) -> CoordinatorResult:
        """Leave, fencing or session timeout: tombstones, then a group epoch bump."""
        group_id = group.group_id
        self.scheduler.cancel(self.timer_owner, timer_key("share-session", group_id, member.member_id))
        records = [
            Record(ShareGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member.member_id), None),
            Record(ShareGroupMemberMetadataKey(group_id=group_id, member_id=member.member_id), None),
        ]
        metadata = self._share_subscription_metadata(group.subscribed_topic_names_with(member, None))
        if metadata != group.subscription_metadata:
            records.append(self._share_partition_metadata_record(group_id, metadata))
        records.append(self._share_epoch_record(group_id, group.group_epoch + 1))
        return CoordinatorResult(response, (tuple(records),), origin=origin)

    # ------------------------------------------------------------------ the initialize / delete dance
    def _call_share_state(self, request: Message) -> Any:
        response = self.share_state_rpc(request)  # type: ignore[misc]
        self.share_state_calls.append((request, response))
        return response

    @staticmethod
    def _first_error(response: Any) -> Errors:
        """The first partition's error in a persister response, or NONE."""
        return next((p.error_code for t in response.results for p in t.partitions if p.error_code), Errors.NONE)

    def _with_state_sync(self, result: CoordinatorResult, group_id: str) -> CoordinatorResult:
        """``result`` followed by whatever the initialize / delete dance wrote for the group."""
        extra = self._sync_share_state(group_id)
        if not extra:
            return result
        return CoordinatorResult(result.response, result.batches + extra, origin=result.origin)

    def _sync_share_state(self, group_id: str) -> tuple[tuple[Record, ...], ...]:
        """Reconcile the persisted share-partitions with the subscriptions and the cluster: delete, then initialize."""
        group = self.share_groups.get(group_id)
        if group is None or self.share_state_rpc is None:
            return ()
        deleted = self._finish_share_state_deletions(group)
        initialized = self._initialize_share_state(self.share_groups[group_id])
        return tuple(batch for batch in (deleted, initialized) if batch is not None)

    def _finish_share_state_deletions(self, group: ShareGroup) -> tuple[Record, ...] | None:
        """Delete unfinished deletions and the state of topics that no longer exist (their absence is the marker).

        The batch written once the share coordinator has deleted them (a vanished topic also bumps the epoch).
        """
        gone = {tid: v for tid, v in group.initialized.items() if self.cluster.topic_by_id(tid) is None}
        pending = {**gone, **group.deleting}
        if not pending or self._delete_state(group.group_id, pending) is not Errors.NONE:
            return None
        initialized = {t: v for t, v in group.initialized.items() if t not in pending}
        batch = [self._share_state_metadata_record(group.group_id, initialized, {})]
        if gone:
            batch.append(self._share_epoch_record(group.group_id, group.group_epoch + 1))
        return self._write_share_batch(*batch)

    def _initialize_share_state(self, group: ShareGroup) -> tuple[Record, ...] | None:
        """Initialize subscribed topics without state, and partitions added to topics with state.

        The batch written once the share coordinator has initialized them all: the topics join
        ShareGroupStatePartitionMetadata and the group epoch moves, so the next target includes them.
        """
        wanted: dict[str, list[InitializeStatePartition]] = {}
        grown: TopicState = dict(group.initialized)
        for name, (topic_id, count) in sorted(group.subscription_metadata.items()):
            if topic_id in group.deleting:
                continue
            have = group.initialized.get(topic_id, (name, frozenset()))[1]
            # A topic new to the group starts unset (-1, auto.offset.reset decides); added partitions start at 0.
            start = -1 if topic_id not in group.initialized else 0
            new = [p for p in range(count) if p not in have]
            if new:
                wanted[topic_id] = [
                    InitializeStatePartition(partition=p, state_epoch=group.group_epoch, start_offset=start)
                    for p in new
                ]
                grown[topic_id] = (name, have | frozenset(new))
        if not wanted:
            return None
        request = InitializeShareGroupStateRequest(
            group_id=group.group_id,
            topics=[InitializeStateData(topic_id=t, partitions=ps) for t, ps in sorted(wanted.items())],
        )
        if self._first_error(self._call_share_state(request)) is not Errors.NONE:
            return None
        batch = (
            self._share_state_metadata_record(group.group_id, grown, group.deleting),
            self._share_epoch_record(group.group_id, group.group_epoch + 1),
        )
        return self._write_share_batch(*batch)

    def _delete_state(self, group_id: str, topics: TopicState) -> Errors:
        """DeleteShareGroupState for these topics' partitions; the first error, or NONE."""
        if self.share_state_rpc is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        request = DeleteShareGroupStateRequest(
            group_id=group_id,
            topics=[
                DeleteStateData(topic_id=tid, partitions=[DeleteStatePartition(partition=p) for p in sorted(parts)])
                for tid, (_, parts) in sorted(topics.items())
            ],
        )
        return self._first_error(self._call_share_state(request))

    # ------------------------------------------------------------------ describe / list / delete
    def share_group_describe(self, request: ShareGroupDescribeRequest) -> CoordinatorResult[ShareGroupDescribeResponse]:
        groups = []
        for group_id in request.group_ids:
            try:
                group = self._share_group(group_id)
            except ApiError as error:
                groups.append(
                    DescribedShareGroup(group_id=group_id, error_code=error.error, error_message=error.message)
                )
                continue
            members = [
                DescribedShareMember(
                    member_id=m.member_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    assignment=[
                        DescribedShareTopicPartitions(
                            topic_id=t, topic_name=group.topic_name_of(t) or "", partitions=sorted(p)
                        )
                        for t, p in sorted(m.assigned.items())
                    ],
                )
                for _, m in sorted(group.members.items())
            ]
            groups.append(
                DescribedShareGroup(
                    group_id=group_id,
                    group_state=group.state.value,
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor_name=self.share_assignor.name,
                    members=members,
                )
            )
        return CoordinatorResult(ShareGroupDescribeResponse(groups=groups), origin="ShareGroupDescribe")

    def list_share_groups(self, request: ListShareGroupsRequest) -> CoordinatorResult[ListShareGroupsResponse]:
        wanted = {s.lower() for s in request.states_filter}
        listed = [
            ListedShareGroup(group_id=g, group_state=v.state.value)
            for g, v in sorted(self.share_groups.items())
            if not wanted or v.state.value.lower() in wanted
        ]
        return CoordinatorResult(ListShareGroupsResponse(groups=listed), origin="ListShareGroups")

    def _empty_share_group(self, group_id: str) -> ShareGroup:
        """The share group, which must have no members: deleting it or its offsets, or altering them."""
        group = self._share_group(group_id)
        if group.state is not ShareGroupState.EMPTY:
            raise ApiError(Errors.NON_EMPTY_GROUP, f"Share group {group.group_id} is not empty.")
        return group

    def delete_share_groups(self, request: DeleteShareGroupsRequest) -> CoordinatorResult[DeleteShareGroupsResponse]:
        """Only an empty group: its state goes to DeletingTopics, is deleted, then the group's tombstones."""
        results, batches = [], []
        for group_id in request.groups_names:
            try:
                group = self._empty_share_group(group_id)
                if group.initialized:
                    marked = (self._share_state_metadata_record(group_id, {}, {**group.deleting, **group.initialized}),)
                    batches.append(self._write_share_batch(*marked))
                error = self._delete_state(group_id, group.deleting) if group.deleting else Errors.NONE
                if error is not Errors.NONE:
                    raise ApiError(error, "The share coordinator did not delete the share state.")
                tombstones = [
                    Record(ShareGroupTargetAssignmentMemberKey(group_id=group_id, member_id=m), None)
                    for m in sorted(group.target)
                ]
                tombstones += [
                    Record(ShareGroupTargetAssignmentMetadataKey(group_id=group_id), None),
                    Record(ShareGroupPartitionMetadataKey(group_id=group_id), None),
                    Record(ShareGroupStatePartitionMetadataKey(group_id=group_id), None),
                    Record(ShareGroupMetadataKey(group_id=group_id), None),
                ]
                batches.append(self._write_share_batch(*tombstones))
                self._share_metadata_checked.pop(group_id, None)
                results.append(DeletedShareGroup(group_id=group_id))
            except ApiError as error:
                results.append(
                    DeletedShareGroup(group_id=group_id, error_code=error.error, error_message=error.message)
                )
        return CoordinatorResult(DeleteShareGroupsResponse(results=results), tuple(batches), origin="DeleteShareGroups")

    # ------------------------------------------------------------------ share-partition start offsets
    def alter_share_group_offsets(
        self, request: AlterShareGroupOffsetsRequest
    ) -> CoordinatorResult[AlterShareGroupOffsetsResponse]:
        """Reset SPSOs of an empty group: bump the epoch, then Initialize with the new state epoch."""
        try:
            group = self._empty_share_group(request.group_id)
        except ApiError as error:
            return CoordinatorResult(
                AlterShareGroupOffsetsResponse(error_code=error.error, error_message=error.message),
                origin="AlterShareGroupOffsets",
            )
        epoch = group.group_epoch + 1
        batches = [self._write_share_batch(self._share_epoch_record(group.group_id, epoch))]
        asked = [(topic, self._topic_or_none(topic.topic_name)) for topic in request.topics]
        initialize = [
            (known, _initialize_offsets_data(topic, known, epoch)) for topic, known in asked if known is not None
        ]
        grown: TopicState = dict(group.initialized)
        for known, data in initialize:
            have = grown.get(known.topic_id, (known.name, frozenset()))[1]
            grown[known.topic_id] = (known.name, have | frozenset(p.partition for p in data.partitions))
        errors = self._initialize_offsets(group.group_id, [data for _, data in initialize])
        if grown != group.initialized and all(code == Errors.NONE for code, _ in errors.values()):
            record = self._share_state_metadata_record(group.group_id, grown, group.deleting)
            batches.append(self._write_share_batch(record))
        return CoordinatorResult(
            AlterShareGroupOffsetsResponse(responses=[_altered_offsets_topic(t, known, errors) for t, known in asked]),
            tuple(batches),
            origin="AlterShareGroupOffsets",
        )

    def _topic_or_none(self, name: str) -> Topic | None:
        return self.cluster.topic(name) if name in self.cluster else None

    def _initialize_offsets(
        self, group_id: str, topics: list[InitializeStateData]
    ) -> dict[tuple[str, int], tuple[Errors, str | None]]:
        """InitializeShareGroupState at the new start offsets: (topic id, partition) -> (error, message)."""
        if not topics:
            return {}
        if self.share_state_rpc is None:
            return {
                (t.topic_id, p.partition): (Errors.COORDINATOR_NOT_AVAILABLE, "No share coordinator.")
                for t in topics
                for p in t.partitions
            }
        answer = self._call_share_state(InitializeShareGroupStateRequest(group_id=group_id, topics=topics))
        return {
            (t.topic_id, p.partition): (p.error_code, p.error_message) for t in answer.results for p in t.partitions
        }

    def delete_share_group_offsets(
        self, request: DeleteShareGroupOffsetsRequest
    ) -> CoordinatorResult[DeleteShareGroupOffsetsResponse]:
        """Remove whole topics' state from an empty group: Deleting, DeleteShareGroupState, then gone."""
        try:
            group = self._empty_share_group(request.group_id)
        except ApiError as error:
            return CoordinatorResult(
                DeleteShareGroupOffsetsResponse(error_code=error.error, error_message=error.message),
                origin="DeleteShareGroupOffsets",
            )
        by_name = {name: tid for tid, (name, _) in group.initialized.items()}
        chosen: TopicState = {}
        out = []
        for name in request.topic_names:
            tid = by_name.get(name)
            if tid is None:
                out.append(
                    DeleteShareGroupOffsetsResponseTopic(
                        topic_name=name,
                        error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=f"Topic {name} has no share state in group {group.group_id}.",
                    )
                )
            else:
                chosen[tid] = group.initialized[tid]
        batches = []
        if chosen:
            remaining = {t: v for t, v in group.initialized.items() if t not in chosen}
            marked = self._share_state_metadata_record(group.group_id, remaining, {**group.deleting, **chosen})
            batches.append(self._write_share_batch(marked))
            code = self._delete_state(group.group_id, chosen)
            if code is Errors.NONE:
                done = self._share_state_metadata_record(group.group_id, remaining, {})
                batches.append(self._write_share_batch(done))
            for tid, (name, _) in sorted(chosen.items(), key=lambda kv: request.topic_names.index(kv[1][0])):
                out.append(DeleteShareGroupOffsetsResponseTopic(topic_name=name, topic_id=tid, error_code=code))
        return CoordinatorResult(
            DeleteShareGroupOffsetsResponse(responses=out),
            tuple(batches),
            origin="DeleteShareGroupOffsets",
        )

    def describe_share_group_offsets(
        self, request: DescribeShareGroupOffsetsRequest
    ) -> CoordinatorResult[DescribeShareGroupOffsetsResponse]:
        """Each share-partition's start offset, read from the share coordinator (not the leaders)."""
        try:
            group = self._share_group(request.group_id)
        except ApiError as error:
            return CoordinatorResult(
                DescribeShareGroupOffsetsResponse(error_code=error.error, error_message=error.message),
                origin="DescribeShareGroupOffsets",
            )
        asked: list[tuple[str, str | None, list[int]]]
        if request.topics is None:
            asked = [(name, tid, sorted(parts)) for tid, (name, parts) in sorted(group.initialized.items())]
        else:
            by_name = {name: tid for tid, (name, _) in group.initialized.items()}
            asked = [(t.topic_name, by_name.get(t.topic_name), t.partitions) for t in request.topics]
        summary = self._read_start_offsets(group.group_id, asked)
        out = [
            ShareOffsetsResponseTopic(
                topic_name=name,
                topic_id=tid,
                partitions=[
                    _described_offsets_partition(p, summary.get((tid, p)) if tid is not None else None) for p in parts
                ],
            )
            for name, tid, parts in asked
        ]
        return CoordinatorResult(DescribeShareGroupOffsetsResponse(responses=out), origin="DescribeShareGroupOffsets")

    def _read_start_offsets(
        self, group_id: str, asked: list[tuple[str, str | None, list[int]]]
    ) -> dict[tuple[str, int], Any]:
        """ReadShareGroupStateSummary for the known topics asked: (topic id, partition) -> its summary."""
        query = [
            ReadStateData(topic_id=tid, partitions=[ReadStatePartition(partition=p) for p in parts])
            for _, tid, parts in asked
            if tid is not None and parts
        ]
        if not query or self.share_state_rpc is None:
            return {}
        answer = self._call_share_state(ReadShareGroupStateSummaryRequest(group_id=group_id, topics=query))
        return {(t.topic_id, p.partition): p for t in answer.results for p in t.partitions}

    # ------------------------------------------------------------------ inspection
    def share_state_snapshot(self) -> dict[str, Any]:
        """Everything the log determines about share groups, as plain sorted data."""
        out = {}
        for group_id in sorted(self.share_groups):
            g = self.share_groups[group_id]
            out[group_id] = {
                **group_snapshot_head(g),
                "members": {
                    m: (
                        v.rack_id,
                        v.client_id,
                        v.subscribed_topic_names,
                        v.member_epoch,
                        v.previous_member_epoch,
                        {t: sorted(p) for t, p in sorted(v.assigned.items())},
                    )
                    for m, v in sorted(g.members.items())
                },
                "initialized": {t: (n, sorted(p)) for t, (n, p) in sorted(g.initialized.items())},
                "deleting": {t: (n, sorted(p)) for t, (n, p) in sorted(g.deleting.items())},
            }
        return out
