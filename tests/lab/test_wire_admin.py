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
