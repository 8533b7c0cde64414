"""Durable share-partition state as offset ranges, and the one rule for combining writes.

A *span* is ``(first_offset, last_offset, delivery_state, delivery_count)`` with
``delivery_state`` a ``DeliveryState`` code. Spans in a durable state are sorted, do not
overlap and are coalesced (neighbours with the same state and count merged). The share
coordinator (on every write and on replay) and the leader's persister (tracking what it has
made durable) combine writes with the same function, so they can never disagree about what
a write means.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from kip_lab.protocol.share import UNCHANGED_START_OFFSET, DeliveryState, StateBatch

Span = tuple[int, int, int, int]


def spans_from_batches(batches: Iterable[StateBatch]) -> list[Span]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in batches]


def batches_from_spans(spans: Iterable[Span]) -> list[StateBatch]:
    return [
        StateBatch.model_construct(first_offset=f, last_offset=last, delivery_state=DeliveryState(s), delivery_count=c)
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


def overlay(old: Sequence[Span], new: Sequence[Span]) -> list[Span]:
    """``new`` written over ``old`` offset by offset (newest wins); both sorted, non-overlapping."""
    out: list[Span] = []
    it = iter(old)
    cur = next(it, None)
    for span in new:
        first, last = span[0], span[1]
        while cur is not None and cur[1] < first:
            out.append(cur)
            cur = next(it, None)
        if cur is not None and cur[0] < first:
            out.append((cur[0], first - 1, cur[2], cur[3]))
            cur = (first, cur[1], cur[2], cur[3])
        out.append(span)
        while cur is not None and cur[1] <= last:
            cur = next(it, None)
        if cur is not None and cur[0] <= last:
            cur = (last + 1, cur[1], cur[2], cur[3])
    while cur is not None:
        out.append(cur)
        cur = next(it, None)
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
        """This state after a write: a new start offset (unless -1), then its spans overlaid."""
        start = self.start_offset if start_offset == UNCHANGED_START_OFFSET else start_offset
        combined = overlay(self.spans, spans) if spans else self.spans
        if combined and start != UNCHANGED_START_OFFSET and combined[0][0] < start:
            combined = drop_below(combined, start)
        leader = self.leader_epoch if leader_epoch == -1 else leader_epoch
        return DurableState(self.state_epoch, leader, self.snapshot_epoch, start, tuple(combined))

    @property
    def state_batches(self) -> list[StateBatch]:
        return batches_from_spans(self.spans)
