"""A share-partition leader loading stored state: Kafka's ``SharePartition.maybeInitialize``.

The property: whatever state the share coordinator stores, and in whatever order it returns the
batches, the loaded leader shows that state: the SPSO at the first offset that is neither
Acknowledged nor Archived, the SPEO after the last batch, every stored offset with its state
and delivery count, and offsets between batches Available (never delivered).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from share_support import GROUP, TOPIC, initialize

from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.share import (
    DeliveryState,
    PartitionStateResult,
    WriteShareGroupStateRequest,
    WriteStateData,
    WriteStatePartition,
)
from kip_lab.runtime.scheduler import Scheduler
from kip_lab.share.config import ShareCoordinatorConfig, SharePartitionConfig
from kip_lab.share.coordinator import ShareCoordinator
from kip_lab.share.partition import ACKNOWLEDGED, ARCHIVED, AVAILABLE, SharePartition
from kip_lab.share.persister import CoordinatorPersister
from kip_lab.share.state_batches import Span, batches_from_spans
from kip_lab.share.topic_log import TopicLog

STATE_OF = {int(DeliveryState.AVAILABLE): AVAILABLE, int(DeliveryState.ACKNOWLEDGED): ACKNOWLEDGED}
STATE_OF[int(DeliveryState.ARCHIVED)] = ARCHIVED


class StoredState:
    """A persister that answers ReadShareGroupState with a fixed result, batches in the order given."""

    def __init__(self, start_offset: int, spans: list[Span]) -> None:
        self.result = PartitionStateResult(
            partition=0, start_offset=start_offset, state_batches=batches_from_spans(spans)
        )
        self.submitted = []

    def read_state(self, group_id, topic_id, partition, leader_epoch) -> PartitionStateResult:
        return self.result

    def submit(self, partition, write) -> None:
        self.submitted.append(write)


def log_up_to(end: int) -> TopicLog:
    log = TopicLog(TOPIC, 0)
    while log.high_watermark < end:
        log.append(min(7, end - log.high_watermark))
    return log


def load(persister, log: TopicLog, fidelity: str = "kafka") -> SharePartition:
    config = SharePartitionConfig(fidelity=fidelity)
    return SharePartition.load(GROUP, TOPIC, 0, log, config=config, scheduler=Scheduler(), persister=persister)


def expected_view(start: int, spans: list[Span]) -> tuple[int, int, dict[int, tuple[str, int]]]:
    """(SPSO, SPEO, offset -> (state, delivery count)) a leader must show for a stored state."""
    by_offset = {o: (STATE_OF[s], c) for f, last, s, c in spans for o in range(f, last + 1)}
    end = max((last for _, last, _, _ in spans), default=start - 1) + 1
    spso = start
    while spso < end and by_offset.get(spso, (AVAILABLE, 0))[0] in (ACKNOWLEDGED, ARCHIVED):
        spso += 1
    speo = max(end, spso)
    return spso, speo, {o: by_offset.get(o, (AVAILABLE, 0)) for o in range(spso, speo)}


def view(sp: SharePartition) -> tuple[int, int, dict[int, tuple[str, int]]]:
    return sp.spso, sp.speo, {o: sp.state_at(o) for o in range(sp.spso, sp.speo)}


@st.composite
def stored_states(draw) -> tuple[int, list[Span]]:
    """A start offset and non-overlapping durable spans at or above it (gaps allowed), sorted."""
    start = draw(st.integers(0, 40))
    spans, cursor = [], start
    for _ in range(draw(st.integers(0, 8))):
        cursor += draw(st.integers(0, 30))  # a gap of never-delivered records, possibly none
        length = draw(st.integers(1, 300))
        state = draw(st.sampled_from([DeliveryState.AVAILABLE, DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED]))
        spans.append((cursor, cursor + length - 1, int(state), draw(st.integers(1, 5))))
        cursor += length
    return start, spans


@settings(max_examples=150, deadline=None)
@given(state=stored_states(), seed=st.integers(0, 2**16))
def test_load_of_any_stored_state_in_any_order_shows_that_state(state, seed) -> None:
    """Kafka's ``SharePartition.maybeInitialize``: load(read(state)) == state whatever the batch order."""
    start, spans = state
    shuffled = list(spans)
    random.Random(seed).shuffle(shuffled)
    end = max((last for _, last, _, _ in spans), default=start) + 1
    sp = load(StoredState(start, shuffled), log_up_to(end + 5))
    assert view(sp) == expected_view(start, spans)


