"""Share-group invariants (KIP-932), checked from what the share-partition leaders trace.

Each step's ``share_acquired`` and ``share_state_write`` events say which records changed and
where the share-partition start offset (SPSO) is; the checks keep a small memory per
share-partition and compare. They read events rather than the leaders' state so that a
broken leader (one that hands a record out twice, or reports a lower delivery count) is
caught: its own state would agree with itself.

At-least-once is a property of a whole run, not of a step: ``at_least_once`` says, at the
end, which share-partitions still have records that are neither Acknowledged nor Archived.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kip_lab.contract import checked, refuse
from kip_lab.events import EventKind, Note, ShareAcquired, ShareStateRpc, ShareStateWrite

SHARE_INVARIANTS: dict[str, str] = {
    "share-single-acquirer": "A record is acquired by at most one member at a time.",
    "share-delivery-counts-never-decrease": "A record's delivery count never goes down (an admin reset aside).",
    "share-start-offset-never-back": "A share-partition's start offset never moves back, except by an admin reset.",
    "share-at-least-once": "With consumers that keep running, every produced record ends Acknowledged or Archived "
    "(checked at the end of a run: share_invariants.at_least_once).",
}

ACQUIRED = "Acquired"
# The event kinds the checks read; a step with none of them is not looked at.
READS = frozenset({EventKind.SHARE_ACQUIRED, EventKind.SHARE_STATE_WRITE, EventKind.SHARE_STATE_RPC, EventKind.NOTE})
SPKey = tuple[str, str, int]  # (group id, topic id, partition)


class ShareInvariants:
    def __init__(self) -> None:
        self.holders: dict[SPKey, dict[int, str]] = {}
        self.counts: dict[SPKey, dict[int, int]] = {}
        self.starts: dict[tuple[str, SPKey], int] = {}  # (leader broker, share-partition) -> SPSO

    def check(self, events: Iterable[Any]) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for event in events:
            body = event.body
            if isinstance(body, ShareAcquired):
                found += self._acquired(event.actor, body)
            elif isinstance(body, ShareStateWrite):
                found += self._written(event.actor, body)
            elif isinstance(body, ShareStateRpc) and body.api == "InitializeShareGroupState" and body.request:
                self._reset(body.request)
            elif isinstance(body, Note) and "share_leader_moved" in body.details:
                topic_id, partition = body.details["share_leader_moved"]
                for key in [k for k in self.holders if k[1:] == (topic_id, partition)]:
                    del self.holders[key]  # the new leader reloads: acquisitions are not durable
                for memory in [m for m in self.starts if m[1][1:] == (topic_id, partition)]:
                    del self.starts[memory]  # a leader that comes back reloads (its durable start may lag)
        return found

    @staticmethod
    def _key(event: ShareAcquired | ShareStateWrite) -> SPKey:
        return (event.group_id, event.topic_id, event.partition)

    def _acquired(self, broker: str, event: ShareAcquired) -> list[tuple[str, str]]:
        key = self._key(event)
        member = event.member_id
        holders = self.holders.setdefault(key, {})
        counts = self.counts.setdefault(key, {})
        found = []
        for first, last, count in event.ranges:
            for offset in range(first, last + 1):
                held_by = holders.get(offset)
                if held_by is not None:
                    found.append(
                        (
                            "share-single-acquirer",
                            f"{key[1]}-{key[2]}@{offset} acquired by {member} while {held_by} holds it",
                        )
                    )
                holders[offset] = member
                found += self._count(key, counts, offset, count)
        return found + self._start(broker, key, event.spso)

    def _written(self, broker: str, event: ShareStateWrite) -> list[tuple[str, str]]:
        if event.error is not None:
            return []  # refused by the share coordinator: nothing changed
        key = self._key(event)
        holders = self.holders.setdefault(key, {})
        counts = self.counts.setdefault(key, {})
        found = []
        for first, last, _, target in event.transitions:
            if target != ACQUIRED:
                for offset in range(first, last + 1):
                    holders.pop(offset, None)
        for batch in event.request["state_batches"]:  # the request, as JSON
            for offset in range(batch["first_offset"], batch["last_offset"] + 1):
                found += self._count(key, counts, offset, batch["delivery_count"])
        return found + self._start(broker, key, event.spso)

    def _count(self, key: SPKey, counts: dict[int, int], offset: int, count: int) -> list[tuple[str, str]]:
        before = counts.get(offset, 0)
        counts[offset] = max(before, count)
        if count < before:
            return [
                (
                    "share-delivery-counts-never-decrease",
                    f"{key[1]}-{key[2]}@{offset}: delivery count went from {before} to {count}",
                )
            ]
        return []

    def _start(self, broker: str, key: SPKey, spso: int | None) -> list[tuple[str, str]]:
        if spso is None:
            return []
        memory = (broker, key)
        before = self.starts.get(memory)
        self.starts[memory] = spso if before is None else max(before, spso)
        # Forget what the start offset has passed: those records are Archived for good.
        for table in (self.holders.get(key), self.counts.get(key)):
            if table:
                for offset in [o for o in table if o < spso]:
                    del table[offset]
        if before is not None and spso < before:
            return [
                ("share-start-offset-never-back", f"{key[1]}-{key[2]} at {broker}: SPSO went from {before} to {spso}")
            ]
        return []

    def _reset(self, request: dict) -> None:
        """InitializeShareGroupState restarts a share-partition (an admin reset): its history is void."""
        for topic in request["topics"]:
            for p in topic["partitions"]:
                key = (request["group_id"], topic["topic_id"], p["partition"])
                self.holders.pop(key, None)
                self.counts.pop(key, None)
                for memory in [m for m in self.starts if m[1] == key]:
                    del self.starts[memory]


@checked
def at_least_once(world: Any) -> list[tuple[str, str]]:
    """Share-partitions whose records are not all Acknowledged or Archived (the SPSO short of the log end)."""
    if not hasattr(world, "share"):
        raise refuse("at_least_once", "world", f"a Lab's world (lab.world), not {type(world).__name__}")
    found = []
    share = world.share
    for group_id, group in sorted(world.coordinator.share_groups.items()):
        for topic_id, (name, partitions) in sorted(group.initialized.items()):
            for p in sorted(partitions):
                tp = (topic_id, p)
                sp = share.share_partition(group_id, tp)
                end = share.topic_log(tp).high_watermark
                if sp is None:
                    if end > 0:
                        found.append(("share-at-least-once", f"group {group_id}: {name}-{p} was never read"))
                    continue
                if sp.spso < end:
                    open_ = [(r.first_offset, r.last_offset, r.state) for r in sp.records()][:5]
                    found.append(
                        (
                            "share-at-least-once",
                            f"group {group_id}: {name}-{p} has records up to {end} but its SPSO is {sp.spso} {open_}",
                        )
                    )
    return found
