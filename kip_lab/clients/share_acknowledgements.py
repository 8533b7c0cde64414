"""The share consumer's record bookkeeping: delivered records, acknowledgements, and the two modes.

KIP-932's ``KafkaShareConsumer`` rules (section 'Client programming interface'):

* the mode is decided by use: calling ``acknowledge`` makes the consumer *explicit*; a
  commit or the next poll with delivered records and no ``acknowledge`` makes it *implicit*
  (every delivered record is ACCEPTed). The modes cannot be mixed: ``acknowledge`` on an
  implicit consumer raises;
* only records of the latest poll can be acknowledged, once, and per partition in the order
  they were returned (non-decreasing offsets, docs/decisions.md SG8);
* an explicit consumer's unacknowledged records stay Acquired and are handed back at the next
  poll (the broker's lock keeps running);
* close: explicit, pending acknowledgements are sent and the rest released; implicit, every
  delivered record is released.

Pure data, no clock and no network: the Lab's ``ShareConsumer`` drives it, tests poke it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from kip_lab.errors import KipLabError
from kip_lab.protocol.share import AcknowledgementBatch, AcknowledgeType

TP = tuple[str, int]  # (topic id, partition)


class AcknowledgementMode(StrEnum):
    UNDECIDED = "undecided"
    IMPLICIT = "implicit"
    EXPLICIT = "explicit"


class IllegalAcknowledgement(KipLabError, RuntimeError):
    """Kafka's IllegalStateException / IllegalArgumentException from ``acknowledge``."""


@dataclass(frozen=True, slots=True)
class DeliveredRecord:
    """``ConsumerRecord`` as a share consumer sees it: with its delivery count (KIP-932)."""

    topic_id: str
    partition: int
    offset: int
    delivery_count: int
    key: str | None = None
    value: str | None = None

    @property
    def tp(self) -> TP:
        return (self.topic_id, self.partition)


def to_batches(acks: list[tuple[int, AcknowledgeType]]) -> list[AcknowledgementBatch]:
    """Offsets with their types as the wire's batches: one per contiguous run, one type if uniform."""
    batches: list[AcknowledgementBatch] = []
    run: list[tuple[int, AcknowledgeType]] = []
    for offset, kind in sorted(acks):
        if run and offset != run[-1][0] + 1:
            batches.append(_batch(run))
            run = []
        run.append((offset, kind))
    if run:
        batches.append(_batch(run))
    return batches


def _batch(run: list[tuple[int, AcknowledgeType]]) -> AcknowledgementBatch:
    types = [kind for _, kind in run]
    return AcknowledgementBatch(
        first_offset=run[0][0], last_offset=run[-1][0], acknowledge_types=types[:1] if len(set(types)) == 1 else types
    )


@dataclass
class Acknowledgements:
    mode: AcknowledgementMode = AcknowledgementMode.UNDECIDED
    delivered: dict[TP, dict[int, DeliveredRecord]] = field(default_factory=dict)  # latest poll, not acknowledged
    pending: dict[TP, list[tuple[int, AcknowledgeType]]] = field(default_factory=dict)  # acknowledged, not sent
    _last: dict[TP, int] = field(default_factory=dict)  # last offset acknowledged per partition in this poll

    def has_delivered(self) -> bool:
        return any(self.delivered.values())

    def _accept_all_implicitly(self) -> None:
        if self.mode is AcknowledgementMode.UNDECIDED and self.has_delivered():
            self.mode = AcknowledgementMode.IMPLICIT
        if self.mode is AcknowledgementMode.IMPLICIT:
            self._all_delivered_as(AcknowledgeType.ACCEPT)

    def _all_delivered_as(self, kind: AcknowledgeType) -> None:
        for tp, records in self.delivered.items():
            if records:
                self.pending.setdefault(tp, []).extend((offset, kind) for offset in sorted(records))
        self.delivered = {}

    def on_poll(self, records: list[DeliveredRecord]) -> list[DeliveredRecord]:
        """A poll: implicit acknowledgement of the previous batch, then what the app gets now.

        An explicit consumer's unacknowledged records come back first (docs/decisions.md SG8).
        """
        self._accept_all_implicitly()
        self._last = {}
        handed_back = [r for tp in sorted(self.delivered) for _, r in sorted(self.delivered[tp].items())]
        for record in records:
            self.delivered.setdefault(record.tp, {})[record.offset] = record
        return handed_back + records

    def acknowledge(self, record: DeliveredRecord, kind: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """``acknowledge(record, type)``: explicit mode; sent at the next commit or poll."""
        if kind is AcknowledgeType.GAP:
            raise IllegalAcknowledgement("GAP is not an application acknowledgement type (ACCEPT, RELEASE, REJECT).")
        if self.mode is AcknowledgementMode.IMPLICIT:
            raise IllegalAcknowledgement(
                "This consumer acknowledges implicitly (it committed or polled without calling acknowledge); "
                "explicit and implicit acknowledgement cannot be mixed."
            )
        waiting = self.delivered.get(record.tp, {})
        if record.offset not in waiting:
            raise IllegalAcknowledgement(
                f"Record {record.topic_id}-{record.partition}@{record.offset} is not awaiting acknowledgement "
                "(not from the latest poll, or already acknowledged)."
            )
        last = self._last.get(record.tp)
        if last is not None and record.offset < last:
            raise IllegalAcknowledgement(
                f"Records of {record.topic_id}-{record.partition} must be acknowledged in the order returned: "
                f"offset {record.offset} after {last}."
            )
        self.mode = AcknowledgementMode.EXPLICIT
        del waiting[record.offset]
        self._last[record.tp] = record.offset
        self.pending.setdefault(record.tp, []).append((record.offset, kind))

    def take_for_commit(self) -> dict[TP, list[AcknowledgementBatch]]:
        """What a commitSync/commitAsync (or the next poll) sends: implicit ACCEPTs, then everything pending."""
        self._accept_all_implicitly()
        return self._drain()

    def take_for_close(self, unreturned: Iterable[DeliveredRecord] = ()) -> dict[TP, list[AcknowledgementBatch]]:
        """Close: explicit sends what is pending and releases the rest; implicit releases everything.

        ``unreturned``: records fetched (so acquired) that no poll has returned yet: released too.
        """
        for record in unreturned:
            self.delivered.setdefault(record.tp, {})[record.offset] = record
        self._all_delivered_as(AcknowledgeType.RELEASE)
        return self._drain()

    def forget(self, partitions: set[TP]) -> None:
        """Partitions no longer fetched (a new assignment): nothing of theirs is acknowledged any more."""
        for tp in partitions:
            self.delivered.pop(tp, None)
            self.pending.pop(tp, None)

    def _drain(self) -> dict[TP, list[AcknowledgementBatch]]:
        out = {tp: to_batches(acks) for tp, acks in sorted(self.pending.items()) if acks}
        self.pending = {}
        return out
