"""What ``GroupCoordinator``'s host-protocol parts rely on from the coordinator that hosts them.

The coordinator is built from two kinds of parts. Composed parts are objects it holds, each
given what it uses when built, as Kafka's ``GroupCoordinatorShard`` holds an
``OffsetMetadataManager``: ``offsets.OffsetManager``, ``describe.GroupDescriber`` and
``share_group.ShareGroupManager``. Host-protocol parts are mixins (``ClientSideAssignment``,
``ClassicGroupHandlers``, ``OnlineMigration``), each deriving from ``CoordinatorHost``, which declares, for the type
checker only, the state and engine methods they use: the contract a part can rely on, checked
by mypy. At run time the class adds nothing (the declarations are annotations, and the methods
exist only under ``TYPE_CHECKING``); ``GroupCoordinator`` and the parts provide them all.

Why those stay mixins: the classic protocol, online migration and the client-side assignor mode
are one engine with the consumer-group heartbeat, not beside it. A classic member of a consumer
group is served by the consumer heartbeat (``_heartbeat``), a conversion writes consumer-group
records and arms its timers, classic handlers call migration and migration calls them back, and
all of them write through ``_apply`` and the consumer group's record builders. Given as explicit
dependencies, each would take most of the coordinator; the declared protocol names that shared
surface instead, in one place.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kip_lab.cluster import ClusterMetadata
    from kip_lab.coordinator.classic_group import ClassicGroup, ClassicGroupMember, ClassicOutbox, Parked
    from kip_lab.coordinator.config import CoordinatorConfig
    from kip_lab.coordinator.group import (
        AssignmentRound,
        ConsumerGroup,
        SubscriptionCounts,
        SubscriptionMetadata,
        TargetPartitions,
    )
    from kip_lab.coordinator.member import ConsumerGroupMember
    from kip_lab.protocol.classic_group import (
        HeartbeatRequest,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
    from kip_lab.protocol.records import ClassicMemberMetadata
    from kip_lab.runtime.log import Record
    from kip_lab.runtime.result import CoordinatorResult, DeferredResponse
    from kip_lab.runtime.scheduler import Scheduler
    from kip_lab.share.group import ShareGroup


class CoordinatorHost:
    """The coordinator state and engine methods every handler part may use (declared, not defined here)."""

    config: CoordinatorConfig
    cluster: ClusterMetadata
    scheduler: Scheduler
    groups: dict[str, ConsumerGroup]
    classic_groups: dict[str, ClassicGroup]
    share_groups: dict[str, ShareGroup]
    _rng: random.Random
    _rounds: dict[str, AssignmentRound]
    _initial_delays: dict[str, tuple[int, int]]

    if TYPE_CHECKING:

        def fire_timer(self, key: Hashable) -> CoordinatorResult: ...

        def _apply(self, result: CoordinatorResult, rebalance_downgraded: bool = True) -> CoordinatorResult: ...
        def _cancel_classic_timers(self, group_id: str) -> None: ...
        def _cancel_member_timers(self, group_id: str, member_id: str) -> None: ...
        def _classic_heartbeat_to_consumer_group(
            self, group: ConsumerGroup, r: HeartbeatRequest
        ) -> CoordinatorResult: ...
        def _classic_join_to_consumer_group(self, group: ConsumerGroup, r: JoinGroupRequest) -> CoordinatorResult: ...
        def _classic_leave_to_consumer_group(self, group: ConsumerGroup, r: LeaveGroupRequest) -> CoordinatorResult: ...
        def _classic_sync_to_consumer_group(self, group: ConsumerGroup, r: SyncGroupRequest) -> CoordinatorResult: ...
        @staticmethod
        def _client_side_assignor(subscriptions: SubscriptionCounts) -> str | None: ...
        @staticmethod
        def _complete_join(out: ClassicOutbox, member: ClassicGroupMember, response: JoinGroupResponse) -> None: ...
        @staticmethod
        def _complete_sync(out: ClassicOutbox, member: ClassicGroupMember, response: SyncGroupResponse) -> bool: ...
        def _consumer_group_tombstones(self, group: ConsumerGroup) -> list[Record]: ...
        @staticmethod
        def _current_assignment_record(group_id: str, member: ConsumerGroupMember) -> Record: ...
        def _departure_epoch_bump(self, group: ConsumerGroup, remaining: SubscriptionCounts) -> list[Record]: ...
        def _departure_tombstones(self, group_id: str, member_id: str) -> list[Record]: ...
        @staticmethod
        def _group_epoch_record(group_id: str, epoch: int) -> Record: ...
        def _heartbeat(
            self,
            r: ConsumerGroupHeartbeatRequest,
            group: ConsumerGroup | None = None,
            classic: ClassicMemberMetadata | None = None,
        ) -> CoordinatorResult[ConsumerGroupHeartbeatResponse]: ...
        @staticmethod
        def _member_metadata_record(group_id: str, member: ConsumerGroupMember, group_epoch: int) -> Record: ...
        def _new_member_id(self) -> str: ...
        @staticmethod
        def _partition_metadata_record(group_id: str, metadata: SubscriptionMetadata, epoch: int) -> Record: ...
        def _prepare_rebalance(self, out: ClassicOutbox, group: ClassicGroup) -> None: ...
        def _remove_member(
            self, group: ConsumerGroup, member: ConsumerGroupMember, response: Any, origin: str
        ) -> CoordinatorResult: ...
        def _schedule_classic_session(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None: ...
        def _schedule_session(self, group_id: str, member: ConsumerGroupMember) -> None: ...
        @staticmethod
        def _split_responses(
            out: ClassicOutbox, parked: Parked | None, response: Any
        ) -> tuple[Any, tuple[DeferredResponse, ...]]: ...
        def _start_round(self, group_id: str, members: dict[str, ConsumerGroupMember]) -> AssignmentRound: ...
        def _subscription_metadata(self, subscriptions: SubscriptionCounts) -> SubscriptionMetadata: ...
        def _target_batch(
            self, group_id: str, old: dict[str, TargetPartitions], new: dict[str, TargetPartitions], epoch: int
        ) -> tuple[Record, ...]: ...
        def _target_due(self, group_id: str, interval: int | None = None) -> bool: ...
        @staticmethod
        def _target_epoch_record(group_id: str, epoch: int) -> Record: ...
        @staticmethod
        def _target_member_record(group_id: str, member_id: str, target: TargetPartitions | None) -> Record: ...
        def _validate_heartbeat(self, r: ConsumerGroupHeartbeatRequest) -> None: ...
        @property
        def now_ms(self) -> int: ...
