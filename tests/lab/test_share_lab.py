"""Share groups in the Lab: poison messages end to end, failovers, the four share invariants (each caught
when a component is deliberately broken), determinism."""

from __future__ import annotations

import pytest

from kip_lab.clients.share_consumer import FailureRule
from kip_lab.events import MessageSent, Note, ShareAcquired, ShareStateWrite
from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.lab.share_invariants import at_least_once
from kip_lab.share import partition as partition_module
from kip_lab.share.config import SharePartitionConfig
from kip_lab.share.partition import ACKNOWLEDGED, ARCHIVED, SharePartition

SHARE = SharePartitionConfig(record_lock_duration_ms=2_000, delivery_count_limit=5)


def _lab(seed: int = 7, share: SharePartitionConfig = SHARE) -> Lab:
    lab = Lab(seed=seed, config=LabConfig(share=share))
    lab.create_topic("orders", 1, produce_rate_per_s=0)
    return lab


def _poison_run(action: str, consumers: int = 3, seed: int = 7) -> Lab:
    lab = _lab(seed)
    rule = FailureRule(value_regex="poison-.*", action=action, hang_ms=5_000)
    acknowledgement = "implicit" if action == "hang" else "explicit"
    for i in range(consumers):
        lab.add_share_consumer(
            f"C{i}",
            group_id="queue",
            subscribed_topic_names=["orders"],
            acknowledgement=acknowledgement,
            max_poll_records=1 if action == "hang" else 5,  # a hang holds up its whole batch
            failures=[rule],
        )
    lab.run(until=6_000)  # joined, share-partition initialized (at latest = 0)
    # A fetch takes whole log batches (Kafka's SharePartition.acquire), so the hanging run produces one-record batches.
    lab.produce_share_records("orders", 30, poison_every=10, batch_size=1 if action == "hang" else 5)
    lab.run(until=90_000)
    return lab


def _transitions_of(lab: Lab, offset: int) -> list[tuple[str, str]]:
    """(trigger, target) of every persisted change of ``offset``, in order."""
    return [
        (trigger, target)
        for e in lab.trace.of_type(ShareStateWrite)
        if e.body.error is None
        for first, last, trigger, target in e.body.transitions
        if first <= offset <= last
    ]


def _acquisitions_of(lab: Lab, offset: int) -> list[int]:
    return [
        count
        for e in lab.trace.of_type(ShareAcquired)
        for first, last, count in e.body.ranges
        if first <= offset <= last
    ]


def _sp(lab: Lab) -> SharePartition:
    tp = (lab.topic_id("orders"), 0)
    return lab.world.share.share_partition("queue", tp)


@pytest.mark.parametrize("action", ["release", "hang"])
def test_poison_records_are_redelivered_up_to_the_limit_then_archived_and_the_rest_flow(action):
    # delivery counts 1..5, writes Available dc1..dc4 then Archived dc5; nothing else is held up.
    lab = _poison_run(action)
    poison = [9, 19, 29]
    for offset in poison:
        assert _acquisitions_of(lab, offset) == [1, 2, 3, 4, 5]
        failed = "release" if action == "release" else "lock timeout"
        assert _transitions_of(lab, offset) == [(failed, "Available")] * 4 + [(f"{failed} at limit", "Archived")]
    sp = _sp(lab)
    assert sp.spso == 30 and sp.records() == []
    healthy = [o for o in range(30) if o not in poison]
    for offset in healthy:
        assert _acquisitions_of(lab, offset) == [1]
    assert at_least_once(lab.world) == []
    assert lab.invariants.violations == []


def test_rejected_poison_is_archived_after_one_delivery():
    lab = _poison_run("reject")
    for offset in (9, 19, 29):
        assert _acquisitions_of(lab, offset) == [1]
        assert _transitions_of(lab, offset) == [("reject", "Archived")]
    assert _sp(lab).spso == 30
    assert lab.invariants.violations == [] and at_least_once(lab.world) == []


def test_more_consumers_than_partitions_share_the_partition():
    lab = _poison_run("release", consumers=4)
    members = {e.body.member_id for e in lab.trace.of_type(ShareAcquired)}
    assert len(members) >= 2  # several members read the one partition
    assert all(c.assigned == {(lab.topic_id("orders"), 0)} for c in lab.clients.values())


def test_the_same_seed_gives_the_same_trace():
    first = [e.to_json() for e in _poison_run("release", seed=3).trace]
    second = [e.to_json() for e in _poison_run("release", seed=3).trace]
    assert first == second


