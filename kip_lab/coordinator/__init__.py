"""The KIP-848 group coordinator (handlers, state, reconciliation, records)."""

from kip_lab.coordinator.config import CoordinatorConfig
from kip_lab.coordinator.coordinator import GroupCoordinator
from kip_lab.coordinator.group import GROUP_STATE_MACHINE, ConsumerGroup, GroupState
from kip_lab.coordinator.member import RECONCILIATION_MACHINE, ConsumerGroupMember, MemberState
from kip_lab.coordinator.reconciliation import reconcile
from kip_lab.coordinator.result import CoordinatorResult

__all__ = [
    "GROUP_STATE_MACHINE",
    "RECONCILIATION_MACHINE",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "CoordinatorConfig",
    "CoordinatorResult",
    "GroupCoordinator",
    "GroupState",
    "MemberState",
    "reconcile",
]
