"""The wire front door's parts without a network: the real-time clock, the codec's conversions,
the consumer protocol's binary form (Kafka `ConsumerProtocol.serializeSubscription` /
`deserializeAssignment`), and the record store (Kafka `DefaultRecordBatch` layout)."""

from __future__ import annotations

import io
import struct

import pytest

pytest.importorskip("kio", reason="the wire front door needs kio (pip install 'kip-lab[wire]')")

from kio.schema.consumer_protocol_assignment.v0.data import (
    ConsumerProtocolAssignment as WireAssignment,
)
from kio.schema.consumer_protocol_assignment.v0.data import TopicPartition as AssignedTopic
from kio.schema.consumer_protocol_subscription.v1.data import (
    ConsumerProtocolSubscription as WireSubscription,
)
from kio.schema.consumer_protocol_subscription.v1.data import TopicPartition as OwnedTopic
from kio.serial import entity_writer

from kip_lab.lab.lab import Lab
from kip_lab.lab.trace import EventKind
from kip_lab.protocol import consumer_group as cg
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kip_lab.wire import codec
from kip_lab.wire import consumer_protocol as embedded
from kip_lab.wire.clock import RealTimeClock
from kip_lab.wire.endpoint import WireClient, WireRequest
from kip_lab.wire.records import RecordStore, record_count, split_batches


class FakeWall:
    def __init__(self) -> None:
        self.seconds = 100.0

    def __call__(self) -> float:
        return self.seconds


def test_real_time_clock_steps_the_timers_due_and_brings_the_clock_to_now():
    lab = Lab(seed=1)
    lab.create_topic("t", 2)
    lab.add_consumer("A", group_id="g", subscribed_topic_names=["t"])
    wall = FakeWall()
    clock = RealTimeClock(lab, wall)
    start = lab.now
    wall.seconds += 7.0
    taken = clock.catch_up()
    assert taken > 0 and lab.now <= start + 7_000
    assert lab.world.scheduler.peek() > start + 7_000  # nothing due is left behind
    clock.advance()
    assert lab.now == start + 7_000
    last = lab.trace[-1]
    assert last.kind is EventKind.ACTION_APPLIED
    assert last.body.fields == {"action": "advance_to", "time_ms": start + 7_000}
    assert clock.seconds_to_next_timer(cap=60.0) == (lab.world.scheduler.peek() - lab.now) / 1000


def test_topic_ids_round_trip_between_the_lab_and_the_wire():
    lab = Lab(seed=1)
    topic_id = lab.create_topic("orders", 1)
    assert codec.lab_topic_id(codec.topic_uuid(topic_id)) == topic_id
    assert codec.lab_topic_id(codec.topic_uuid("")) == ""


def test_to_lab_and_build_carry_fields_and_durations_across():
    request_class = codec.request_class(68, 0)
    wire = request_class(
        group_id="g",
        member_id="m",
        member_epoch=0,
        rebalance_timeout=codec.datetime.timedelta(milliseconds=45_000),
        subscribed_topic_names=("orders",),
        topic_partitions=(),
    )
    lab_request = codec.to_lab(wire, cg.ConsumerGroupHeartbeatRequest, client_id="c1")
    assert (lab_request.rebalance_timeout_ms, lab_request.subscribed_topic_names) == (45_000, ["orders"])
    assert lab_request.topic_partitions == [] and lab_request.client_id == "c1"
    response = codec.build(
        codec.response_class(68, 0),
        cg.ConsumerGroupHeartbeatResponse(member_id="m", member_epoch=3, heartbeat_interval_ms=5_000),
    )
    assert (response.member_epoch, response.heartbeat_interval.total_seconds()) == (3, 5.0)
    assert response.assignment is None and int(response.error_code) == 0


def _binary(entity, version: int) -> bytes:
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", version))
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def test_subscription_round_trips_between_kafkas_binary_form_and_the_labs():
    wire = _binary(
        WireSubscription(
            topics=("a", "b"), user_data=b"\x00\x01", owned_partitions=(OwnedTopic(topic="a", partitions=(0, 2)),)
        ),
        1,
    )
    lab_bytes = embedded.subscription_to_lab(wire)
    lab = ConsumerProtocolSubscription.decode(lab_bytes)
    assert (lab.version, lab.topics, lab.owned_partitions, lab.user_data) == (
        1,
        ["a", "b"],
        [("a", 0), ("a", 2)],
        b"\x00\x01",
    )
    assert embedded.subscription_to_wire(lab_bytes) == wire