@settings(max_examples=100, deadline=None)
@given(state=stored_states(), seed=st.integers(0, 2**16))
def test_load_of_written_state_is_that_state(state, seed) -> None:
    """load(write(state)) == state through the share coordinator, batches written in any order.

    Kafka's ``ShareCoordinatorShard.writeState`` combines them (``PersisterStateBatchCombiner``)
    and ``SharePartition.maybeInitialize`` rebuilds the leader from what it stores.
    """
    start, spans = state
    coordinator = ShareCoordinator(ShareCoordinatorConfig(snapshot_update_records_per_snapshot=2))
    initialize(coordinator, start_offset=start)
    shuffled = list(spans)
    random.Random(seed).shuffle(shuffled)
    for index in range(0, len(shuffled), 3):  # a few writes, each with a few batches out of order
        data = WriteStatePartition(
            partition=0,
            state_epoch=0,
            leader_epoch=0,
            start_offset=-1,
            state_batches=batches_from_spans(shuffled[index : index + 3]),
        )
        request = WriteShareGroupStateRequest(
            group_id=GROUP, topics=[WriteStateData(topic_id=TOPIC, partitions=[data])]
        )
        assert coordinator.write_share_group_state(request).response.results[0].partitions[0].error_code is Errors.NONE
    end = max((last for _, last, _, _ in spans), default=start) + 1
    sp = load(CoordinatorPersister(coordinator), log_up_to(end + 5))
    assert view(sp) == expected_view(start, spans)
    assert ShareCoordinator.from_log(coordinator.log).states == coordinator.states


def test_out_of_order_batches_do_not_deliver_acknowledged_records_again() -> None:
    """Kafka's ``SharePartition.maybeInitialize``: 600 acknowledged records stored as two batches, later one first."""
    acked = int(DeliveryState.ACKNOWLEDGED)
    sp = load(StoredState(0, [(300, 599, acked, 1), (0, 299, acked, 1)]), log_up_to(650))
    assert (sp.spso, sp.speo) == (600, 600)
    assert sp.records() == []


def test_a_gap_before_the_first_batch_is_available_again() -> None:
    """Kafka's ``SharePartition.maybeInitialize`` with KAFKA-18494: offsets with no stored batch are Available."""
    acked = int(DeliveryState.ACKNOWLEDGED)
    sp = load(StoredState(0, [(100, 399, acked, 1)]), log_up_to(450))
    assert (sp.spso, sp.speo) == (0, 400)
    assert [(v.first_offset, v.last_offset, v.state, v.delivery_count) for v in sp.records()] == [
        (0, 6, AVAILABLE, 0),  # the log's batches of 7: a gap's records come into flight batch by batch
        *[(f, min(f + 6, 99), AVAILABLE, 0) for f in range(7, 100, 7)],
        (100, 399, ACKNOWLEDGED, 1),
    ]


def test_a_start_offset_inside_a_stored_batch_fails_the_load() -> None:
    """Kafka's ``SharePartition.maybeInitialize``: a batch below the start offset fails (IllegalStateException)."""
    available = int(DeliveryState.AVAILABLE)
    persister = StoredState(10, [(5, 20, available, 2)])
    with pytest.raises(ApiError) as error:
        load(persister, log_up_to(30))
    assert error.value.error is Errors.UNKNOWN_SERVER_ERROR
    assert "below the start offset 10" in str(error.value)


def test_a_start_offset_inside_a_stored_batch_archives_what_is_below_kip() -> None:
    """KIP-932, 'In-flight records': everything below the SPSO is Archived; the rest of the batch stays."""
    available = int(DeliveryState.AVAILABLE)
    sp = load(StoredState(10, [(5, 20, available, 2)]), log_up_to(30), fidelity="kip")
    assert (sp.spso, sp.speo) == (10, 21)
    assert sp.state_at(7) == (ARCHIVED, 0) and sp.state_at(10) == (AVAILABLE, 2)


def test_a_refused_read_reaches_the_client_as_kafka_maps_it() -> None:
    """Kafka's ``SharePartition.fetchPersisterError``: a read's UNKNOWN_TOPIC_OR_PARTITION is INVALID_REQUEST."""
    persister = StoredState(0, [])
    persister.result = PartitionStateResult(partition=0, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION)
    with pytest.raises(ApiError) as error:
        load(persister, log_up_to(1))
    assert error.value.error is Errors.INVALID_REQUEST
    with pytest.raises(ApiError) as error:
        load(persister, log_up_to(1), fidelity="kip")
    assert error.value.error is Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_loading_start_offset_minus_one_writes_only_under_kip() -> None:
    """Kafka's ``SharePartition.maybeInitialize`` writes nothing; the KIP's example writes the resolved start."""
    log = log_up_to(100)
    kafka = StoredState(-1, [])
    assert load(kafka, log).spso == 100 and kafka.submitted == []
    kip = StoredState(-1, [])
    load(kip, log, fidelity="kip")
    assert [(w.start_offset, w.spans) for w in kip.submitted] == [(100, ())]
