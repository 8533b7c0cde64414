"""KIP-932 RPCs of the share-partition leader and the share coordinator, KIP field names in snake_case.

Consumer -> share-partition leader: ShareFetch and ShareAcknowledge (with share sessions and
acknowledgement batches). Share-partition leader / group coordinator -> share coordinator:
InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState
and ReadShareGroupStateSummary. Types are checked here (pydantic); the KIP's semantic rules
(batch order, session epochs, fencing) are checked by the component serving the RPC, which
answers them with an error code as Kafka does.
"""

from __future__ import annotations

from enum import IntEnum

from pydantic import Field, model_validator

from kip_lab.protocol.common import Message
from kip_lab.protocol.errors import Errors

INT32_MAX = 2**31 - 1

# Special share session epochs (KIP-932 "Share sessions").
INITIAL_SHARE_SESSION_EPOCH = 0
FINAL_SHARE_SESSION_EPOCH = -1

# A StartOffset of -1 on the wire: "not initialized yet" (Initialize, Read) or "unchanged" (Write).
UNCHANGED_START_OFFSET = -1


class AcknowledgeType(IntEnum):
    """``AcknowledgementBatches[].AcknowledgeTypes`` codes."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class DeliveryState(IntEnum):
    """``StateBatches[].DeliveryState`` codes. ACQUIRED is never persisted (KIP-932; code 1 is implied)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


# -- common pieces ------------------------------------------------------------------------
class AcknowledgementBatch(Message):
    """One acknowledged offset range: one type for the whole range or one type per offset."""

    first_offset: int = Field(ge=0)
    last_offset: int = Field(ge=0)
    acknowledge_types: list[AcknowledgeType] = Field(min_length=1)

    @model_validator(mode="after")
    def _shape(self) -> AcknowledgementBatch:
        if self.last_offset < self.first_offset:
            raise ValueError(f"last_offset {self.last_offset} < first_offset {self.first_offset}")
        size = self.last_offset - self.first_offset + 1
        if len(self.acknowledge_types) not in (1, size):
            raise ValueError(f"acknowledge_types must hold 1 or {size} values, got {len(self.acknowledge_types)}")
        return self


class LeaderIdAndEpoch(Message):
    leader_id: int = -1
    leader_epoch: int = -1


class StateBatch(Message):
    """A range of offsets with one persisted delivery state and delivery count."""

    first_offset: int = Field(ge=0)
    last_offset: int = Field(ge=0)
    delivery_state: DeliveryState
    delivery_count: int = Field(ge=0)


# -- ShareFetch ---------------------------------------------------------------------------
class ShareFetchRequestPartition(Message):
    partition_index: int = Field(ge=0)
    partition_max_bytes: int = Field(INT32_MAX, ge=0, description="0 = acknowledge only, fetch nothing")
    acknowledgement_batches: list[AcknowledgementBatch] = Field(default_factory=list)


class ShareFetchRequestTopic(Message):
    topic_id: str = Field(min_length=1)
    partitions: list[ShareFetchRequestPartition]


class ForgottenTopic(Message):
    topic_id: str = Field(min_length=1)
    partitions: list[int]


class ShareFetchRequest(Message):
    """``share_session_epoch``: 0 opens a session, -1 closes it, otherwise the next expected epoch.

    ``max_records`` [Kafka, ShareFetch v1] caps how many records one request acquires.
    """

    group_id: str = Field(min_length=1)
    member_id: str = Field(min_length=1)
    share_session_epoch: int = Field(ge=-1)
    max_wait_ms: int = 0
    min_bytes: int = 0
    max_bytes: int = INT32_MAX
    max_records: int = Field(500, gt=0)
    topics: list[ShareFetchRequestTopic] = Field(default_factory=list)
    forgotten_topics_data: list[ForgottenTopic] = Field(default_factory=list)


class AcquiredRecords(Message):
    first_offset: int
    last_offset: int
    delivery_count: int


class ShareRecord(Message):
    """One record of ``Records`` (the log's record batches, flattened to what a consumer reads)."""

    offset: int
    key: str | None = None
    value: str | None = None


class ShareFetchResponsePartition(Message):
    partition_index: int
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    acknowledge_error_code: Errors = Errors.NONE
    acknowledge_error_message: str | None = None
    current_leader: LeaderIdAndEpoch = Field(default_factory=LeaderIdAndEpoch)
    records: list[ShareRecord] = Field(default_factory=list)
    acquired_records: list[AcquiredRecords] = Field(default_factory=list)


class ShareFetchResponseTopic(Message):
    topic_id: str
    partitions: list[ShareFetchResponsePartition]


class ShareFetchResponse(Message):
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    responses: list[ShareFetchResponseTopic] = Field(default_factory=list)


