"""The share-partition leader's state for one (share group, topic-partition): KIP-932's in-flight records.

Records between the share-partition start offset (SPSO) and end offset (SPEO, exclusive) are
*in flight*; each is Available, Acquired (by one member, under an acquisition lock),
Acknowledged or Archived, and carries a delivery count. Below the SPSO everything is Archived;
at and above the SPEO everything is Available and undelivered.

State is kept per range of offsets (``InFlightBatch``), as Kafka's ``SharePartition`` keeps
whole batches until an operation splits them: a log batch is acquired whole when the limits
allow, so a million records in batches of 500 cost two thousand objects, not a million.

Durability (KIP-932 "Managing durable share-partition state"): acquisition is never persisted;
every other change (acknowledge, release, reject, gap, lock expiry, session end; the log start
moving only under ``fidelity="kip"``) becomes a ``PendingWrite`` handed to the persister. The
records it touches are marked pending and the change takes effect only in ``complete_write``,
when the share coordinator has answered, so a simulation can put latency (or a failure) between
the two. ``SharePartitionConfig.fidelity`` picks Kafka's ``SharePartition`` behaviour (default)
or the KIP's text where they differ (docs/decisions.md SP rows).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple, Protocol

from kip_lab.machines import StateMachine
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.share import (
    UNCHANGED_START_OFFSET,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    DeliveryState,
    PartitionStateResult,
    StateBatch,
    WriteStatePartition,
)
from kip_lab.runtime.scheduler import Scheduler
from kip_lab.share.config import SharePartitionConfig
from kip_lab.share.state_batches import (
    DurableState,
    Span,
    batches_from_spans,
    coalesce,
    combine,
    drop_below,
    spans_from_batches,
)
from kip_lab.share.topic_log import TopicLog

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "Available", "Acquired", "Acknowledged", "Archived"
RECORD_STATES = (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED)

RECORD_STATE_MACHINE = StateMachine.from_table(
    "share record state",
    RECORD_STATES,
    AVAILABLE,
    [
        (AVAILABLE, "acquire", ACQUIRED),  # T1: delivery count + 1, lock started
        (AVAILABLE, "skip", ARCHIVED),  # a transaction marker, or an aborted record under read_committed
        (AVAILABLE, "log start passes", ARCHIVED),  # T10: retention
        (ACQUIRED, "accept", ACKNOWLEDGED),  # T2
        (ACQUIRED, "release", AVAILABLE),  # T3 (also session end, T9)
        (ACQUIRED, "release at limit", ARCHIVED),  # T5
        (ACQUIRED, "lock timeout", AVAILABLE),  # T4
        (ACQUIRED, "lock timeout at limit", ARCHIVED),  # T6
        (ACQUIRED, "reject", ARCHIVED),  # T7
        (ACQUIRED, "gap", ARCHIVED),  # T13: the offset holds no record (compaction)
        (ACQUIRED, "log start passes", ARCHIVED),  # T11: acknowledgements still accepted, no error
        (ACKNOWLEDGED, "start offset passes", ARCHIVED),  # T8: leaves the in-flight window
        (ACKNOWLEDGED, "log start passes", ARCHIVED),  # T10
    ],
    description="KIP-932 in-flight record states; the delivery-count guard picks the 'at limit' edges.",
)

DURABLE_CODE = {
    AVAILABLE: DeliveryState.AVAILABLE,
    ACKNOWLEDGED: DeliveryState.ACKNOWLEDGED,
    ARCHIVED: DeliveryState.ARCHIVED,
}
STATE_OF_CODE = {int(code): state for state, code in DURABLE_CODE.items()}
FENCING_ERRORS = (Errors.FENCED_LEADER_EPOCH, Errors.FENCED_STATE_EPOCH)
# What a share-partition leader answers its client when the share coordinator refused a read or a
# write: Kafka's ``SharePartition.fetchPersisterError`` (any other code: UNKNOWN_SERVER_ERROR).
CLIENT_ERROR_OF_PERSISTER_ERROR = {
    Errors.NOT_COORDINATOR: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.COORDINATOR_NOT_AVAILABLE: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.COORDINATOR_LOAD_IN_PROGRESS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.GROUP_ID_NOT_FOUND: Errors.INVALID_REQUEST,
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.INVALID_REQUEST,
    Errors.FENCED_STATE_EPOCH: Errors.FENCED_STATE_EPOCH,
    Errors.FENCED_LEADER_EPOCH: Errors.NOT_LEADER_OR_FOLLOWER,
}


def client_error(error: Errors, fidelity: str) -> Errors:
    """What a client is told when the share coordinator refused a read or a write: under ``kafka``,
    Kafka's ``SharePartition.fetchPersisterError``; under ``kip``, the share coordinator's own error."""
    if fidelity == "kip" or error is Errors.NONE:
        return error
    return CLIENT_ERROR_OF_PERSISTER_ERROR.get(error, Errors.UNKNOWN_SERVER_ERROR)


ACKNOWLEDGE_TRIGGER = {AcknowledgeType.ACCEPT: "accept", AcknowledgeType.REJECT: "reject", AcknowledgeType.GAP: "gap"}
AT_LIMIT = {"release": "release at limit", "lock timeout": "lock timeout at limit"}  # the edge past the delivery limit


class LockTimer(NamedTuple):
    """The timer key of acquisition lock ``lock_id``: when it fires, the lock has expired."""

    lock_id: int


@dataclass(slots=True)
class InFlightBatch:
    """A run of in-flight offsets that share one state, delivery count, owner and lock."""

    first_offset: int
    last_offset: int
    state: str
    delivery_count: int = 0
    member_id: str | None = None
    lock_id: int | None = None
    pending_write: int | None = None  # id of the write that will change it
    pending_state: str | None = None  # where that write takes it

    @property
    def size(self) -> int:
        return self.last_offset - self.first_offset + 1

    @property
    def effective_state(self) -> str:
        return self.pending_state or self.state


@dataclass(frozen=True, slots=True)
class RecordChange:
    """One range's planned move along the record-state machine, applied when its write completes."""

    first_offset: int
    last_offset: int
    trigger: str
    target: str


