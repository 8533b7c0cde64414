"""Member reconciliation: one pure function from (member, target, ownership) to the next member.

This is the heart of KIP-848's incremental protocol. It follows Kafka's
``CurrentAssignmentBuilder``:

* revoke before assign — a member that still holds partitions outside its target keeps its
  epoch, is told to give them up, and gets nothing new in the same response;
* a member with nothing to revoke jumps straight to the target epoch;
* a partition still held by another member (its *partition epoch* is set) is not given out:
  it waits, and the member sits in UNRELEASED_PARTITIONS until it is released.

``partition_owner`` answers "does someone hold this partition?" for partitions outside the
member's own ``owned()`` set, so the function never gives a partition to two members.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from kip_lab.coordinator.member import RECONCILIATION_MACHINE, Assignment, ConsumerGroupMember, ReconciliationState
from kip_lab.protocol.errors import ApiError, Errors

PartitionHeld = Callable[[str, int], bool]  # (topic id, partition) -> held by some member


def _owns_any(owned_reported: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member's reported owned set still contains any of ``partitions``.

    A heartbeat that does not report owned partitions (``None``) proves nothing, so the
    member is presumed to still hold them (the KIP's null-means-unchanged rule).
    """
    if owned_reported is None:
        return True
    return any(owned_reported.get(topic_id, frozenset()) & parts for topic_id, parts in partitions.items())


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Mapping[str, frozenset[int]],
    partition_held: PartitionHeld,
    owned_reported: Assignment | None,
) -> tuple[ConsumerGroupMember, str | None]:
    """Next state of ``member`` toward ``target`` (epoch ``target_epoch``).

    Returns the updated member and the machine trigger taken (``None`` when nothing moved).
    Raises FENCED_MEMBER_EPOCH for a member in the UNKNOWN state that still claims partitions.
    """
    state = member.state
    if state is ReconciliationState.STABLE:
        if member.member_epoch == target_epoch:
            return member, None
        return _next(member, member.member_epoch, target_epoch, target, partition_held, owned_reported, "new target")
    if state is ReconciliationState.UNREVOKED_PARTITIONS:
        if _owns_any(owned_reported, member.pending_revocation):
            return member, None
        # Having revoked, a member that must revoke again for a newer target keeps its epoch
        # (Kafka ``CurrentAssignmentBuilder.build`` as fixed by KAFKA-19974; before, it moved on one).
        return _next(
            member,
            member.member_epoch,
            target_epoch,
            target,
            partition_held,
            owned_reported,
            "revocation acknowledged",
        )
    if state is ReconciliationState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_held, owned_reported, "released")
    # UNKNOWN: only reachable from a future state we do not know; start over, as Kafka does.
    if owned_reported is None or any(owned_reported.values()):
        raise ApiError(Errors.FENCED_MEMBER_EPOCH, "The member is in an unknown state and must rejoin.")
    return _next(member, target_epoch, target_epoch, target, partition_held, owned_reported, "rejoined")


def _next(
    member: ConsumerGroupMember,
    epoch_if_revoking: int,
    target_epoch: int,
    target: Mapping[str, frozenset[int]],
    partition_held: PartitionHeld,
    owned_reported: Assignment | None,
    cause: str,
) -> tuple[ConsumerGroupMember, str]:
    kept: Assignment = {}
    assigned: Assignment = {}
    to_revoke: Assignment = {}
    unreleased = False
    for topic_id in sorted(set(target) | set(member.assigned)):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        revoke = current - keep
        new = wanted - keep
        # A partition this member is releasing right now (its acknowledged revocation) is free
        # for it again; anyone else's is held (Kafka KAFKA-19449).
        releasing = member.pending_revocation.get(topic_id, frozenset())
        free = frozenset(p for p in new if p in releasing or not partition_held(topic_id, p))
        if len(free) != len(new):
            unreleased = True
        if keep:
            kept[topic_id] = keep
        if keep or free:
            assigned[topic_id] = keep | free
        if revoke:
            to_revoke[topic_id] = revoke

    if to_revoke and _owns_any(owned_reported, to_revoke):
        # Revoke first: keep the epoch, hand out nothing new.
        updated = replace(
            member,
            state=ReconciliationState.UNREVOKED_PARTITIONS,
            previous_member_epoch=member.member_epoch,
            member_epoch=epoch_if_revoking,
            assigned=kept,
            pending_revocation=to_revoke,
        )
        trigger = {
            "new target": "new target, must revoke",
            "released": "new target, must revoke",
            "revocation acknowledged": "revocation acknowledged, newer target must revoke",
        }[cause]
    else:
        new_state = ReconciliationState.UNRELEASED_PARTITIONS if unreleased else ReconciliationState.STABLE
        updated = replace(
            member,
            state=new_state,
            previous_member_epoch=member.member_epoch,
            member_epoch=target_epoch,
            assigned=assigned,
            pending_revocation={},
        )
        trigger = _settled_trigger(member.state, new_state, cause)
    RECONCILIATION_MACHINE.require(member.state.value, trigger, updated.state.value)
    return updated, trigger


def _settled_trigger(source: ReconciliationState, target: ReconciliationState, cause: str) -> str:
    unreleased = target is ReconciliationState.UNRELEASED_PARTITIONS
    if source is ReconciliationState.STABLE:
        return "new target, partitions not yet released" if unreleased else "new target, nothing to revoke"
    if source is ReconciliationState.UNREVOKED_PARTITIONS:
        return "revocation acknowledged, partitions not yet released" if unreleased else "revocation acknowledged"
    if source is ReconciliationState.UNRELEASED_PARTITIONS:
        return "still waiting for release" if unreleased else "partitions released"
    return "rejoined, partitions not yet released" if unreleased else "rejoined without partitions"
