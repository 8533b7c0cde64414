"""Faults on real clients' connections: the Lab's faults act on the messages a real client's
requests become, and the front door can cut its connections.

The coordinator failover follows Kafka: the old broker answers NOT_COORDINATOR (Kafka
`CoordinatorRuntime` when the partition is not loaded), the client finds the new coordinator
(FindCoordinator), and the new coordinator, rebuilt from the log (Kafka
`GroupMetadataManager.replay`), keeps the members and their epochs.
"""

from __future__ import annotations

import threading

import pytest

from tests.wire_support import ConsumerProcess, consumed, group_members, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")

from kip_lab.coordinator import CoordinatorConfig  # noqa: E402
from kip_lab.events import MessageDelivered, MessageDropped, MessageSent, TimerFired  # noqa: E402
from kip_lab.lab.lab import Lab, LabConfig  # noqa: E402
from kip_lab.protocol.errors import Errors  # noqa: E402
from kip_lab.wire import serve  # noqa: E402
from kip_lab.wire.groups import settled_assignment  # noqa: E402

SESSION_TIMEOUT_MS = 6_000
PARTITIONS = 4


def fast_lab(seed: int) -> Lab:
    coordinator = CoordinatorConfig(
        session_timeout_ms=SESSION_TIMEOUT_MS,
        min_session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=1_000,
        min_heartbeat_interval_ms=1_000,
    )
    lab = Lab(seed=seed, config=LabConfig(coordinator=coordinator))
    lab.create_topic("orders", PARTITIONS, produce_rate_per_s=0)
    return lab


def consumer_config(server, name: str) -> dict:
    return {
        "bootstrap.servers": server.bootstrap_servers,
        "client.id": name,
        "group.id": "g",
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "socket.timeout.ms": 3_000,
    }


def stable(server, clients: list[str]) -> bool:
    """Exactly ``clients`` in the settled group, owning every partition once."""
    settled = server.call(lambda lab: settled_assignment(lab, "g"))
    if settled is None or sorted(settled) != sorted(clients):
        return False
    return sorted(p for owned in settled.values() for _, p in owned) == list(range(PARTITIONS))


class BackgroundProducer:
    """Produces a numbered record to each partition in turn until stopped."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": "producer"})
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.producer.produce("orders", value=f"record-{self.sent}", partition=self.sent % PARTITIONS)
            self.sent += 1
            self.producer.poll(0.05)
        self.producer.flush(10)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(15)
        return self.sent


def sent_by(lab, actor: str, api: str) -> list:
    return [e for e in lab.trace.of_type(MessageSent) if e.body.source == actor and e.body.api == api]


@pytest.mark.slow
def test_coordinator_failover_mid_run_real_consumers_recover():
    """Kafka: NOT_COORDINATOR from the old host, FindCoordinator, and the new coordinator loaded from
    the log keeps each member and its epoch; consumption goes on."""
    lab = fast_lab(seed=21)
    with serve(lab) as server:
        producer = BackgroundProducer(server.bootstrap_servers)
        consumers = {name: ConsumerProcess(consumer_config(server, name), ["orders"]) for name in ("c1", "c2")}
        try:
            wait_until(lambda: stable(server, ["c1", "c2"]), 60, "c1 and c2 to be stable")

            def consuming_what_they_own() -> bool:
                """Each consumer has read from every partition the coordinator gave it: past its
                OffsetFetch (a failover between assignment and OffsetFetch is another case)."""
                owned = server.call(
                    lambda lab: {
                        c: {p for ps in m.assigned.values() for p in ps} for c, m in group_members(lab, "g").items()
                    }
                )
                return all(owned[n] <= {p for _, p, _ in consumers[n].records()} for n in ("c1", "c2"))

            wait_until(consuming_what_they_own, 30, "both consumers to read their partitions")
            before = server.call(
                lambda lab: {c: (m.member_id, m.member_epoch) for c, m in group_members(lab, "g").items()}
            )
            failed_over_at = server.call(lambda lab: (lab.fail_over(), lab.now)[1])
            assert server.call(lambda lab: lab.world.coordinator_host) == "broker-1"

            def heartbeats_reach_new_coordinator() -> bool:
                delivered = [
                    e
                    for e in lab.trace.of_type(MessageDelivered)
                    if e.body.api == "ConsumerGroupHeartbeat"
                    and e.body.destination == "broker-1"
                    and e.time_ms > failed_over_at
                ]
                return {e.body.source for e in delivered} == {"c1", "c2"}

            wait_until(heartbeats_reach_new_coordinator, 30, "both clients to find the new coordinator")
            wait_until(lambda: stable(server, ["c1", "c2"]), 30, "the group to be stable on the new coordinator")
            after = server.call(
                lambda lab: {c: (m.member_id, m.member_epoch) for c, m in group_members(lab, "g").items()}
            )
            assert {c: m for c, (m, _) in after.items()} == {c: m for c, (m, _) in before.items()}
            assert all(after[c][1] >= before[c][1] for c in after)

            refused = [
                e
                for e in lab.trace.of_type(MessageSent)
                if e.body.source == "broker-0"
                and e.time_ms > failed_over_at
                and e.body.body.get("error_code") == Errors.NOT_COORDINATOR
            ]
            assert refused, "the old coordinator answered NOT_COORDINATOR"

            produced_at_failover = producer.sent
            wait_until(lambda: producer.sent > produced_at_failover + 20, 20, "the producer to go on")
            total = producer.stop()
            wait_until(
                lambda: len(consumed(consumers)) >= total,
                30,
                "every record, before and after the failover, to be consumed",
            )
            assert lab.invariants.violations == []
        finally:
            producer.stop()
            for consumer in consumers.values():
                consumer.kill()


@pytest.mark.slow
def test_coordinator_failover_mid_run_real_classic_consumers_recover():
    """The same failover under classic cooperative-sticky consumers: the new coordinator rebuilds
    the classic group from its GroupMetadata record (Kafka `GroupMetadataManager.replay`), keeps
    its generation and members, and the consumers' Heartbeats reach it."""
    from kip_lab.coordinator.classic_group import ClassicGroupState

    lab = fast_lab(seed=23)
    with serve(lab) as server:
        producer = BackgroundProducer(server.bootstrap_servers)
        config = {
            "bootstrap.servers": server.bootstrap_servers,
            "group.id": "g",
            "partition.assignment.strategy": "cooperative-sticky",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 500,
        }
        consumers = {n: ConsumerProcess({**config, "client.id": n}, ["orders"]) for n in ("c1", "c2")}

        def generation() -> tuple[int, list[str]] | None:
            def read(lab):
                group = lab.coordinator.classic_groups.get("g")
                if group is None or group.state is not ClassicGroupState.STABLE:
                    return None
                return group.generation_id, sorted(m.client_id for m in group.members.values())

            return server.call(read)

        def reading_all() -> bool:
            return all(
                c.assignment() and set(c.assignment()) <= {(t, p) for t, p, _ in c.records()}
                for c in consumers.values()
            )

        try:
            wait_until(lambda: (generation() or (0, []))[1] == ["c1", "c2"] and reading_all(), 60, "a stable group")
            before = generation()
            failed_over_at = server.call(lambda lab: (lab.fail_over(), lab.now)[1])
            wait_until(
                lambda: (
                    {
                        e.body.source
                        for e in lab.trace.of_type(MessageDelivered)
                        if e.body.api == "Heartbeat" and e.body.destination == "broker-1" and e.time_ms > failed_over_at
                    }
                    == {"c1", "c2"}
                ),
                30,
                "both classic consumers to heartbeat to the new coordinator",
            )
            assert generation() == before, "the new coordinator keeps the generation and its members"
            produced_at_failover = producer.sent
            wait_until(lambda: producer.sent > produced_at_failover + 20, 20, "the producer to go on")
            total = producer.stop()
            wait_until(
                lambda: len(consumed(consumers)) >= total,
                30,
                "every record, before and after the failover, to be consumed",
            )
            assert lab.invariants.violations == []
        finally:
            producer.stop()
            for consumer in consumers.values():
                consumer.kill()


