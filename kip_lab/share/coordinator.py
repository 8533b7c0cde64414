"""The share coordinator: one ``__share_group_state`` partition, holding share-partition state.

Same engine as the group coordinator: a handler validates and computes on the current state
without changing it and returns a ``CoordinatorResult`` (response plus record batches); the
records are appended to the log and replayed, and replay is the only code that changes state.
Failover is ``from_log``: replay the partition into a fresh shard. While a shard is loading
(``ShareCoordinator.loading`` + ``load_step``) every RPC answers COORDINATOR_LOAD_IN_PROGRESS.

Records (KIP-932 "Share-group state records"): InitializeShareGroupState writes a
ShareSnapshot; WriteShareGroupState writes a ShareUpdate carrying the write as sent, or a
ShareSnapshot of the whole combined state when the state has no batches left (the KIP's
"snapshot when small") or when ``snapshot_update_records_per_snapshot`` updates have been
written since the last snapshot; DeleteShareGroupState writes the deletion marker (a
snapshot with snapshot epoch -1). Fencing: a lower state epoch gets FENCED_STATE_EPOCH, a
lower leader epoch FENCED_LEADER_EPOCH (zombie leaders); a read with a higher leader epoch
records it, so the old leader is fenced from then on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kip_lab.protocol.common import Message
from kip_lab.protocol.errors import Errors
from kip_lab.protocol.share import (
    UNCHANGED_START_OFFSET,
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    PartitionResult,
    PartitionStateResult,
    PartitionSummaryResult,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    TopicResults,
    TopicStateResults,
    TopicSummaryResults,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
    WriteStatePartition,
)
from kip_lab.runtime.log import LogEntry, PartitionLog, Record
from kip_lab.runtime.result import CoordinatorResult
from kip_lab.share.config import ShareCoordinatorConfig
from kip_lab.share.records import (
    DELETED_SNAPSHOT_EPOCH,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
)
from kip_lab.share.state_batches import DurableState, batches_from_spans, combine, spans_from_batches

SharePartitionKey = tuple[str, str, int]  # (group id, topic id, partition)
# Kafka ``ShareCoordinatorShard.maybeGetWriteStateError`` / ``maybeGetReadStateError``, checked first.
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
STATE_TOPIC = "__share_group_state"
STATE_TOPIC_PARTITIONS = 50  # share.coordinator.state.topic.num.partitions


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit signed overflow)."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def state_partition_for(
    group_id: str, topic_id: str, partition: int, num_partitions: int = STATE_TOPIC_PARTITIONS
) -> int:
    """The ``__share_group_state`` partition (hence the share coordinator) of a share-partition.

    The FindCoordinator key is ``"group:topicId:partition"`` (key type SHARE); Kafka maps it to
    ``Utils.abs(key.hashCode()) % partitions`` (``Utils.abs(MIN_VALUE)`` is 0), reproduced here.
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    h = java_string_hash(f"{group_id}:{topic_id}:{partition}")
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


P = TypeVar("P", bound=Message)


