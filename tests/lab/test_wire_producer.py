"""Idempotent producers through the front door: InitProducerId, and sequence numbers checked as
Kafka's log checks them (``ProducerAppendInfo``, ``ProducerStateEntry.findDuplicateBatch``).

The default producers of librdkafka (``enable.idempotence=true``) and kafka-python (idempotent
by default, as the Java producer is) produce; a retried batch is not appended twice; a gap,
an old epoch or a transactional batch is refused with Kafka's error.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i16, i32, i64

from kip_lab.lab.lab import Lab
from kip_lab.wire import serve
from kip_lab.wire.admin import NO_TRANSACTIONS
from tests.wire_support import RawClient, record_batch


@pytest.fixture
def served():
    lab = Lab(seed=3)
    lab.create_topic("orders", 1, produce_rate_per_s=0)
    with serve(lab) as server:
        leader = server.call(lambda lab: lab.world.share.leader_of((lab.topic_id("orders"), 0)))
        yield lab, server, RawClient(server.ports[leader], client_id="idem")


def produce(client: RawClient, batch: bytes) -> tuple[ErrorCode, int, str | None]:
    request = ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=__import__("datetime").timedelta(seconds=5),
        topic_data=(
            TopicProduceData(name="orders", partition_data=(PartitionProduceData(index=i32(0), records=batch),)),
        ),
    )
    answer = client.request(request).responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset, answer.error_message


def init_producer_id(client: RawClient) -> tuple[int, int]:
    answer = client.request(
        InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=__import__("datetime").timedelta(seconds=60),
            producer_id=i64(-1),
            producer_epoch=i16(-1),
        )
    )
    assert answer.error_code == ErrorCode.none
    return answer.producer_id, answer.producer_epoch


def test_each_init_producer_id_gives_a_new_producer_id_at_epoch_0(served):
    _, _, client = served
    assert [init_producer_id(client) for _ in range(3)] == [(0, 0), (1, 0), (2, 0)]


def test_sequence_numbers_are_checked_as_kafkas_log_does(served):
    lab, _, client = served
    pid, epoch = init_producer_id(client)
    assert produce(client, record_batch(3, pid, epoch, 0))[:2] == (ErrorCode.none, 0)
    assert produce(client, record_batch(2, pid, epoch, 3))[:2] == (ErrorCode.none, 3)
    # a retry of the last batch (its answer lost): the offset it had, nothing appended
    assert produce(client, record_batch(2, pid, epoch, 3))[:2] == (ErrorCode.none, 3)
    # and of one before it, still among the last five
    assert produce(client, record_batch(3, pid, epoch, 0))[:2] == (ErrorCode.none, 0)
    error, _, message = produce(client, record_batch(1, pid, epoch, 7))  # 5 and 6 never came
    assert error == ErrorCode.out_of_order_sequence_number
    assert "7 (incoming seq. number), 4 (current end sequence number)" in message
    error, _, message = produce(client, record_batch(1, pid, epoch + 1, 5))  # a new epoch starts at 0
    assert error == ErrorCode.out_of_order_sequence_number and "new epoch" in message
    assert produce(client, record_batch(1, pid, epoch + 1, 0))[:2] == (ErrorCode.none, 5)
    error, _, message = produce(client, record_batch(1, pid, epoch, 5))  # the old epoch is fenced
    assert error == ErrorCode.invalid_producer_epoch and "smaller than the last seen epoch 1" in message
    error, _, _ = produce(client, record_batch(1, pid, epoch + 1, 0, transactional=True))
    assert error == ErrorCode.invalid_txn_state
    assert produce(client, record_batch(4))[:2] == (ErrorCode.none, 6)  # no producer id: no checks
    assert lab.world.share.topic_log((lab.topic_id("orders"), 0)).high_watermark == 10


def test_a_transactional_producer_is_told_transactions_are_not_served(served):
    _, server, _ = served
    client = RawClient(server.port, client_id="txn")
    answer = client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=("tx-1",)))
    (coordinator,) = answer.coordinators
    assert coordinator.error_code == ErrorCode.invalid_request
    assert coordinator.error_message == NO_TRANSACTIONS


@pytest.mark.slow
def test_default_idempotent_producers_of_librdkafka_and_kafka_python_produce():
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")
    kafka = pytest.importorskip("kafka", reason="needs kafka-python (the test extra)")
    lab = Lab(seed=5)
    lab.create_topic("orders", 6, produce_rate_per_s=0)
    with serve(lab) as server:
        librdkafka = confluent_kafka.Producer(
            {"bootstrap.servers": server.bootstrap_servers, "client.id": "rdkafka", "enable.idempotence": True}
        )
        for n in range(150):
            librdkafka.produce("orders", f"r{n}".encode(), partition=n % 6)
        assert librdkafka.flush(30) == 0
        python = kafka.KafkaProducer(bootstrap_servers=server.bootstrap_servers, client_id="kafka-python")
        assert python.config["enable_idempotence"], "kafka-python's producer is idempotent by default"
        futures = [python.send("orders", f"p{n}".encode(), partition=n % 6) for n in range(150)]
        python.flush(30)
        offsets = sorted((f.get(10).partition, f.get(10).offset) for f in futures)
        python.close()
        ends = server.call(
            lambda lab: [lab.world.share.topic_log((lab.topic_id("orders"), p)).high_watermark for p in range(6)]
        )
        producers = server.handlers.producers.partitions
    assert ends == [50] * 6  # 25 + 25 records on each partition, none twice
    assert {p: sorted(o for q, o in offsets if q == p) for p in range(6)} == {
        p: list(range(25, 50)) for p in range(6)
    }  # kafka-python's came after librdkafka's
    assert all(len(producers[(lab.topic_id("orders"), p)]) == 2 for p in range(6))  # two producer ids
