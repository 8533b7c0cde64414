"""Things that happen to a run from outside: faults, membership changes, scripted requests.

Each is a small pydantic model, so a scenario file, a widget button and a test all say the
same thing the same way. ``Lab.apply`` performs one, as its own step of the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import ConfigDict, Field, model_validator

from kip_lab.clients.classic_consumer import ClassicConsumerConfig
from kip_lab.clients.consumer import ConsumerConfig
from kip_lab.clients.share_consumer import ShareConsumerConfig
from kip_lab.contract import LONG_MAX, MAX_PARTITIONS, Model
from kip_lab.lab.network import LinkConfig


class _Action(Model):
    model_config = ConfigDict(extra="forbid", frozen=True)


LabAction = _Action  # what ``Lab.apply`` takes: any of the actions below


class AddConsumer(_Action):
    """A new consumer process; it subscribes at once unless ``start`` is false.

    ``config`` says which protocol it speaks: a ``ConsumerConfig`` is the new consumer
    (KIP-848); a ``ClassicConsumerConfig`` (``group_protocol: classic``) the classic one (KIP-429).
    """

    action: Literal["add_consumer"] = "add_consumer"
    member: str = Field(..., min_length=1)
    config: ClassicConsumerConfig | ConsumerConfig
    start: bool = True


class AdvanceTo(_Action):
    """Let the clock reach ``time_ms`` (a step of its own, so that time travel replays it)."""

    action: Literal["advance_to"] = "advance_to"
    time_ms: int = Field(..., ge=0, le=LONG_MAX)


class Start(_Action):
    """The member subscribes and starts heartbeating."""

    action: Literal["start"] = "start"
    member: str


class Close(_Action):
    """The member leaves gracefully: commit, on_partitions_revoked, heartbeat with epoch -1 (-2 if static)."""

    action: Literal["close"] = "close"
    member: str


class Crash(_Action):
    """The member's process dies: no leave, no commit; its session times out."""

    action: Literal["crash"] = "crash"
    member: str


class Restart(_Action):
    """A crashed or closed member comes back as a new incarnation: the same config, or ``config``
    (a new version or new settings: an upgrade's rolling bounce, a switch of group.protocol)."""

    action: Literal["restart"] = "restart"
    member: str
    config: ClassicConsumerConfig | ConsumerConfig | None = None


class Pause(_Action):
    """The member's application thread stops polling; its heartbeats go on."""

    action: Literal["pause"] = "pause"
    member: str


class Resume(_Action):
    action: Literal["resume"] = "resume"
    member: str


MAX_MESSAGES = 1_000_000  # messages one fault drops or delays
MAX_RECORDS = 100_000  # records one produce_share_records batch puts on a partition
MAX_REPEAT = 10_000  # times a steady producer produces


class DropMessages(_Action):
    """Drop the next ``count`` messages between the member and the coordinator (either way)."""

    action: Literal["drop_messages"] = "drop_messages"
    member: str
    count: int = Field(1, ge=1, le=MAX_MESSAGES)


class DelayMessages(_Action):
    action: Literal["delay_messages"] = "delay_messages"
    member: str
    count: int = Field(1, ge=1, le=MAX_MESSAGES)
    delay_ms: int = Field(..., ge=0, le=LONG_MAX)


class PartitionLink(_Action):
    """Cut the link between the member and the coordinator for ``duration_ms``."""

    action: Literal["partition_link"] = "partition_link"
    member: str
    duration_ms: int = Field(..., gt=0, le=LONG_MAX)


class ConfigureLink(_Action):
    """Give the links between the member and every broker their own latency model and loss."""

    action: Literal["configure_link"] = "configure_link"
    member: str
    link: LinkConfig


class FailOver(_Action):
    """Move ``__consumer_offsets`` to another broker; the new coordinator rebuilds from the log."""

    action: Literal["fail_over"] = "fail_over"
    to_broker: str | None = None


class CreateTopic(_Action):
    action: Literal["create_topic"] = "create_topic"
    topic: str = Field(..., min_length=1)
    partitions: int = Field(..., ge=1, le=MAX_PARTITIONS)
    produce_rate_per_s: float = Field(
        100.0, ge=0, le=1_000_000, description="records produced per second per partition"
    )


class AddPartitions(_Action):
    action: Literal["add_partitions"] = "add_partitions"
    topic: str
    count: int = Field(..., ge=1, le=MAX_PARTITIONS)


class DeleteTopic(_Action):
    action: Literal["delete_topic"] = "delete_topic"
    topic: str


class RecreateTopic(_Action):
    action: Literal["recreate_topic"] = "recreate_topic"
    topic: str
    partitions: int | None = Field(None, ge=1, le=MAX_PARTITIONS)


class ChangeSubscription(_Action):
    """The member subscribes to other topics (names) or another pattern (regex)."""

    action: Literal["change_subscription"] = "change_subscription"
    member: str
    topics: list[str] | None = None
    regex: str | None = None

    @model_validator(mode="after")
    def _names_or_pattern(self) -> ChangeSubscription:
        """Topic names or a pattern, never both: a consumer subscribes one way (as a scenario's member does)."""
        if self.topics is not None and self.regex is not None:
            raise ValueError("give topics or regex, not both")
        return self


class ClientRequest(_Action):
    """A request a client that is not simulated sends: a scripted one (``SendRequest``) or a real
    one through the wire front door. The World hands ``body`` to the client named ``member``."""

    action: str
    member: str
    api: str
    body: dict[str, Any]


