"""A real AdminClient lists and describes the Lab's groups (ListGroups, DescribeGroups,
ConsumerGroupDescribe), as Kafka `GroupCoordinatorService.listGroups` / `describeGroups` /
`consumerGroupDescribe` answer it."""

from __future__ import annotations

import pytest

from tests.wire_support import ConsumerProcess, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")
from confluent_kafka.admin import AdminClient  # noqa: E402

from kip_lab.lab.lab import Lab  # noqa: E402
from kip_lab.wire import serve  # noqa: E402


@pytest.mark.slow
def test_admin_client_lists_and_describes_a_consumer_group_and_a_classic_group():
    lab = Lab(seed=4)
    lab.create_topic("orders", 2, produce_rate_per_s=0)
    with serve(lab) as server:
        base = {"bootstrap.servers": server.bootstrap_servers, "auto.offset.reset": "earliest"}
        consumers = [
            ConsumerProcess({**base, "client.id": "new", "group.id": "g848", "group.protocol": "consumer"}, ["orders"]),
            ConsumerProcess(
                {**base, "client.id": "old", "group.id": "gclassic", "session.timeout.ms": 6000}, ["orders"]
            ),
        ]
        try:

            def both_assigned() -> bool:
                return all(any(e["event"] == "assigned" and e["partitions"] for e in c.events) for c in consumers)

            wait_until(both_assigned, 60, "both consumers to get partitions")
            admin = AdminClient({"bootstrap.servers": server.bootstrap_servers, "client.id": "admin"})
            listed = admin.list_consumer_groups(request_timeout=10).result(15)
            assert sorted(g.group_id for g in listed.valid) == ["g848", "gclassic"]
            described = admin.describe_consumer_groups(["g848", "gclassic"], request_timeout=10)
            g848 = described["g848"].result(15)
            classic = described["gclassic"].result(15)
            assert [m.client_id for m in g848.members] == ["new"]
            assert sorted(tp.partition for tp in g848.members[0].assignment.topic_partitions) == [0, 1]
            assert [m.client_id for m in classic.members] == ["old"]
            assert sorted(tp.partition for tp in classic.members[0].assignment.topic_partitions) == [0, 1]
            assert str(g848.state).endswith("STABLE") and str(classic.state).endswith("STABLE")
        finally:
            for consumer in consumers:
                consumer.kill()


# ---------------------------------------------------------------------- admin calls that change the Lab
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import ConfigResource, NewPartitions, ResourceType  # noqa: E402

from kip_lab.coordinator import CoordinatorConfig  # noqa: E402
from kip_lab.lab.lab import LabConfig  # noqa: E402


def _admin(server) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap_servers, "client.id": "admin"})


def _produce(server, topic: str, per_partition: int, partitions: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap_servers, "client.id": "producer"})
    for n in range(per_partition * partitions):
        producer.produce(topic, f"r{n}".encode(), partition=n % partitions)
    assert producer.flush(30) == 0


