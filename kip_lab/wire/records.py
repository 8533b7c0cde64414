"""The bytes real producers wrote, kept beside the Lab's topic logs.

The Lab's ``TopicLog`` of a partition (the one its share-partition leaders read) assigns the
offsets: each record batch a producer sends is appended there as one batch of as many records
(the handler's ``produce_share_records`` step). The batch's bytes are kept here, with the base
offset rewritten to the one the log gave (the
CRC of a v2 record batch does not cover its base offset, so the batch stays valid), and a
Fetch or ShareFetch returns them as a broker does: whole batches, from the one holding the
fetch offset.
"""

from __future__ import annotations

import asyncio
import bisect
import struct
from dataclasses import dataclass, field

_LAST_OFFSET_DELTA = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")
_LENGTH_END = 12  # base offset (8) + batch length (4): the length counts the bytes after these
_MAGIC_AT = 16
_LAST_OFFSET_DELTA_AT = 23
_MIN_BATCH = 61  # a v2 batch header without records


def split_batches(records: bytes) -> list[bytes]:
    """The record batches in a Produce request's records field; ValueError if they are not v2 batches."""
    batches = []
    position = 0
    while position < len(records):
        if len(records) - position < _MIN_BATCH:
            raise ValueError(f"a record batch of {len(records) - position} bytes is shorter than its header")
        length = struct.unpack_from(">i", records, position + 8)[0]
        end = position + _LENGTH_END + length
        if length < _MIN_BATCH - _LENGTH_END or end > len(records):
            raise ValueError(f"a record batch claims {length} bytes; {len(records) - position - _LENGTH_END} follow")
        if records[position + _MAGIC_AT] != 2:
            raise ValueError(f"record batch magic {records[position + _MAGIC_AT]}: only v2 batches are served")
        batches.append(records[position:end])
        position = end
    if not batches:
        raise ValueError("a produce request for a partition carries no record batch")
    return batches


def record_count(batch: bytes) -> int:
    """The offsets a v2 batch takes: its last offset delta plus one."""
    return _LAST_OFFSET_DELTA.unpack_from(batch, _LAST_OFFSET_DELTA_AT)[0] + 1


def end_offset(records: bytes) -> int:
    """The offset past the last record of stored batches (their base offsets are the log's)."""
    last = split_batches(records)[-1]
    return _BASE_OFFSET.unpack_from(last, 0)[0] + record_count(last)


@dataclass
class StoredBatches:
    bases: list[int] = field(default_factory=list)
    lasts: list[int] = field(default_factory=list)
    data: list[bytes] = field(default_factory=list)


class RecordStore:
    """Record batches by (topic id, partition), in offset order."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], StoredBatches] = {}
        self.appended = asyncio.Event()  # set (and replaced) whenever records arrive: long-polling fetches wake

    def store(self, topic_id: str, partition: int, base_offset: int, batch: bytes) -> None:
        """Keep ``batch`` as the one the Lab's log holds at ``base_offset`` (its base offset rewritten)."""
        stored = self.partitions.setdefault((topic_id, partition), StoredBatches())
        rebased = bytearray(batch)
        _BASE_OFFSET.pack_into(rebased, 0, base_offset)
        stored.bases.append(base_offset)
        stored.lasts.append(base_offset + record_count(batch) - 1)
        stored.data.append(bytes(rebased))

    def forget_topic(self, topic_id: str) -> None:
        """A deleted topic's batches go with it."""
        for partition in [p for p in self.partitions if p[0] == topic_id]:
            del self.partitions[partition]

    def read(self, topic_id: str, partition: int, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (at least one batch)."""
        stored = self.partitions.get((topic_id, partition))
        if stored is None:
            return b""
        index = bisect.bisect_right(stored.bases, offset) - 1
        if index < 0 or stored.lasts[index] < offset:
            index += 1
        out: list[bytes] = []
        size = 0
        while index < len(stored.data):
            batch = stored.data[index]
            if out and size + len(batch) > max_bytes:
                break
            out.append(batch)
            size += len(batch)
            index += 1
        return b"".join(out)

    def batches_between(self, topic_id: str, partition: int, first: int, last: int) -> bytes:
        """Every batch holding an offset in ``[first, last]`` (what a ShareFetch returns for acquired records)."""
        stored = self.partitions.get((topic_id, partition))
        if stored is None:
            return b""
        index = max(bisect.bisect_right(stored.bases, first) - 1, 0)
        out: list[bytes] = []
        while index < len(stored.data) and stored.bases[index] <= last:
            if stored.lasts[index] >= first:
                out.append(stored.data[index])
            index += 1
        return b"".join(out)