@pytest.mark.slow
def test_delay_drop_kill_and_partition_a_real_consumer():
    """The Lab's message faults on a real client's requests (Kafka's client sees a slow or silent
    broker), a cut connection, and a partition longer than the session: the coordinator's session
    timer removes the member (Kafka `GroupMetadataManager` session expiry) and librdkafka rejoins
    after FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID with epoch 0 (KIP-848 'Joining')."""
    lab = fast_lab(seed=22)
    with serve(lab) as server:
        consumer = ConsumerProcess(consumer_config(server, "c1"), ["orders"])
        try:
            wait_until(lambda: stable(server, ["c1"]), 60, "c1 to be stable")

            server.call(lambda lab: lab.delay_messages("c1", count=1, delay_ms=1_500))
            wait_until(
                lambda: any(  # the next message between c1 and its coordinator, either way
                    "c1" in (e.body.source, e.body.destination) and e.body.latency_ms >= 1_500
                    for e in lab.trace.of_type(MessageSent)
                ),
                15,
                "a delayed message",
            )

            server.call(lambda lab: lab.drop_messages("c1", count=1))
            dropped = wait_until(
                lambda: [e for e in lab.trace.of_type(MessageDropped) if e.body.reason == "dropped by fault"],
                15,
                "a dropped message",
            )
            wait_until(
                lambda: any(e.step > dropped[0].step for e in sent_by(lab, "c1", "ConsumerGroupHeartbeat")),
                30,
                "c1 to heartbeat again after the lost request",
            )
            wait_until(lambda: stable(server, ["c1"]), 30, "c1 stable after the drop")

            assert server.kill_connections("c1") >= 1
            killed_at = server.call(lambda lab: lab.step_count)
            wait_until(
                lambda: any(e.step > killed_at for e in sent_by(lab, "c1", "ConsumerGroupHeartbeat")),
                30,
                "c1 to reconnect and heartbeat",
            )
            assert any(reason.startswith("killed") for reason in server.stats.closed)

            member_id = server.call(lambda lab: group_members(lab, "g")["c1"].member_id)
            server.call(lambda lab: lab.partition_link("c1", duration_ms=SESSION_TIMEOUT_MS + 3_000))
            wait_until(lambda: server.call(lambda lab: not group_members(lab, "g")), 20, "c1's session to expire")
            assert any(
                e.body.timer[0] == "session" and member_id in e.body.timer for e in lab.trace.of_type(TimerFired)
            )
            assert [e for e in lab.trace.of_type(MessageDropped) if e.body.reason == "link partitioned"]
            wait_until(lambda: stable(server, ["c1"]), 40, "c1 to rejoin once the link is back")
            rejoins = [
                e for e in sent_by(lab, "c1", "ConsumerGroupHeartbeat") if e.body.body.get("member_epoch", 0) == 0
            ]
            assert len(rejoins) >= 2, "c1 joined, then joined again after it was removed"
            assert lab.invariants.violations == []
        finally:
            consumer.kill()
