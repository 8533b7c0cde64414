"""What a consumer group with real members looks like at its coordinator.

``Lab.is_stable`` counts real members as their messages show them (``kip_lab.lab.observed``);
this is the coordinator's own view of a KIP-848 group: settled once every member is at the
group epoch with no partition left to revoke.
"""

from __future__ import annotations

from typing import Any


def settled_assignment(lab: Any, group_id: str) -> dict[str, set[tuple[str, int]]] | None:
    """client id -> the (topic name, partition)s the coordinator assigns that member, once the
    KIP-848 group ``group_id`` is settled (every member at the group epoch, none with partitions
    pending revocation); None while it is not, or has no members. Members without a client id
    (the Lab's scripted members) are keyed by member id."""
    group = lab.coordinator.groups.get(group_id)
    if group is None or not group.members:
        return None
    split = {}
    for member in group.members.values():
        if member.member_epoch != group.group_epoch or any(member.pending_revocation.values()):
            return None
        split[member.client_id or member.member_id] = {
            (lab.cluster.topic_by_id(t).name, p) for t, parts in member.assigned.items() for p in parts
        }
    return split
