"""Typed messages: RPC requests/responses and ``__consumer_offsets`` records, KIP names."""

from kip_lab.protocol.classic_group import *  # noqa: F403 - the classic RPC models are the API
from kip_lab.protocol.common import Message, TopicPartitions
from kip_lab.protocol.consumer_group import *  # noqa: F403 - the RPC models are the API
from kip_lab.protocol.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
)
from kip_lab.protocol.errors import GROUP_NOT_EMPTY, ApiError, Errors

__all__ = [
    "GROUP_NOT_EMPTY",
    "JOIN_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "ApiError",
    "Errors",
    "Message",
    "TopicPartitions",
]
