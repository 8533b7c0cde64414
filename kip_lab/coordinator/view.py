"""The coordinator's state in the notation of KIP-848's case studies, for tests, notebooks and reviews.

The KIP's case studies draw a group as a table: group epoch, target, and a cell per member
such as ``e2 [0,1] p[2]`` (epoch 2, may use foo-0 and foo-1, foo-2 pending — in its target
but not yet released by its previous owner). ``r[2]`` marks a partition the member was told to
revoke and still holds (the KIP writes ``e1 [0,1,2] (revoking 2)``). One heartbeat may write
several batches; ``states_after_batches`` replays the log one batch at a time to show the
KIP's separate snapshots.
"""

from __future__ import annotations

from typing import Any

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator.classic_group import ClassicGroup
from kip_lab.coordinator.coordinator import GroupCoordinator
from kip_lab.coordinator.group import ConsumerGroup
from kip_lab.coordinator.member import ReconciliationState
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolError
from kip_lab.protocol.records import GroupMetadataValue
from kip_lab.runtime.log import Record
from kip_lab.runtime.result import CoordinatorResult


def _numbers(values: Any) -> str:
    return ",".join(str(v) for v in values)


def member_cell(group: ConsumerGroup | None, member_id: str) -> str:
    """``e<epoch> [usable] p[pending] r[revoking]``, or ``-`` when the member is not in the group."""
    member = group.members.get(member_id) if group is not None else None
    if group is None or member is None:
        return "-"
    assigned = sorted(p for parts in member.assigned.values() for p in parts)
    text = f"e{member.member_epoch} [{_numbers(assigned)}]"
    if member.state is ReconciliationState.UNRELEASED_PARTITIONS:
        target = sorted(p for parts in group.target_of(member_id).values() for p in parts)
        text += f" p[{_numbers(p for p in target if p not in assigned)}]"
    revoking = sorted(p for parts in member.pending_revocation.values() for p in parts)
    if revoking:
        text += f" r[{_numbers(revoking)}]"
    return text


def group_row(group: ConsumerGroup, members: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """One row of a case-study table: epochs, target (in target order), member cells, state."""
    target = {m: [p for parts in t.values() for p in parts] for m, t in sorted(group.target.items())}
    return {
        "GE": group.group_epoch,
        "TE": group.assignment_epoch,
        "target": " ".join(f"{m}:{p}" for m, p in target.items()),
        **{m: member_cell(group, m) for m in members},
        "state": group.state.value,
    }


def _embedded_partitions(assignment: bytes) -> str:
    """A classic member's assignment bytes as ``foo-0,foo-1`` (raw size when not the consumer protocol)."""
    if not assignment:
        return "[]"
    try:
        decoded = ConsumerProtocolAssignment.decode(assignment)
    except ConsumerProtocolError:
        return f"<{len(assignment)} bytes>"
    return "[" + ",".join(f"{t}-{p}" for t, p in decoded.assigned_partitions) + "]"


def classic_group_summary(value: GroupMetadataValue) -> str:
    """A classic group's record in one line: generation, protocol, leader, each member's assignment."""
    members = " ".join(f"{m.member_id}:{_embedded_partitions(m.assignment)}" for m in value.members)
    return f"generation={value.generation}, protocol={value.protocol}, leader={value.leader}, members={{{members}}}"


def classic_group_row(group: ClassicGroup) -> dict[str, Any]:
    """A classic group as one table row: state, generation, protocol, leader, member assignments."""
    return {
        "state": group.state.value,
        "generation": group.generation_id,
        "protocol": group.protocol_name,
        "leader": group.leader_id,
        **{m: _embedded_partitions(v.assignment) for m, v in sorted(group.members.items())},
    }


def describe_record(record: Record, cluster: ClusterMetadata | None = None) -> str:
    """One line: key type (``ConsumerGroup`` prefix dropped), member, the value's non-default fields.

    With ``cluster``, partitions are shown per topic name (a topic that no longer exists by a
    short form of its old id); without, as one flat list.
    """
    key, value = record.key, record.value
    name = type(key).__name__.removeprefix("ConsumerGroup").removesuffix("Key")
    member = getattr(key, "member_id", None)
    head = name + (f"({member})" if member else "")
    if value is None:
        return head + ": tombstone"

    def topic(topic_id: str) -> str:
        found = cluster.topic_by_id(topic_id) if cluster else None
        return found.name if found else f"<old id {topic_id[:6]}…>"

    if isinstance(value, GroupMetadataValue):
        return f"{head}: {classic_group_summary(value)}"
    fields = value.model_dump(exclude_defaults=True)
    for field in ("topic_partitions", "partitions_pending_revocation"):
        if field in fields:
            if cluster is None:
                fields[field] = [p for tp in fields[field] for p in tp["partitions"]]
            else:
                fields[field] = {topic(tp["topic_id"]): tp["partitions"] for tp in fields[field]}
    if "topics" in fields:
        fields["topics"] = {t["topic_name"]: t["num_partitions"] for t in fields["topics"]}
    return head + ": " + ", ".join(f"{k}={v}" for k, v in fields.items())


def states_after_batches(coordinator: GroupCoordinator, result: CoordinatorResult) -> list[GroupCoordinator]:
    """The state right after each batch ``result`` wrote (the last batches of the log), by replay."""
    end = coordinator.log.batch_count
    first = end - len(result.batches)
    return [
        GroupCoordinator.from_log(coordinator.log.truncated(k), coordinator.config, coordinator.cluster, load=False)
        for k in range(first + 1, end + 1)
    ]


def describe_response(response: Any) -> str:
    """A heartbeat response in one line: error, member epoch, usable and pending partitions."""
    text = f"{response.error_code.name}, member epoch {response.member_epoch}, "
    assignment = response.assignment
    if assignment is None:
        text += "no assignment"
    else:
        usable = [p for tp in assignment.assigned_topic_partitions for p in tp.partitions]
        pending = [p for tp in assignment.pending_topic_partitions for p in tp.partitions]
        text += f"use {usable}, pending {pending}"
    if response.should_compute_assignment:
        text += ", ShouldComputeAssignment"
    if response.error_message:
        text += f" ({response.error_message})"
    return text
