"""``client_story`` tells a run from its trace: transitions, callbacks, faults, drops."""

from __future__ import annotations

from kip_lab.clients import CallbackConfig, ConsumerConfig
from kip_lab.lab import Lab
from kip_lab.lab.story import client_story


def test_story_of_a_crash_and_a_slow_callback():
    lab = Lab(seed=5)
    lab.create_topic("foo", 4)
    lab.add_consumer(
        "A", ConsumerConfig(subscribed_topic_names=["foo"], callbacks=CallbackConfig(on_partitions_revoked_ms=700))
    )
    lab.add_consumer("B", subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    lab.drop_messages("A", 1)
    lab.run(until=lab.now + 6_000)  # A's next heartbeat is lost on the wire
    lab.crash("B")
    assert lab.run_until_stable()
    story = client_story(lab.trace)
    lines = story.splitlines()
    assert "A: UNSUBSCRIBED -> JOINING  (subscribe; epoch 0)" in lines[0]
    assert any("A:   on_partitions_revoked(" in line and "takes 700 ms" in line for line in lines)
    assert any(line.endswith("** crash B") for line in lines)
    assert any("network: dropped ConsumerGroupHeartbeat A -> broker-0" in line for line in lines)
    only_b = client_story(lab.trace, members=["B"]).splitlines()
    assert only_b and all(" B:" in line for line in only_b)
    assert client_story(lab.trace, since_ms=lab.now + 1) == ""
