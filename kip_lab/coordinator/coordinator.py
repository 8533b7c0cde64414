"""The KIP-848 group coordinator: one ``__consumer_offsets`` shard, one request at a time.

Every public handler is named after its RPC. A handler validates, computes on the current
state *without changing it*, and returns a ``CoordinatorResult`` whose record batches are
then appended to the log and replayed — replay (``ConsumerGroup.replay``) is the only code
that changes group state. Timers (session, rebalance, client-side assignment deadlines) fire
on the scheduler's manual clock and go through the same path.

This module holds the heartbeat path, timers, replay and failover. OffsetCommit/OffsetFetch
(``offsets.OffsetManager``), the describe and list RPCs (``describe.GroupDescriber``) and share
groups (``share_group.ShareGroupManager``) are objects the coordinator holds, each given what it
uses; the client-side assignor mode (``client_side``), the classic protocol (``classic``) and
online migration between the two group types (``migration``) are mixed in from their own
modules (``host`` says why). Where the KIP is silent the behaviour
follows Apache Kafka's ``GroupMetadataManager``; each such choice is in ``docs/decisions.md``.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Annotated, Any, cast

from pydantic import Field

from kip_lab.assignors import (
    AssignmentSpec,
    MapOrder,
    PartitionAssignor,
    PartitionAssignorError,
    TopicMetadata,
)
from kip_lab.assignors.builtin import assignor_names_problem, builtin_assignors
from kip_lab.assignors.java_hash_order import string_key_order
from kip_lab.cluster import ClusterMetadata
from kip_lab.contract import LONG_MAX, checked, refuse
from kip_lab.coordinator.classic import ClassicGroupHandlers
from kip_lab.coordinator.classic_group import UNLOAD_TRIGGER, ClassicGroup, ClassicGroupState
from kip_lab.coordinator.client_side import ClientSideAssignment
from kip_lab.coordinator.config import CoordinatorConfig
from kip_lab.coordinator.describe import GroupDescriber
from kip_lab.coordinator.group import (
    AssignmentRound,
    ConsumerGroup,
    GroupState,
    SubscriptionCounts,
    SubscriptionMetadata,
    TargetPartitions,
    check_group_transition,
    group_snapshot_head,
)
from kip_lab.coordinator.member import Assignment, ConsumerGroupMember, ReconciliationState, fenced_instance_error
from kip_lab.coordinator.migration import OnlineMigration
from kip_lab.coordinator.offsets import CommittingGroup, GroupOffsets, OffsetAnswers, OffsetManager
from kip_lab.coordinator.reconciliation import reconcile
from kip_lab.coordinator.share_group import ShareGroupManager, ShareStateRpc
from kip_lab.coordinator.target_records import target_assignment_batch
from kip_lab.coordinator.timers import TimerKey, TimerKind, timer_key
from kip_lab.protocol.classic_group import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kip_lab.protocol.common import Message, TopicPartitions, from_topic_partitions, to_topic_partitions
from kip_lab.protocol.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    HeartbeatAssignment,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.records import (
    SHARE_GROUP_RECORD_KEYS,
    ClassicMemberMetadata,
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
    OffsetCommitKey,
    PartitionMetadataTopic,
)
from kip_lab.protocol.share_group import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupsRequest,
    DeleteShareGroupsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ListShareGroupsRequest,
    ListShareGroupsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kip_lab.regex import InvalidRegex, compile_subscription
from kip_lab.runtime.collector import collector_paused
from kip_lab.runtime.log import PartitionLog, Record
from kip_lab.runtime.memo import Memo
from kip_lab.runtime.result import CoordinatorResult
from kip_lab.runtime.scheduler import Scheduler
from kip_lab.share.group import ShareGroup
from kip_lab.share.group_assignor import SimpleAssignor
from kip_lab.share.group_config import ShareGroupConfig


def _fresh(member: ConsumerGroupMember) -> ConsumerGroupMember:
    """The member with no assignment and epoch 0, as after a (re)join."""
    return replace(
        member,
        member_epoch=0,
        previous_member_epoch=-1,
        state=ReconciliationState.STABLE,
        assigned={},
        pending_revocation={},
    )


def _metadata_fields(member: ConsumerGroupMember) -> tuple:
    return (
        member.instance_id,
        member.rack_id,
        member.client_id,
        member.client_host,
        member.subscribed_topic_names,
        member.subscribed_topic_regex,
        member.client_assignors,
        member.server_assignor,
        member.rebalance_timeout_ms,
        member.classic_member_metadata,
    )


def _metadata_fields_changed(member: ConsumerGroupMember, updated: ConsumerGroupMember) -> bool:
    """Whether the update changed a field the member metadata record holds."""
    return updated is not member and _metadata_fields(updated) != _metadata_fields(member)


def _assignment_fields(member: ConsumerGroupMember) -> tuple:
    return (member.member_epoch, member.previous_member_epoch, member.state, member.assigned, member.pending_revocation)


@dataclass(slots=True)
class _FoundMember:
    """Phase 2's answer: the member a heartbeat speaks for, before the request's changes."""

    member_id: str
    member: ConsumerGroupMember
    joining: bool
    released: Assignment = field(default_factory=dict)  # what an old incarnation gives up with this request
    rejoining: bool = False  # ``kip``: a known member's epoch-0 rejoin, recreated afresh
    replaced: str | None = None  # the static member this one replaces
    records: list[Record] = field(default_factory=list)  # the replacement's records, written first


@dataclass(slots=True)
class _EpochUpdate:
    """Phase 3's answer: the new group epoch, the group as it will be, and the records saying so."""

    group_epoch: int
    updated: ConsumerGroupMember  # the member with the request's changes
    subscriptions: SubscriptionCounts  # the group's, with this member updated
    metadata: SubscriptionMetadata
    target_due: bool  # batching allows a new target now
    client_side: bool  # the group uses a client-side assignor
    records: list[Record]


def _invalid(message: str) -> ApiError:
    return ApiError(Errors.INVALID_REQUEST, message)


def _blank(value: str | None) -> bool:
    """Kafka's ``throwIfEmptyString``: set, but only whitespace."""
    return value is not None and not value.strip()


def _validate_epoch_fields(r: ConsumerGroupHeartbeatRequest, kip: bool) -> None:
    """The fields each kind of heartbeat must carry: a join, a heartbeat or leave, a static member's leave."""
    if r.member_epoch > 0 or r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if _blank(r.member_id):
            raise _invalid("MemberId can't be empty.")
    elif r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        _validate_join_fields(r, kip)
    elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if _blank(r.member_id):
            raise _invalid("MemberId can't be empty.")
        if r.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    else:
        raise _invalid("MemberEpoch is invalid.")


def _validate_join_fields(r: ConsumerGroupHeartbeatRequest, kip: bool) -> None:
    """A join (epoch 0) carries a rebalance timeout and a subscription, and owns nothing."""
    if r.rebalance_timeout_ms == -1:
        raise _invalid("RebalanceTimeoutMs must be provided in first request.")
    if kip and r.rebalance_timeout_ms <= 0:
        raise _invalid("RebalanceTimeoutMs must be greater than 0.")
    if r.topic_partitions is None or r.topic_partitions:
        raise _invalid("TopicPartitions must be empty when (re-)joining.")
    if kip and not r.subscribed_topic_names and not r.subscribed_topic_regex:
        raise _invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
        raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")


