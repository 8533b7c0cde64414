"""Kafka's error codes, by Kafka's names, and the exception handlers raise to return one.

Codes are Apache Kafka's (``org.apache.kafka.common.protocol.Errors``). The one exception is
INVALID_ASSIGNMENT: the KIP's client-side assignor mode defines it but Kafka never shipped
that mode, so it has no Kafka code; we give it one outside Kafka's range.
"""

from __future__ import annotations

from enum import IntEnum

from kip_lab.errors import KipLabError


class Errors(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    GROUP_AUTHORIZATION_FAILED = 30
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FENCED_LEADER_EPOCH = 74
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    UNKNOWN_TOPIC_ID = 100
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_REGULAR_EXPRESSION = 128
    # Workbench-only: the KIP's client-side assignor mode was never shipped by Kafka.
    INVALID_ASSIGNMENT = 10_001

    @property
    def is_error(self) -> bool:
        return self is not Errors.NONE


# Kafka's name for code 68 is NON_EMPTY_GROUP; KIP-932 and the admin tools call it GROUP_NOT_EMPTY.
GROUP_NOT_EMPTY = Errors.NON_EMPTY_GROUP


class ApiError(KipLabError):
    """Raised inside a handler to answer the request with ``error`` and ``message``.

    Handlers validate before they compute, so raising never leaves records half-written.
    """

    def __init__(self, error: Errors, message: str = "") -> None:
        super().__init__(f"{error.name}: {message}" if message else error.name)
        self.error = error
        self.message = message or None
