"""KIP-848 RPCs served by the group coordinator, with the KIP's field names in snake_case.

ConsumerGroupHeartbeat, ConsumerGroupDescribe, ConsumerGroupPrepareAssignment and
ConsumerGroupInstallAssignment (client-side assignor mode), and the member-epoch versions
(v9) of OffsetCommit and OffsetFetch. Types are checked here (pydantic); the KIP's semantic
rules (INVALID_REQUEST and friends) are checked by the coordinator, which answers them with
an error code as Kafka does.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, NamedTuple

from pydantic import Field, GetCoreSchemaHandler
from pydantic_core import core_schema

from kip_lab.protocol.common import Message, TopicPartitions, dumped_as_fields
from kip_lab.protocol.errors import Errors

# Special member epochs (KIP-848 "Joining, leaving and fencing").
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class ClientAssignor(Message):
    """A client-side assignor a member supports; list order is the member's priority."""

    name: str
    minimum_version: int = -1
    maximum_version: int = 0
    reason: int = 0
    metadata_version: int = 0
    metadata_bytes: bytes = b""


# -- ConsumerGroupHeartbeat ---------------------------------------------------------------
class ConsumerGroupHeartbeatRequest(Message):
    """Optional fields are ``None`` when unchanged since the member's last heartbeat."""

    group_id: str
    member_id: str = ""
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    client_assignors: list[ClientAssignor] | None = None
    topic_partitions: list[TopicPartitions] | None = None
    # Not body fields in Kafka: they come from the request header / connection.
    client_id: str = ""
    client_host: str = ""


class HeartbeatAssignment(Message):
    error: int = 0
    assigned_topic_partitions: list[TopicPartitions] = Field(default_factory=list)
    pending_topic_partitions: list[TopicPartitions] = Field(default_factory=list)
    metadata_version: int = 0
    metadata_bytes: bytes = b""


class ConsumerGroupHeartbeatResponse(Message):
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    should_compute_assignment: bool = False
    heartbeat_interval_ms: int = 0
    assignment: HeartbeatAssignment | None = None


# -- ConsumerGroupDescribe ----------------------------------------------------------------
class ConsumerGroupDescribeRequest(Message):
    group_ids: list[str]
    include_authorized_operations: bool = False


class DescribedTopicPartitions(Message):
    topic_id: str
    topic_name: str
    partitions: list[int]


class DescribedAssignment(Message):
    topic_partitions: list[DescribedTopicPartitions] = Field(default_factory=list)
    error: int = 0
    metadata_version: int = 0
    metadata_bytes: bytes = b""


class DescribedMember(Message):
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: DescribedAssignment
    target_assignment: DescribedAssignment


class DescribedGroup(Message):
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    group_id: str
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list[DescribedMember] = Field(default_factory=list)
    authorized_operations: int = -2147483648


class ConsumerGroupDescribeResponse(Message):
    throttle_time_ms: int = 0
    groups: list[DescribedGroup]


# -- ConsumerGroupPrepareAssignment (client-side assignor mode) ----------------------------
class ConsumerGroupPrepareAssignmentRequest(Message):
    group_id: str
    member_id: str
    member_epoch: int


class PreparedAssignorMetadata(Message):
    reason: int = 0
    metadata_version: int = 0
    metadata_bytes: bytes = b""


class PreparedMember(Message):
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: list[str]
    assignor: PreparedAssignorMetadata
    topic_partitions: list[TopicPartitions]


class PreparedTopic(Message):
    topic_id: str
    topic_name: str
    num_partitions: int


class ConsumerGroupPrepareAssignmentResponse(Message):
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    group_epoch: int = 0
    assignor_name: str = ""
    members: list[PreparedMember] = Field(default_factory=list)
    topics: list[PreparedTopic] = Field(default_factory=list)


# -- ConsumerGroupInstallAssignment (client-side assignor mode) ----------------------------
class InstalledMemberAssignment(Message):
    member_id: str
    partitions: list[TopicPartitions]
    metadata_version: int = 0
    metadata_bytes: bytes = b""