@dataclass(slots=True)
class PendingWrite:
    """One WriteShareGroupState for this share-partition, and the changes it makes when it succeeds."""

    write_id: int
    origin: str
    state_epoch: int
    leader_epoch: int
    start_offset: int
    spans: tuple[Span, ...]
    changes: tuple[RecordChange, ...]
    new_log_start: int | None = None
    applies_on_failure: bool = False  # a lock timeout: its records move even if the write fails
    error: Errors | None = None  # set when completed

    @property
    def state_batches(self) -> list[StateBatch]:
        return batches_from_spans(self.spans)

    def partition_data(self, partition: int) -> WriteStatePartition:
        return WriteStatePartition(
            partition=partition,
            state_epoch=self.state_epoch,
            leader_epoch=self.leader_epoch,
            start_offset=self.start_offset,
            state_batches=self.state_batches,
        )


class Persister(Protocol):
    """How a share-partition reaches the share coordinator (``kip_lab.share.persister``)."""

    def read_state(self, group_id: str, topic_id: str, partition: int, leader_epoch: int) -> PartitionStateResult: ...

    def submit(self, partition: SharePartition, write: PendingWrite) -> None: ...


@dataclass(frozen=True, slots=True)
class RecordView:
    """One in-flight range as a reader sees it."""

    first_offset: int
    last_offset: int
    state: str
    delivery_count: int
    member_id: str | None
    pending: bool


