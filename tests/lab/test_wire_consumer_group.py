"""Real KIP-848 consumers (librdkafka, ``group.protocol=consumer``) in a Lab through the wire front door.

They join, split the partitions, consume what a real producer wrote; a third joins and the
partitions it gets are first revoked from their owners; one is killed (no leave) and its
partitions move once its session times out. Each step is checked on the Lab's trace and
invariants: the coordinator served the real clients through its own handlers (Kafka
`GroupMetadataManager.consumerGroupHeartbeat`, its session timer `consumerGroupSessionTimeout`).
"""

from __future__ import annotations

import time

import pytest

from tests.wire_support import (
    ConsumerProcess,
    consumed,
    coordinator_assignment_history,
    group_members,
    handler_records,
    wait_until,
)

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")

from kip_lab.coordinator import CoordinatorConfig  # noqa: E402
from kip_lab.events import MessageSent, TimerFired  # noqa: E402
from kip_lab.lab.lab import Lab, LabConfig  # noqa: E402
from kip_lab.lab.metrics import compute_metrics  # noqa: E402
from kip_lab.wire import serve  # noqa: E402
from kip_lab.wire.groups import settled_assignment  # noqa: E402

SESSION_TIMEOUT_MS = 6_000
PARTITIONS = 6
RECORDS = 60


def fast_lab() -> Lab:
    """A Lab whose group coordinator has short sessions and heartbeats, so a test runs in seconds."""
    coordinator = CoordinatorConfig(
        session_timeout_ms=SESSION_TIMEOUT_MS,
        min_session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=1_000,
        min_heartbeat_interval_ms=1_000,
    )
    lab = Lab(seed=11, config=LabConfig(coordinator=coordinator))
    lab.create_topic("orders", PARTITIONS, produce_rate_per_s=0)
    return lab


def produce(bootstrap: str, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": "producer"})
    for n in range(count):
        producer.produce("orders", value=f"record-{n}", partition=n % PARTITIONS)
    assert producer.flush(15) == 0


def stable_split(server, clients: list[str]) -> dict[str, set[int]] | None:
    """client id -> partitions, once exactly ``clients`` are members of the settled group with
    disjoint assignments covering every partition."""
    settled = server.call(lambda lab: settled_assignment(lab, "g"))
    if settled is None or sorted(settled) != sorted(clients):
        return None
    split = {client: {p for _, p in owned} for client, owned in settled.items()}
    if set().union(*split.values()) != set(range(PARTITIONS)) or sum(map(len, split.values())) != PARTITIONS:
        return None
    return split


@pytest.mark.slow
def test_kip848_consumers_join_rebalance_and_time_out():
    """Kafka `GroupMetadataManager.consumerGroupHeartbeat` serving librdkafka's KIP-848 consumer:
    disjoint assignments, revocation before reassignment (the member's ``UNREVOKED_PARTITIONS``
    state), and the session timeout of a member that died without leaving."""
    lab = fast_lab()
    with serve(lab) as server:
        produce(server.bootstrap_servers, RECORDS)
        base = {
            "bootstrap.servers": server.bootstrap_servers,
            "group.id": "g",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
        consumers = {name: ConsumerProcess({**base, "client.id": name}, ["orders"]) for name in ("c1", "c2")}
        try:
            started = time.monotonic()
            split = wait_until(lambda: stable_split(server, ["c1", "c2"]), 60, "c1 and c2 to share the partitions")
            assert sorted(map(len, split.values())) == [3, 3]
            wait_until(
                lambda: len(consumed(consumers)) == RECORDS,
                30,
                "every produced record to be consumed",
            )
            records = consumed(consumers)
            assert {(p, o) for _, p, o in records} == {(n % PARTITIONS, n // PARTITIONS) for n in range(RECORDS)}
            first_stable_s = time.monotonic() - started

            # A third member: the coordinator revokes before it reassigns.
            consumers["c3"] = ConsumerProcess({**base, "client.id": "c3"}, ["orders"])
            split = wait_until(lambda: stable_split(server, ["c1", "c2", "c3"]), 60, "c3 to get its share")
            assert sorted(map(len, split.values())) == [2, 2, 2]
            history = coordinator_assignment_history(lab)
            for owners in history:  # the coordinator never gives a partition to two members at once
                owned = [tp for parts in owners.values() for tp in parts]
                assert len(owned) == len(set(owned)), owners
            states = [
                r["value"].get("state")
                for r in handler_records(lab, "ConsumerGroupHeartbeat")
                if r["key"]["type"] == "ConsumerGroupCurrentMemberAssignmentKey" and r["value"]
            ]
            assert "UNREVOKED_PARTITIONS" in states, "a member had to give partitions up first"
            assert any(e["event"] == "revoked" for name in ("c1", "c2") for e in consumers[name].events)

            # c1 dies without leaving: its partitions move once its session times out.
            c1_member = server.call(lambda lab: group_members(lab, "g")["c1"].member_id)
            killed_at = server.call(lambda lab: lab.now)
            consumers["c1"].kill()
            split = wait_until(
                lambda: stable_split(server, ["c2", "c3"]), 60, "c1's session to time out and its partitions to move"
            )
            assert sorted(map(len, split.values())) == [3, 3]
            expired = [
                e for e in lab.trace.of_type(TimerFired) if e.body.timer[0] == "session" and c1_member in e.body.timer
            ]
            assert expired, "the coordinator's session timer removed c1"
            assert expired[0].time_ms - killed_at >= SESSION_TIMEOUT_MS - 1_500  # its last heartbeat was <= 1 s before

            # The others close: each leaves with epoch -1 (KIP-848 "Leaving").
            for name in ("c2", "c3"):
                consumers[name].close()
            wait_until(lambda: server.call(lambda lab: not group_members(lab, "g")), 20, "c2 and c3 to leave")
            leaves = [
                e
                for e in lab.trace.of_type(MessageSent)
                if e.body.api == "ConsumerGroupHeartbeat"
                and e.body.source in ("c2", "c3")
                and e.body.body.get("member_epoch") == -1
            ]
            assert {e.body.source for e in leaves} == {"c2", "c3"}
            assert lab.invariants.violations == []
            assert first_stable_s < 30

            # The Lab's metrics read the real clients like simulated ones.
            metrics = compute_metrics(lab.trace)
            sent = [
                e
                for e in lab.trace.of_type(MessageSent)
                if e.body.api == "ConsumerGroupHeartbeat" and e.body.source in consumers
            ]
            assert metrics["heartbeats_sent"] == len(sent) > 0
            assert metrics["invariant_violations"] == 0
        finally:
            for consumer in consumers.values():
                consumer.kill()