def test_a_crashed_consumers_records_are_released_when_its_connection_closes():
    lab = _lab()
    lab.add_share_consumer("slow", group_id="queue", subscribed_topic_names=["orders"], processing_ms_per_record=10_000)
    lab.run(until=6_000)
    lab.produce_share_records("orders", 5, batch_size=5)
    lab.run(until=7_000)
    assert _sp(lab).owner_at(0) is not None
    lab.add_share_consumer("fast", group_id="queue", subscribed_topic_names=["orders"])
    lab.crash("slow")
    lab.run(until=20_000)
    sp = _sp(lab)
    assert sp.spso == 5
    assert lab.clients["fast"].outcomes == {"accept": 5}
    assert lab.invariants.violations == []


def test_share_coordinator_failover_mid_run_loses_nothing():
    lab = _lab()
    for name in ("A", "B"):
        lab.add_share_consumer(name, group_id="queue", subscribed_topic_names=["orders"], max_poll_records=3)
    lab.run(until=6_000)
    lab.produce_share_records("orders", 20, batch_size=4, repeat=3, every_ms=2_000)
    lab.run(until=7_500)
    before = lab.world.share.coordinator
    lab.fail_over_share_coordinator()
    rebuilt = lab.world.share.coordinator
    assert rebuilt is not before and rebuilt.states == before.states
    lab.run(until=40_000)
    assert _sp(lab).spso == 60
    assert at_least_once(lab.world) == [] and lab.invariants.violations == []


def test_a_zombie_share_partition_leader_is_fenced_by_leader_epoch():
    lab = _lab()
    lab.add_share_consumer(
        "A", group_id="queue", subscribed_topic_names=["orders"], processing_ms_per_record=1_000, max_poll_records=5
    )
    lab.run(until=6_000)
    lab.produce_share_records("orders", 10, batch_size=5)
    lab.run(until=6_500)  # A holds 0-4 at the old leader
    old = lab.world.share.leader_of((lab.topic_id("orders"), 0))
    lab.move_share_leader("orders", 0)
    lab.add_share_consumer("B", group_id="queue", subscribed_topic_names=["orders"])  # reads the new leader
    lab.run(until=60_000)
    fenced = [e for e in lab.trace.of_type(ShareStateWrite) if e.actor == old and e.body.error == "FENCED_LEADER_EPOCH"]
    assert fenced  # the zombie's lock expiry could not be written once the new leader had read
    assert _sp(lab).spso == 10  # the new leader redelivered and everything completed
    assert lab.invariants.violations == []


# -- each invariant catches a deliberately broken component ---------------------------------------
def _violations(lab: Lab, name: str) -> list[str]:
    return [text for invariant, text in lab.invariants.violations if invariant == name]


def test_single_acquirer_catches_a_leader_that_hands_a_record_out_twice(monkeypatch):
    original = SharePartition.acquire

    def leaky(self, member_id, max_records):
        acquired = original(self, member_id, max_records)
        for batch in self._batches:  # forget the acquisition: the next member gets the same records
            if batch.member_id == member_id:
                batch.state, batch.member_id = partition_module.AVAILABLE, None
        return acquired

    monkeypatch.setattr(SharePartition, "acquire", leaky)
    lab = _poison_run("release", consumers=2)
    assert _violations(lab, "share-single-acquirer")


def test_delivery_count_check_catches_a_leader_that_reports_low_counts(monkeypatch):
    original = partition_module._acquired_ranges

    def first_delivery_always(batches):
        return [r.model_copy(update={"delivery_count": 1}) for r in original(batches)]

    monkeypatch.setattr(partition_module, "_acquired_ranges", first_delivery_always)
    lab = _poison_run("release", consumers=2)
    assert _violations(lab, "share-delivery-counts-never-decrease")


def test_start_offset_check_catches_a_leader_that_moves_it_back(monkeypatch):
    original = SharePartition._advance_start

    def backwards(self):
        original(self)
        if self.spso >= 20:
            self.spso -= 10

    monkeypatch.setattr(SharePartition, "_advance_start", backwards)
    lab = _poison_run("reject", consumers=1)
    assert _violations(lab, "share-start-offset-never-back")


