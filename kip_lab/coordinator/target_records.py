"""The batch that writes a new target assignment, for consumer and share groups alike (KIP-848 W3, KIP-932).

Which records it holds is the same for both group types — one per member whose target
changed or is new, a tombstone per member no longer in it, then the metadata record with the
new assignment epoch; only the record types differ, so the caller builds those.
"""

from __future__ import annotations

from collections.abc import Callable

from kip_lab.coordinator.group import TargetPartitions
from kip_lab.runtime.log import Record


def target_assignment_batch(
    old: dict[str, TargetPartitions],
    new: dict[str, TargetPartitions],
    member_record: Callable[[str, TargetPartitions | None], Record],
    metadata_record: Record,
) -> tuple[Record, ...]:
    """``member_record(member_id, None)`` is the member's tombstone; members in member-id order."""
    records = [member_record(m, new[m]) for m in sorted(new) if m not in old or new[m] != old[m]]
    records += [member_record(m, None) for m in sorted(old) if m not in new]
    records.append(metadata_record)
    return tuple(records)