def _validate_subscription_fields(r: ConsumerGroupHeartbeatRequest, kip: bool) -> None:
    """Topic names and regex: exclusive under ``kip``; the regex must compile."""
    if kip and r.subscribed_topic_names and r.subscribed_topic_regex:
        raise _invalid("SubscribedTopicNames and SubscribedTopicRegex cannot be used together.")
    if not r.subscribed_topic_regex:
        return
    try:
        compile_subscription(r.subscribed_topic_regex)
    except InvalidRegex as exc:
        if kip:
            raise _invalid(f"SubscribedTopicRegex is invalid: {exc}") from None
        raise ApiError(
            Errors.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{r.subscribed_topic_regex}` is not a valid regular expression: {exc.reason}.",
        ) from None


def _validate_client_assignors(r: ConsumerGroupHeartbeatRequest) -> None:
    """Client-side assignors (KIP-848 "Request Validation"): not beside a server assignor, versions in order."""
    if r.server_assignor is not None and r.client_assignors:
        raise _invalid("ServerAssignor and ClientAssignors cannot be used together.")
    for assignor in r.client_assignors or ():
        if not assignor.name:
            raise _invalid("Assignor name can't be empty.")
        if assignor.minimum_version < -1:
            raise _invalid(f"Assignor {assignor.name}: MinimumVersion must be >= -1.")
        if assignor.maximum_version < 0 or assignor.maximum_version < assignor.minimum_version:
            raise _invalid(f"Assignor {assignor.name}: MaximumVersion must be >= 0 and >= MinimumVersion.")
        if not assignor.minimum_version <= assignor.metadata_version <= assignor.maximum_version:
            raise _invalid(f"Assignor {assignor.name}: MetadataVersion must lie in [MinimumVersion, MaximumVersion].")


def _group_with(
    members: dict[str, ConsumerGroupMember], found: _FoundMember, updated: ConsumerGroupMember
) -> dict[str, ConsumerGroupMember]:
    """The group's members with this one updated (and the static member it replaces gone)."""
    view = {m: v for m, v in members.items() if m != found.replaced}
    view[found.member_id] = updated
    return view


def _members_without(group: ConsumerGroup, member_id: str) -> dict[str, ConsumerGroupMember]:
    """The group's members but one: what a client-side round chooses from when that one leaves."""
    return {m: v for m, v in group.members.items() if m != member_id}


def _subscriptions_with(group: ConsumerGroup, found: _FoundMember, updated: ConsumerGroupMember) -> SubscriptionCounts:
    """The group's subscription counts with this member updated (and the static member it replaces gone),
    from the kept counts and these members alone (Kafka ``ModernGroup.computeSubscribedTopicNames``)."""
    old = [group.members[m] for m in dict.fromkeys((found.member_id, found.replaced)) if m in group.members]
    return group.subscriptions.changed(removed=old, added=[updated])


def _is_steady(r: ConsumerGroupHeartbeatRequest) -> bool:
    """A steady heartbeat carries none of the optional fields: the member is unchanged."""
    return (
        r.instance_id is None
        and r.rack_id is None
        and not r.client_id
        and not r.client_host
        and r.rebalance_timeout_ms == -1
        and r.subscribed_topic_names is None
        and r.subscribed_topic_regex is None
        and r.server_assignor is None
        and r.client_assignors is None
    )


def _given(value: Any, current: Any) -> Any:
    """The request's value when it sets the field (not None), else the member's."""
    return value if value is not None else current


def _is_full_request(r: ConsumerGroupHeartbeatRequest) -> bool:
    """A join, or a request carrying the rebalance timeout, subscription and owned partitions (sent
    after an error): its response carries the assignment even when unchanged (Kafka
    ``consumerGroupHeartbeat``'s full-request check)."""
    if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        return True
    subscribed = r.subscribed_topic_names is not None or r.subscribed_topic_regex is not None
    return r.rebalance_timeout_ms != -1 and subscribed and r.topic_partitions is not None


def _heartbeat_assignment(reconciled: ConsumerGroupMember, target: Assignment) -> HeartbeatAssignment:
    """The assignment sent to the member; pending partitions are those of its target still held by others."""
    pending = {}
    if reconciled.state is ReconciliationState.UNRELEASED_PARTITIONS:
        pending = {t: p - reconciled.assigned.get(t, frozenset()) for t, p in target.items()}
    return HeartbeatAssignment(
        assigned_topic_partitions=to_topic_partitions(reconciled.assigned),
        pending_topic_partitions=to_topic_partitions(pending),
    )


def _steady_response(
    member_id: str | None, member_epoch: int, heartbeat_interval_ms: int, should_compute: bool
) -> ConsumerGroupHeartbeatResponse:
    """The answer to a heartbeat that changes nothing for the member (no assignment to send): a frozen
    value, built once per member and epoch (``GroupCoordinator._steady_responses``, which buys about
    20% of bench_coordinator's steady-heartbeat rate)."""
    return ConsumerGroupHeartbeatResponse(
        member_id=member_id,
        member_epoch=member_epoch,
        heartbeat_interval_ms=heartbeat_interval_ms,
        should_compute_assignment=should_compute,
    )


class GroupCoordinator(ClientSideAssignment, ClassicGroupHandlers, OnlineMigration):
    """KIP-848 consumer groups on one ``__consumer_offsets`` partition (and classic groups: ``classic_groups``)."""

    @checked
    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        cluster: ClusterMetadata | None = None,
        *,
        assignors: Sequence[PartitionAssignor] | None = None,
        scheduler: Scheduler | None = None,
        log: PartitionLog | None = None,
        seed: int = 0,
    ) -> None:
        self._config = config or CoordinatorConfig()
        self.cluster = cluster if cluster is not None else ClusterMetadata()
        # Assignor objects given here (a custom assignor) win over the names in the config.
        chosen = list(assignors) if assignors is not None else builtin_assignors(self._config.assignors)
        problem = assignor_names_problem([a.name for a in chosen])
        if problem is not None:
            raise refuse("GroupCoordinator", "assignors", problem)
        self.assignors: dict[str, PartitionAssignor] = {a.name: a for a in chosen}
        self.scheduler = scheduler if scheduler is not None else Scheduler()
        self.log = log if log is not None else PartitionLog()
        self.groups: dict[str, ConsumerGroup] = {}
        self.classic_groups: dict[str, ClassicGroup] = {}
        self._initial_delays: dict[str, tuple[int, int]] = {}  # classic group -> (delay, remaining) ms
        self.offsets: dict[str, GroupOffsets] = {}
        self._rng = random.Random(seed)
        self._rounds: dict[str, AssignmentRound] = {}
        self._rebalance_epochs: dict[tuple[str, str], int] = {}
        self._metadata_checked: dict[str, int] = {}  # group id -> cluster.version last compared
        self._target_computed_at: dict[str, int] = {}  # group id -> when its last target was computed (ms)
        self.load_results: list[CoordinatorResult] = []
        self._steady_responses = Memo(_steady_response, limit=1 << 12)
        self._offset_answers = OffsetAnswers()
        self.share_groups: dict[str, ShareGroup] = {}
        self.share_manager = ShareGroupManager(
            self.share_groups,
            config=self.config,
            cluster=self.cluster,
            log=self.log,
            scheduler=self.scheduler,
            timer_owner=self,
            group_kind=self._group_kind,
            new_member_id=self._new_member_id,
            target_due=self._target_due,
            target_computed_at=self._target_computed_at,
        )
        self._compose()

    @property
    def config(self) -> CoordinatorConfig:
        """The settings; a new one reaches every part."""
        return self._config

    @config.setter
    def config(self, config: CoordinatorConfig) -> None:
        self._config = config
        self.share_manager.config = config
        self._compose()

    def _compose(self) -> None:
        """Build the parts that are objects of their own over this coordinator's state, each given what it uses."""
        self.offset_manager = OffsetManager(
            self.offsets,
            cluster=self.cluster,
            group=self._committing_group,
            classic_groups=self.classic_groups,
            keep_session=self._keep_classic_session,
            clock=self.scheduler,
            metadata_max_bytes=self.config.offset_metadata_max_bytes,
            answers=self._offset_answers,
        )
        self.describer = GroupDescriber(
            groups=self.groups,
            classic_groups=self.classic_groups,
            share_groups=self.share_groups,
            cluster=self.cluster,
            client_side_assignor=self._client_side_assignor,
            preferred_server_assignor=self._preferred_server_assignor,
            partitions_by_name=self._partitions_by_name,
        )

    def __getstate__(self) -> dict[str, Any]:
        """What a copy or a snapshot holds: the state, not the composed parts (they hold nothing but
        references to it, and ``__setstate__`` builds them again)."""
        return {k: v for k, v in self.__dict__.items() if k not in _COMPOSED_PARTS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._compose()

    # ------------------------------------------------------------------ requests answered by composed parts
    @checked
    def offset_commit(self, request: OffsetCommitRequest) -> CoordinatorResult[OffsetCommitResponse]:
        """OffsetCommit (``OffsetManager.commit``), its records applied."""
        return self._apply(self.offset_manager.commit(request))

    @checked
    def delete_groups(self, request: DeleteGroupsRequest) -> CoordinatorResult[DeleteGroupsResponse]:
        """DeleteGroups (Kafka ``GroupCoordinatorShard.deleteGroups``): each empty group is deleted
        with its committed offsets (their tombstones, then the group's); a group with members is
        NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND. Share groups go to the share manager."""
        results: list[DeletableGroupResult] = []
        records: list[Record] = []
        batches: list[tuple[Record, ...]] = []
        for group_id in request.groups_names:
            if group_id in self.share_groups:
                shared = self.delete_share_groups(DeleteShareGroupsRequest(groups_names=[group_id]))
                batches += shared.batches
                error = shared.response.results[0].error_code
            else:
                error = self._deletable_group_error(group_id)
            if error is Errors.NONE and group_id not in self.share_groups:
                records += [
                    Record(OffsetCommitKey(group=group_id, topic=topic, partition=partition), None)
                    for topic, partition in self.offsets.get(group_id, {})
                ]
                if group_id in self.groups:
                    records += self._consumer_group_tombstones(self.groups[group_id])
                elif group_id in self.classic_groups:
                    records.append(self.classic_groups[group_id].tombstone())
            results.append(DeletableGroupResult(group_id=group_id, error_code=error))
        result = CoordinatorResult(DeleteGroupsResponse(results=results), (tuple(records),), origin="DeleteGroups")
        deleted = self._apply(result) if records else result
        return replace(deleted, batches=tuple(batches) + deleted.batches)

    def _deletable_group_error(self, group_id: str) -> Errors:
        """Kafka ``ConsumerGroup.validateDeleteGroup`` / ``ClassicGroup.validateDeleteGroup``."""
        group = self.groups.get(group_id)
        classic = self.classic_groups.get(group_id)
        if group is not None:
            return Errors.NONE if group.state is GroupState.EMPTY else Errors.NON_EMPTY_GROUP
        if classic is not None:
            if classic.state is ClassicGroupState.DEAD:
                return Errors.GROUP_ID_NOT_FOUND
            return Errors.NONE if classic.state is ClassicGroupState.EMPTY else Errors.NON_EMPTY_GROUP
        return Errors.NONE if self.offsets.get(group_id) else Errors.GROUP_ID_NOT_FOUND

    @checked
    def offset_fetch(self, request: OffsetFetchRequest) -> CoordinatorResult[OffsetFetchResponse]:
        """OffsetFetch (``OffsetManager.fetch``)."""
        return self.offset_manager.fetch(request)

    @checked
    def consumer_group_describe(
        self, request: ConsumerGroupDescribeRequest
    ) -> CoordinatorResult[ConsumerGroupDescribeResponse]:
        """ConsumerGroupDescribe (``GroupDescriber.consumer_group_describe``)."""
        return self.describer.consumer_group_describe(request)

    @checked
    def list_groups(self, request: ListGroupsRequest) -> CoordinatorResult[ListGroupsResponse]:
        """ListGroups v5 (``GroupDescriber.list_groups``)."""
        return self.describer.list_groups(request)

    @checked
    def describe_groups(self, request: DescribeGroupsRequest) -> CoordinatorResult[DescribeGroupsResponse]:
        """DescribeGroups (``GroupDescriber.describe_groups``)."""
        return self.describer.describe_groups(request)

    @checked
    def share_group_heartbeat(
        self, request: ShareGroupHeartbeatRequest
    ) -> CoordinatorResult[ShareGroupHeartbeatResponse]:
        """ShareGroupHeartbeat (``ShareGroupManager.share_group_heartbeat``)."""
        return self.share_manager.share_group_heartbeat(request)

    @checked
    def share_group_describe(self, request: ShareGroupDescribeRequest) -> CoordinatorResult[ShareGroupDescribeResponse]:
        """ShareGroupDescribe (``ShareGroupManager.share_group_describe``)."""
        return self.share_manager.share_group_describe(request)

    @checked
    def list_share_groups(self, request: ListShareGroupsRequest) -> CoordinatorResult[ListShareGroupsResponse]:
        """ListShareGroups (``ShareGroupManager.list_share_groups``)."""
        return self.share_manager.list_share_groups(request)

    @checked
    def delete_share_groups(self, request: DeleteShareGroupsRequest) -> CoordinatorResult[DeleteShareGroupsResponse]:
        """DeleteShareGroups (``ShareGroupManager.delete_share_groups``)."""
        return self.share_manager.delete_share_groups(request)

    @checked
    def alter_share_group_offsets(
        self, request: AlterShareGroupOffsetsRequest
    ) -> CoordinatorResult[AlterShareGroupOffsetsResponse]:
        """AlterShareGroupOffsets (``ShareGroupManager.alter_share_group_offsets``)."""
        return self.share_manager.alter_share_group_offsets(request)

    @checked
    def delete_share_group_offsets(
        self, request: DeleteShareGroupOffsetsRequest
    ) -> CoordinatorResult[DeleteShareGroupOffsetsResponse]:
        """DeleteShareGroupOffsets (``ShareGroupManager.delete_share_group_offsets``)."""
        return self.share_manager.delete_share_group_offsets(request)

    @checked
    def describe_share_group_offsets(
        self, request: DescribeShareGroupOffsetsRequest
    ) -> CoordinatorResult[DescribeShareGroupOffsetsResponse]:
        """DescribeShareGroupOffsets (``ShareGroupManager.describe_share_group_offsets``)."""
        return self.share_manager.describe_share_group_offsets(request)

    def sync_share_state(self) -> list[CoordinatorResult]:
        """The initialize / delete dance for every share group (``ShareGroupManager.sync_share_state``)."""
        return self.share_manager.sync_share_state()

    def share_state_snapshot(self) -> dict[str, Any]:
        """Everything the log determines about share groups (``ShareGroupManager.share_state_snapshot``)."""
        return self.share_manager.share_state_snapshot()

    @property
    def share_config(self) -> ShareGroupConfig:
        """The share-group settings (``ShareGroupManager.share_config``)."""
        return self.share_manager.share_config

    @property
    def share_state_rpc(self) -> ShareStateRpc | None:
        """How share groups reach the share coordinator (``ShareGroupManager.share_state_rpc``)."""
        return self.share_manager.share_state_rpc

    @share_state_rpc.setter
    def share_state_rpc(self, rpc: ShareStateRpc | None) -> None:
        self.share_manager.share_state_rpc = rpc

    @property
    def share_assignor(self) -> SimpleAssignor:
        """The share groups' assignor (``ShareGroupManager.share_assignor``)."""
        return self.share_manager.share_assignor

    @share_assignor.setter
    def share_assignor(self, assignor: SimpleAssignor) -> None:
        self.share_manager.share_assignor = assignor

    @property
    def share_state_calls(self) -> list[tuple[Message, Any]]:
        """Every call to the share coordinator, oldest first (``ShareGroupManager.share_state_calls``)."""
        return self.share_manager.share_state_calls

    def _fire_share_timer(self, key: TimerKey) -> CoordinatorResult:
        """A share member's session timeout (``ShareGroupManager.fire_session_timer``)."""
        return self.share_manager.fire_session_timer(key)

    def _group_kind(self, group_id: str) -> str | None:
        """Which kind of group holds ``group_id``: one namespace, one kind per id (KIP-932)."""
        if group_id in self.share_groups:
            return "share"
        if group_id in self.groups:
            return "consumer"
        if group_id in self.classic_groups:
            return "classic"
        return None

    def _committing_group(self, group_id: str) -> CommittingGroup | None:
        """The group of any kind holding ``group_id`` (Kafka ``GroupMetadataManager.group``), or None."""
        for groups in (self.share_groups, self.groups, self.classic_groups):
            group = groups.get(group_id)
            if group is not None:
                return group
        return None

    def _reject_share_group_id(self, group_id: str) -> None:
        """Called by the other kinds' handlers: a share group's id is not theirs."""
        if group_id in self.share_groups:
            raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    # ------------------------------------------------------------------ construction
    @classmethod
    @checked
    def from_log(
        cls,
        log: PartitionLog,
        config: CoordinatorConfig | None = None,
        cluster: ClusterMetadata | None = None,
        *,
        assignors: Sequence[PartitionAssignor] | None = None,
        scheduler: Scheduler | None = None,
        seed: int = 0,
        load: bool = True,
    ) -> GroupCoordinator:
        """Failover: rebuild every group from ``log`` alone, then run the load duties.

        Load duties (KIP-848 "Failover"): re-arm session timers (and the rebalance timers
        of members still revoking), re-check partition metadata and regex subscriptions
        against the cluster (a change bumps the group epoch), and compute a new target
        where the group epoch is ahead of the assignment epoch. Their results are in
        ``load_results``. ``load=False`` stops after the replay: the state exactly as the
        log describes it, for inspection and time travel (no timers armed, nothing written).
        """
        coordinator = cls(config, cluster, assignors=assignors, scheduler=scheduler, log=log, seed=seed)
        # A new coordinator must not hand out its predecessor's member ids again.
        coordinator._rng = random.Random(f"{seed}:{log.end_offset}")
        with collector_paused():  # every replayed object survives: the collector's passes would find nothing
            for entry in log:
                coordinator._replay(entry.record)
        for dead in [gid for gid, g in coordinator.groups.items() if g.dead]:
            del coordinator.groups[dead]  # in place: the composed parts hold this very dict
        if load:
            coordinator.load_results = [coordinator._load_group(gid) for gid in sorted(coordinator.groups)]
            coordinator.load_results += coordinator.share_manager.load()
            for classic in coordinator.classic_groups.values():
                for member_id, member in sorted(classic.members.items()):
                    coordinator._schedule_classic_session(classic, member_id, member.session_timeout_ms)
        else:
            for dead in [g for g, v in coordinator.share_groups.items() if v.dead]:
                del coordinator.share_groups[dead]
        return coordinator

    def _load_group(self, group_id: str) -> CoordinatorResult[None]:
        group = self.groups[group_id]
        for member in group.members.values():
            self._schedule_session(group_id, member)
            if member.state is ReconciliationState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance(group_id, member)
        batches: list[tuple[Record, ...]] = []
        metadata = self._subscription_metadata(group.subscriptions)
        self._metadata_checked[group_id] = self.cluster.version
        group_epoch = group.group_epoch
        if metadata != group.subscription_metadata:
            group_epoch += 1
            batches.append(
                (
                    self._partition_metadata_record(group_id, metadata, group_epoch),
                    self._group_epoch_record(group_id, group_epoch),
                )
            )
        if group_epoch > group.assignment_epoch and group.members:
            if self._client_side_assignor(group.subscriptions) is None:
                try:
                    _, target_batch = self._compute_target(
                        group, group.members, group.subscriptions, metadata, group_epoch
                    )
                    batches.append(target_batch)
                    self._target_computed_at[group_id] = self.now_ms
                except ApiError:  # e.g. an assignor this coordinator lacks: each heartbeat reports it
                    pass
            else:
                self._start_round(group_id, group.members)
        return self._apply(CoordinatorResult(None, tuple(batches), origin=f"load {group_id}"))

    # ------------------------------------------------------------------ the engine path
    @property
    def now_ms(self) -> int:
        return self.scheduler.now_ms

    @checked
    def advance(self, delta_ms: Annotated[int, Field(ge=0, le=LONG_MAX)]) -> list[CoordinatorResult]:
        """Move the clock forward, firing due timers; returns the results they produced."""
        return [fired.result for fired in self.scheduler.advance(delta_ms) if fired.owner is self]

    def _apply(self, result: CoordinatorResult, rebalance_downgraded: bool = True) -> CoordinatorResult:
        """Append each batch to the log, then replay it: the only way consumer-group state changes.

        A classic group's records (``replay_records=False``) persist soft state its handler
        already changed: they are appended only. A ``GroupMetadataValue`` that *is* replayed
        comes from a downgrade, and the rebuilt classic group then starts rebalancing — unless
        ``rebalance_downgraded`` is False (a static member's replacement keeps the generation).
        """
        for batch in result.batches:
            if not batch:
                continue
            if not result.replay_records:
                self.log.append(batch)
                continue
            if result.origin == "OffsetCommit":  # offset values only: no group state to re-derive or check
                self.log.append(batch)
                self.offset_manager.replay(batch)
                continue
            touched = sorted({r.key.group_id for r in batch if type(r.key) not in (OffsetCommitKey, GroupMetadataKey)})
            before = {gid: (self.groups[gid].state if gid in self.groups else GroupState.EMPTY) for gid in touched}
            self.log.append(batch)
            for record in batch:
                self._replay(record)
            for gid in touched:
                group = self.groups[gid]
                check_group_transition(before[gid], group.state)
                if group.dead:
                    del self.groups[gid]
            for record in batch:
                if type(record.key) is GroupMetadataKey and record.value is not None:
                    self._start_downgraded_group(self.classic_groups[record.key.group], rebalance_downgraded)
        return result

    def _replay(self, record: Record) -> None:
        key = record.key
        if isinstance(key, GroupMetadataKey):
            old = self.classic_groups.pop(key.group, None)
            if old is not None:  # deleted or converted: what still holds the old object sees it Dead
                old.transition_to(ClassicGroupState.DEAD, UNLOAD_TRIGGER, self.now_ms)
            if record.value is not None:
                self.classic_groups[key.group] = ClassicGroup.from_record(key.group, record.value)
            return
        if isinstance(key, OffsetCommitKey):
            self.offset_manager.replay((record,))
            return
        if isinstance(key, SHARE_GROUP_RECORD_KEYS):
            self.share_manager.replay(key, record.value)
            return
        group = self.groups.get(key.group_id)
        if group is None or (group.dead and record.value is not None):
            # (a dead group seen again in the log was converted away and back: start afresh)
            group = self.groups[key.group_id] = ConsumerGroup(key.group_id)
        group.replay(key, record.value)

    def fire_timer(self, key: Hashable) -> CoordinatorResult:
        """Run the handler of a due timer (the scheduler calls this); ``_TIMER_HANDLERS`` maps each kind."""
        timer = cast(TimerKey, key)  # every timer this coordinator arms has a ``timer_key``
        return _TIMER_HANDLERS[timer[0]](self, timer)

    def _fire_session_timer(self, key: TimerKey) -> CoordinatorResult:
        """A member that did not heartbeat within its session timeout is removed."""
        kind, group_id, member_id = key
        group, member = self._timer_member(group_id, member_id)
        if group is None or member is None:
            return CoordinatorResult(None, origin=f"{kind} timeout {group_id}/{member_id}")
        return self._apply(self._remove_member(group, member, None, origin=f"session timeout {member_id}"))

    def _fire_rebalance_timer(self, key: TimerKey) -> CoordinatorResult:
        """A member still revoking partitions at the epoch the timer was armed for is removed."""
        kind, group_id, member_id = key
        group, member = self._timer_member(group_id, member_id)
        epoch = self._rebalance_epochs.pop((group_id, member_id), None) if group is not None else None
        if (
            group is None
            or member is None
            or member.member_epoch != epoch
            or member.state is not ReconciliationState.UNREVOKED_PARTITIONS
        ):
            return CoordinatorResult(None, origin=f"{kind} timeout {group_id}/{member_id}")
        return self._apply(self._remove_member(group, member, None, origin=f"rebalance timeout {member_id}"))

    def _fire_assignment_timer(self, key: TimerKey) -> CoordinatorResult:
        """The member computing a client-side assignment took too long: another one is asked."""
        kind, group_id, member_id = key
        group = self.groups.get(group_id)
        if group is None:
            return CoordinatorResult(None, origin=f"{kind} timeout {group_id}/{member_id}")
        round_ = self._rounds.get(group_id)
        if round_ is not None and round_.member_id == member_id:
            round_.excluded.add(member_id)
            self._choose_computing_member(group_id, group.members, round_)
        return CoordinatorResult(None, origin=f"client assignment timeout {member_id}")

    def _timer_member(self, group_id: str, member_id: str) -> tuple[ConsumerGroup | None, ConsumerGroupMember | None]:
        group = self.groups.get(group_id)
        return group, group.members.get(member_id) if group else None

    def _schedule_session(self, group_id: str, member: ConsumerGroupMember) -> None:
        """A classic member inside a consumer group keeps its own JoinGroup session timeout (Kafka)."""
        classic = member.classic_member_metadata
        timeout = classic.session_timeout_ms if classic is not None else self.config.session_timeout_ms
        self.scheduler.schedule(self, timer_key("session", group_id, member.member_id), timeout)

    def _schedule_rebalance(self, group_id: str, member: ConsumerGroupMember) -> None:
        """Kafka ``scheduleConsumerGroupRebalanceTimeout``: the member's own timeout, whatever value it gave
        (0 or less fires at once); a member that never gave one (-1, built outside a heartbeat) gets the
        session timeout."""
        self._rebalance_epochs[(group_id, member.member_id)] = member.member_epoch
        timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms != -1 else self.config.session_timeout_ms
        self.scheduler.schedule(self, timer_key("rebalance", group_id, member.member_id), max(0, timeout))

    def _cancel_member_timers(self, group_id: str, member_id: str) -> None:
        for kind in _MEMBER_TIMERS:
            self.scheduler.cancel(self, timer_key(kind, group_id, member_id))
        self._rebalance_epochs.pop((group_id, member_id), None)

    def timers(self) -> dict[Hashable, int]:
        """Armed timers: (kind, group id, member id) -> due time."""
        return self.scheduler.timers(self)

    def _new_member_id(self) -> str:
        while True:
            member_id = base64.urlsafe_b64encode(self._rng.getrandbits(128).to_bytes(16, "big")).rstrip(b"=").decode()
            if not any(member_id in group.members for group in self.groups.values()):
                return member_id

    def unload(self) -> None:
        """Stop serving (this broker lost the partition): groups become Dead, timers stop."""
        for group in self.groups.values():
            group.dead = True
        for classic in self.classic_groups.values():
            classic.transition_to(ClassicGroupState.DEAD, UNLOAD_TRIGGER, self.now_ms)
        self.scheduler.cancel_all(self)
        self.groups.clear()  # in place: the composed parts hold these very dicts
        self.classic_groups.clear()
        self._initial_delays.clear()
        self.share_groups.clear()
        self._rounds.clear()

    # ------------------------------------------------------------------ records
    @staticmethod
    def _group_epoch_record(group_id: str, epoch: int) -> Record:
        return Record(ConsumerGroupMetadataKey(group_id=group_id), ConsumerGroupMetadataValue(epoch=epoch))

    @staticmethod
    def _partition_metadata_record(group_id: str, metadata: SubscriptionMetadata, epoch: int) -> Record:
        topics = [
            PartitionMetadataTopic(topic_id=tid, topic_name=name, num_partitions=n)
            for name, (tid, n) in sorted(metadata.items())
        ]
        return Record(
            ConsumerGroupPartitionMetadataKey(group_id=group_id),
            ConsumerGroupPartitionMetadataValue(epoch=epoch, topics=topics),
        )

    @staticmethod
    def _member_metadata_record(group_id: str, member: ConsumerGroupMember, group_epoch: int) -> Record:
        return Record(
            ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member.member_id),
            ConsumerGroupMemberMetadataValue(
                group_epoch=group_epoch,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=list(member.subscribed_topic_names),
                subscribed_topic_regex=member.subscribed_topic_regex,
                assignors=list(member.client_assignors),
                server_assignor=member.server_assignor,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                classic_member_metadata=member.classic_member_metadata,
            ),
        )

    @staticmethod
    def _current_assignment_record(group_id: str, member: ConsumerGroupMember) -> Record:
        # Built from the coordinator's own state, already valid: not validated again (model_construct).
        return Record(
            ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member.member_id),
            ConsumerGroupCurrentMemberAssignmentValue.model_construct(
                member_epoch=member.member_epoch,
                previous_member_epoch=member.previous_member_epoch,
                state=member.state.value,
                topic_partitions=to_topic_partitions(member.assigned),
                partitions_pending_revocation=to_topic_partitions(member.pending_revocation),
            ),
        )

    @staticmethod
    def _target_member_record(group_id: str, member_id: str, target: TargetPartitions | None) -> Record:
        key = ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id)
        if target is None:
            return Record(key, None)
        # The assignor's output, checked when computed: not validated again (model_construct). Its topics
        # in its own order, which is the order of Kafka's map (``newConsumerGroupTargetAssignmentRecord``).
        partitions = [TopicPartitions.model_construct(topic_id=t, partitions=list(p)) for t, p in target.items() if p]
        return Record(key, ConsumerGroupTargetAssignmentMemberValue.model_construct(topic_partitions=partitions))

    @staticmethod
    def _member_tombstones(group_id: str, member_id: str) -> list[Record]:
        """A member's removal: current assignment, target entry, then metadata (Kafka ``removeMember``'s order)."""
        return [
            Record(ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None),
            Record(ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None),
            Record(ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None),
        ]

    def _departure_tombstones(self, group_id: str, member_id: str) -> list[Record]:
        """The tombstones a departing member (leave, fencing, timeout) writes.

        ``kafka``: all three (Kafka ``GroupMetadataManager.removeMember``). ``kip``: without the target
        entry, which KIP-848's "Member Failure" example keeps until the next target drops it.
        """
        records = self._member_tombstones(group_id, member_id)
        if self.config.fidelity == "kip":
            records = [r for r in records if type(r.key) is not ConsumerGroupTargetAssignmentMemberKey]
        return records

    def _departure_epoch_bump(self, group: ConsumerGroup, remaining: SubscriptionCounts) -> list[Record]:
        """After departures' tombstones: the partition metadata if the members left (counted in
        ``remaining``) subscribe to other topics, then the group epoch bumped once (Kafka
        ``GroupMetadataManager.consumerGroupFenceMember``, ``classicGroupLeaveToConsumerGroup``)."""
        epoch = group.group_epoch + 1
        records = []
        metadata = self._subscription_metadata(remaining)
        if metadata != group.subscription_metadata:
            records.append(self._partition_metadata_record(group.group_id, metadata, epoch))
        records.append(self._group_epoch_record(group.group_id, epoch))
        return records

    @staticmethod
    def _unknown_member(member_id: str, group_id: str) -> ApiError:
        """UNKNOWN_MEMBER_ID in Kafka's words (``ConsumerGroup.getOrMaybeCreateMember``)."""
        return ApiError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")

    def _subscription_changed(self, old: ConsumerGroupMember, new: ConsumerGroupMember) -> bool:
        """Whether the member's update needs a new target (a group epoch bump).

        ``kafka``: its topic names or regex changed (Kafka ``hasMemberSubscriptionChanged``).
        ``kip``: also its server assignor (KIP-848 "Group Epoch - Trigger a rebalance"). In both,
        a change of client-side assignors or their metadata, which only the KIP has.
        """
        if new.subscription_key() != old.subscription_key():
            return True
        return self.config.fidelity == "kip" and new.server_assignor != old.server_assignor

    # ------------------------------------------------------------------ subscriptions
    def has_unseen_metadata(self, group_id: str) -> bool:
        """Whether the cluster changed in a way the group's partition metadata does not show yet.

        Cheap when the coordinator already compared the group at the current cluster version
        (every heartbeat and every load does); a pending change means a rebalance to come.
        """
        group = self.groups[group_id]
        if self._metadata_checked.get(group_id) == self.cluster.version:
            return False
        return self._subscription_metadata(group.subscriptions) != group.subscription_metadata

    def _subscription_metadata(self, subscriptions: SubscriptionCounts) -> SubscriptionMetadata:
        """Topics any member subscribes to (by name or regex) that exist in the cluster (Kafka
        ``ModernGroup.computeSubscriptionMetadata``, from the subscription counts)."""
        cluster_names = self.cluster.topic_names()
        names = set(subscriptions.topic_names)
        for pattern in sorted(subscriptions.regexes):
            compiled = compile_subscription(pattern)
            names.update(n for n in cluster_names if compiled.fullmatch(n) is not None)
        out: SubscriptionMetadata = {}
        for name in sorted(names):
            if name in self.cluster:
                topic = self.cluster.topic(name)
                out[name] = (topic.topic_id, topic.num_partitions)
        return out

    # ------------------------------------------------------------------ assignors
    def _preferred_server_assignor(self, subscriptions: SubscriptionCounts) -> str:
        """The name most members asked for, else the default (Kafka ``ConsumerGroup.computePreferredServerAssignor``).

        Ties go to the assignor configured first. A name may be one this coordinator no longer has
        (the members named it to an earlier one); it ranks after every configured name.
        """
        order = list(self.assignors)
        votes = subscriptions.server_assignors
        if not votes:
            return order[0]

        def rank(item: tuple[str, int]) -> tuple:
            name, count = item
            return (count, -order.index(name) if name in self.assignors else -len(order), name)

        return max(votes.items(), key=rank)[0]

    def _supported_assignors(self) -> str:
        """The configured names as Kafka's messages list them: its name-to-assignor ``HashMap``'s order."""
        return ", ".join(string_key_order(self.assignors))

    def _server_assignor(self, subscriptions: SubscriptionCounts) -> PartitionAssignor:
        """The preferred assignor; UNKNOWN_SERVER_ERROR when this coordinator does not have it."""
        name = self._preferred_server_assignor(subscriptions)
        if name not in self.assignors:
            raise ApiError(
                Errors.UNKNOWN_SERVER_ERROR,
                f"The group's preferred server assignor {name} is not configured. "
                f"Supported assignors: {self._supported_assignors()}.",
            )
        return self.assignors[name]

    def _target_due(self, group_id: str, interval: int | None = None) -> bool:
        """Whether a new target may be computed now: ``interval`` (``assignment_interval_ms``) after
        the last one (Kafka ``GroupMetadataManager``'s assignment batching; soft state, so a new
        coordinator computes at once)."""
        interval = self.config.assignment_interval_ms if interval is None else interval
        if not interval:
            return True
        computed_at = self._target_computed_at.get(group_id)
        return computed_at is None or self.now_ms - computed_at >= interval

    def _assignment_spec(
        self,
        group: ConsumerGroup,
        members: dict[str, ConsumerGroupMember],
        metadata: SubscriptionMetadata,
        old_target: dict[str, TargetPartitions],
    ) -> AssignmentSpec:
        topics = {tid: TopicMetadata(tid, name, n) for name, (tid, n) in metadata.items()}
        # Kafka reads targets in its hash maps' order; the KIP's tables list them as they were assigned.
        map_order = MapOrder.AS_GIVEN if self.config.fidelity == "kip" else MapOrder.JAVA_HASH
        return AssignmentSpec(group.assignor_members(members, metadata, old_target), topics, map_order=map_order)

    def _compute_target(
        self,
        group: ConsumerGroup,
        members: dict[str, ConsumerGroupMember],
        subscriptions: SubscriptionCounts,
        metadata: SubscriptionMetadata,
        group_epoch: int,
        old_target: dict[str, TargetPartitions] | None = None,
        written: dict[str, TargetPartitions] | None = None,
    ) -> tuple[dict[str, TargetPartitions], tuple[Record, ...]]:
        """Run the server-side assignor (``members``' preferred one, from their ``subscriptions``); the
        batch holds changed members then the epoch.

        ``old_target`` is what the assignor starts from; ``written`` (by default the same) what the
        group's target records hold, which a member's new target is compared with to decide whether it
        gets a record (Kafka ``TargetAssignmentBuilder.build``)."""
        old_target = group.target if old_target is None else old_target
        written = old_target if written is None else written
        spec = self._assignment_spec(group, members, metadata, old_target)
        assignor = self._server_assignor(subscriptions)
        try:
            computed = assignor.assign(spec)
        except PartitionAssignorError as exc:
            raise ApiError(Errors.UNKNOWN_SERVER_ERROR, f"Assignor {assignor.name} failed: {exc}") from None
        new_target = {
            member_id: {t: tuple(p) for t, p in computed.get(member_id, {}).items() if p} for member_id in members
        }
        return new_target, self._target_batch(group.group_id, written, new_target, group_epoch)

    def _target_batch(
        self, group_id: str, old: dict[str, TargetPartitions], new: dict[str, TargetPartitions], epoch: int
    ) -> tuple[Record, ...]:
        metadata = self._target_epoch_record(group_id, epoch)
        return target_assignment_batch(old, new, partial(self._target_member_record, group_id), metadata)

    @staticmethod
    def _target_epoch_record(group_id: str, epoch: int) -> Record:
        return Record(
            ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id),
            ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch),
        )

    # ------------------------------------------------------------------ heartbeat
    @checked
    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest
    ) -> CoordinatorResult[ConsumerGroupHeartbeatResponse]:
        """ConsumerGroupHeartbeat: join, heartbeat, reconcile, leave — all one RPC."""
        try:
            if request.group_id in self.classic_groups:
                return self._heartbeat_into_classic_group(request)  # online upgrade (``migration``)
            result = self._heartbeat(request)
        except ApiError as error:
            # The error alone, its other fields left at their defaults (Kafka
            # ``GroupCoordinatorService.consumerGroupHeartbeat``).
            response = ConsumerGroupHeartbeatResponse(error_code=error.error, error_message=error.message)
            return CoordinatorResult(response, origin="ConsumerGroupHeartbeat")
        return self._apply(result)

    def _validate_heartbeat(self, r: ConsumerGroupHeartbeatRequest) -> None:
        """Refuse a malformed request before any group is looked at.

        ``kafka``: the checks of Kafka's ``GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid``
        with its messages, as changed to accept topic names and/or a regex (KAFKA-17593); an
        invalid regex is INVALID_REGULAR_EXPRESSION. ``kip``: the list in KIP-848's "Request
        Validation" (names and regex exclusive, a positive rebalance timeout, INVALID_REQUEST for
        an invalid regex). Either way the client-side assignor checks come from the KIP, since
        Kafka has no client-side assignors.
        """
        kip = self.config.fidelity == "kip"
        if _blank(r.group_id):
            raise _invalid("GroupId can't be empty.")
        if _blank(r.instance_id):
            raise _invalid("InstanceId can't be empty.")
        if _blank(r.rack_id):
            raise _invalid("RackId can't be empty.")
        _validate_epoch_fields(r, kip)
        _validate_subscription_fields(r, kip)
        _validate_client_assignors(r)
        if r.server_assignor is not None and r.server_assignor not in self.assignors:
            raise ApiError(
                Errors.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {r.server_assignor} is not supported. "
                f"Supported assignors: {self._supported_assignors()}.",
            )

    def _heartbeat(
        self,
        r: ConsumerGroupHeartbeatRequest,
        group: ConsumerGroup | None = None,
        classic: ClassicMemberMetadata | None = None,
    ) -> CoordinatorResult[ConsumerGroupHeartbeatResponse]:
        """The heartbeat path, in Kafka ``GroupMetadataManager.consumerGroupHeartbeat``'s phases.

        ``group`` is a classic group just converted (not yet in ``groups``); ``classic`` is set
        when a classic member's JoinGroup is served here (``migration``). The phases compute on
        the current state and return records; nothing changes until ``_apply`` replays them.
        """
        self._validate_heartbeat(r)
        self._reject_share_group_id(r.group_id)
        if r.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(r)
        group = group or self._group_for_heartbeat(r)
        self._throw_if_group_full(group, r.member_id)
        found = self._member_for_heartbeat(group, r, classic)
        if isinstance(found, CoordinatorResult):  # fenced under the ``kip`` profile: removed
            return found
        updated = self._updated_member(found.member, r, classic)
        epoch = self._update_group_epoch(group, found, updated)
        batches: list[tuple[Record, ...]] = (
            [tuple(found.records + epoch.records)] if found.records or epoch.records else []
        )
        target_view, target_epoch = self._maybe_compute_target(group, found, epoch, batches)
        before = group.members.get(found.member_id) if found.replaced is None else None
        reconciled, target = self._reconcile_member(group, r, found, updated, target_view, target_epoch)
        if self._assignment_record_needed(found, before, reconciled):
            batches.append((self._current_assignment_record(group.group_id, reconciled),))
        self._arm_member_timers(group.group_id, found, before, reconciled)
        response = self._heartbeat_response(r, group.group_id, found.member_id, before, reconciled, target)
        return CoordinatorResult(response, tuple(batches), origin="ConsumerGroupHeartbeat")

    # Phase 1: get or create the group, refuse a full one.
    def _group_for_heartbeat(self, r: ConsumerGroupHeartbeatRequest) -> ConsumerGroup:
        """The group; a new, empty one for a join (created by replaying this heartbeat's records)."""
        group = self.groups.get(r.group_id)
        if group is not None:
            return group
        if r.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
            if self.config.fidelity == "kip":  # KIP-848 "Consumer Group Heartbeat API": the member is unknown
                raise self._unknown_member(r.member_id, r.group_id)
            raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {r.group_id} not found.")
        return ConsumerGroup(r.group_id)

    def _throw_if_group_full(self, group: ConsumerGroup, member_id: str | None) -> None:
        """Kafka ``throwIfConsumerGroupIsFull``: before the member is looked up, whatever the epoch; a
        static member replacing another under a new id counts as new."""
        if member_id not in group.members and len(group.members) >= self.config.max_size:
            raise ApiError(
                Errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )

    # Phase 2: get or create the member.
    def _member_for_heartbeat(
        self, group: ConsumerGroup, r: ConsumerGroupHeartbeatRequest, classic: ClassicMemberMetadata | None
    ) -> _FoundMember | CoordinatorResult[ConsumerGroupHeartbeatResponse]:
        """The member this heartbeat speaks for: joining (epoch 0) or known (fenced when its epoch is wrong)."""
        if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            return self._joining_member(group, r, classic)
        member = self._known_member(group, r)
        fenced = self._epoch_fencing_message(member, r)
        if fenced is None:
            return _FoundMember(member.member_id, member, joining=False)
        if self.config.fidelity == "kafka":  # the request is refused; the member stays
            raise ApiError(Errors.FENCED_MEMBER_EPOCH, fenced)
        # KIP-848 "Consumer Group Heartbeat API": the member is also removed from the group.
        response = ConsumerGroupHeartbeatResponse(error_code=Errors.FENCED_MEMBER_EPOCH, error_message=fenced)
        return self._remove_member(group, member, response, origin="ConsumerGroupHeartbeat")

    def _known_member(self, group: ConsumerGroup, r: ConsumerGroupHeartbeatRequest) -> ConsumerGroupMember:
        """The member a non-zero epoch names, by instance id when static (Kafka ``getOrMaybeCreateMember``)."""
        if r.instance_id is None:
            found = group.members.get(r.member_id)
            if found is None:
                raise self._unknown_member(r.member_id, r.group_id)
            return found
        known = group.static_member(r.instance_id)
        if known is None:
            raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
        if known.member_id != r.member_id:
            raise fenced_instance_error(r.member_id, r.instance_id, known.member_id)
        return known

    def _joining_member(
        self, group: ConsumerGroup, r: ConsumerGroupHeartbeatRequest, classic: ClassicMemberMetadata | None
    ) -> _FoundMember:
        """An epoch-0 heartbeat: a new member, a known one rejoining, or a static member's replacement."""
        members = group.members
        member_id = r.member_id or self._new_member_id()
        known = members.get(member_id)
        # A member still at epoch 0 holding nothing (client-side mode, before the first install)
        # can only send epoch 0: that is an ordinary heartbeat at its current epoch, not a new
        # join, so no bump (Kafka accepts a matching epoch).
        waiting = known is not None and known.member_epoch == JOIN_GROUP_MEMBER_EPOCH and not known.owned()
        existing_static = group.static_member(r.instance_id) if r.instance_id is not None else None
        if existing_static is not None and not (waiting and existing_static.member_id == member_id):
            return self._replace_static_consumer_member(group, existing_static, member_id, r, classic)
        if known is None:
            return _FoundMember(member_id, ConsumerGroupMember(member_id), joining=True)
        if waiting or self.config.fidelity == "kafka":
            # Kafka (KAFKA-19233) accepts a known member's epoch-0 rejoin as it is: the member keeps
            # its epoch and assignment, and the full response hands the assignment back.
            return _FoundMember(member_id, known, joining=True)
        # KIP-848 "Consumer Group Heartbeat API": epoch 0 creates the member afresh (nothing owned).
        return _FoundMember(member_id, _fresh(known), joining=True, released=known.owned(), rejoining=True)

    def _replace_static_consumer_member(
        self,
        group: ConsumerGroup,
        existing: ConsumerGroupMember,
        member_id: str,
        r: ConsumerGroupHeartbeatRequest,
        classic: ClassicMemberMetadata | None,
    ) -> _FoundMember:
        """KIP-345 replacement (Kafka ``replaceMember``): the old member's tombstones, then a copy of it
        under the new id with the old target and assignment; the request's changes come after."""
        # A classic static member never announces a temporary leave: when either side of the
        # replacement speaks the classic protocol, the instance id is taken over at once (Kafka).
        unreleased = existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
        if unreleased and classic is None and not existing.uses_classic_protocol:
            raise ApiError(
                Errors.UNRELEASED_INSTANCE_ID,
                f"Static member {member_id} with instance id {r.instance_id} cannot join the group because "
                f"the instance id is owned by {existing.member_id} member.",
            )
        group_id, replaced = group.group_id, existing.member_id
        member = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        records = self._member_tombstones(group_id, replaced)
        records += [
            self._member_metadata_record(group_id, member, group.group_epoch),
            self._target_member_record(group_id, member_id, group.target.get(replaced, {})),
            self._current_assignment_record(group_id, member),
        ]
        return _FoundMember(member_id, member, joining=True, replaced=replaced, records=records)

    # Phase 3: update the member, its subscription metadata and the group epoch.
    def _updated_member(
        self, member: ConsumerGroupMember, r: ConsumerGroupHeartbeatRequest, classic: ClassicMemberMetadata | None
    ) -> ConsumerGroupMember:
        """The member with the request's fields applied; the same object for a steady heartbeat."""
        if classic is None and member.classic_member_metadata is None and _is_steady(r):
            return member
        updated = replace(
            member,
            classic_member_metadata=classic,
            instance_id=_given(r.instance_id, member.instance_id),
            rack_id=_given(r.rack_id, member.rack_id),
            client_id=r.client_id or member.client_id,
            client_host=r.client_host or member.client_host,
            rebalance_timeout_ms=r.rebalance_timeout_ms
            if r.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            subscribed_topic_names=(
                tuple(sorted(set(r.subscribed_topic_names)))
                if r.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(  # an empty regex clears the member's
                (r.subscribed_topic_regex or None)
                if r.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            server_assignor=_given(r.server_assignor, member.server_assignor),
            client_assignors=tuple(r.client_assignors) if r.client_assignors is not None else member.client_assignors,
        )
        if self.config.fidelity == "kip" and updated.subscribed_topic_names and updated.subscribed_topic_regex:
            raise _invalid("SubscribedTopicNames and SubscribedTopicRegex cannot be used together.")
        return updated

    def _update_group_epoch(
        self, group: ConsumerGroup, found: _FoundMember, updated: ConsumerGroupMember
    ) -> _EpochUpdate:
        """Whether the group epoch bumps (a new member, a changed subscription, changed cluster metadata),
        with the records that say so: the changed member, then partition metadata, then the epoch, last."""
        member, member_id, replaced = found.member, found.member_id, found.replaced
        is_new = replaced is None and member_id not in group.members
        bump = self._epoch_bump_needed(found, updated, is_new)
        metadata_stale = self._metadata_checked.get(group.group_id) != self.cluster.version
        target_due = self._target_due(group.group_id)
        target_behind = group.group_epoch > group.assignment_epoch and target_due
        # What the group's members would subscribe to and which assignors they would name with this update:
        # the same cost whatever the group's size (Kafka ``consumerGroupHeartbeat``).
        subscriptions = group.subscriptions
        client_side = False
        if bump or replaced is not None or metadata_stale or target_behind:
            subscriptions = _subscriptions_with(group, found, updated)
            client_side = self._client_side_assignor(subscriptions) is not None  # UNSUPPORTED_ASSIGNOR if incompatible
        metadata = self._subscription_metadata(subscriptions) if bump or metadata_stale else group.subscription_metadata
        metadata_changed = metadata != group.subscription_metadata
        bump = bump or metadata_changed
        group_epoch = group.group_epoch + int(bump)
        records: list[Record] = []
        if is_new or _metadata_fields_changed(member, updated):
            records.append(self._member_metadata_record(group.group_id, updated, group_epoch))
        if metadata_changed:
            records.append(self._partition_metadata_record(group.group_id, metadata, group_epoch))
        if bump:
            records.append(self._group_epoch_record(group.group_id, group_epoch))
        return _EpochUpdate(group_epoch, updated, subscriptions, metadata, target_due, client_side, records)

    def _epoch_bump_needed(self, found: _FoundMember, updated: ConsumerGroupMember, is_new: bool) -> bool:
        """A new or (``kip``) rejoined member, or a changed subscription, bumps the group epoch."""
        if found.replaced is not None:  # the replacement is a copy of the old member: only its changes count
            return self._subscription_changed(found.member, updated)
        if is_new or found.rejoining:
            return True
        return updated is not found.member and self._subscription_changed(found.member, updated)

    # Phase 4: compute the target assignment (with batching).
    def _maybe_compute_target(
        self, group: ConsumerGroup, found: _FoundMember, epoch: _EpochUpdate, batches: list[tuple[Record, ...]]
    ) -> tuple[dict[str, TargetPartitions], int]:
        """The target the member reconciles toward, and its epoch; a new one (appended to ``batches``)
        when the group epoch is ahead and batching allows, else a client-side round starts.

        Batching (Kafka 4.3): until the interval has passed, the member is told the last target, at
        the assignment epoch; the next heartbeat after it computes one for every change meanwhile.
        """
        target_view = written = group.target
        if found.replaced is not None:
            # The replacement starts from the old member's target, but Kafka compares the new target with
            # the group's before this heartbeat's records, where the new member id has none: it always
            # gets a target record (Kafka ``TargetAssignmentBuilder.build``, ``testReplaceStaticMember``).
            written = {m: t for m, t in group.target.items() if m != found.replaced}
            target_view = {**written, found.member_id: group.target.get(found.replaced, {})}
        if epoch.group_epoch <= group.assignment_epoch or not epoch.target_due:
            return target_view, group.assignment_epoch
        view = _group_with(group.members, found, epoch.updated)  # the members the new target is for
        if epoch.client_side:
            self._start_round(group.group_id, view)
            return target_view, group.assignment_epoch
        target_view, target_batch = self._compute_target(
            group, view, epoch.subscriptions, epoch.metadata, epoch.group_epoch, target_view, written
        )
        batches.append(target_batch)
        self._target_computed_at[group.group_id] = self.now_ms
        return target_view, epoch.group_epoch

    # Phase 5: reconcile the member toward its target (Kafka ``CurrentAssignmentBuilder``).
    def _reconcile_member(
        self,
        group: ConsumerGroup,
        r: ConsumerGroupHeartbeatRequest,
        found: _FoundMember,
        updated: ConsumerGroupMember,
        target_view: dict[str, TargetPartitions],
        target_epoch: int,
    ) -> tuple[ConsumerGroupMember, Assignment]:
        """The member's next epoch and assignment, and its target (empty when already reconciled)."""
        if updated.is_reconciled_to(target_epoch):  # a steady heartbeat's member already is
            return updated, {}
        target = {t: frozenset(p) for t, p in target_view.get(found.member_id, {}).items()}
        if found.joining:
            owned: Assignment | None = {}
        else:
            owned = from_topic_partitions(r.topic_partitions) if r.topic_partitions is not None else None
        released = found.released

        def held(topic_id: str, partition: int) -> bool:
            return group.partition_held(topic_id, partition) and partition not in released.get(topic_id, ())

        reconciled, _ = reconcile(updated, target_epoch, target, held, owned)
        return reconciled, target

    @staticmethod
    def _assignment_record_needed(
        found: _FoundMember, before: ConsumerGroupMember | None, reconciled: ConsumerGroupMember
    ) -> bool:
        """Whether the member's current assignment must be written: new, rejoined or changed. (A
        replacement's copy is already in the membership batch, so it is compared with that.)"""
        written = found.member if found.replaced is not None else before
        if written is None or found.rejoining:
            return True
        return reconciled is not written and _assignment_fields(reconciled) != _assignment_fields(written)

    # Phase 6: arm the timers.
    def _arm_member_timers(
        self, group_id: str, found: _FoundMember, before: ConsumerGroupMember | None, reconciled: ConsumerGroupMember
    ) -> None:
        """Session always; the rebalance timer (re)starts whenever the member's assignment changes while
        it has partitions to revoke (Kafka ``GroupMetadataManager.maybeReconcile``)."""
        member_id = found.member_id
        if found.replaced is not None:
            self._cancel_member_timers(group_id, found.replaced)
        self._schedule_session(group_id, reconciled)
        if reconciled.state is ReconciliationState.UNREVOKED_PARTITIONS:
            if before is None or _assignment_fields(before) != _assignment_fields(reconciled):
                self._schedule_rebalance(group_id, reconciled)
        elif self._rebalance_epochs.pop((group_id, member_id), None) is not None:
            self.scheduler.cancel(self, timer_key("rebalance", group_id, member_id))  # armed only while that was set
        self._metadata_checked[group_id] = self.cluster.version

    # Phase 7: build the response.
    def _heartbeat_response(
        self,
        r: ConsumerGroupHeartbeatRequest,
        group_id: str,
        member_id: str,
        before: ConsumerGroupMember | None,
        reconciled: ConsumerGroupMember,
        target: Assignment,
    ) -> ConsumerGroupHeartbeatResponse:
        """The member's epoch, and its assignment when it changed or the request was a full one."""
        should_compute = self._should_compute(group_id, member_id, reconciled)
        joining = r.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        changed = before is None or (before is not reconciled and before.assigned != reconciled.assigned)
        assignment = _heartbeat_assignment(reconciled, target) if changed or _is_full_request(r) else None
        # Kafka echoes the member id in every response; the KIP's schema only on a join.
        echoed_id = member_id if joining or self.config.fidelity == "kafka" else None
        if joining or assignment is not None:
            return ConsumerGroupHeartbeatResponse(
                member_id=echoed_id,
                member_epoch=reconciled.member_epoch,
                heartbeat_interval_ms=self.config.heartbeat_interval_ms,
                should_compute_assignment=should_compute,
                assignment=assignment,
            )
        return self._steady_responses(
            echoed_id, reconciled.member_epoch, self.config.heartbeat_interval_ms, should_compute
        )

    def _epoch_fencing_message(self, member: ConsumerGroupMember, r: ConsumerGroupHeartbeatRequest) -> str | None:
        """Why a heartbeat at ``r.member_epoch`` is fenced, or None when it is accepted."""
        received, known = r.member_epoch, member.member_epoch
        if received > known:
            return (
                f"The consumer group member has a greater member epoch ({received}) than the one known by "
                f"the group coordinator ({known}). The member must abandon all its partitions and rejoin."
            )
        if received < known:
            owned = from_topic_partitions(r.topic_partitions) if r.topic_partitions is not None else None
            subset = owned is not None and all(p <= member.assigned.get(t, frozenset()) for t, p in owned.items())
            if not (self.config.accept_previous_epoch and received == member.previous_member_epoch and subset):
                return (
                    f"The consumer group member has a smaller member epoch ({received}) than the one known by "
                    f"the group coordinator ({known}). The member must abandon all its partitions and rejoin."
                )
        return None

    def _leave(self, r: ConsumerGroupHeartbeatRequest) -> CoordinatorResult[ConsumerGroupHeartbeatResponse]:
        """A leave (epoch -1) or a static member's temporary leave (-2): Kafka ``consumerGroupLeave``."""
        kip = self.config.fidelity == "kip"
        group = self.groups.get(r.group_id)
        if group is None:
            if kip:
                raise self._unknown_member(r.member_id, r.group_id)
            raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {r.group_id} not found.")
        if r.instance_id is None:
            member = group.members.get(r.member_id)
            if member is None:
                raise self._unknown_member(r.member_id, r.group_id)
        else:
            member = group.static_member(r.instance_id)
            if member is None:
                raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
            if member.member_id != r.member_id:
                raise fenced_instance_error(r.member_id, r.instance_id, member.member_id)
        response = ConsumerGroupHeartbeatResponse(member_id=None if kip else r.member_id, member_epoch=r.member_epoch)
        if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Temporary leave: keep the assignment until the session timeout (KIP-345 in KIP-848).
            leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
            self.scheduler.cancel(self, timer_key("rebalance", group.group_id, member.member_id))
            batch = (self._current_assignment_record(group.group_id, leaving),)
            return CoordinatorResult(response, (batch,), origin="ConsumerGroupHeartbeat")
        return self._remove_member(group, member, response, origin="ConsumerGroupHeartbeat")

    def _remove_member(
        self, group: ConsumerGroup, member: ConsumerGroupMember, response: Any, origin: str
    ) -> CoordinatorResult:
        """Leave, fencing, session or rebalance timeout: tombstones, then a group epoch bump."""
        group_id = group.group_id
        self._cancel_member_timers(group_id, member.member_id)
        remaining = group.subscriptions.changed(removed=[group.members[member.member_id]])
        if self._downgrade_allowed(remaining, member):
            return self._downgrade(group, member, response, origin)
        records = self._departure_tombstones(group_id, member.member_id)
        records += self._departure_epoch_bump(group, remaining)
        round_ = self._rounds.get(group_id)
        if round_ is not None and round_.member_id == member.member_id:
            self.scheduler.cancel(self, timer_key("assignment", group_id, member.member_id))
            if remaining.members:
                self._choose_computing_member(group_id, _members_without(group, member.member_id), round_)
            else:
                del self._rounds[group_id]
        elif round_ is None and remaining.members and self._client_side_assignor(remaining) is not None:
            self._start_round(group_id, _members_without(group, member.member_id))
        return CoordinatorResult(response, (tuple(records),), origin=origin)

    # ------------------------------------------------------------------ inspection
    def state_snapshot(self) -> dict[str, Any]:
        """Everything the log determines, as plain sorted data: what failover must reproduce.

        Timers are compared by which are armed (their deadlines are re-armed from the load
        time, as Kafka does, so they legitimately differ after a failover).
        """
        groups = {}
        for group_id in sorted(self.groups):
            g = self.groups[group_id]
            groups[group_id] = {
                **group_snapshot_head(g),
                "members": {
                    m: {
                        "metadata": _metadata_fields(v),
                        "member_epoch": v.member_epoch,
                        "previous_member_epoch": v.previous_member_epoch,
                        "state": v.state.value,
                        "assigned": {t: sorted(p) for t, p in sorted(v.assigned.items())},
                        "pending_revocation": {t: sorted(p) for t, p in sorted(v.pending_revocation.items())},
                    }
                    for m, v in sorted(g.members.items())
                },
                "partition_epochs": {t: dict(sorted(p.items())) for t, p in sorted(g.partition_epochs.items())},
            }
        offsets = {
            gid: {f"{t}-{p}": v.model_dump() for (t, p), v in sorted(o.items())}
            for gid, o in sorted(self.offsets.items())
        }
        timers = sorted(
            (str(k) for k in self.timers() if cast(TimerKey, k)[0] in _SNAPSHOT_TIMERS),
        )
        return {
            "groups": groups,
            "offsets": offsets,
            "timers": timers,
            "share_groups": self.share_state_snapshot(),
            "classic_groups": self.classic_state_snapshot(),
        }


# The attributes ``_compose`` builds (``__getstate__`` leaves them out).
_COMPOSED_PARTS = frozenset({"offset_manager", "describer"})
# A consumer group member's own timers, cancelled when it leaves or is replaced.
_MEMBER_TIMERS: tuple[TimerKind, ...] = ("session", "rebalance", "join", "sync")
# The timers a failover re-arms from the log (``state_snapshot`` compares which are armed).
_SNAPSHOT_TIMERS: tuple[TimerKind, ...] = ("session", "rebalance", "share-session")

_TIMER_HANDLERS: dict[TimerKind, Callable[[GroupCoordinator, TimerKey], CoordinatorResult]] = {
    "session": GroupCoordinator._fire_session_timer,
    "rebalance": GroupCoordinator._fire_rebalance_timer,
    "assignment": GroupCoordinator._fire_assignment_timer,
    "join": GroupCoordinator._fire_classic_member_timer,
    "sync": GroupCoordinator._fire_classic_member_timer,
    "classic session": GroupCoordinator._fire_classic_timer,
    "classic initial": GroupCoordinator._fire_classic_timer,
    "classic join": GroupCoordinator._fire_classic_timer,
    "classic sync": GroupCoordinator._fire_classic_timer,
    "share-session": GroupCoordinator._fire_share_timer,
}