def test_start_offset_may_move_back_by_an_admin_reset():
    lab = _poison_run("reject", consumers=1)
    lab.close("C0")
    lab.run(until=lab.now + 10_000)
    lab.reset_share_group_offsets("queue", "orders", "earliest")
    note = [e.body for e in lab.trace.of_type(Note) if "errors" in e.body.details][-1]
    assert note.details["errors"] == {"orders-0": "NONE"}
    lab.add_share_consumer("again", group_id="queue", subscribed_topic_names=["orders"])
    lab.run(until=lab.now + 30_000)
    assert _acquisitions_of(lab, 0) == [1, 1]  # delivered again after the reset, its count restarted
    assert lab.invariants.violations == []


def test_at_least_once_catches_a_leader_that_never_releases(monkeypatch):
    monkeypatch.setattr(SharePartition, "release_member", lambda self, member_id, origin="session end": None)
    monkeypatch.setattr(SharePartition, "fire_timer", lambda self, key: None)
    lab = _lab()
    lab.add_share_consumer(
        "doomed", group_id="queue", subscribed_topic_names=["orders"], processing_ms_per_record=10_000
    )
    lab.run(until=6_000)
    lab.produce_share_records("orders", 5, batch_size=5)
    lab.run(until=7_000)
    lab.add_share_consumer("survivor", group_id="queue", subscribed_topic_names=["orders"])
    lab.crash("doomed")
    lab.run(until=60_000)
    found = at_least_once(lab.world)
    assert found and found[0][0] == "share-at-least-once"
    states = {r.state for r in _sp(lab).records()}
    assert states - {ACKNOWLEDGED, ARCHIVED}


def test_metrics_count_redeliveries_and_archived_records():
    from kip_lab.lab.metrics import compute_metrics

    metrics = compute_metrics(_poison_run("release").trace)
    # 30 records: 27 accepted once; 3 poison records delivered 5 times each, then archived.
    assert metrics["share_records_acquired"] == 30 + 3 * 4
    assert metrics["share_redeliveries"] == 3 * 4
    assert metrics["share_records_acknowledged"] == 27
    assert metrics["share_records_archived"] == 3


def test_time_travel_replays_a_share_run_identically():
    lab = _poison_run("release", consumers=2)
    first = [e.to_json() for e in lab.trace]
    lab.seek(40)
    lab.seek(lab.horizon)
    assert [e.to_json() for e in lab.trace] == first
    twin = lab.fork()
    twin.seek(60)
    twin.close("C0")  # forks in place: the original run is untouched
    assert [e.to_json() for e in lab.trace] == first


def test_group_coordinator_failover_keeps_the_share_group_and_its_epoch():
    """Kafka's ``GroupMetadataManager.onLoaded``: the share group, its members and its epoch survive as they were."""
    lab = _lab()
    for name in ("A", "B"):
        lab.add_share_consumer(name, group_id="queue", subscribed_topic_names=["orders"])
    lab.run(until=6_000)
    lab.produce_share_records("orders", 10, batch_size=5, repeat=3, every_ms=3_000)
    before = lab.coordinator.share_state_snapshot()["queue"]
    lab.fail_over()
    after = lab.coordinator.share_groups["queue"]
    assert after.group_epoch == before["group_epoch"] and set(after.members) == set(before["members"])
    lab.run(until=40_000)
    assert all(c.settled() for c in lab.clients.values())
    assert _sp(lab).spso == 30 and at_least_once(lab.world) == [] and lab.invariants.violations == []


def test_auto_offset_reset_earliest_reads_what_was_produced_before_the_group_existed():
    from kip_lab.lab import actions as a

    lab = _lab()
    lab.produce_share_records("orders", 8, batch_size=4)
    lab.apply(a.SetShareAutoOffsetReset(group_id="queue", value="earliest"))
    lab.add_share_consumer("A", group_id="queue", subscribed_topic_names=["orders"])
    lab.run(until=20_000)
    assert lab.clients["A"].outcomes == {"accept": 8}
    lab.seek(1)
    lab.seek(lab.horizon)  # the config change is a step: time travel replays it
    assert lab.clients["A"].outcomes == {"accept": 8}


def test_a_restarted_share_consumer_is_a_new_incarnation_that_rejoins():
    lab = _lab()
    lab.add_share_consumer("A", group_id="queue", subscribed_topic_names=["orders"])
    lab.run(until=6_000)
    old = lab.clients["A"]
    lab.restart("A")
    lab.produce_share_records("orders", 5, batch_size=5)
    lab.run(until=20_000)
    new = lab.clients["A"]
    assert new is not old and new.incarnation == 1 and new.outcomes == {"accept": 5}
    assert new.member_id in lab.coordinator.share_groups["queue"].members


