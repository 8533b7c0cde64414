"""The share-state records on ``__share_group_state`` (KIP-932 "Share-group state records").

Both record types are keyed by (group, topic id, partition), so every record of one
share-partition lands on one state-topic partition; the key version tells them apart
(0 = ShareSnapshot, 1 = ShareUpdate). Field set: the KIP's JSON schemas with signed epochs
(docs/decisions.md SP2): a snapshot holds the whole durable state; an update holds what one
write changed and the snapshot epoch it applies to. A ShareSnapshot whose snapshot epoch is
-1 is the deletion marker.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from kip_lab.protocol.common import Message
from kip_lab.protocol.records import RecordKey
from kip_lab.protocol.share import StateBatch

DELETED_SNAPSHOT_EPOCH = -1


class ShareSnapshotKey(RecordKey):
    key_version: ClassVar[int] = 0
    group_id: str
    topic_id: str
    partition: int


class ShareSnapshotValue(Message):
    snapshot_epoch: int = Field(ge=DELETED_SNAPSHOT_EPOCH)
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[StateBatch] = Field(default_factory=list)


class ShareUpdateKey(RecordKey):
    key_version: ClassVar[int] = 1
    group_id: str
    topic_id: str
    partition: int


class ShareUpdateValue(Message):
    """``start_offset`` -1 means "unchanged"; ``state_batches`` overlay the stored ones."""

    snapshot_epoch: int = Field(ge=0)
    leader_epoch: int
    start_offset: int
    state_batches: list[StateBatch] = Field(default_factory=list)