class SendRequest(ClientRequest):
    """A scripted client sends an exact request (``body`` is the request's fields)."""

    action: Literal["send_request"] = "send_request"
    api: Literal[
        "ConsumerGroupHeartbeat",
        "ConsumerGroupDescribe",
        "OffsetCommit",
        "OffsetFetch",
        "ConsumerGroupPrepareAssignment",
        "ConsumerGroupInstallAssignment",
    ] = "ConsumerGroupHeartbeat"


class AddShareConsumer(_Action):
    """A new share consumer (KIP-932); it subscribes at once unless ``start`` is false."""

    action: Literal["add_share_consumer"] = "add_share_consumer"
    member: str = Field(..., min_length=1)
    config: ShareConsumerConfig
    start: bool = True


class ProduceShareRecords(_Action):
    """The producer: ``count`` records to each partition of ``topic`` (or to ``partition``), in batches.

    Values are ``<value_prefix><offset>``; with ``poison_every`` = k every k-th is ``poison-<offset>``.
    ``repeat`` > 1 produces again every ``every_ms`` (a steady producer).
    """

    action: Literal["produce_share_records"] = "produce_share_records"
    topic: str = Field(..., min_length=1)
    count: int = Field(..., ge=1, le=MAX_RECORDS)
    partition: int | None = Field(None, ge=0, lt=MAX_PARTITIONS)
    batch_size: int = Field(10, ge=1, le=MAX_RECORDS)
    value_prefix: str = "record-"
    poison_every: int = Field(0, ge=0, le=MAX_RECORDS)
    repeat: int = Field(1, ge=1, le=MAX_REPEAT)
    every_ms: int = Field(1_000, ge=1, le=LONG_MAX)


class FailOverShareCoordinator(_Action):
    """Move ``__share_group_state`` to another broker; the new share coordinator replays its log."""

    action: Literal["fail_over_share_coordinator"] = "fail_over_share_coordinator"
    to_broker: str | None = None


class MoveShareLeader(_Action):
    """A topic-partition's leadership moves (leader epoch + 1): the old share-partition leader is a zombie."""

    action: Literal["move_share_leader"] = "move_share_leader"
    topic: str = Field(..., min_length=1)
    partition: int = Field(0, ge=0, lt=MAX_PARTITIONS)
    to_broker: str | None = None


class ResetShareGroupOffsets(_Action):
    """``kafka-share-groups.sh --reset-offsets``: move an empty share group's start offsets on ``topic``."""

    action: Literal["reset_share_group_offsets"] = "reset_share_group_offsets"
    group_id: str = Field(..., min_length=1)
    topic: str = Field(..., min_length=1)
    to: Literal["earliest", "latest", "datetime"] = "earliest"
    timestamp_ms: int | None = Field(
        None, ge=0, le=LONG_MAX, description="for 'datetime': the first offset at or after it"
    )
    partitions: list[int] | None = None

    @model_validator(mode="after")
    def _timestamp_for_datetime(self) -> ResetShareGroupOffsets:
        if self.to == "datetime" and self.timestamp_ms is None:
            raise ValueError("a reset to a date-time needs timestamp_ms")
        return self


class SetShareAutoOffsetReset(_Action):
    """The dynamic group config ``group.share.auto.offset.reset``: where a share-partition with no start
    offset begins (the first time the group reads it)."""

    action: Literal["set_share_auto_offset_reset"] = "set_share_auto_offset_reset"
    group_id: str = Field(..., min_length=1)
    value: Literal["latest", "earliest"]


class DeleteRecords(_Action):
    """Admin ``deleteRecords`` (``kafka-delete-records.sh``): the partition's log start offset moves
    up to ``before_offset``; share groups drop what lies below it when they next read the partition."""

    action: Literal["delete_records"] = "delete_records"
    topic: str = Field(..., min_length=1)
    partition: int = Field(0, ge=0)
    before_offset: int = Field(..., ge=0)


SHARE_ACTIONS = (
    AddShareConsumer,
    ProduceShareRecords,
    DeleteRecords,
    FailOverShareCoordinator,
    MoveShareLeader,
    ResetShareGroupOffsets,
    SetShareAutoOffsetReset,
)

Action = Annotated[
    AddConsumer
    | AdvanceTo
    | Start
    | Close
    | Crash
    | Restart
    | Pause
    | Resume
    | DropMessages
    | DelayMessages
    | PartitionLink
    | ConfigureLink
    | FailOver
    | CreateTopic
    | AddPartitions
    | DeleteTopic
    | RecreateTopic
    | ChangeSubscription
    | SendRequest
    | AddShareConsumer
    | ProduceShareRecords
    | DeleteRecords
    | FailOverShareCoordinator
    | MoveShareLeader
    | ResetShareGroupOffsets
    | SetShareAutoOffsetReset,
    Field(discriminator="action"),
]


class ScheduleAction(_Action):
    """Perform ``inner`` when the clock reaches ``at_ms`` (a scenario's timed fault)."""

    action: Literal["schedule"] = "schedule"
    at_ms: int = Field(..., ge=0, le=LONG_MAX)
    inner: Action


FAULTS = (
    Crash,
    Restart,
    Close,
    Pause,
    Resume,
    DropMessages,
    DelayMessages,
    PartitionLink,
    ConfigureLink,
    FailOver,
    CreateTopic,
    AddPartitions,
    DeleteTopic,
    RecreateTopic,
    ChangeSubscription,
    FailOverShareCoordinator,
    MoveShareLeader,
)


Handler = TypeVar("Handler")


def handler_for(handlers: Mapping[type, Handler], kind: type) -> Handler | None:
    """The handler registered for an action class, or for its nearest base class (a real client's
    ``WireRequest`` is a ``ClientRequest``); ``None`` when there is none."""
    return next((handlers[cls] for cls in kind.__mro__ if cls in handlers), None)