@dataclass(eq=False, repr=False)
class SharePartition:
    """In-flight records of one share-partition, driven by its leader.

    Build one with ``SharePartition.load`` (reads the durable state through the persister,
    as the KIP's first ShareFetch does). Public operations: ``acquire``, ``acknowledge``,
    ``release_member``, ``move_log_start``, and ``fire_timer`` for acquisition locks; each
    durable change returns the ``PendingWrite`` it submitted.
    """

    group_id: str
    topic_id: str
    partition: int
    log: TopicLog
    config: SharePartitionConfig
    scheduler: Scheduler
    persister: Persister
    leader_epoch: int = 0
    state_epoch: int = 0
    fenced: Errors | None = field(default=None, init=False)  # set when the share coordinator fenced a write
    spso: int = field(default=0, init=False)
    speo: int = field(default=0, init=False)
    durable: DurableState = field(init=False)  # what the share coordinator holds once its writes completed
    acquired_count: int = field(default=0, init=False)
    _batches: list[InFlightBatch] = field(default_factory=list, init=False)
    # ``kafka``: Acquired records the log start passed, still with their member until acknowledged or timed out
    _passed: list[InFlightBatch] = field(default_factory=list, init=False)
    _lock_sizes: dict[int, int] = field(default_factory=dict, init=False)  # lock id -> records still under it
    _expired_locks: set[int] = field(default_factory=set, init=False)
    _pending: dict[int, PendingWrite] = field(default_factory=dict, init=False)
    _next_lock_id: int = field(default=0, init=False)
    _next_write_id: int = field(default=0, init=False)

    def __repr__(self) -> str:
        return f"SharePartition({self.group_id}:{self.topic_id}:{self.partition}, spso={self.spso}, speo={self.speo})"

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(
        cls,
        group_id: str,
        topic_id: str,
        partition: int,
        log: TopicLog,
        *,
        config: SharePartitionConfig,
        scheduler: Scheduler,
        persister: Persister,
        leader_epoch: int = 0,
    ) -> SharePartition:
        """Read the durable state (ApiError if the share coordinator refuses) and rebuild the window.

        As Kafka's ``SharePartition.maybeInitialize``: the stored batches are taken in offset
        order whatever order they arrive in; offsets between them that have no batch were never
        delivered and are Available again; the SPEO follows the last batch. Under ``kafka`` a
        batch that starts below the stored start offset fails the load (UNKNOWN_SERVER_ERROR, as
        Kafka's IllegalStateException reaches the client); under ``kip`` the part below is
        Archived, as the KIP says of everything below the SPSO.

        A start offset of -1 is resolved from ``auto_offset_reset``; under ``kip`` it is written
        back at once (the KIP's first write, ``{StartOffset: 100, StateBatches: []}``), under
        ``kafka`` the first acknowledgement's write carries it.
        """
        result = persister.read_state(group_id, topic_id, partition, leader_epoch)
        kafka = config.fidelity == "kafka"
        if result.error_code is not Errors.NONE:
            raise ApiError(client_error(result.error_code, config.fidelity), result.error_message or "")
        sp = cls(group_id, topic_id, partition, log, config, scheduler, persister, leader_epoch, result.state_epoch)
        spans = sorted(spans_from_batches(result.state_batches))
        sp.durable = DurableState(result.state_epoch, leader_epoch, 0, result.start_offset, tuple(spans))
        if result.start_offset == UNCHANGED_START_OFFSET:
            start = log.high_watermark if config.auto_offset_reset == "latest" else log.log_start_offset
            sp.spso = sp.speo = start
            if not kafka:
                sp._submit(sp._new_write("initialize start offset", start, (), ()))
            return sp
        if kafka and spans and spans[0][0] < result.start_offset:
            raise ApiError(
                Errors.UNKNOWN_SERVER_ERROR,
                f"failed to initialize share-partition {group_id}:{topic_id}:{partition}: a state batch starts at "
                f"{spans[0][0]}, below the start offset {result.start_offset}",
            )
        sp.spso = sp.speo = result.start_offset
        sp._rebuild_window(drop_below(spans, sp.spso))
        sp._advance_start()
        sp.move_log_start()  # retention may have passed the stored start meanwhile
        return sp

    def _rebuild_window(self, spans: list[Span]) -> None:
        """In-flight records from sorted durable spans at or above the SPSO.

        An offset between spans has no durable state: it was never delivered (or only acquired),
        so it is Available again (Kafka fills such gaps since KAFKA-18494), unless the log says it
        is not deliverable (a transaction marker, an aborted record under read_committed).
        """
        cursor = self.spso
        for first, last, code, count in spans:
            first = max(first, cursor)  # a span overlapping an earlier one keeps only its new offsets
            if first > last:
                continue
            if first > cursor:
                self._fill_undelivered(cursor, first)
            self._append(InFlightBatch(first, last, STATE_OF_CODE[code], count))
            cursor = last + 1

    def _fill_undelivered(self, first: int, end: int) -> None:
        """Offsets ``[first, end)`` with no durable state: Available, or Archived where the log skips them."""
        read_committed = self.config.isolation_level == "read_committed"
        cursor = first
        for segment in self.log.segments(first, end, read_committed):
            if segment.first > cursor:
                self._append(InFlightBatch(cursor, segment.first - 1, AVAILABLE))
            self._append(InFlightBatch(segment.first, segment.last, AVAILABLE if segment.deliverable else ARCHIVED))
            cursor = segment.last + 1
        if cursor < end:
            self._append(InFlightBatch(cursor, end - 1, AVAILABLE))

    def _append(self, batch: InFlightBatch) -> None:
        self._batches.append(batch)
        self.speo = batch.last_offset + 1

    # ------------------------------------------------------------------ reading the state
    def records(self) -> list[RecordView]:
        """The in-flight records as ranges, in offset order (``kafka``: with Acquired ones the log start passed)."""
        return [
            RecordView(
                b.first_offset, b.last_offset, b.state, b.delivery_count, b.member_id, b.pending_write is not None
            )
            for b in [*self._passed, *self._batches]
        ]

    def state_at(self, offset: int) -> tuple[str, int]:
        """(state, delivery count) of one offset: Archived below the SPSO (unless the log start passed it while it was
        Acquired, under ``kafka``), Available (0) at or past the SPEO."""
        if offset < self.spso:
            passed = self._passed_at(offset)
            return (passed.state, passed.delivery_count) if passed is not None else (ARCHIVED, 0)
        if offset >= self.speo:
            return AVAILABLE, 0
        batch = self._batches[self._index_of(offset)]
        return batch.state, batch.delivery_count

    def owner_at(self, offset: int) -> str | None:
        if offset < self.spso:
            passed = self._passed_at(offset)
            return passed.member_id if passed is not None else None
        if offset >= self.speo:
            return None
        return self._batches[self._index_of(offset)].member_id

    def _passed_at(self, offset: int) -> InFlightBatch | None:
        return next((b for b in self._passed if b.first_offset <= offset <= b.last_offset), None)

    @property
    def pending_writes(self) -> list[PendingWrite]:
        return list(self._pending.values())

    def projected_durable(self) -> DurableState:
        """The durable state once every write submitted so far has completed."""
        state = self.durable
        for write in self._pending.values():
            state = state.with_write(write.start_offset, write.spans, write.leader_epoch)
        return state

    # ------------------------------------------------------------------ window bookkeeping
    def _index_of(self, offset: int) -> int:
        return bisect.bisect_right(self._batches, offset, key=attrgetter("first_offset")) - 1

    def _split_before(self, offset: int) -> int:
        """Make ``offset`` the first offset of a batch; returns that batch's index (or len)."""
        if offset >= self.speo:
            return len(self._batches)
        index = self._index_of(offset)
        batch = self._batches[index]
        if batch.first_offset == offset:
            return index
        tail = InFlightBatch(
            offset,
            batch.last_offset,
            batch.state,
            batch.delivery_count,
            batch.member_id,
            batch.lock_id,
            batch.pending_write,
            batch.pending_state,
        )
        batch.last_offset = offset - 1
        self._batches.insert(index + 1, tail)
        return index + 1

    def _slice(self, first: int, last: int) -> range:
        """Indices of the batches covering exactly ``[first, last]`` (split as needed)."""
        start = self._split_before(first)
        stop = self._split_before(last + 1)
        return range(start, stop)

    def _advance_start(self) -> None:
        """The SPSO moves past the leading run of Acknowledged/Archived records (they leave the window)."""
        batches = self._batches
        drop = 0
        while (
            drop < len(batches)
            and batches[drop].state in (ACKNOWLEDGED, ARCHIVED)
            and batches[drop].pending_write is None
        ):
            if batches[drop].state == ACKNOWLEDGED:
                RECORD_STATE_MACHINE.require(ACKNOWLEDGED, "start offset passes", ARCHIVED)
            drop += 1
        if drop:
            self.spso = batches[drop - 1].last_offset + 1
            del batches[:drop]

    def _start_floor(self) -> int:
        """The SPSO, or the log start offset a pending write is moving it to."""
        moves = [w.new_log_start for w in self._pending.values() if w.new_log_start is not None]
        return max([self.spso, *moves])

    def _projected_start(self) -> int:
        """Where the SPSO will be once the pending writes complete."""
        for batch in self._batches:
            if batch.effective_state not in (ACKNOWLEDGED, ARCHIVED):
                return batch.first_offset
        return self.speo

    # ------------------------------------------------------------------ acquisition (never persisted)
    def acquire(self, member_id: str, max_records: int) -> list[AcquiredRecords]:
        """ShareFetch's acquisition for ``member_id``: about ``max_records`` records under one lock.

        Available in-flight records come first (lowest offsets), then new records from the log,
        a whole log batch at a time. Returns the acquired ranges in offset order with their
        delivery counts. How the limits apply depends on ``fidelity`` (docs/decisions.md SP4, SP5):

        * ``kafka`` (Kafka's ``SharePartition.canAcquireRecords`` and ``acquire``): nothing is
          acquired when no in-flight record is Available and the window SPEO - SPSO has reached
          ``partition_max_record_locks``; otherwise ``max_records`` is a soft limit: a batch is
          taken whole once it starts within the limit.
        * ``kip``: ``partition_max_record_locks`` caps both the acquired records and the window,
          and ``max_records`` is a hard cap: a log batch it cuts is split, its rest entering the
          window as Available (the KIP's share-state example).
        """
        if max_records < 1:
            raise ValueError(f"max_records must be >= 1, got {max_records}")
        if self.fenced is not None:
            return []
        self.move_log_start()
        floor = self._start_floor()
        budget = self._acquire_budget(max_records, floor)
        if budget <= 0:
            return []
        lock_id = self._next_lock_id
        taken = self._acquire_in_flight(member_id, lock_id, budget, floor)
        budget -= sum(b.size for b in taken)
        if budget > 0 and floor == self.spso:  # no new records while the log start's write is pending
            taken.extend(self._acquire_from_log(member_id, lock_id, budget))
        if taken:
            self._arm_lock(lock_id, taken)
        self._advance_start()
        return _acquired_ranges(taken)

    def _acquire_budget(self, max_records: int, floor: int) -> int:
        """How many records this acquisition may take (see ``acquire`` for the two fidelities)."""
        if self.config.fidelity == "kafka":
            return max_records if self._can_acquire(floor) else 0
        return min(max_records, self.config.partition_max_record_locks - self.acquired_count)

    def _acquire_in_flight(self, member_id: str, lock_id: int, budget: int, floor: int) -> list[InFlightBatch]:
        """Available in-flight records, lowest offsets first; under ``kip`` a batch the budget cuts is split."""
        taken: list[InFlightBatch] = []
        index = 0
        while index < len(self._batches) and budget > 0:
            batch = self._batches[index]
            if _acquirable(batch, floor):
                if batch.size > budget and self.config.fidelity == "kip":
                    self._split_before(batch.first_offset + budget)
                self._acquire_batch(batch, member_id, lock_id)
                budget -= batch.size
                taken.append(batch)
            index += 1
        return taken

    def _arm_lock(self, lock_id: int, taken: list[InFlightBatch]) -> None:
        """One acquisition lock over everything just taken, expiring after ``record_lock_duration_ms``."""
        self._next_lock_id += 1
        self._lock_sizes[lock_id] = sum(b.size for b in taken)
        self.acquired_count += self._lock_sizes[lock_id]
        self.scheduler.schedule(self, LockTimer(lock_id), self.config.record_lock_duration_ms)

    def _can_acquire(self, floor: int) -> bool:
        """Kafka's ``canAcquireRecords``: an Available in-flight record, or room in the window."""
        if any(_acquirable(batch, floor) for batch in self._batches):
            return True
        return self.speo - self.spso < self.config.partition_max_record_locks

    def _acquire_batch(self, batch: InFlightBatch, member_id: str, lock_id: int) -> None:
        RECORD_STATE_MACHINE.require(batch.state, "acquire", ACQUIRED)
        batch.state = ACQUIRED
        batch.delivery_count += 1
        batch.member_id = member_id
        batch.lock_id = lock_id

    def _acquire_from_log(self, member_id: str, lock_id: int, budget: int) -> list[InFlightBatch]:
        read_committed = self.config.isolation_level == "read_committed"
        end = self.log.last_stable_offset if read_committed else self.log.high_watermark
        kafka = self.config.fidelity == "kafka"
        if not kafka:
            end = min(end, self.spso + self.config.partition_max_record_locks)
        taken = []
        for segment in self.log.segments(self.speo, end, read_committed):
            if not segment.deliverable:
                RECORD_STATE_MACHINE.require(AVAILABLE, "skip", ARCHIVED)
                self._append(InFlightBatch(segment.first, segment.last, ARCHIVED))
                continue
            last = segment.last if kafka else min(segment.last, segment.first + budget - 1)
            RECORD_STATE_MACHINE.require(AVAILABLE, "acquire", ACQUIRED)
            batch = InFlightBatch(segment.first, last, ACQUIRED, 1, member_id, lock_id)
            self._append(batch)
            taken.append(batch)
            budget -= batch.size
            if last < segment.last:  # the rest of the log batch comes into flight, Available
                self._append(InFlightBatch(last + 1, segment.last, AVAILABLE))
            if budget <= 0:
                break
        return taken

    # ------------------------------------------------------------------ durable changes
    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> PendingWrite | None:
        """Apply one request's acknowledgements for this partition, atomically.

        INVALID_REQUEST if the batches are out of order or overlap; INVALID_RECORD_STATE (and
        nothing changes) if any acknowledged in-flight offset is not Acquired by ``member_id``.
        Offsets past the in-flight records: INVALID_REQUEST under ``kafka`` (Kafka's
        ``SharePartition.acknowledge``), INVALID_RECORD_STATE under ``kip``. Offsets below the
        SPSO (passed by retention while acquired) are accepted and ignored.
        """
        if self.fenced is not None:
            raise ApiError(self.client_error(self.fenced), "the share coordinator fenced this share-partition's leader")
        previous_last = -1
        for ack in batches:
            if ack.first_offset == previous_last and self.config.fidelity == "kafka":
                # KafkaApis.validateAcknowledgementBatches lets a batch start at the previous one's last offset;
                # SharePartition.acknowledge then finds that offset no longer Acquired and rolls back.
                raise ApiError(Errors.INVALID_RECORD_STATE, f"offset {previous_last} is acknowledged twice")
            if ack.first_offset <= previous_last:
                raise ApiError(Errors.INVALID_REQUEST, "acknowledgement batches must be ascending and not overlap")
            previous_last = ack.last_offset
        for ack in batches:
            self._check_acquired_by(member_id, ack.first_offset, ack.last_offset)
        changes: list[tuple[int, int, str]] = []
        for ack in batches:
            for first, last, kind in _runs(ack):
                first = max(first, self.spso)
                if first <= last:
                    changes.extend(self._plan_range(first, last, kind))
        return self._submit_changes(changes, "acknowledge") if changes else None

    def _check_acquired_by(self, member_id: str, first: int, last: int) -> None:
        if last >= self.speo:
            if self.config.fidelity == "kafka" and self._batches:  # Kafka's fetchSubMapForAcknowledgementBatch
                raise ApiError(
                    Errors.INVALID_REQUEST,
                    f"offsets up to {last} are past the in-flight records (the last is {self.speo - 1})",
                )
            raise ApiError(Errors.INVALID_RECORD_STATE, f"offsets up to {last} were never delivered (SPEO {self.speo})")
        first = max(first, self.spso)
        if first > last:
            return
        index = self._index_of(first)
        while index < len(self._batches) and self._batches[index].first_offset <= last:
            batch = self._batches[index]
            if not (_settled_acquired(batch) and batch.member_id == member_id):
                raise ApiError(
                    Errors.INVALID_RECORD_STATE,
                    f"offsets {batch.first_offset}-{batch.last_offset} are {batch.state}"
                    + (f" by {batch.member_id}" if batch.member_id else "")
                    + (" (acknowledgement in progress)" if batch.pending_write is not None else "")
                    + f", not Acquired by {member_id}",
                )
            index += 1

    def _plan_range(self, first: int, last: int, kind: AcknowledgeType) -> list[tuple[int, int, str]]:
        plans = []
        for index in self._slice(first, last):
            batch = self._batches[index]
            trigger = self._at_limit(batch, "release") if kind is AcknowledgeType.RELEASE else ACKNOWLEDGE_TRIGGER[kind]
            plans.append((batch.first_offset, batch.last_offset, trigger))
        return plans

    def _at_limit(self, batch: InFlightBatch, trigger: str) -> str:
        """The delivery-limit rule (T5, T6): a release or lock timeout of records delivered
        ``delivery_count_limit`` times archives them instead of making them Available again."""
        return AT_LIMIT[trigger] if batch.delivery_count >= self.config.delivery_count_limit else trigger

    def release_member(self, member_id: str, origin: str = "session end") -> PendingWrite | None:
        """Release every record ``member_id`` holds here (its share session ended): T9, as RELEASE."""
        if self.fenced is not None:
            return None
        changes = [
            (batch.first_offset, batch.last_offset, self._at_limit(batch, "release"))
            for batch in self._batches
            if _settled_acquired(batch) and batch.member_id == member_id
        ]
        passed = [batch for batch in self._passed if _settled_acquired(batch) and batch.member_id == member_id]
        return self._submit_changes(changes, origin, passed=passed) if changes or passed else None

    def fire_timer(self, key: Hashable) -> PendingWrite | None:
        """An acquisition lock expired: its records still Acquired go back to Available (or Archived at the limit)."""
        if not isinstance(key, LockTimer):
            raise ValueError(f"unknown timer {key!r}")
        lock_id = key.lock_id
        self._expired_locks.add(lock_id)
        changes = [
            (batch.first_offset, batch.last_offset, self._at_limit(batch, "lock timeout"))
            for batch in self._batches
            if _settled_acquired(batch) and batch.lock_id == lock_id
        ]
        passed = [batch for batch in self._passed if _settled_acquired(batch) and batch.lock_id == lock_id]
        if not changes and not passed:
            return None
        return self._submit_changes(changes, f"lock {lock_id} timeout", applies_on_failure=True, passed=passed)

    def move_log_start(self) -> PendingWrite | None:
        """Retention moved the log start offset past the SPSO: the records below it leave the window.

        ``kafka`` (Kafka's ``SharePartition.updateCacheAndOffsets`` and
        ``archiveAvailableRecordsOnLsoMovement``): at once and in memory only; the SPSO becomes the
        log start offset and the next write carries it. Only Available records are archived: Acquired
        ones stay with their member, under their lock. Acknowledging them is accepted and changes
        nothing (``acknowledgeBatchRecords`` skips offsets below the start); a lock timeout or a
        release archives them, with a write (``releaseAcquisitionLockOnTimeout``,
        ``releaseAcquiredRecords``: below the start the next state is Archived). ``kip``: one write
        archives everything below the new log start (T10/T11); until it completes nothing below it
        is acquired and no new records are read.
        """
        if self.fenced is not None:
            return None
        new_start = self.log.log_start_offset
        if new_start <= self._start_floor():
            return None
        if self.config.fidelity == "kafka":
            self._drop_below_log_start(new_start)
            self._advance_start()
            return None
        changes = []
        for batch in self._batches[: self._split_before(min(new_start, self.speo))]:
            if batch.pending_write is None and batch.state != ARCHIVED:
                changes.append((batch.first_offset, batch.last_offset, "log start passes"))
        return self._submit_changes(changes, "log start moved", new_log_start=new_start)

    def _submit_changes(
        self,
        changes: list[tuple[int, int, str]],
        origin: str,
        new_log_start: int | None = None,
        *,
        applies_on_failure: bool = False,
        passed: Sequence[InFlightBatch] = (),
    ) -> PendingWrite:
        """Plan ``changes`` (window ranges) under one new write; ``passed`` records go to Archived with it."""
        write_id = self._next_write_id
        planned = []
        changed: list[Span] = []
        for batch in passed:
            batch.pending_write, batch.pending_state = write_id, ARCHIVED
            changed.append((batch.first_offset, batch.last_offset, int(DeliveryState.ARCHIVED), batch.delivery_count))
        for first, last, trigger in changes:
            for index in self._slice(first, last):
                batch = self._batches[index]
                target = RECORD_STATE_MACHINE.next_state(batch.state, trigger)
                batch.pending_write, batch.pending_state = write_id, target
                planned.append(RecordChange(batch.first_offset, batch.last_offset, trigger, target))
                if trigger != "log start passes" and (target != AVAILABLE or batch.delivery_count > 0):
                    changed.append(
                        (batch.first_offset, batch.last_offset, int(DURABLE_CODE[target]), batch.delivery_count)
                    )
        changed.sort()
        spans: tuple[Span, ...]
        if new_log_start is not None:
            start_offset, spans = new_log_start, ()  # every change is below the new start
        else:
            start_offset, spans = self._start_offset_field(changed)
        write = self._new_write(origin, start_offset, spans, tuple(planned), new_log_start)
        write.applies_on_failure = applies_on_failure
        return self._submit(write)

    def _start_offset_field(self, changed: list[Span]) -> tuple[int, tuple[Span, ...]]:
        """The write's StartOffset and state batches (docs/decisions.md SP6).

        ``kafka`` (Kafka's ``SharePartition.writeShareGroupState``): the SPSO as it is before the
        change, and the changed ranges. ``kip`` (the KIP's share-state example): a write whose
        SPSO move leaves no durable in-flight state is just the new StartOffset; otherwise the
        changed ranges with StartOffset -1, and the stored start lags until a later write moves
        it (the example's "Acknowledge 110" step).
        """
        if self.config.fidelity == "kafka":
            return self.spso, tuple(coalesce(changed))
        new_start = self._projected_start()
        if new_start > self.spso and not drop_below(combine(self.projected_durable().spans, changed), new_start):
            return new_start, ()
        return UNCHANGED_START_OFFSET, tuple(coalesce(changed))

    def _new_write(
        self,
        origin: str,
        start_offset: int,
        spans: tuple[Span, ...],
        changes: tuple[RecordChange, ...],
        new_log_start: int | None = None,
    ) -> PendingWrite:
        write = PendingWrite(
            self._next_write_id,
            origin,
            self.state_epoch,
            self.leader_epoch,
            start_offset,
            spans,
            changes,
            new_log_start,
        )
        self._next_write_id += 1
        return write

    def _submit(self, write: PendingWrite) -> PendingWrite:
        self._pending[write.write_id] = write
        self.persister.submit(self, write)
        return write

    def complete_write(self, write_id: int, error: Errors = Errors.NONE) -> PendingWrite:
        """The share coordinator answered ``write_id`` (writes complete in the order submitted).

        On success the write's record changes take effect, locks are settled and the SPSO moves.
        On failure an acknowledgement's or release's records return to Acquired (Kafka's
        ``rollbackOrProcessStateUpdates``), and those whose lock ran out meanwhile time out at
        once, a new write (KAFKA-19476); a lock timeout's records move anyway, as in Kafka's
        ``releaseAcquisitionLockOnTimeout``, though the share coordinator does not hold the change.
        """
        if not self._pending:
            raise ValueError(f"write {write_id} is not pending")
        oldest = next(iter(self._pending))
        if write_id != oldest:
            raise ValueError(f"writes complete in order: {oldest} is pending before {write_id}")
        write = self._pending.pop(write_id)
        write.error = error
        self._settle_passed(write_id, error is Errors.NONE or write.applies_on_failure)
        if error is Errors.NONE or write.applies_on_failure:
            self._apply_changes(write)
            if error is Errors.NONE:
                self.durable = self.durable.with_write(write.start_offset, write.spans, write.leader_epoch)
                if write.new_log_start is not None:
                    self._drop_below_log_start(write.new_log_start)
            self._advance_start()
        else:
            expired = set()
            for batch in self._batches:
                if batch.pending_write == write_id:
                    batch.pending_write = batch.pending_state = None
                    if batch.state == ACQUIRED and batch.lock_id in self._expired_locks:
                        expired.add(batch.lock_id)
            for lock_id in sorted(expired):
                self.scheduler.schedule(self, LockTimer(lock_id), 0)
        if error in FENCING_ERRORS:
            self.fenced = error  # another leader (or a reset) owns the state now: this one stops
            self.scheduler.cancel_all(self)
        return write

    def _settle_passed(self, write_id: int, applied: bool) -> None:
        """Passed records this write archives leave for good; on a failed release they stay Acquired."""
        for batch in [b for b in self._passed if b.pending_write == write_id]:
            batch.pending_write = batch.pending_state = None
            if applied:
                RECORD_STATE_MACHINE.require(ACQUIRED, "log start passes", ARCHIVED)
                self._unlock(batch)
                self._passed.remove(batch)
            elif batch.lock_id in self._expired_locks:
                self.scheduler.schedule(self, LockTimer(batch.lock_id), 0)

    def _apply_changes(self, write: PendingWrite) -> None:
        for change in write.changes:
            first = max(change.first_offset, self.spso)  # the log start may have passed it meanwhile
            if first > change.last_offset:
                continue
            for index in self._slice(first, change.last_offset):
                batch = self._batches[index]
                if batch.pending_write != write.write_id:
                    continue
                RECORD_STATE_MACHINE.require(batch.state, change.trigger, batch.pending_state)  # type: ignore[arg-type]
                if batch.state == ACQUIRED:
                    self._unlock(batch)
                batch.state = batch.pending_state  # type: ignore[assignment]
                batch.pending_write = batch.pending_state = None

    def client_error(self, error: Errors) -> Errors:
        """The error a client gets for a refused write (see ``client_error``)."""
        return client_error(error, self.config.fidelity)

    def _unlock(self, batch: InFlightBatch) -> None:
        lock_id = batch.lock_id
        self.acquired_count -= batch.size
        batch.member_id = batch.lock_id = None
        if lock_id is None:
            return
        self._lock_sizes[lock_id] -= batch.size
        if self._lock_sizes[lock_id] == 0:
            del self._lock_sizes[lock_id]
            self._expired_locks.discard(lock_id)
            self.scheduler.cancel(self, LockTimer(lock_id))

    def _drop_below_log_start(self, new_start: int) -> None:
        """Records below the new log start leave the window; acquired ones keep their member and lock
        (``kafka``) or release them (``kip``)."""
        if new_start <= self.spso:
            return
        cut = self._split_before(min(new_start, self.speo))
        for batch in self._batches[:cut]:
            if batch.state == ACQUIRED and self.config.fidelity == "kafka":
                self._passed.append(batch)
            elif batch.state == ACQUIRED:
                self._unlock(batch)
        del self._batches[:cut]
        self.spso = new_start
        self.speo = max(self.speo, new_start)

    def lock_deadlines(self) -> dict[int, int]:
        """Armed acquisition locks: lock id -> due time."""
        locks = {key.lock_id: due for key, due in self.scheduler.timers(self).items() if isinstance(key, LockTimer)}
        return dict(sorted(locks.items()))


