"""A share group (KIP-932) of real librdkafka ``ShareConsumer``s — more consumers than partitions —
in a Lab through the wire front door.

The Lab's share-group coordinator (Kafka `GroupMetadataManager.shareGroupHeartbeat`) assigns the
partitions; the share-partition leaders (Kafka `SharePartition.acquire` / `acknowledge`) hand out
record locks through ShareFetch and take the consumers' acknowledgements (implicit mode: a poll
accepts what the previous poll delivered). Every produced record must end Acknowledged: the
share-partition start offset reaches the log end.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("kio", reason="the wire front door needs kio (pip install 'kip-lab[wire]')")

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")

from kip_lab.events import ShareAcquired, ShareStateWrite  # noqa: E402
from kip_lab.lab import actions as a  # noqa: E402
from kip_lab.lab.lab import Lab  # noqa: E402
from kip_lab.wire import serve  # noqa: E402

PARTITIONS = 2
CONSUMERS = 4
RECORDS = 60


@pytest.mark.slow
def test_share_consumers_outnumbering_partitions_acknowledge_every_record():
    """Kafka `SharePartition.acquire`/`acknowledge` with librdkafka's ShareConsumer: each record
    delivered, acknowledged, and the share-partition start offset moved to the log end."""
    lab = Lab(seed=9)
    lab.create_topic("jobs", PARTITIONS, produce_rate_per_s=0)
    lab.apply(a.SetShareAutoOffsetReset(group_id="sg", value="earliest"))
    with serve(lab) as server:
        producer = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap_servers, "client.id": "producer"})
        for n in range(RECORDS):
            producer.produce("jobs", value=f"job-{n}", partition=n % PARTITIONS)
        assert producer.flush(15) == 0
        consumers = [
            confluent_kafka.ShareConsumer(
                {"bootstrap.servers": server.bootstrap_servers, "client.id": f"s{i}", "group.id": "sg"}
            )
            for i in range(CONSUMERS)
        ]
        received: dict[tuple[int, int], list[str]] = {}
        try:
            for consumer in consumers:
                consumer.subscribe(["jobs"])
            topic_id = lab.topic_id("jobs")

            def acknowledged_to_end() -> bool:
                def read(lab):
                    leaders = lab.world.share.leaders.values()
                    parts = {k[2]: sp for leader in leaders for k, sp in leader.partitions.items() if k[0] == "sg"}
                    ends = {p: lab.world.share.topic_log((topic_id, p)).high_watermark for p in range(PARTITIONS)}
                    return len(parts) == PARTITIONS and all(
                        parts[p].spso == ends[p] == RECORDS // PARTITIONS for p in parts
                    )

                return server.call(read)

            deadline = time.monotonic() + 60
            while not acknowledged_to_end():  # implicit acknowledgement: the next poll accepts the last one's
                assert time.monotonic() < deadline, f"not every record acknowledged; received {len(received)}"
                for index, consumer in enumerate(consumers):
                    for message in consumer.poll(0.05) or []:
                        assert not message.error(), message.error()
                        received.setdefault((message.partition(), message.offset()), []).append(f"s{index}")
                        assert message.value().decode() == f"job-{message.partition() + PARTITIONS * message.offset()}"
            assert set(received) == {(n % PARTITIONS, n // PARTITIONS) for n in range(RECORDS)}

            members = server.call(lambda lab: lab.coordinator.share_groups["sg"].members)
            assert sorted(m.client_id for m in members.values()) == [f"s{i}" for i in range(CONSUMERS)]
            assigned = [tp for m in members.values() for tp in ((t, p) for t, ps in m.assigned.items() for p in ps)]
            assert set(assigned) == {(topic_id, p) for p in range(PARTITIONS)}
            assert len(assigned) > PARTITIONS, "with more members than partitions, a partition is shared"
        finally:
            for consumer in consumers:
                consumer.close()

        acquired = [e.body for e in lab.trace.of_type(ShareAcquired)]
        delivered = {(e.partition, o) for e in acquired for first, last, _ in e.ranges for o in range(first, last + 1)}
        assert delivered == set(received)
        writes = [e.body for e in lab.trace.of_type(ShareStateWrite)]
        assert {w.spso for w in writes if w.partition == 0} >= {RECORDS // PARTITIONS}
        assert lab.invariants.violations == []