class ShareCoordinator:
    """KIP-932 share-partition state on one ``__share_group_state`` partition."""

    def __init__(self, config: ShareCoordinatorConfig | None = None, *, log: PartitionLog | None = None) -> None:
        self.config = config or ShareCoordinatorConfig()
        self.log = log if log is not None else PartitionLog(STATE_TOPIC, 0)
        self.states: dict[SharePartitionKey, DurableState] = {}
        self.snapshot_offsets: dict[SharePartitionKey, int] = {}  # log offset of each latest snapshot
        self.updates_since_snapshot: dict[SharePartitionKey, int] = {}
        self.loaded = True
        self._load_batches = 0  # batches replayed while loading
        self._load_start = 0  # first log offset to replay (a pruned log starts later)

    # ------------------------------------------------------------------ failover
    @classmethod
    def loading(
        cls, log: PartitionLog, config: ShareCoordinatorConfig | None = None, *, start_offset: int = 0
    ) -> ShareCoordinator:
        """A shard that has just become leader of ``log``: nothing replayed yet, every RPC refused.

        ``start_offset`` replays a log pruned below that offset (``prunable_offset``).
        """
        coordinator = cls(config, log=log)
        coordinator.loaded = False
        coordinator._load_start = start_offset
        return coordinator

    @classmethod
    def from_log(
        cls, log: PartitionLog, config: ShareCoordinatorConfig | None = None, *, start_offset: int = 0
    ) -> ShareCoordinator:
        """Failover: replay ``log`` (from ``start_offset``) into a fresh shard, ready to serve."""
        coordinator = cls(config, log=log)
        for entry in log.entries(start_offset):
            coordinator._replay(entry)
        return coordinator

    def load_step(self, batches: int = 1) -> bool:
        """Replay up to ``batches`` more atomic batches; returns whether loading has finished."""
        if batches < 1:
            raise ValueError(f"batches must be >= 1, got {batches}")
        all_batches = list(self.log.batches())
        for batch in all_batches[self._load_batches : self._load_batches + batches]:
            for entry in batch:
                if entry.offset >= self._load_start:
                    self._replay(entry)
        self._load_batches = min(self._load_batches + batches, len(all_batches))
        self.loaded = self._load_batches == len(all_batches)
        return self.loaded

    # ------------------------------------------------------------------ engine path
    def _apply(self, result: CoordinatorResult) -> CoordinatorResult:
        """Append each batch, then replay it: the only way state changes."""
        for batch in result.batches:
            if batch:
                offsets = self.log.append(batch)
                for offset in offsets:
                    self._replay(self.log.entries(offset, offset + 1)[0])
        return result

    def _replay(self, entry: LogEntry) -> None:
        """Apply one record: a snapshot replaces a share-partition's state, an update combines into it.

        Share-state records have no tombstones, so the value's type says which record it is.
        """
        key, value = entry.record.key, entry.record.value
        sp = (key.group_id, key.topic_id, key.partition)
        if isinstance(value, ShareSnapshotValue):
            self._replay_snapshot(sp, entry.offset, value)
        elif isinstance(value, ShareUpdateValue):
            self._replay_update(sp, value)
        else:
            raise TypeError(f"not a share-state record: {type(key).__name__} -> {type(value).__name__}")

    def _replay_snapshot(self, sp: SharePartitionKey, offset: int, value: ShareSnapshotValue) -> None:
        if value.snapshot_epoch == DELETED_SNAPSHOT_EPOCH:
            self.states.pop(sp, None)
            self.snapshot_offsets.pop(sp, None)
            self.updates_since_snapshot.pop(sp, None)
            return
        self.states[sp] = DurableState(
            value.state_epoch,
            value.leader_epoch,
            value.snapshot_epoch,
            value.start_offset,
            tuple(spans_from_batches(value.state_batches)),
        )
        self.snapshot_offsets[sp] = offset
        self.updates_since_snapshot[sp] = 0

    def _replay_update(self, sp: SharePartitionKey, value: ShareUpdateValue) -> None:
        state = self.states.get(sp)
        if state is None or state.snapshot_epoch != value.snapshot_epoch:
            return  # an update of an older snapshot (or of a deleted share-partition): ignored
        self.states[sp] = state.with_write(
            value.start_offset, spans_from_batches(value.state_batches), value.leader_epoch
        )
        self.updates_since_snapshot[sp] += 1

    def prunable_offset(self) -> int:
        """Records below this offset can be deleted: the oldest latest-snapshot of the live share-partitions."""
        return min(self.snapshot_offsets.values(), default=self.log.end_offset)

    def state(self, group_id: str, topic_id: str, partition: int) -> DurableState | None:
        return self.states.get((group_id, topic_id, partition))

    # ------------------------------------------------------------------ records
    @staticmethod
    def _snapshot(sp: SharePartitionKey, state: DurableState) -> Record:
        return Record(
            ShareSnapshotKey(group_id=sp[0], topic_id=sp[1], partition=sp[2]),
            ShareSnapshotValue(
                snapshot_epoch=state.snapshot_epoch,
                state_epoch=state.state_epoch,
                leader_epoch=state.leader_epoch,
                start_offset=state.start_offset,
                state_batches=state.state_batches,
            ),
        )

    # ------------------------------------------------------------------ handlers
    def _run_each(
        self,
        request,
        handle: Callable[[SharePartitionKey, Any], tuple[P, Record | None]],
        refuse: Callable[[int, Errors], P],
        response_type: type,
        topic_results_type: type,
    ) -> CoordinatorResult:
        """Partitions one at a time; each partition's record is applied before the next is handled.

        The answer is ``response_type`` with one ``topic_results_type`` per topic, in request order; the origin is
        the API name (the response type without its ``Response`` suffix).
        """
        results = []
        applied: list[tuple[Record, ...]] = []
        for topic in request.topics:
            answers = []
            for data in topic.partitions:
                if not self.loaded:
                    answers.append(refuse(data.partition, Errors.COORDINATOR_LOAD_IN_PROGRESS))
                    continue
                answer, record = handle((request.group_id, topic.topic_id, data.partition), data)
                answers.append(answer)
                if record is not None:
                    self._apply(CoordinatorResult(None, ((record,),)))
                    applied.append((record,))
            results.append(topic_results_type(topic_id=topic.topic_id, partitions=answers))
        origin = response_type.__name__.removesuffix("Response")
        return CoordinatorResult(response_type(results=results), tuple(applied), origin=origin)

    def initialize_share_group_state(
        self, request: InitializeShareGroupStateRequest
    ) -> CoordinatorResult[InitializeShareGroupStateResponse]:
        """Start (or restart, for an offset reset) a share-partition's state: always a ShareSnapshot."""

        def handle(sp: SharePartitionKey, data) -> tuple[PartitionResult, Record | None]:
            current = self.states.get(sp)
            if current is not None and data.state_epoch < current.state_epoch:
                return _error(
                    data.partition, Errors.FENCED_STATE_EPOCH, _stale("state", data.state_epoch, current.state_epoch)
                ), None
            snapshot_epoch = current.snapshot_epoch + 1 if current is not None else 0
            state = DurableState(data.state_epoch, -1, snapshot_epoch, data.start_offset)
            return PartitionResult(partition=data.partition), self._snapshot(sp, state)

        return self._run_each(request, handle, _error, InitializeShareGroupStateResponse, TopicResults)

    def read_share_group_state(
        self, request: ReadShareGroupStateRequest
    ) -> CoordinatorResult[ReadShareGroupStateResponse]:
        """The durable state for a share-partition leader; a newer leader epoch is recorded (fencing older ones)."""

        def handle(sp: SharePartitionKey, data) -> tuple[PartitionStateResult, Record | None]:
            if data.partition < 0:
                return _state_error(data.partition, Errors.INVALID_REQUEST, NEGATIVE_PARTITION_ID), None
            state = self.states.get(sp)
            if state is None:
                return _state_error(data.partition, *self._uninitialized(sp, "Read")), None
            if data.leader_epoch < state.leader_epoch:
                message = _stale("leader", data.leader_epoch, state.leader_epoch)
                return _state_error(data.partition, Errors.FENCED_LEADER_EPOCH, message), None
            answer = PartitionStateResult(
                partition=data.partition,
                state_epoch=state.state_epoch,
                start_offset=state.start_offset,
                state_batches=state.state_batches,
            )
            record = None
            if data.leader_epoch > state.leader_epoch:
                record = self._write_record(sp, state, _leader_epoch_write(data))
            return answer, record

        return self._run_each(request, handle, _state_error, ReadShareGroupStateResponse, TopicStateResults)

    def write_share_group_state(
        self, request: WriteShareGroupStateRequest
    ) -> CoordinatorResult[WriteShareGroupStateResponse]:
        def handle(sp: SharePartitionKey, data: WriteStatePartition) -> tuple[PartitionResult, Record | None]:
            if data.partition < 0:
                return _error(data.partition, Errors.INVALID_REQUEST, NEGATIVE_PARTITION_ID), None
            state = self.states.get(sp)
            if state is None:
                return _error(data.partition, *self._uninitialized(sp, "Write")), None
            if data.leader_epoch < state.leader_epoch:
                return _error(
                    data.partition, Errors.FENCED_LEADER_EPOCH, _stale("leader", data.leader_epoch, state.leader_epoch)
                ), None
            if data.state_epoch < state.state_epoch:
                return _error(
                    data.partition, Errors.FENCED_STATE_EPOCH, _stale("state", data.state_epoch, state.state_epoch)
                ), None
            return PartitionResult(partition=data.partition), self._write_record(sp, state, data)

        return self._run_each(request, handle, _error, WriteShareGroupStateResponse, TopicResults)

    def _uninitialized(self, sp: SharePartitionKey, operation: str) -> tuple[Errors, str]:
        """A read or write of a share-partition with no state (never initialized, or deleted).

        ``kafka``: INVALID_REQUEST, as Kafka's ``ShareCoordinatorShard`` answers since KAFKA-19338
        (before it, a write created the state). ``kip``: UNKNOWN_TOPIC_OR_PARTITION, the KIP's
        "this share-partition is not actually part of the share group".
        """
        if self.config.fidelity == "kafka":
            return Errors.INVALID_REQUEST, f"{operation} operation on uninitialized share partition not allowed."
        return Errors.UNKNOWN_TOPIC_OR_PARTITION, _unknown(sp)

    def _write_record(self, sp: SharePartitionKey, state: DurableState, data: WriteStatePartition) -> Record:
        """A ShareSnapshot of the combined state, or a ShareUpdate with the write's batches combined.

        As Kafka's ``ShareCoordinatorShard.generateShareStateRecord``: a snapshot once
        ``snapshot_update_records_per_snapshot`` updates followed the last one; under ``kip``
        also when the combined state has no batches left (the KIP's "the snapshot will be small").
        """
        spans = spans_from_batches(data.state_batches)
        combined = state.with_write(data.start_offset, spans, data.leader_epoch)
        due = self.updates_since_snapshot.get(sp, 0) >= self.config.snapshot_update_records_per_snapshot
        if due or (self.config.fidelity == "kip" and not combined.spans):
            return self._snapshot(
                sp,
                DurableState(
                    combined.state_epoch,
                    combined.leader_epoch,
                    state.snapshot_epoch + 1,
                    combined.start_offset,
                    combined.spans,
                ),
            )
        return Record(
            ShareUpdateKey(group_id=sp[0], topic_id=sp[1], partition=sp[2]),
            ShareUpdateValue(
                snapshot_epoch=state.snapshot_epoch,
                leader_epoch=data.leader_epoch,
                start_offset=data.start_offset,
                state_batches=batches_from_spans(combine((), spans, data.start_offset)),
            ),
        )

    def delete_share_group_state(
        self, request: DeleteShareGroupStateRequest
    ) -> CoordinatorResult[DeleteShareGroupStateResponse]:
        """Write the deletion marker; deleting state that is already gone succeeds (the GC retries)."""

        def handle(sp: SharePartitionKey, data) -> tuple[PartitionResult, Record | None]:
            state = self.states.get(sp)
            if state is None:
                return PartitionResult(partition=data.partition), None
            marker = DurableState(state.state_epoch, state.leader_epoch, DELETED_SNAPSHOT_EPOCH, UNCHANGED_START_OFFSET)
            return PartitionResult(partition=data.partition), self._snapshot(sp, marker)

        return self._run_each(request, handle, _error, DeleteShareGroupStateResponse, TopicResults)

    def read_share_group_state_summary(
        self, request: ReadShareGroupStateSummaryRequest
    ) -> CoordinatorResult[ReadShareGroupStateSummaryResponse]:
        """State epoch and start offset only (the group coordinator's offsets view, the leader's reload check)."""

        def handle(sp: SharePartitionKey, data) -> tuple[PartitionSummaryResult, None]:
            if data.partition < 0:
                return _summary_error(data.partition, Errors.INVALID_REQUEST, NEGATIVE_PARTITION_ID), None
            state = self.states.get(sp)
            if state is None:
                return _summary_error(data.partition, Errors.UNKNOWN_TOPIC_OR_PARTITION, _unknown(sp)), None
            return PartitionSummaryResult(
                partition=data.partition, state_epoch=state.state_epoch, start_offset=state.start_offset
            ), None

        return self._run_each(request, handle, _summary_error, ReadShareGroupStateSummaryResponse, TopicSummaryResults)


def _leader_epoch_write(data) -> WriteStatePartition:
    """A read by a newer leader is recorded as an empty write carrying its leader epoch."""
    return WriteStatePartition(
        partition=data.partition,
        state_epoch=0,
        leader_epoch=data.leader_epoch,
        start_offset=UNCHANGED_START_OFFSET,
        state_batches=[],
    )


def _error(partition: int, error: Errors, message: str | None = None) -> PartitionResult:
    return PartitionResult(partition=partition, error_code=error, error_message=message)


def _state_error(partition: int, error: Errors, message: str | None = None) -> PartitionStateResult:
    return PartitionStateResult(partition=partition, error_code=error, error_message=message)


def _summary_error(partition: int, error: Errors, message: str | None = None) -> PartitionSummaryResult:
    return PartitionSummaryResult(partition=partition, error_code=error, error_message=message)


def _stale(kind: str, got: int, stored: int) -> str:
    return f"{kind} epoch {got} is older than the stored {kind} epoch {stored}"


def _unknown(sp: SharePartitionKey) -> str:
    return f"no share state for group {sp[0]!r}, topic {sp[1]!r}, partition {sp[2]}"
