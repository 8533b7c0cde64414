"""Real classic consumers (librdkafka, ``partition.assignment.strategy=cooperative-sticky``) in a
Lab through the wire front door.

The Lab's classic coordinator (Kafka `ClassicGroup` handling in `GroupMetadataManager`:
`classicGroupJoin`, `classicGroupSync`, `classicGroupHeartbeat`, `classicGroupLeave`) serves
them; the consumers' own leader runs librdkafka's cooperative-sticky assignor, whose binary
assignments the front door converts to the Lab's form, so the Lab's invariants read them.
"""

from __future__ import annotations

import time

import pytest

from tests.wire_support import ConsumerProcess, classic_generations, consumed, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")

from kip_lab.events import MessageSent, TimerFired  # noqa: E402
from kip_lab.lab.lab import Lab  # noqa: E402
from kip_lab.wire import serve  # noqa: E402

SESSION_TIMEOUT_MS = 6_000
PARTITIONS = 6
RECORDS = 60


def produce(bootstrap: str, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": "producer"})
    for n in range(count):
        producer.produce("orders", value=f"record-{n}", partition=n % PARTITIONS)
    assert producer.flush(15) == 0


def stable_split(server, clients: list[str]) -> dict[str, set[int]] | None:
    """client id -> partitions once the classic group is Stable with exactly ``clients``, each
    holding its stored assignment, disjoint and covering every partition."""
    from kip_lab.coordinator.classic_group import ClassicGroupState
    from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment

    def read(lab):
        group = lab.coordinator.classic_groups.get("g")
        if group is None or group.state is not ClassicGroupState.STABLE:
            return None
        split = {}
        for member in group.members.values():
            if not member.assignment:
                return None
            split[member.client_id] = {
                p for _, p in ConsumerProtocolAssignment.decode(member.assignment).assigned_partitions
            }
        if sorted(split) != sorted(clients) or set().union(*split.values()) != set(range(PARTITIONS)):
            return None
        return split if sum(map(len, split.values())) == PARTITIONS else None

    return server.call(read)


@pytest.mark.slow
def test_cooperative_sticky_consumers_join_rebalance_and_time_out():
    """Kafka's classic coordinator with KIP-429 clients: a new member's partitions are revoked
    from their owners in one generation and assigned in the next (no partition in two stored
    assignments of a generation); a member that dies without LeaveGroup is removed by its session
    timer (Kafka `GroupMetadataManager.classicGroupHeartbeat` expiry)."""
    lab = Lab(seed=5)
    lab.create_topic("orders", PARTITIONS, produce_rate_per_s=0)
    with serve(lab) as server:
        produce(server.bootstrap_servers, RECORDS)
        base = {
            "bootstrap.servers": server.bootstrap_servers,
            "group.id": "g",
            "partition.assignment.strategy": "cooperative-sticky",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 500,
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
            assert time.monotonic() - started < 40

            consumers["c3"] = ConsumerProcess({**base, "client.id": "c3"}, ["orders"])
            split = wait_until(lambda: stable_split(server, ["c1", "c2", "c3"]), 60, "c3 to get its share")
            assert sorted(map(len, split.values())) == [2, 2, 2]
            generations = classic_generations(lab, "g")
            for generation, members in generations:  # disjoint in every generation
                owned = [tp for parts in members.values() for tp in parts]
                assert len(owned) == len(set(owned)), (generation, members)
            # Incremental cooperative rebalancing: c3's partitions were first owned by nobody.
            with_c3 = [members for _, members in generations if "c3" in members]
            assert with_c3 and not with_c3[0]["c3"], "c3's first generation gives it nothing (revocation first)"
            assert with_c3[-1]["c3"], "a later generation gives c3 what was revoked"
            assert any(e["event"] == "revoked" and e["partitions"] for n in ("c1", "c2") for e in consumers[n].events)

            killed = consumers["c1"]
            killed.kill()
            split = wait_until(lambda: stable_split(server, ["c2", "c3"]), 60, "c1's session to time out")
            assert sorted(map(len, split.values())) == [3, 3]
            expired = [
                e
                for e in lab.trace.of_type(TimerFired)
                if e.body.timer[0] == "classic session" and str(e.body.timer[-1]).startswith("c1-")
            ]
            assert expired, "the classic session timer removed c1"
            leave_before = [
                e for e in lab.trace.of_type(MessageSent) if e.body.source == "c1" and e.body.api == "LeaveGroup"
            ]
            assert leave_before == [], "a killed consumer sends no LeaveGroup"

            for name in ("c2", "c3"):
                consumers[name].close()
            wait_until(
                lambda: server.call(lambda lab: not lab.coordinator.classic_groups["g"].members),
                20,
                "c2 and c3 to leave",
            )
            leaves = {
                e.body.source
                for e in lab.trace.of_type(MessageSent)
                if e.body.api == "LeaveGroup" and e.body.destination == "broker-0"
            }
            assert leaves == {"c2", "c3"}
            assert lab.invariants.violations == []
        finally:
            for consumer in consumers.values():
                consumer.kill()
