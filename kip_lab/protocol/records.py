"""The consumer-group records on ``__consumer_offsets`` (KIP-848 newer layout, key versions 0-8).

A record is a key and a value (``kip_lab.runtime.Record``); ``None`` as the value is a
tombstone. Each key type has its own ``key_version`` so that log compaction never merges
two kinds of record, as the KIP requires.

Fields marked [Kafka] are not in the KIP's record schemas but are in Apache Kafka's (the
KIP's member record lacks what a coordinator needs after failover; see docs/decisions.md):
``rebalance_timeout_ms`` and ``server_assignor`` on the member record; ``state``,
``previous_member_epoch`` and ``partitions_pending_revocation`` on the current assignment;
``topic_name`` in the partition metadata.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar, NamedTuple

from pydantic import Field

from kip_lab.protocol.common import Message, TopicPartitions, value_fields
from kip_lab.protocol.consumer_group import ClientAssignor


class RecordKey(Message):
    key_version: ClassVar[int]


# -- offsets (key versions 0 and 1: the classic OffsetCommit record, extended) ------------
class OffsetCommitKey(RecordKey):
    key_version: ClassVar[int] = 1
    group: str
    topic: str
    partition: int

    @cached_property
    def partition_key(self) -> tuple[str, int]:
        """(topic, partition): where the offset goes in its group's offsets. Made once per key, and
        the coordinator shares one key per partition across commits, so replaying a commit finds
        each entry by the very tuple that keys it."""
        return (self.topic, self.partition)


class OffsetCommitValue(NamedTuple):
    """One partition's committed offset.

    A plain immutable value, not a ``Message`` like the other records: it is the one record
    written at volume (one per partition per commit interval of every member), always built by
    the coordinator from values already typed (a validated OffsetCommit request and its clock),
    so validating it again cost a tenth of a stable group's run and three times the memory
    (docs/decisions.md P12). ``model_dump`` gives the view a ``Message`` gives.
    """

    offset: int
    commit_timestamp: int
    leader_epoch: int = -1
    metadata: str | None = None
    topic_id: str | None = None  # v4: lets a recreated topic start fresh

    def model_dump(self, exclude_defaults: bool = False) -> dict[str, Any]:
        return value_fields(self, exclude_defaults)


# -- key version 3 --------------------------------------------------------------------
class ConsumerGroupMetadataKey(RecordKey):
    key_version: ClassVar[int] = 3
    group_id: str


class ConsumerGroupMetadataValue(Message):
    epoch: int


# -- key version 4 --------------------------------------------------------------------
class PartitionMetadataTopic(Message):
    topic_id: str
    topic_name: str  # [Kafka]
    num_partitions: int


class ConsumerGroupPartitionMetadataKey(RecordKey):
    key_version: ClassVar[int] = 4
    group_id: str


class ConsumerGroupPartitionMetadataValue(Message):
    epoch: int
    topics: list[PartitionMetadataTopic]


# -- key version 5 --------------------------------------------------------------------
class ConsumerGroupMemberMetadataKey(RecordKey):
    key_version: ClassVar[int] = 5
    group_id: str
    member_id: str


class ClassicProtocol(Message):
    """One JoinGroup protocol a classic member supports: its name and embedded subscription bytes."""

    name: str
    metadata: bytes = b""


class ClassicMemberMetadata(Message):
    """[Kafka] Set only for a member that speaks the classic protocol inside a consumer group."""

    session_timeout_ms: int
    supported_protocols: list[ClassicProtocol]


class ConsumerGroupMemberMetadataValue(Message):
    group_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = Field(default_factory=list)
    subscribed_topic_regex: str | None = None
    assignors: list[ClientAssignor] = Field(default_factory=list)
    server_assignor: str | None = None  # [Kafka]
    rebalance_timeout_ms: int = -1  # [Kafka]
    classic_member_metadata: ClassicMemberMetadata | None = None  # [Kafka] online migration


# -- key version 6 --------------------------------------------------------------------
class ConsumerGroupTargetAssignmentMetadataKey(RecordKey):
    key_version: ClassVar[int] = 6
    group_id: str


class ConsumerGroupTargetAssignmentMetadataValue(Message):
    assignment_epoch: int


# -- key version 7 --------------------------------------------------------------------
class ConsumerGroupTargetAssignmentMemberKey(RecordKey):
    key_version: ClassVar[int] = 7
    group_id: str
    member_id: str


class ConsumerGroupTargetAssignmentMemberValue(Message):
    """``topic_partitions`` keeps the order the assignor gave (the uniform assignor's stickiness)."""

    error: int = 0
    topic_partitions: list[TopicPartitions]
    metadata_version: int = 0
    metadata_bytes: bytes = b""


# -- key version 8 --------------------------------------------------------------------
class ConsumerGroupCurrentMemberAssignmentKey(RecordKey):
    key_version: ClassVar[int] = 8
    group_id: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentValue(Message):
    """``topic_partitions`` holds the partitions the member may use (the KIP's ``partitions``)."""

    member_epoch: int
    previous_member_epoch: int = -1  # [Kafka]
    state: str = "STABLE"  # [Kafka] the server-side reconciliation state
    error: int = 0
    topic_partitions: list[TopicPartitions]
    partitions_pending_revocation: list[TopicPartitions] = Field(default_factory=list)  # [Kafka]
    metadata_version: int = 0
    metadata_bytes: bytes = b""


# -- share groups (KIP-932), key versions 9-15 -------------------------------------------
class ShareGroupPartitionMetadataKey(RecordKey):
    key_version: ClassVar[int] = 9
    group_id: str


class ShareGroupPartitionMetadataValue(Message):
    """The subscribed topics' metadata (to notice partition changes), as for consumer groups."""

    epoch: int
    topics: list[PartitionMetadataTopic]


class ShareGroupMemberMetadataKey(RecordKey):
    key_version: ClassVar[int] = 10
    group_id: str
    member_id: str


class ShareGroupMemberMetadataValue(Message):
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = Field(default_factory=list)


class ShareGroupMetadataKey(RecordKey):
    key_version: ClassVar[int] = 11
    group_id: str


class ShareGroupMetadataValue(Message):
    epoch: int


class ShareGroupTargetAssignmentMetadataKey(RecordKey):
    key_version: ClassVar[int] = 12
    group_id: str


class ShareGroupTargetAssignmentMetadataValue(Message):
    assignment_epoch: int


class ShareGroupTargetAssignmentMemberKey(RecordKey):
    key_version: ClassVar[int] = 13
    group_id: str
    member_id: str


class ShareGroupTargetAssignmentMemberValue(Message):
    topic_partitions: list[TopicPartitions]


class ShareGroupCurrentMemberAssignmentKey(RecordKey):
    key_version: ClassVar[int] = 14
    group_id: str
    member_id: str


class ShareGroupCurrentMemberAssignmentValue(Message):
    member_epoch: int
    previous_member_epoch: int = -1
    state: int = 0
    assigned_partitions: list[TopicPartitions]


class StatePartitionTopic(Message):
    topic_id: str
    topic_name: str
    partitions: list[int] = Field(default_factory=list)


class ShareGroupStatePartitionMetadataKey(RecordKey):
    key_version: ClassVar[int] = 15
    group_id: str


class ShareGroupStatePartitionMetadataValue(Message):
    """Which share-partitions have persistent state on the share coordinator (the KIP's "hard" state)."""

    initialized_topics: list[StatePartitionTopic] = Field(default_factory=list)
    deleting_topics: list[StatePartitionTopic] = Field(default_factory=list)


SHARE_GROUP_RECORD_KEYS = (
    ShareGroupPartitionMetadataKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupStatePartitionMetadataKey,
)


# -- key version 2: the classic group (Kafka's GroupMetadataKey/GroupMetadataValue) ---------
class GroupMetadataKey(RecordKey):
    """A classic group's one record. Kafka names the field ``group`` (not ``group_id``)."""

    key_version: ClassVar[int] = 2
    group: str


class MemberMetadata(Message):
    """One classic member as persisted when its group completes a rebalance."""

    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout: int = -1
    session_timeout: int
    subscription: bytes = b""  # the metadata of the group's selected protocol
    assignment: bytes = b""


class GroupMetadataValue(Message):
    """The whole classic group, rewritten at each completed rebalance (and at conversion)."""

    protocol_type: str
    generation: int
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = Field(default_factory=list)
