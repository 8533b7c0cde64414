"""Real members drawn like simulated ones: the membership a real client's messages show becomes
the same typed events a simulated client emits (``kip_lab.lab.observed``), marked as observed
from the wire, and ``Lab.is_stable`` turns true once the real members settle."""

from __future__ import annotations

import pytest

from kip_lab.coordinator import CoordinatorConfig
from kip_lab.events import AssignmentChanged, CommitResult, StateTransition
from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.lab.observed import OBSERVED
from kip_lab.viz.frames import member_state_frame
from kip_lab.wire import serve, settled_assignment
from tests.wire_support import ConsumerProcess, wait_until

pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")

FAST = CoordinatorConfig(
    session_timeout_ms=6000,
    min_session_timeout_ms=6000,
    heartbeat_interval_ms=1000,
    min_heartbeat_interval_ms=1000,
    initial_rebalance_delay_ms=0,
)


def observed(lab: Lab, actor: str, event_type: type) -> list:
    return [e.body for e in lab.trace.of_type(event_type) if e.actor == actor]


def member_config(server, protocol: str) -> dict:
    """A librdkafka consumer of group ``g`` reading from the start, with FAST's timeouts for classic."""
    config = {
        "bootstrap.servers": server.bootstrap_servers,
        "group.id": "g",
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
    }
    if protocol == "classic":
        config |= {"session.timeout.ms": FAST.session_timeout_ms, "heartbeat.interval.ms": FAST.heartbeat_interval_ms}
    return config


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_real_members_have_observed_states_and_the_lab_turns_stable(protocol):
    lab = Lab(seed=9, config=LabConfig(coordinator=FAST))
    lab.create_topic("orders", 6, produce_rate_per_s=0)
    with serve(lab) as server:
        base = member_config(server, protocol)
        members = [ConsumerProcess({**base, "client.id": name}, ["orders"]) for name in ("c1", "c2")]
        try:

            def settled_with_both(lab) -> dict[str, set[int]] | None:
                """What each real member owns as the Lab observed it, once the Lab is stable with both."""
                clients = [lab.world.clients.get(name) for name in ("c1", "c2")]
                if not (lab.is_stable() and all(c is not None and c.acknowledged for c in clients)):
                    return None
                assigned = settled_assignment(lab, "g") if protocol == "consumer" else None
                if assigned is not None:  # KIP-848: what the coordinator assigns is what they own
                    assert {n: {p for _, p in tps} for n, tps in assigned.items()} == {
                        c.name: {p for _, p in c.acknowledged} for c in clients
                    }
                return {c.name: {p for _, p in c.acknowledged} for c in clients}

            owned = wait_until(lambda: server.call(settled_with_both), 60, "the Lab to see both real members settle")
        finally:
            for member in members:
                member.close()
        wait_until(lambda: server.call(lambda lab: lab.is_stable()), 30, "stable again once both left")
    names = {lab.topic_id("orders"): "orders"}
    for name in ("c1", "c2"):
        transitions = observed(lab, name, StateTransition)
        assert transitions and all(t.machine.endswith(OBSERVED) for t in transitions)
        assert "STABLE" in [t.to_state for t in transitions]
        assert transitions[-1].to_state == "UNSUBSCRIBED"
        seen = [{p for t, p in a.owned if names.get(t) == "orders"} for a in observed(lab, name, AssignmentChanged)]
        assert owned[name] in seen and seen[-1] == set()  # what it owned when stable, and nothing once it left
    assert sorted(owned["c1"] | owned["c2"]) == list(range(6)) and not owned["c1"] & owned["c2"]
    states = member_state_frame(lab.trace)
    assert set(states["member"]) == {"c1", "c2"} and set(states["group_id"]) == {"g"}
    assert "STABLE" in set(states[states["member"] == "c1"]["state"])


@pytest.mark.slow
def test_a_real_members_commits_are_ledger_events():
    """Each OffsetCommit a real member sends is a ``CommitResult`` with the answer's outcome."""
    lab = Lab(seed=9, config=LabConfig(coordinator=FAST))
    lab.create_topic("orders", 2, produce_rate_per_s=0)
    with serve(lab) as server:
        import confluent_kafka

        producer = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap_servers})
        for n in range(20):
            producer.produce("orders", b"x", partition=n % 2)
        producer.flush(10)
        config = member_config(server, "consumer") | {"client.id": "c1", "auto.commit.interval.ms": 200}
        consumer = ConsumerProcess(config, ["orders"])
        try:
            wait_until(lambda: len(consumer.records()) == 20, 60, "the 20 records")

            def committed_to_end(lab) -> bool:
                results = observed(lab, "c1", CommitResult)
                done = {(t, p): o for r in results for t, p, o, error in r.offsets if error is None}
                return sorted(done.values()) == [10, 10]

            wait_until(lambda: server.call(committed_to_end), 30, "commits of both partitions to offset 10")
        finally:
            consumer.close()


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_real_member_killed_without_leaving_is_drawn_gone_once_its_session_expires(protocol):
    """SIGKILL: no leave reaches the Lab. Until its session expires at the coordinator the member
    is drawn as last seen (STABLE); then the coordinator removes it and it is drawn gone
    (UNSUBSCRIBED, owning nothing), and the Lab is stable with the one left."""
    lab = Lab(seed=9, config=LabConfig(coordinator=FAST))
    lab.create_topic("orders", 4, produce_rate_per_s=0)
    with serve(lab) as server:
        base = member_config(server, protocol)
        members = {name: ConsumerProcess({**base, "client.id": name}, ["orders"]) for name in ("c1", "c2")}
        try:

            def both_stable(lab) -> bool:
                clients = [lab.world.clients.get(name) for name in members]
                return lab.is_stable() and all(c is not None and c.state == "STABLE" for c in clients)

            wait_until(lambda: server.call(both_stable), 60, "both real members stable")
            members["c1"].kill()
            killed_at = server.call(lambda lab: lab.now)
            wait_until(
                lambda: server.call(lambda lab: lab.world.clients["c1"].state == "UNSUBSCRIBED"),
                FAST.session_timeout_ms / 1000 + 20,
                "c1 drawn gone",
            )
            wait_until(
                lambda: server.call(lambda lab: lab.is_stable() and len(lab.world.clients["c2"].acknowledged) == 4),
                30,
                "c2 alone, owning every partition",
            )
        finally:
            for member in members.values():
                member.kill()
    gone = [t for t in observed(lab, "c1", StateTransition) if t.to_state == "UNSUBSCRIBED"]
    assert [t.from_state for t in gone] == ["STABLE"]
    assert gone[0].trigger == "removed by the coordinator: no heartbeat within its timeout"
    moved = next(e for e in lab.trace.of_type(StateTransition) if e.actor == "c1" and e.body.to_state == "UNSUBSCRIBED")
    assert moved.time_ms - killed_at >= FAST.session_timeout_ms - 1_000  # not before its session could expire
    assert observed(lab, "c1", AssignmentChanged)[-1].owned == ()