def _settled_acquired(batch: InFlightBatch) -> bool:
    """Acquired, and no write is moving it yet: what a member may acknowledge, release or let time out."""
    return batch.state == ACQUIRED and batch.pending_write is None


def _acquirable(batch: InFlightBatch, floor: int) -> bool:
    """Available, no write is moving it, and not below the log start a pending write moves the SPSO to."""
    return batch.state == AVAILABLE and batch.pending_write is None and batch.first_offset >= floor


def _runs(ack: AcknowledgementBatch) -> list[tuple[int, int, AcknowledgeType]]:
    """An acknowledgement batch as runs of offsets with one type each."""
    types = ack.acknowledge_types
    if len(types) == 1:
        return [(ack.first_offset, ack.last_offset, AcknowledgeType(types[0]))]
    runs: list[tuple[int, int, AcknowledgeType]] = []
    for offset, kind in enumerate(types, start=ack.first_offset):
        kind = AcknowledgeType(kind)
        if runs and runs[-1][2] is kind and runs[-1][1] == offset - 1:
            runs[-1] = (runs[-1][0], offset, kind)
        else:
            runs.append((offset, offset, kind))
    return runs


def _acquired_ranges(batches: list[InFlightBatch]) -> list[AcquiredRecords]:
    batches = sorted(batches, key=attrgetter("first_offset"))
    out: list[AcquiredRecords] = []
    for batch in batches:
        if out and out[-1].last_offset + 1 == batch.first_offset and out[-1].delivery_count == batch.delivery_count:
            out[-1] = AcquiredRecords(
                first_offset=out[-1].first_offset, last_offset=batch.last_offset, delivery_count=batch.delivery_count
            )
        else:
            out.append(
                AcquiredRecords(
                    first_offset=batch.first_offset, last_offset=batch.last_offset, delivery_count=batch.delivery_count
                )
            )
    return out