def _share_partitions(lab: Lab, name: str) -> list[str]:
    return sorted(lab.world.partition_name(tp) for tp in lab.clients[name].assigned)


def test_a_share_member_changes_its_subscription_and_takes_the_new_topics():
    """Kafka ``ShareConsumerImpl.subscribe`` then ``AbstractMembershipManager.onSubscriptionUpdated``: the new topic
    names go out alone with the next heartbeat, the coordinator initializes the new topic's share-partitions, and
    the member consumes from it; the Lab is not stable until the member holds that newest target."""
    lab = _lab()
    lab.create_topic("audit", 3, produce_rate_per_s=0)
    lab.add_share_consumer("S", group_id="queue", subscribed_topic_names=["orders"])
    assert lab.run_until_stable()
    assert _share_partitions(lab, "S") == ["orders-0"]
    since = lab.step_count
    lab.change_subscription("S", topics=["orders", "audit"])
    assert lab.run_until_stable()
    assert _share_partitions(lab, "S") == ["audit-0", "audit-1", "audit-2", "orders-0"]
    sent = [
        e.body.body
        for e in lab.trace.of_type(MessageSent)
        if e.step > since and e.actor == "S" and e.body.api == "ShareGroupHeartbeat"
    ]
    member_id = lab.clients["S"].member_id
    assert sent[0] == {
        "group_id": "queue",
        "member_id": member_id,
        "member_epoch": sent[0]["member_epoch"],
        "subscribed_topic_names": ["orders", "audit"],
    }
    assert all("subscribed_topic_names" not in body for body in sent[1:])  # sent once, then only on change
    assert lab.coordinator.share_groups["queue"].members[member_id].subscribed_topic_names == ("audit", "orders")
    lab.produce_share_records("audit", 4, batch_size=4)
    lab.run(until=lab.now + 10_000)
    assert lab.clients["S"].outcomes == {"accept": 12}  # 4 records on each of the three audit partitions


def test_a_closed_share_member_joins_again_with_its_new_subscription():
    """Kafka ``AbstractMembershipManager.onSubscriptionUpdated``: a member out of the group joins on a new
    subscribe."""
    lab = _lab()
    lab.create_topic("audit", 2, produce_rate_per_s=0)
    lab.add_share_consumer("S", group_id="queue", subscribed_topic_names=["orders"])
    assert lab.run_until_stable()
    lab.close("S")
    assert lab.run_until_stable() and lab.clients["S"].state.value == "UNSUBSCRIBED"
    lab.change_subscription("S", topics=["audit"])
    assert lab.run_until_stable()
    assert lab.clients["S"].state.value == "STABLE"
    assert _share_partitions(lab, "S") == ["audit-0", "audit-1"]
    lab.produce_share_records("audit", 3, batch_size=3)
    lab.run(until=lab.now + 10_000)
    assert lab.clients["S"].outcomes == {"accept": 6}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"regex": "ord.*"}, "'S' is a share consumer: it subscribes to topic names, not to a regex"),
        ({"topics": []}, "'S' is a share consumer: it needs at least one topic name"),
        ({}, "'S' is a share consumer: it needs at least one topic name"),
    ],
)
def test_a_share_member_refuses_a_pattern_or_no_topics_and_nothing_changes(change, words):
    """Kafka ``ShareConsumerImpl.subscribe`` takes topic names only (KIP-932 has no pattern subscription for
    share groups)."""
    lab = _lab()
    lab.add_share_consumer("S", group_id="queue", subscribed_topic_names=["orders"])
    assert lab.run_until_stable()
    steps, before = lab.step_count, lab.clients["S"].config
    with pytest.raises(ValueError, match=words):
        lab.change_subscription("S", **change)
    assert lab.step_count == steps and lab.clients["S"].config == before


def test_the_lab_is_stable_only_once_every_share_member_holds_its_target():
    """Kafka ``GroupMetadataManager.shareGroupHeartbeat`` hands a member its target with the next heartbeat: until
    then the group has not settled, even though each member matches its current assignment."""
    lab = Lab(seed=7)
    lab.create_topic("orders", 2, produce_rate_per_s=0)
    for name in ("S", "T"):
        lab.add_share_consumer(name, group_id="queue", subscribed_topic_names=["orders"])
    assert lab.run_until_stable()
    group = lab.coordinator.share_groups["queue"]
    for client in lab.clients.values():
        target = group.target_of(client.member_id)
        assert client.assigned == {(t, p) for t, parts in target.items() for p in parts}
        assert client.assigned  # with two partitions and two members, each holds some
