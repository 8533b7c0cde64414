"""The KIP-848 group coordinator (handlers, state, reconciliation, records)."""

from kip_lab.coordinator.classic_group import (
    CLASSIC_GROUP_STATE_MACHINE,
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
)
from kip_lab.coordinator.config import ConsumerGroupMigrationPolicy, CoordinatorConfig
from kip_lab.coordinator.coordinator import GroupCoordinator
from kip_lab.coordinator.group import GROUP_STATE_MACHINE, ConsumerGroup, GroupState
from kip_lab.coordinator.member import RECONCILIATION_MACHINE, ConsumerGroupMember, ReconciliationState
from kip_lab.coordinator.reconciliation import reconcile
from kip_lab.runtime.result import CoordinatorResult, DeferredResponse

__all__ = [
    "CLASSIC_GROUP_STATE_MACHINE",
    "GROUP_STATE_MACHINE",
    "RECONCILIATION_MACHINE",
    "ClassicGroup",
    "ClassicGroupMember",
    "ClassicGroupState",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupMigrationPolicy",
    "CoordinatorConfig",
    "CoordinatorResult",
    "DeferredResponse",
    "GroupCoordinator",
    "GroupState",
    "ReconciliationState",
    "reconcile",
]