class ConsumerGroupInstallAssignmentRequest(Message):
    group_id: str
    member_id: str
    member_epoch: int
    group_epoch: int
    error: int = 0
    members: list[InstalledMemberAssignment]


class ConsumerGroupInstallAssignmentResponse(Message):
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    error_message: str | None = None


# -- OffsetCommit v9 ----------------------------------------------------------------------
class OffsetCommitRequestPartition(NamedTuple):
    """One partition's offset to commit.

    A NamedTuple, not a ``Message``: a stable group sends one per fetching partition every
    commit interval, and the trace keeps every request sent. Pydantic still checks it, field by
    field and by name, when the topic holding it is built (a tuple or a dict of its fields is
    accepted, an unknown field is an error), and it dumps as a dict like a ``Message``
    (docs/decisions.md P13).
    """

    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return dumped_as_fields(cls, source, handler)


class OffsetCommitRequestTopic(Message):
    """v9 names a topic by ``name`` or by ``topic_id`` — never both (INVALID_REQUEST)."""

    name: str | None = None
    topic_id: str | None = None
    partitions: list[OffsetCommitRequestPartition]


class OffsetCommitRequest(Message):
    """``api_version`` is the version the client spoke (the wire front door sets it; the Lab's
    own clients speak v9): below 9, a generation to a group that does not exist is
    ILLEGAL_GENERATION instead of GROUP_ID_NOT_FOUND (Kafka ``OffsetMetadataManager.validateOffsetCommit``)."""

    group_id: str
    generation_id_or_member_epoch: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    topics: list[OffsetCommitRequestTopic]
    api_version: int = 9


class OffsetCommitResponsePartition(Message):
    partition_index: int
    error_code: Errors = Errors.NONE


class OffsetCommitResponseTopic(Message):
    name: str | None = None
    topic_id: str | None = None
    partitions: list[OffsetCommitResponsePartition]


class OffsetCommitResponse(Message):
    throttle_time_ms: int = 0
    topics: list[OffsetCommitResponseTopic]

    @cached_property
    def error_codes(self) -> frozenset[Errors]:
        """The distinct error codes of its partitions, worked out once: the coordinator answers a
        member's every commit of the same partitions with the same (interned) response."""
        return frozenset(p.error_code for t in self.topics for p in t.partitions)


# -- OffsetFetch v9 -----------------------------------------------------------------------
class OffsetFetchRequestTopic(Message):
    name: str | None = None
    topic_id: str | None = None
    partition_indexes: list[int]


class OffsetFetchRequestGroup(Message):
    """Member id and epoch are per group (the KIP's top-level placement is read as Kafka's)."""

    group_id: str
    member_id: str | None = None
    member_epoch: int = -1
    topics: list[OffsetFetchRequestTopic] | None = None  # None: every committed offset


class OffsetFetchRequest(Message):
    """``require_stable`` asks Kafka to wait for pending transactional offsets; the Lab has none,
    so it changes nothing. Kafka's coordinator answers every version alike, so, unlike
    ``OffsetCommitRequest``, the request does not carry its version."""

    groups: list[OffsetFetchRequestGroup]
    require_stable: bool = False


class OffsetFetchResponsePartition(Message):
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = None
    error_code: Errors = Errors.NONE


class OffsetFetchResponseTopic(Message):
    name: str | None = None
    topic_id: str | None = None
    partitions: list[OffsetFetchResponsePartition]


class OffsetFetchResponseGroup(Message):
    group_id: str
    topics: list[OffsetFetchResponseTopic] = Field(default_factory=list)
    error_code: Errors = Errors.NONE


class OffsetFetchResponse(Message):
    throttle_time_ms: int = 0
    groups: list[OffsetFetchResponseGroup]


# -- DeleteGroups ---------------------------------------------------------------------------
class DeleteGroupsRequest(Message):
    """Delete empty groups (consumer, classic or share) with their committed offsets."""

    groups_names: list[str]


class DeletableGroupResult(Message):
    group_id: str
    error_code: Errors = Errors.NONE


class DeleteGroupsResponse(Message):
    throttle_time_ms: int = 0
    results: list[DeletableGroupResult]
