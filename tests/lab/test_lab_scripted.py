"""The scripted variant: KIP-848's Basic case study sent as exact requests through the Lab's network.

Every request crosses the simulated network to the coordinator's broker; after each one is
answered, the coordinator's state must equal the KIP's table at that step (the same rows
``test_golden_kip848`` checks on the coordinator alone).
"""

from __future__ import annotations

from golden_support import GROUP, Snapshot, snapshot

from kip_lab.events import MessageSent
from kip_lab.lab import Lab

MEMBERS = ("A", "B", "C")


def heartbeat(lab: Lab, member: str, epoch: int, owned: list[int] | None = None, join: bool = False) -> None:
    body = {"group_id": GROUP, "member_id": member, "member_epoch": epoch}
    if join:
        body |= {"rebalance_timeout_ms": 60_000, "subscribed_topic_names": ["foo"], "topic_partitions": []}
    elif owned is not None:
        body["topic_partitions"] = [{"topic_id": lab.topic_id("foo"), "partitions": owned}]
    answered = len(lab.clients[member].responses) if member in lab.clients else 0
    lab.send_request(member, "ConsumerGroupHeartbeat", **body)
    while len(lab.clients[member].responses) == answered:  # deliver the request and its response
        lab.step()
    api, response = lab.clients[member].responses[-1]
    assert api == "ConsumerGroupHeartbeat" and response.error_code.name == "NONE", response


def test_scripted_basic_case_reproduces_every_step():
    lab = Lab(seed=3)
    lab.create_topic("foo", 3)

    def now() -> Snapshot:
        return snapshot(lab.coordinator, MEMBERS)

    heartbeat(lab, "A", 0, join=True)  # steps 0-2
    assert now() == Snapshot(1, 1, {"A": [0, 1, 2]}, {"A": "e1 [0,1,2]", "B": "-", "C": "-"}, "Stable")
    heartbeat(lab, "B", 0, join=True)  # steps 3-5
    assert now() == Snapshot(
        2, 2, {"A": [0, 1], "B": [2]}, {"A": "e1 [0,1,2]", "B": "e2 [] p[2]", "C": "-"}, "Reconciling"
    )
    heartbeat(lab, "A", 1, owned=[0, 1, 2])  # step 6: told to revoke foo-2
    assert now().members == {"A": "e1 [0,1] r[2]", "B": "e2 [] p[2]", "C": "-"}
    heartbeat(lab, "A", 1, owned=[0, 1])  # step 7: acknowledges
    assert now().members == {"A": "e2 [0,1]", "B": "e2 [] p[2]", "C": "-"}
    heartbeat(lab, "B", 2, owned=[])  # step 8: B gets foo-2
    assert now() == Snapshot(2, 2, {"A": [0, 1], "B": [2]}, {"A": "e2 [0,1]", "B": "e2 [2]", "C": "-"}, "Stable")
    heartbeat(lab, "C", 0, join=True)  # steps 9, 10, 12
    assert now() == Snapshot(
        3, 3, {"A": [0], "B": [2], "C": [1]}, {"A": "e2 [0,1]", "B": "e2 [2]", "C": "e3 [] p[1]"}, "Reconciling"
    )
    heartbeat(lab, "B", 2, owned=[2])  # step 11
    assert now().members == {"A": "e2 [0,1]", "B": "e3 [2]", "C": "e3 [] p[1]"}
    heartbeat(lab, "A", 2, owned=[0, 1])  # step 13: told to revoke foo-1
    assert now().members == {"A": "e2 [0] r[1]", "B": "e3 [2]", "C": "e3 [] p[1]"}
    heartbeat(lab, "A", 2, owned=[0])  # step 14: acknowledges
    heartbeat(lab, "C", 3, owned=[])  # step 15: C gets foo-1
    assert now() == Snapshot(
        3, 3, {"A": [0], "B": [2], "C": [1]}, {"A": "e3 [0]", "B": "e3 [2]", "C": "e3 [1]"}, "Stable"
    )
    # every request and response crossed the network
    sent = [e for e in lab.trace.of_type(MessageSent) if e.body.api == "ConsumerGroupHeartbeat"]
    assert len(sent) == 2 * 10
    assert not lab.invariants.violations
