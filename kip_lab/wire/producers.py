"""Idempotent producers: producer ids, epochs and per-partition sequence numbers.

``InitProducerId`` without a transactional id gives a new producer id at epoch 0, as Kafka's
``TransactionCoordinator.handleInitProducerId`` does for an idempotent producer. Each batch a
producer with an id writes is checked against what the partition's log saw of that producer
before, as Kafka's log does (``ProducerAppendInfo.checkProducerEpoch`` / ``checkSequence``,
``ProducerStateEntry.findDuplicateBatch``):

* an epoch lower than the last one seen is INVALID_PRODUCER_EPOCH;
* a new epoch must start at sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise), unless the
  partition has seen no batch of that producer yet (then any sequence is taken);
* at the same epoch the batch must follow the last one (sequence + 1, wrapping at 2^31 - 1);
* a batch equal (same epoch, first and last sequence) to one of the last five appended is a
  retry whose answer was lost: it is not appended again, and its answer is the offset it was
  given the first time. (DUPLICATE_SEQUENCE_NUMBER exists in the protocol, but Kafka 4.0's log
  never answers it: it answers a duplicate this way.)

Transactional batches are refused: transactions are not served.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_SEQUENCE = 2**31 - 1
BATCHES_TO_RETAIN = 5  # Kafka ProducerStateEntry.NUM_BATCHES_TO_RETAIN
_ATTRIBUTES = struct.Struct(">h")
_PRODUCER = struct.Struct(">qhi")  # producer id, producer epoch, base sequence
_ATTRIBUTES_AT = 21
_PRODUCER_AT = 43
_LAST_OFFSET_DELTA_AT = 23
_TRANSACTIONAL = 0x10


@dataclass(frozen=True)
class BatchProducer:
    """What a v2 record batch's header says of the producer that wrote it."""

    producer_id: int
    epoch: int
    first_sequence: int
    last_sequence: int
    transactional: bool

    @classmethod
    def of(cls, batch: bytes) -> BatchProducer:
        producer_id, epoch, first = _PRODUCER.unpack_from(batch, _PRODUCER_AT)
        last_delta = struct.unpack_from(">i", batch, _LAST_OFFSET_DELTA_AT)[0]
        attributes = _ATTRIBUTES.unpack_from(batch, _ATTRIBUTES_AT)[0]
        last = (first + last_delta) % (MAX_SEQUENCE + 1) if first >= 0 else first
        return cls(producer_id, epoch, first, last, bool(attributes & _TRANSACTIONAL))


@dataclass(frozen=True)
class AppendedBatch:
    first_sequence: int
    last_sequence: int
    first_offset: int


@dataclass
class ProducerEntry:
    """One producer as one partition's log knows it (Kafka ``ProducerStateEntry``)."""

    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[AppendedBatch] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


@dataclass(frozen=True)
class Verdict:
    """The check of one batch: an error (and its message), or a duplicate's first offset, or neither (append)."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    duplicate_of: int | None = None


def in_sequence(last: int, next_first: int) -> bool:
    return next_first == last + 1 or (next_first == 0 and last == MAX_SEQUENCE)


class ProducerStates:
    """Producer ids handed out, and each partition's producers (by topic id and partition)."""

    def __init__(self) -> None:
        self.next_producer_id = 0
        self.partitions: dict[tuple[str, int], dict[int, ProducerEntry]] = {}

    def new_producer_id(self) -> int:
        producer_id = self.next_producer_id
        self.next_producer_id += 1
        return producer_id

    def check(self, partition: tuple[str, int], batch: BatchProducer) -> Verdict:
        """Whether ``batch`` may be appended to ``partition`` (see the module docstring)."""
        if batch.transactional:
            return Verdict(ErrorCode.invalid_txn_state, "transactional batches are not served by kip-lab's front door")
        if batch.producer_id == NO_PRODUCER_ID:
            return Verdict()
        entry = self.partitions.get(partition, {}).get(batch.producer_id, ProducerEntry())
        where = f"producer {batch.producer_id} in {partition[0]}-{partition[1]}"
        if batch.epoch < entry.epoch:
            return Verdict(
                ErrorCode.invalid_producer_epoch,
                f"Epoch of {where} is {batch.epoch}, which is smaller than the last seen epoch {entry.epoch}",
            )
        if batch.epoch != entry.epoch:
            if batch.first_sequence != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                return Verdict(
                    ErrorCode.out_of_order_sequence_number,
                    f"Invalid sequence number for new epoch of {where}: {batch.epoch} (request epoch), "
                    f"{batch.first_sequence} (seq. number), {entry.epoch} (current producer epoch)",
                )
            return Verdict()
        for appended in entry.batches:
            if (appended.first_sequence, appended.last_sequence) == (batch.first_sequence, batch.last_sequence):
                return Verdict(duplicate_of=appended.first_offset)
        if not in_sequence(entry.last_sequence, batch.first_sequence):
            return Verdict(
                ErrorCode.out_of_order_sequence_number,
                f"Out of order sequence number for {where}: {batch.first_sequence} (incoming seq. number), "
                f"{entry.last_sequence} (current end sequence number)",
            )
        return Verdict()

    def appended(self, partition: tuple[str, int], batch: BatchProducer, first_offset: int) -> None:
        """Remember a batch the log took (Kafka ``ProducerStateEntry.addBatch``)."""
        if batch.producer_id == NO_PRODUCER_ID:
            return
        entry = self.partitions.setdefault(partition, {}).setdefault(batch.producer_id, ProducerEntry())
        if batch.epoch != entry.epoch:
            entry.epoch = batch.epoch
            entry.batches.clear()
        entry.batches.append(AppendedBatch(batch.first_sequence, batch.last_sequence, first_offset))

    def forget_topic(self, topic_id: str) -> None:
        """A deleted topic's producers go with it."""
        for partition in [p for p in self.partitions if p[0] == topic_id]:
            del self.partitions[partition]