# -- ShareAcknowledge ---------------------------------------------------------------------
class ShareAcknowledgeRequestPartition(Message):
    partition_index: int = Field(ge=0)
    acknowledgement_batches: list[AcknowledgementBatch]


class ShareAcknowledgeRequestTopic(Message):
    topic_id: str = Field(min_length=1)
    partitions: list[ShareAcknowledgeRequestPartition]


class ShareAcknowledgeRequest(Message):
    group_id: str = Field(min_length=1)
    member_id: str = Field(min_length=1)
    share_session_epoch: int = Field(ge=-1)
    topics: list[ShareAcknowledgeRequestTopic] = Field(default_factory=list)


class ShareAcknowledgeResponsePartition(Message):
    partition_index: int
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    current_leader: LeaderIdAndEpoch = Field(default_factory=LeaderIdAndEpoch)


class ShareAcknowledgeResponseTopic(Message):
    topic_id: str
    partitions: list[ShareAcknowledgeResponsePartition]


class ShareAcknowledgeResponse(Message):
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    responses: list[ShareAcknowledgeResponseTopic] = Field(default_factory=list)


# -- persister RPCs: shared result shapes ---------------------------------------------------
class PartitionResult(Message):
    partition: int
    error_code: Errors = Errors.NONE
    error_message: str | None = None


class PartitionStateResult(PartitionResult):
    """ReadShareGroupState's per-partition answer."""

    state_epoch: int = 0
    start_offset: int = UNCHANGED_START_OFFSET
    state_batches: list[StateBatch] = Field(default_factory=list)


class PartitionSummaryResult(PartitionResult):
    """ReadShareGroupStateSummary's per-partition answer."""

    state_epoch: int = 0
    start_offset: int = UNCHANGED_START_OFFSET


class TopicResults(Message):
    topic_id: str
    partitions: list[PartitionResult]


class TopicStateResults(Message):
    topic_id: str
    partitions: list[PartitionStateResult]


class TopicSummaryResults(Message):
    topic_id: str
    partitions: list[PartitionSummaryResult]


# -- InitializeShareGroupState (group coordinator -> share coordinator) -----------------------
class InitializeStatePartition(Message):
    partition: int = Field(ge=0)
    state_epoch: int = Field(ge=0)
    start_offset: int = Field(ge=UNCHANGED_START_OFFSET)


class InitializeStateData(Message):
    topic_id: str = Field(min_length=1)
    partitions: list[InitializeStatePartition]


class InitializeShareGroupStateRequest(Message):
    group_id: str = Field(min_length=1)
    topics: list[InitializeStateData]


class InitializeShareGroupStateResponse(Message):
    results: list[TopicResults]


# -- ReadShareGroupState / ReadShareGroupStateSummary (leader or GC -> share coordinator) -----
class ReadStatePartition(Message):
    partition: int  # any int32: a negative one is answered INVALID_REQUEST (Kafka ``ShareCoordinatorShard``)
    leader_epoch: int = Field(-1, ge=-1)


class ReadStateData(Message):
    topic_id: str = Field(min_length=1)
    partitions: list[ReadStatePartition]


class ReadShareGroupStateRequest(Message):
    group_id: str = Field(min_length=1)
    topics: list[ReadStateData]


class ReadShareGroupStateResponse(Message):
    results: list[TopicStateResults]


class ReadShareGroupStateSummaryRequest(Message):
    group_id: str = Field(min_length=1)
    topics: list[ReadStateData]


class ReadShareGroupStateSummaryResponse(Message):
    results: list[TopicSummaryResults]


# -- WriteShareGroupState (share-partition leader -> share coordinator) -----------------------
class WriteStatePartition(Message):
    partition: int  # any int32: a negative one is answered INVALID_REQUEST (Kafka ``ShareCoordinatorShard``)
    state_epoch: int = Field(ge=0)
    leader_epoch: int = Field(ge=-1)
    start_offset: int = Field(ge=UNCHANGED_START_OFFSET)
    state_batches: list[StateBatch] = Field(default_factory=list)


class WriteStateData(Message):
    topic_id: str = Field(min_length=1)
    partitions: list[WriteStatePartition]


class WriteShareGroupStateRequest(Message):
    group_id: str = Field(min_length=1)
    topics: list[WriteStateData]


class WriteShareGroupStateResponse(Message):
    results: list[TopicResults]


# -- DeleteShareGroupState (group coordinator -> share coordinator) -------------------------
class DeleteStatePartition(Message):
    partition: int = Field(ge=0)


class DeleteStateData(Message):
    topic_id: str = Field(min_length=1)
    partitions: list[DeleteStatePartition]


class DeleteShareGroupStateRequest(Message):
    group_id: str = Field(min_length=1)
    topics: list[DeleteStateData]


class DeleteShareGroupStateResponse(Message):
    results: list[TopicResults]
