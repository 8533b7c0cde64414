"""A consumer-group member as the coordinator holds it, and its reconciliation machine.

The member is immutable: handlers compute an updated copy (``dataclasses.replace``), turn
the difference into records, and only replaying those records puts the copy in the group.

Reconciliation state (Kafka's ``MemberState``; KIP-848 names no states, see
docs/decisions.md D1): ``assigned`` is what the member may use now (the KIP's ``partitions``);
``pending_revocation`` is what it was told to give up and still holds; the KIP's
``pending-partitions`` — target partitions not yet released by their previous owner — are
derived: ``target - assigned`` while the member is at the target epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from kip_lab.machines import StateMachine
from kip_lab.protocol.consumer_group import ClientAssignor
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.records import ClassicMemberMetadata

Assignment = dict[str, frozenset[int]]  # topic id -> partitions


def fenced_instance_error(member_id: str, instance_id: str, owner_id: str) -> ApiError:
    """FENCED_INSTANCE_ID: ``instance_id`` now belongs to ``owner_id`` (KIP-345), in every group type's words."""
    return ApiError(
        Errors.FENCED_INSTANCE_ID,
        f"Static member {member_id} with instance id {instance_id} was fenced by member {owner_id}.",
    )


class ReconciliationState(StrEnum):
    """Where a member is on its way to its target assignment, as the coordinator sees it.

    Kafka calls it ``MemberState`` (``org.apache.kafka.coordinator.group.modern``);
    kip_lab keeps that name for the consumer's own state machine (``kip_lab.clients.MemberState``).
    """

    STABLE = "STABLE"
    UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
    UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"
    UNKNOWN = "UNKNOWN"


RECONCILIATION_MACHINE = StateMachine.from_table(
    "member reconciliation (coordinator)",
    [s.value for s in ReconciliationState],
    ReconciliationState.STABLE.value,
    [
        # (source, trigger, target)
        ("STABLE", "new target, nothing to revoke", "STABLE"),
        ("STABLE", "new target, must revoke", "UNREVOKED_PARTITIONS"),
        ("STABLE", "new target, partitions not yet released", "UNRELEASED_PARTITIONS"),
        ("UNREVOKED_PARTITIONS", "revocation acknowledged", "STABLE"),
        ("UNREVOKED_PARTITIONS", "revocation acknowledged, partitions not yet released", "UNRELEASED_PARTITIONS"),
        ("UNREVOKED_PARTITIONS", "revocation acknowledged, newer target must revoke", "UNREVOKED_PARTITIONS"),
        ("UNRELEASED_PARTITIONS", "partitions released", "STABLE"),
        ("UNRELEASED_PARTITIONS", "still waiting for release", "UNRELEASED_PARTITIONS"),
        ("UNRELEASED_PARTITIONS", "new target, must revoke", "UNREVOKED_PARTITIONS"),
        ("UNKNOWN", "rejoined without partitions", "STABLE"),
        ("UNKNOWN", "rejoined, partitions not yet released", "UNRELEASED_PARTITIONS"),
    ],
    description="Kafka's server-side MemberState: how a member converges on its target assignment.",
)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    # ConsumerGroupMemberMetadata
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    client_assignors: tuple[ClientAssignor, ...] = ()
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    # Set while the member speaks the classic protocol (online migration, Kafka's field).
    classic_member_metadata: ClassicMemberMetadata | None = None
    # ConsumerGroupCurrentMemberAssignment
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: ReconciliationState = ReconciliationState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    def owned(self) -> Assignment:
        """Every partition the member still holds: usable plus not yet revoked."""
        if not self.pending_revocation:
            return self.assigned
        out = dict(self.assigned)
        for topic_id, parts in self.pending_revocation.items():
            out[topic_id] = out.get(topic_id, frozenset()) | parts
        return out

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is ReconciliationState.STABLE and self.member_epoch == target_epoch

    def subscription_key(self) -> tuple:
        """What, when it changes, requires a new target under either profile (a group epoch bump)."""
        return (self.subscribed_topic_names, self.subscribed_topic_regex, self.client_assignors)
