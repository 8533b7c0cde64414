"""The share-partition leader's persister: its only way to reach the share coordinator.

KIP-932's ``DefaultStatePersister`` turns a share-partition's changes into
ReadShareGroupState / WriteShareGroupState requests. Here a ``SharePartition`` submits each
``PendingWrite``; the persister builds the WriteShareGroupState request, sends it to the
share coordinator that owns the share-partition and completes the write with the answer.
``deferred=True`` queues the requests instead, so a simulation decides when each one is
delivered (latency, reordering of other traffic, a coordinator failover in between).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from kip_lab.contract import checked
from kip_lab.protocol.share import (
    PartitionStateResult,
    PartitionSummaryResult,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    ReadStateData,
    ReadStatePartition,
    WriteShareGroupStateRequest,
    WriteStateData,
)
from kip_lab.share.coordinator import ShareCoordinator
from kip_lab.share.partition import PendingWrite, SharePartition

CoordinatorLookup = Callable[[str, str, int], ShareCoordinator]


@dataclass(frozen=True, slots=True)
class SentWrite:
    """One WriteShareGroupState the persister sent, and for which share-partition write."""

    partition: SharePartition
    write: PendingWrite
    request: WriteShareGroupStateRequest


class CoordinatorPersister:
    """Sends a share-partition leader's reads and writes to the owning share coordinator.

    ``coordinators`` is one ``ShareCoordinator`` or a lookup ``(group, topic id, partition) ->
    ShareCoordinator`` (the KIP's FindCoordinator with key type SHARE). ``sent`` keeps every
    write request in order.
    """

    @checked
    def __init__(self, coordinators: ShareCoordinator | CoordinatorLookup, *, deferred: bool = False) -> None:
        self._coordinators = coordinators
        self.deferred = deferred
        self.sent: list[SentWrite] = []
        self.queue: deque[SentWrite] = deque()

    def coordinator_for(self, group_id: str, topic_id: str, partition: int) -> ShareCoordinator:
        """The share coordinator owning this share-partition's state."""
        if isinstance(self._coordinators, ShareCoordinator):
            return self._coordinators
        return self._coordinators(group_id, topic_id, partition)

    def read_state(self, group_id: str, topic_id: str, partition: int, leader_epoch: int) -> PartitionStateResult:
        request = ReadShareGroupStateRequest(group_id=group_id, topics=[_read_data(topic_id, partition, leader_epoch)])
        result = self.coordinator_for(group_id, topic_id, partition).read_share_group_state(request)
        return result.response.results[0].partitions[0]

    def read_summary(self, group_id: str, topic_id: str, partition: int, leader_epoch: int) -> PartitionSummaryResult:
        request = ReadShareGroupStateSummaryRequest(
            group_id=group_id, topics=[_read_data(topic_id, partition, leader_epoch)]
        )
        result = self.coordinator_for(group_id, topic_id, partition).read_share_group_state_summary(request)
        return result.response.results[0].partitions[0]

    def submit(self, partition: SharePartition, write: PendingWrite) -> None:
        request = WriteShareGroupStateRequest(
            group_id=partition.group_id,
            topics=[
                WriteStateData(topic_id=partition.topic_id, partitions=[write.partition_data(partition.partition)])
            ],
        )
        sent = SentWrite(partition, write, request)
        self.sent.append(sent)
        if self.deferred:
            self.queue.append(sent)
        else:
            self._deliver(sent)

    def deliver(self, count: int | None = None) -> list[SentWrite]:
        """Deliver queued writes (oldest first): ``count`` of them, or all."""
        delivered: list[SentWrite] = []
        while self.queue and (count is None or len(delivered) < count):
            sent = self.queue.popleft()
            self._deliver(sent)
            delivered.append(sent)
        return delivered

    def _deliver(self, sent: SentWrite) -> None:
        sp = sent.partition
        result = self.coordinator_for(sp.group_id, sp.topic_id, sp.partition).write_share_group_state(sent.request)
        sp.complete_write(sent.write.write_id, result.response.results[0].partitions[0].error_code)


def _read_data(topic_id: str, partition: int, leader_epoch: int) -> ReadStateData:
    return ReadStateData(
        topic_id=topic_id, partitions=[ReadStatePartition(partition=partition, leader_epoch=leader_epoch)]
    )