def test_assignment_round_trips_and_a_newer_version_reads_as_the_highest_known():
    wire = _binary(
        WireAssignment(assigned_partitions=(AssignedTopic(topic="a", partitions=(1, 3)),), user_data=None), 0
    )
    lab_bytes = embedded.assignment_to_lab(wire)
    assert ConsumerProtocolAssignment.decode(lab_bytes).assigned_partitions == [("a", 1), ("a", 3)]
    assert embedded.assignment_to_wire(lab_bytes) == wire
    newer = struct.pack(">h", 7) + wire[2:]  # Kafka reads a newer version as its highest (fields only append)
    assert ConsumerProtocolAssignment.decode(embedded.assignment_to_lab(newer)).assigned_partitions == [
        ("a", 1),
        ("a", 3),
    ]


def _batch(records: int, magic: int = 2) -> bytes:
    """A v2 record batch header with ``records`` offsets and no record bodies (the store reads no further)."""
    body = struct.pack(">ibIhiqqqhii", 0, magic, 0, 0, records - 1, 0, 0, -1, -1, -1, records)
    return struct.pack(">qi", 99, len(body)) + body


def test_record_store_rebases_batches_and_reads_whole_batches():
    store = RecordStore()
    for base, batch in ((0, _batch(3)), (3, _batch(2)), (5, _batch(4))):
        assert record_count(batch) == len(range(base, {0: 3, 3: 5, 5: 9}[base]))
        store.store("t", 0, base, batch)
    second_and_after = store.read("t", 0, 4, max_bytes=10_000)
    assert [struct.unpack_from(">q", b)[0] for b in split_batches(second_and_after)] == [3, 5]
    assert len(split_batches(store.read("t", 0, 4, max_bytes=1))) == 1  # at least one batch, as Kafka returns
    assert store.read("t", 0, 9, max_bytes=10_000) == b""
    assert [struct.unpack_from(">q", b)[0] for b in split_batches(store.batches_between("t", 0, 2, 5))] == [0, 3, 5]


@pytest.mark.parametrize(
    ("records", "message"),
    [(_batch(1, magic=1), "magic 1"), (_batch(2)[:-3], "shorter than its header"), (b"", "no record batch")],
)
def test_record_store_refuses_what_is_not_a_v2_batch(records, message):
    with pytest.raises(ValueError, match=message):
        split_batches(records)


def test_a_real_clients_actor_is_made_in_its_first_step_and_replays():
    """The WireRequest step makes the actor, so a seek back before it and forward again replays
    the same trace, and a fork copies the actor (plain data, no socket)."""
    lab = Lab(seed=2)
    lab.create_topic("t", 1)
    request = cg.ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="m1",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=["t"],
        topic_partitions=[],
    )
    lab.apply(WireRequest(member="c1", api="ConsumerGroupHeartbeat", body={"broker": "broker-0", "request": request}))
    lab.run(until=lab.now + 10)
    client = lab.world.clients["c1"]
    assert isinstance(client, WireClient)
    response = client.last_response
    assert response.member_epoch == 1 and response.error_code == 0
    end, trace = lab.step_count, [e.to_json() for e in lab.trace]
    lab.seek(1)
    assert "c1" not in lab.world.clients
    lab.seek(end)
    assert [e.to_json() for e in lab.trace] == trace
    twin = lab.fork()
    assert twin.world.clients["c1"].answers == lab.world.clients["c1"].answers
    assert twin.world.clients["c1"] is not lab.world.clients["c1"]


def test_settled_assignment_waits_for_every_member_at_the_group_epoch():
    """Kafka `ConsumerGroupMember`: a member is reconciled when it is at the group's epoch with
    no partitions pending revocation; the group is settled when every member is."""
    from kip_lab.wire.groups import settled_assignment

    lab = Lab(seed=3)
    lab.create_topic("t", 4)
    assert settled_assignment(lab, "g") is None
    lab.add_consumer("A", group_id="g", subscribed_topic_names=["t"])
    lab.add_consumer("B", group_id="g", subscribed_topic_names=["t"])
    unsettled_seen = False
    while not lab.is_stable():
        lab.step()
        unsettled_seen |= settled_assignment(lab, "g") is None and bool(lab.coordinator.groups.get("g"))
    assert unsettled_seen
    settled = settled_assignment(lab, "g")
    by_member = {lab.clients[n].member_id: {("t", p) for _, p in lab.clients[n].owned} for n in ("A", "B")}
    assert settled == by_member  # simulated members have no client id: keyed by member id
