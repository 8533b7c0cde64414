"""Durable share-partition state as offset ranges, and the one rule for combining writes.

A *span* is ``(first_offset, last_offset, delivery_state, delivery_count)`` with
``delivery_state`` a ``DeliveryState`` code. Spans in a durable state are sorted, do not
overlap and are coalesced (neighbours with the same state and count merged). The share
coordinator (on every write and on replay) and the leader (tracking what it has made
durable) combine writes with the same function, ``combine``, so they can never disagree
about what a write means.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from kip_lab.protocol.share import UNCHANGED_START_OFFSET, DeliveryState, StateBatch

Span = tuple[int, int, int, int]


def spans_from_batches(batches: Iterable[StateBatch]) -> list[Span]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in batches]


def batches_from_spans(spans: Iterable[Span]) -> list[StateBatch]:
    return [
        StateBatch(first_offset=f, last_offset=last, delivery_state=DeliveryState(s), delivery_count=c)
        for f, last, s, c in spans
    ]


def coalesce(spans: Iterable[Span]) -> list[Span]:
    """Merge touching neighbours that have the same state and delivery count."""
    out: list[Span] = []
    for span in spans:
        if out:
            f, last, s, c = out[-1]
            if last + 1 == span[0] and s == span[2] and c == span[3]:
                out[-1] = (f, span[1], s, c)
                continue
        out.append(span)
    return out


def combine(old: Sequence[Span], new: Sequence[Span], start_offset: int = UNCHANGED_START_OFFSET) -> list[Span]:
    """Stored spans and a write's spans as one sorted, non-overlapping, coalesced list.

    As Kafka's ``PersisterStateBatchCombiner.combineStateBatches``: spans wholly below
    ``start_offset`` (unless -1) are dropped and a span across it is cut there; where spans
    overlap, each offset takes the one with the higher delivery count, then the higher
    delivery state. A record's count and state only grow, so for one leader's writes this is
    "the newest wins"; it also merges a write whose own spans overlap.
    """
    spans = [*old, *new]
    if start_offset != UNCHANGED_START_OFFSET:
        spans = drop_below(spans, start_offset)
    events: list[tuple[int, int, tuple[int, int]]] = []
    for first, last, state, count in spans:
        events.append((first, 1, (count, state)))
        events.append((last + 1, -1, (count, state)))
    events.sort()
    active: Counter[tuple[int, int]] = Counter()
    out: list[Span] = []
    index = 0
    while index < len(events):
        offset = events[index][0]
        while index < len(events) and events[index][0] == offset:
            _, delta, priority = events[index]
            active[priority] += delta
            if not active[priority]:
                del active[priority]
            index += 1
        if active:
            count, state = max(active)
            out.append((offset, events[index][0] - 1, state, count))
    return coalesce(out)


def drop_below(spans: Sequence[Span], start_offset: int) -> list[Span]:
    """Everything below the start offset is implied Archived, so it is not kept."""
    out = []
    for f, last, s, c in spans:
        if last < start_offset:
            continue
        out.append((max(f, start_offset), last, s, c))
    return out


class DurableState(NamedTuple):
    """What the share coordinator stores for one share-partition (and what replay rebuilds).

    A named tuple: immutable, compared by value, and cheap to build on the replay path.
    """

    state_epoch: int
    leader_epoch: int
    snapshot_epoch: int
    start_offset: int
    spans: tuple[Span, ...] = ()

    def with_write(self, start_offset: int, spans: Sequence[Span], leader_epoch: int) -> DurableState:
        """This state after a write: a new start offset (unless -1), then its spans combined."""
        start = self.start_offset if start_offset == UNCHANGED_START_OFFSET else start_offset
        combined = combine(self.spans, spans, start)
        leader = self.leader_epoch if leader_epoch == -1 else leader_epoch
        return DurableState(self.state_epoch, leader, self.snapshot_epoch, start, tuple(combined))

    @property
    def state_batches(self) -> list[StateBatch]:
        return batches_from_spans(self.spans)
