"""KIP-932 RPCs served by the group coordinator for share groups, KIP field names in snake_case.

ShareGroupHeartbeat (membership), ShareGroupDescribe, and the admin RPCs on share-partition
start offsets: AlterShareGroupOffsets, DeleteShareGroupOffsets, DescribeShareGroupOffsets.
The KIP defines no RPCs to list or delete share groups (the admin client uses ListGroups and
DeleteGroups with the share type); ``ListShareGroups`` and ``DeleteShareGroups`` below stand in
for those (docs/decisions.md SG6). Types are checked here; the KIP's semantic rules are checked by the
coordinator, which answers with an error code as Kafka does.
"""

from __future__ import annotations

from pydantic import Field

from kip_lab.protocol.common import Message, TopicPartitions
from kip_lab.protocol.errors import Errors

SHARE_JOIN_MEMBER_EPOCH = 0
SHARE_LEAVE_MEMBER_EPOCH = -1


# -- ShareGroupHeartbeat (apiKey 76) ---------------------------------------------------
class ShareGroupHeartbeatRequest(Message):
    """Optional fields are ``None`` when unchanged since the member's last heartbeat.

    There is no instance id: share groups have no static membership (KIP-932).
    """

    group_id: str
    member_id: str = ""
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None
    # Not body fields in Kafka: they come from the request header / connection.
    client_id: str = ""
    client_host: str = ""


class ShareGroupHeartbeatAssignment(Message):
    topic_partitions: list[TopicPartitions] = Field(default_factory=list)


class ShareGroupHeartbeatResponse(Message):
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: ShareGroupHeartbeatAssignment | None = None


# -- ShareGroupDescribe (apiKey 77) -----------------------------------------------------
class ShareGroupDescribeRequest(Message):
    group_ids: list[str]
    include_authorized_operations: bool = False


class DescribedShareTopicPartitions(Message):
    topic_id: str
    topic_name: str
    partitions: list[int]


class DescribedShareMember(Message):
    member_id: str
    rack_id: str | None = None
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str]
    assignment: list[DescribedShareTopicPartitions]


class DescribedShareGroup(Message):
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    group_id: str
    group_state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: list[DescribedShareMember] = Field(default_factory=list)
    authorized_operations: int = -(2**31)


class ShareGroupDescribeResponse(Message):
    throttle_time_ms: int = 0
    groups: list[DescribedShareGroup]


# -- list / delete (stand-ins for ListGroups(type=share) and DeleteGroups) -----------------
class ListShareGroupsRequest(Message):
    states_filter: list[str] = Field(default_factory=list, description="Empty, Stable or Dead; empty = all")


class ListedShareGroup(Message):
    group_id: str
    group_state: str


class ListShareGroupsResponse(Message):
    error_code: Errors = Errors.NONE
    groups: list[ListedShareGroup]


class DeleteShareGroupsRequest(Message):
    groups_names: list[str]


class DeletedShareGroup(Message):
    group_id: str
    error_code: Errors = Errors.NONE
    error_message: str | None = None


class DeleteShareGroupsResponse(Message):
    results: list[DeletedShareGroup]


# -- AlterShareGroupOffsets ------------------------------------------------------------
class AlterShareGroupOffsetsRequestPartition(Message):
    partition_index: int = Field(ge=0)
    start_offset: int = Field(ge=0)


class AlterShareGroupOffsetsRequestTopic(Message):
    topic_name: str = Field(min_length=1)
    partitions: list[AlterShareGroupOffsetsRequestPartition]


class AlterShareGroupOffsetsRequest(Message):
    group_id: str
    topics: list[AlterShareGroupOffsetsRequestTopic]


class ShareOffsetsResponsePartition(Message):
    partition_index: int
    start_offset: int = -1
    error_code: Errors = Errors.NONE
    error_message: str | None = None


class ShareOffsetsResponseTopic(Message):
    topic_name: str
    topic_id: str | None = None
    partitions: list[ShareOffsetsResponsePartition]


class AlterShareGroupOffsetsResponse(Message):
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    responses: list[ShareOffsetsResponseTopic] = Field(default_factory=list)


# -- DeleteShareGroupOffsets -----------------------------------------------------------
class DeleteShareGroupOffsetsRequest(Message):
    group_id: str
    topic_names: list[str]


class DeleteShareGroupOffsetsResponseTopic(Message):
    topic_name: str
    topic_id: str | None = None
    error_code: Errors = Errors.NONE
    error_message: str | None = None


class DeleteShareGroupOffsetsResponse(Message):
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    responses: list[DeleteShareGroupOffsetsResponseTopic] = Field(default_factory=list)


# -- DescribeShareGroupOffsets ---------------------------------------------------------
class DescribeShareGroupOffsetsRequestTopic(Message):
    topic_name: str
    partitions: list[int]


class DescribeShareGroupOffsetsRequest(Message):
    group_id: str
    topics: list[DescribeShareGroupOffsetsRequestTopic] | None = None  # None: every initialized partition


class DescribeShareGroupOffsetsResponse(Message):
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    responses: list[ShareOffsetsResponseTopic] = Field(default_factory=list)
