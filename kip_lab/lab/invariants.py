"""Invariants checked after every step of a Lab run.

Each has a name and a one-line explanation. A check only looks at what the step could have
changed (a client's assignment, records the coordinator wrote), so a quiet step costs
nothing. A violation is written to the trace at the step that caused it, or raised.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kip_lab.clients.member_state import MemberState as ClientState
from kip_lab.coordinator import GroupState
from kip_lab.coordinator.member import ReconciliationState as MemberState
from kip_lab.lab.share_invariants import READS as SHARE_READS
from kip_lab.lab.share_invariants import SHARE_INVARIANTS, ShareInvariants
from kip_lab.lab.trace import EventKind, TraceEvent
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment
from kip_lab.protocol.records import OffsetCommitKey

INVARIANTS: dict[str, str] = {
    "single-owner": "No partition is owned by two live members of the group, as the clients see it "
    "(classic and mixed groups included, across generations).",
    "epochs-never-go-back": "Group, assignment and member epochs never decrease (a rejoin restarts at 0).",
    "target-covers-subscriptions": "A current target assigns every subscribed partition exactly once.",
    "stable-means-converged": "In a Stable group every member is at the group epoch with nothing pending.",
    "partition-epochs-match-ownership": "The coordinator's partition epochs are exactly what its members hold.",
    "classic-assignment-disjoint": "A classic generation's stored assignment gives each partition to one member.",
}

INVARIANTS.update(SHARE_INVARIANTS)

GONE = (ClientState.UNSUBSCRIBED, ClientState.FENCED, ClientState.STALE, ClientState.FATAL)

# What each group check reads, by the record types that can change it (replay is the only writer).
TARGET_INPUTS = frozenset(
    {
        "ConsumerGroupMemberMetadataKey",
        "ConsumerGroupMetadataKey",
        "ConsumerGroupPartitionMetadataKey",
        "ConsumerGroupTargetAssignmentMetadataKey",
        "ConsumerGroupTargetAssignmentMemberKey",
    }
)
OWNERSHIP_INPUTS = frozenset({"ConsumerGroupMemberMetadataKey", "ConsumerGroupCurrentMemberAssignmentKey"})
ALL_RECORDS = TARGET_INPUTS | OWNERSHIP_INPUTS
NO_GROUP_CHANGE = frozenset({OffsetCommitKey})  # offsets change no group
NOTHING_WRITTEN: frozenset[str] = frozenset()
_kind_of = TraceEvent.kind.fget  # the property's own getter: no descriptor call per event
OWNERSHIP_EVENTS = frozenset({EventKind.ASSIGNMENT_CHANGED, EventKind.STATE_TRANSITION})  # what the clients own
QUIET_EVENTS = frozenset(EventKind) - OWNERSHIP_EVENTS - SHARE_READS  # no check reads what these tell


class InvariantViolation(AssertionError):
    """Raised instead of only tracing when the Lab is built with ``raise_on_violation``."""


class InvariantChecker:
    def __init__(self, raise_on_violation: bool = False) -> None:
        self.raise_on_violation = raise_on_violation
        self.group_epochs: dict[str, tuple[int, int]] = {}
        self.member_epochs: dict[tuple[str, str], int] = {}
        self.client_epochs: dict[tuple[str, int], int] = {}
        self.violations: list[tuple[str, str]] = []
        self.share = ShareInvariants()
        self.ownership_checks = 0  # steps that changed what members own: the Lab weighs them as work

    def check(self, world: Any, events: Iterable[Any]) -> list[tuple[str, str]]:
        """Check what this step's ``events`` and records (``world.written_key_types``) can have changed."""
        if QUIET_EVENTS.issuperset(map(_kind_of, events)) and world.written_key_types <= NO_GROUP_CHANGE:
            return []  # most steps: a message sent or delivered, a heartbeat answered, offsets written
        kinds = set(map(_kind_of, events))
        changed = world.written_key_types - NO_GROUP_CHANGE  # a commit step: empty, with no names made
        written = {t.__name__ for t in changed} if changed else NOTHING_WRITTEN
        wrote = bool(written)
        found: list[tuple[str, str]] = []
        if not kinds.isdisjoint(OWNERSHIP_EVENTS) or wrote:
            self.ownership_checks += 1
            found += self._single_owner(world)
            found += self._client_epochs(world)
        if wrote:
            for group in world.coordinator.groups.values():
                found += self._group(group, written)
        if "GroupMetadataKey" in written:
            found += self._classic_assignments(world)
        if not kinds.isdisjoint(SHARE_READS):
            found += self.share.check(events)
        if found:
            self.violations += found
            if self.raise_on_violation:
                raise InvariantViolation("; ".join(f"{name}: {text}" for name, text in found))
        return found

    def _single_owner(self, world: Any) -> list[tuple[str, str]]:
        """Within each group (two groups may well read the same partition); classic and mixed
        groups too, whatever generation each member is at."""
        groups = world.coordinator.groups
        classic_groups = world.coordinator.classic_groups
        members: dict[str, list[tuple[str, Any]]] = {}
        for name, client in world.clients.items():
            if not getattr(client, "alive", False) or not hasattr(client, "owned") or client.state in GONE:
                continue
            group_id = client.config.group_id
            group = groups.get(group_id) or classic_groups.get(group_id)
            if group is None or client.member_id not in group.members:
                continue  # removed by the coordinator: a zombie until it hears so
            if client.owned:
                members.setdefault(group_id, []).append((name, client.owned))
        found = []
        for group_id in sorted(members):
            owners = members[group_id]
            if len(owners) < 2 or len(set().union(*(o for _, o in owners))) == sum(len(o) for _, o in owners):
                continue  # the common case, at C speed: nobody shares
            seen: dict[tuple[str, int], str] = {}
            for name, owned in sorted(owners, key=lambda item: item[0]):
                for tp in sorted(owned):
                    if tp in seen:
                        found.append(("single-owner", f"{world.partition_name(tp)} is owned by {seen[tp]} and {name}"))
                    seen[tp] = name
        return found

    def _classic_assignments(self, world: Any) -> list[tuple[str, str]]:
        """The leader's SyncGroup assignment, as the coordinator stored it for the generation."""
        found = []
        for group_id, group in sorted(world.coordinator.classic_groups.items()):
            seen: dict[tuple[str, int], str] = {}
            for member_id, member in sorted(group.members.items()):
                if not member.assignment:
                    continue
                for tp in ConsumerProtocolAssignment.decode(member.assignment).assigned_partitions:
                    if tp in seen:
                        found.append(
                            (
                                "classic-assignment-disjoint",
                                f"group {group_id} generation {group.generation_id}: {tp[0]}-{tp[1]} "
                                f"assigned to {seen[tp]} and {member_id}",
                            )
                        )
                    seen[tp] = member_id
        return found

    def _client_epochs(self, world: Any) -> list[tuple[str, str]]:
        found = []
        memory = self.client_epochs
        for name, client in world.clients.items():
            epoch = getattr(client, "member_epoch", None)
            if epoch is None:
                continue
            key = (name, client.incarnation)
            before = memory.get(key)
            if before is not None and 0 < epoch < before:
                found.append(("epochs-never-go-back", f"{name} went from epoch {before} to {epoch}"))
            memory[key] = epoch
        return found

    def _group(self, group: Any, written: set[str] = ALL_RECORDS) -> list[tuple[str, str]]:
        """The group checks; a check whose inputs no written record type can change is skipped."""
        found = []
        gid = group.group_id
        epochs = (group.group_epoch, group.assignment_epoch)
        before = self.group_epochs.get(gid)
        if before is not None and (epochs[0] < before[0] or epochs[1] < before[1]):
            found.append(("epochs-never-go-back", f"group {gid} went from epochs {before} to {epochs}"))
        if group.assignment_epoch > group.group_epoch:
            found.append(("epochs-never-go-back", f"group {gid}: assignment epoch ahead of group epoch {epochs}"))
        self.group_epochs[gid] = epochs
        for member_id, member in group.members.items():
            key = (gid, member_id)
            last = self.member_epochs.get(key)
            if last is not None and member.member_epoch > 0 and member.member_epoch < last:
                found.append(("epochs-never-go-back", f"{member_id} went from epoch {last} to {member.member_epoch}"))
            self.member_epochs[key] = member.member_epoch
        for key in [k for k in self.member_epochs if k[0] == gid and k[1] not in group.members]:
            del self.member_epochs[key]

        client_side = any(m.client_assignors for m in group.members.values())
        if (
            written & TARGET_INPUTS
            and group.members
            and group.group_epoch == group.assignment_epoch
            and not client_side
        ):
            wanted = {(tid, p) for tid, n in group.subscription_metadata.values() for p in range(n)}
            targets = group.target
            flat = [(tid, p) for m in group.members for tid, parts in targets.get(m, {}).items() for p in parts]
            covered = set(flat)
            if len(covered) != len(flat) or not wanted <= covered:  # else: once each, all covered
                counted: dict[tuple[str, int], int] = {}
                for tp in flat:
                    counted[tp] = counted.get(tp, 0) + 1
                twice = sorted(tp for tp, n in counted.items() if n > 1)
                missing = sorted(wanted - covered)
                if twice or missing:
                    found.append(
                        (
                            "target-covers-subscriptions",
                            f"group {gid}: assigned twice {twice[:5]}, unassigned {missing[:5]}",
                        )
                    )

        if group.state is GroupState.STABLE:
            for member_id, member in sorted(group.members.items()):
                if (
                    member.member_epoch != group.group_epoch
                    or member.pending_revocation
                    or member.state is not MemberState.STABLE
                    or member.assigned != group.target_of(member_id)
                ):
                    found.append(("stable-means-converged", f"group {gid} is Stable but {member_id} is not converged"))

        if not written & OWNERSHIP_INPUTS:
            return found
        held: dict[str, dict[int, int]] = {}
        for member in group.members.values():
            for tid, parts in member.owned().items():
                held.setdefault(tid, {}).update(dict.fromkeys(parts, member.member_epoch))
        if held != group.partition_epochs:
            found.append(("partition-epochs-match-ownership", f"group {gid}: partition epochs differ from ownership"))
        return found