@pytest.mark.slow
def test_admin_client_deletes_a_topic_and_adds_partitions_that_a_consumer_group_then_reads():
    """DeleteTopics and CreatePartitions are the Lab's ``delete_topic`` and ``add_partitions``
    steps; a KIP-848 consumer is given the new partitions as a simulated one would be."""
    lab = Lab(seed=4)
    lab.create_topic("orders", 2, produce_rate_per_s=0)
    lab.create_topic("scratch", 1, produce_rate_per_s=0)
    with serve(lab) as server:
        admin = _admin(server)
        admin.delete_topics(["scratch"], request_timeout=10)["scratch"].result(15)
        assert "scratch" not in server.call(lambda lab: lab.cluster)
        missing = admin.delete_topics(["scratch"], request_timeout=10)["scratch"]
        with pytest.raises(confluent_kafka.KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
            missing.result(15)
        base = {"bootstrap.servers": server.bootstrap_servers, "auto.offset.reset": "earliest"}
        consumer = ConsumerProcess(
            {**base, "client.id": "c1", "group.id": "g", "group.protocol": "consumer"}, ["orders"]
        )
        try:
            wait_until(lambda: sorted(p for _, p in consumer.assignment()) == [0, 1], 60, "c1 to own both partitions")
            admin.create_partitions([NewPartitions("orders", 4)], request_timeout=10)["orders"].result(15)
            assert server.call(lambda lab: lab.cluster.topic("orders").num_partitions) == 4
            too_few = admin.create_partitions([NewPartitions("orders", 3)], request_timeout=10)["orders"]
            with pytest.raises(confluent_kafka.KafkaException, match="which is higher than the requested 3"):
                too_few.result(15)
            _produce(server, "orders", 5, 4)
            wait_until(lambda: sorted(p for _, p in consumer.assignment()) == [0, 1, 2, 3], 60, "c1 to get 2 and 3")
            wait_until(lambda: len(consumer.records()) == 20, 60, "c1 to read all 20 records")
        finally:
            consumer.kill()


@pytest.mark.slow
def test_admin_client_describes_the_labs_group_settings():
    """DescribeConfigs: the broker's group settings are the Lab's coordinator config under Kafka's
    names; a group's own (Kafka ``GroupConfig``) fall back to them; a topic has none modelled."""
    coordinator = CoordinatorConfig(session_timeout_ms=10_000, min_session_timeout_ms=10_000)
    lab = Lab(seed=4, config=LabConfig(coordinator=coordinator))
    lab.create_topic("orders", 1, produce_rate_per_s=0)
    with serve(lab) as server:
        admin = _admin(server)
        broker, group, topic = (
            ConfigResource(ResourceType.BROKER, "0"),
            ConfigResource(ResourceType.GROUP, "g"),
            ConfigResource(ResourceType.TOPIC, "orders"),
        )
        described = {
            r: f.result(15) for r, f in admin.describe_configs([broker, group, topic], request_timeout=10).items()
        }
        broker_configs = {name: entry.value for name, entry in described[broker].items()}
        assert broker_configs["group.consumer.session.timeout.ms"] == "10000"
        assert broker_configs["group.consumer.heartbeat.interval.ms"] == "5000"
        assert broker_configs["group.initial.rebalance.delay.ms"] == "3000"
        group_configs = {name: entry.value for name, entry in described[group].items()}
        assert group_configs["consumer.session.timeout.ms"] == "10000"
        assert group_configs["share.auto.offset.reset"] == "latest"
        assert described[topic] == {}


@pytest.mark.slow
def test_admin_client_deletes_records_and_a_new_consumer_starts_at_the_log_start():
    """DeleteRecords moves the log start (the Lab's ``delete_records`` step): a consumer reading
    from the earliest offset starts there, and a share group's start moves with it."""
    lab = Lab(seed=4)
    lab.create_topic("orders", 2, produce_rate_per_s=0)
    with serve(lab) as server:
        _produce(server, "orders", 10, 2)
        admin = _admin(server)
        deleted = admin.delete_records(
            [TopicPartition("orders", 0, 6), TopicPartition("orders", 1, -1)], request_timeout=10
        )
        low = {tp.partition: f.result(15).low_watermark for tp, f in deleted.items()}
        assert low == {0: 6, 1: 10}
        starts = server.call(
            lambda lab: [lab.world.share.topic_log((lab.topic_id("orders"), p)).log_start_offset for p in range(2)]
        )
        assert starts == [6, 10]
        base = {"bootstrap.servers": server.bootstrap_servers, "auto.offset.reset": "earliest"}
        consumer = ConsumerProcess(
            {**base, "client.id": "late", "group.id": "g", "group.protocol": "consumer"}, ["orders"]
        )
        try:
            wait_until(lambda: len(consumer.records()) == 4, 60, "the 4 records left")
            assert sorted(consumer.records()) == [("orders", 0, offset) for offset in range(6, 10)]
        finally:
            consumer.kill()


@pytest.mark.slow
def test_admin_client_deletes_an_empty_group_with_its_offsets_and_refuses_one_with_members():
    """DeleteGroups (Kafka ``GroupCoordinatorShard.deleteGroups``): an empty group goes with its
    committed offsets; a group with members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND."""
    lab = Lab(seed=4, config=LabConfig(coordinator=CoordinatorConfig(initial_rebalance_delay_ms=0)))
    lab.create_topic("orders", 2, produce_rate_per_s=0)
    with serve(lab) as server:
        _produce(server, "orders", 5, 2)
        base = {"bootstrap.servers": server.bootstrap_servers, "auto.offset.reset": "earliest"}
        done = ConsumerProcess(
            {**base, "client.id": "done", "group.id": "finished", "group.protocol": "consumer"}, ["orders"]
        )
        busy = ConsumerProcess(
            {**base, "client.id": "busy", "group.id": "busy", "group.protocol": "consumer"}, ["orders"]
        )
        try:
            wait_until(lambda: len(done.records()) == 10, 60, "the first group to read everything")
            wait_until(
                lambda: server.call(lambda lab: len(lab.coordinator.offsets.get("finished", {}))) == 2, 60, "commits"
            )
            done.close()
            wait_until(
                lambda: server.call(lambda lab: not lab.coordinator.groups["finished"].members), 30, "an empty group"
            )
            admin = _admin(server)
            futures = admin.delete_consumer_groups(["finished", "busy", "nobody"], request_timeout=10)
            futures["finished"].result(15)
            with pytest.raises(confluent_kafka.KafkaException, match="NON_EMPTY_GROUP"):
                futures["busy"].result(15)
            with pytest.raises(confluent_kafka.KafkaException, match="GROUP_ID_NOT_FOUND"):
                futures["nobody"].result(15)
            assert (
                server.call(
                    lambda lab: ("finished" in lab.coordinator.groups, lab.coordinator.offsets.get("finished"))
                )[0]
                is False
            )
            assert not server.call(lambda lab: lab.coordinator.offsets.get("finished"))
        finally:
            busy.kill()
            done.kill()
