"""The classic group protocol's RPCs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).

Field names are Apache Kafka's message schemas in snake_case (JoinGroup v9, SyncGroup v5,
Heartbeat v4, LeaveGroup v5). ``metadata`` and ``assignment`` are opaque bytes to the
coordinator: for ``protocol_type="consumer"`` they hold the consumer protocol's
subscription and assignment (``kip_lab.protocol.consumer_protocol``), which only the
clients — and the coordinator during online migration — decode.

The MEMBER_ID_REQUIRED flow (JoinGroup v4+, KIP-394): a dynamic member's first JoinGroup
carries ``member_id=""``; the coordinator answers MEMBER_ID_REQUIRED with the id it picked
in ``member_id``, and the member joins again with that id. Static members (with a
``group_instance_id``) skip the round trip.
"""

from __future__ import annotations

from pydantic import Field

from kip_lab.protocol.common import Message
from kip_lab.protocol.errors import Errors

# Kafka's sentinels: an unknown member id and the generation a group without one reports.
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
CONSUMER_PROTOCOL_TYPE = "consumer"
FIRST_VERSION_REQUIRING_MEMBER_ID = 4  # JoinGroup v4 (KIP-394)


# -- JoinGroup ----------------------------------------------------------------------------
class JoinGroupRequestProtocol(Message):
    """One assignment protocol the member supports; list order is the member's preference."""

    name: str = Field(min_length=1)
    metadata: bytes = b""


class JoinGroupRequest(Message):
    group_id: str
    session_timeout_ms: int = Field(gt=0)
    rebalance_timeout_ms: int = -1  # -1: the session timeout (JoinGroup v0 semantics)
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    protocol_type: str = CONSUMER_PROTOCOL_TYPE
    protocols: list[JoinGroupRequestProtocol]
    reason: str | None = None
    # Not body fields in Kafka: they come from the request header / connection / version.
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True  # JoinGroup v4+ (KIP-394); before, a new member joins at once


class JoinGroupResponseMember(Message):
    member_id: str
    group_instance_id: str | None = None
    metadata: bytes = b""


class JoinGroupResponse(Message):
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = UNKNOWN_MEMBER_ID
    members: list[JoinGroupResponseMember] = Field(default_factory=list)  # the leader's only


# -- SyncGroup ----------------------------------------------------------------------------
class SyncGroupRequestAssignment(Message):
    member_id: str
    assignment: bytes = b""


class SyncGroupRequest(Message):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: list[SyncGroupRequestAssignment] = Field(default_factory=list)  # the leader's only


class SyncGroupResponse(Message):
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


# -- Heartbeat ----------------------------------------------------------------------------
class HeartbeatRequest(Message):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


class HeartbeatResponse(Message):
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE


# -- LeaveGroup ---------------------------------------------------------------------------
class MemberIdentity(Message):
    """A member leaving: by ``member_id``, or a static member by ``group_instance_id``."""

    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    reason: str | None = None


class LeaveGroupRequest(Message):
    group_id: str
    members: list[MemberIdentity] = Field(min_length=1)


class LeaveGroupResponseMember(Message):
    member_id: str
    group_instance_id: str | None = None
    error_code: Errors = Errors.NONE


class LeaveGroupResponse(Message):
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    members: list[LeaveGroupResponseMember] = Field(default_factory=list)


# -- DescribeGroups (classic view of any consumer-protocol group) -------------------------
class DescribeGroupsRequest(Message):
    groups: list[str]
    include_authorized_operations: bool = False


class DescribedGroupMember(Message):
    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    member_metadata: bytes = b""
    member_assignment: bytes = b""


class DescribeGroupsResponseGroup(Message):
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    group_id: str
    group_state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""  # the selected protocol's name
    members: list[DescribedGroupMember] = Field(default_factory=list)


class DescribeGroupsResponse(Message):
    throttle_time_ms: int = 0
    groups: list[DescribeGroupsResponseGroup]


# -- ListGroups v5 (KIP-848: filter by type and state) -----------------------------------
class ListGroupsRequest(Message):
    states_filter: list[str] = Field(default_factory=list)  # empty: every state
    types_filter: list[str] = Field(default_factory=list)  # classic, consumer, share; empty: every type


class ListedGroup(Message):
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str


class ListGroupsResponse(Message):
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    groups: list[ListedGroup] = Field(default_factory=list)


__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "NO_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribeGroupsResponseGroup",
    "DescribedGroupMember",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupRequest",
    "JoinGroupRequestProtocol",
    "JoinGroupResponse",
    "JoinGroupResponseMember",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "LeaveGroupResponseMember",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListedGroup",
    "MemberIdentity",
    "SyncGroupRequest",
    "SyncGroupRequestAssignment",
    "SyncGroupResponse",
]
