"""A simulated consumer and a real one in the same KIP-848 group: one coordinator, one set of
handlers (Kafka `GroupMetadataManager.consumerGroupHeartbeat`) for both, one trace."""

from __future__ import annotations

import pytest

from tests.wire_support import ConsumerProcess, group_members, wait_until

pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")

from kip_lab.coordinator import CoordinatorConfig
from kip_lab.events import CallbackInvoked, MessageSent
from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.wire import serve

PARTITIONS = 4


@pytest.mark.slow
def test_a_simulated_and_a_real_consumer_share_a_group():
    coordinator = CoordinatorConfig(heartbeat_interval_ms=1_000, min_heartbeat_interval_ms=1_000)
    lab = Lab(seed=13, config=LabConfig(coordinator=coordinator))
    lab.create_topic("orders", PARTITIONS, produce_rate_per_s=10)
    lab.add_consumer("sim", group_id="g", subscribed_topic_names=["orders"])
    lab.run(until=2_000)
    assert {p for _, p in lab.clients["sim"].owned} == set(range(PARTITIONS))
    with serve(lab) as server:
        real = ConsumerProcess(
            {
                "bootstrap.servers": server.bootstrap_servers,
                "client.id": "real",
                "group.id": "g",
                "group.protocol": "consumer",
            },
            ["orders"],
        )
        try:

            def split() -> dict[str, set[int]] | None:
                def read(lab):
                    group = lab.coordinator.groups["g"]
                    members = group.members
                    sim = lab.clients["sim"]
                    by_client = {
                        ("sim" if m.member_id == sim.member_id else m.client_id): {
                            p for ps in m.assigned.values() for p in ps
                        }
                        for m in members.values()
                    }
                    settled = all(m.member_epoch == group.group_epoch for m in members.values())
                    sim_owns = {p for _, p in sim.owned}
                    if sorted(by_client) != ["real", "sim"] or not settled or sim_owns != by_client["sim"]:
                        return None
                    if set().union(*by_client.values()) != set(range(PARTITIONS)):
                        return None  # partitions revoked from one, not yet given to the other
                    return by_client

                return server.call(read)

            owners = wait_until(split, 60, "the simulated and the real consumer to share the partitions")
            assert owners["sim"].isdisjoint(owners["real"]) and owners["sim"] | owners["real"] == set(range(PARTITIONS))
            wait_until(
                lambda: {p for _, p in real.assignment()} == owners["real"],
                10,
                "the real consumer's own callbacks to agree",
            )
            assert set(server.call(lambda lab: group_members(lab, "g"))) >= {"real"}
            senders = {e.body.source for e in lab.trace.of_type(MessageSent) if e.body.api == "ConsumerGroupHeartbeat"}
            assert {"sim", "real"} <= senders
            revoked = [e for e in lab.trace.of_type(CallbackInvoked) if e.actor == "sim"]
            assert revoked, "the simulated consumer gave partitions up for the real one"
            assert lab.invariants.violations == []
        finally:
            real.kill()


@pytest.mark.slow
def test_the_stepper_walks_a_run_with_a_real_consumer():
    """After the server stops, the stepper seeks through the run (real clients' requests are steps)."""
    pytest.importorskip("ipywidgets", reason="the stepper needs the lab extra")
    from widgets.stepper import Stepper

    coordinator = CoordinatorConfig(heartbeat_interval_ms=1_000, min_heartbeat_interval_ms=1_000)
    lab = Lab(seed=14, config=LabConfig(coordinator=coordinator))
    lab.create_topic("orders", 2, produce_rate_per_s=10)
    lab.add_consumer("sim", group_id="g", subscribed_topic_names=["orders"])
    with serve(lab) as server:
        real = ConsumerProcess(
            {
                "bootstrap.servers": server.bootstrap_servers,
                "client.id": "real",
                "group.id": "g",
                "group.protocol": "consumer",
            },
            ["orders"],
        )
        try:
            wait_until(lambda: real.assignment(), 60, "the real consumer to get a partition")
        finally:
            real.close()
    end = lab.step_count
    trace = [e.to_json() for e in lab.trace]
    stepper = Stepper(lab, group_id="g", member="sim")
    assert stepper.lab is not lab  # the stepper owns a fork of the run; the caller's lab stays where it was
    for step in (1, end // 2, end, 3):
        stepper.go(step)
        assert stepper.lab.step_count == step
        assert lab.step_count == end
    stepper.go(end)
    assert [e.to_json() for e in stepper.lab.trace] == trace
    assert [e.to_json() for e in lab.trace] == trace
    assert stepper.errors.outputs == ()
