"""The Lab end to end: every fault, the KIP-848 case studies, determinism, trace files, metrics."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bench_support import import_benchmark
from lab_support import make_lab

from kip_lab.clients import MemberState
from kip_lab.events import (
    ActionApplied,
    AssignmentChanged,
    CallbackInvoked,
    Event,
    FaultInjected,
    HandlerResult,
    InvariantViolated,
    MessageDropped,
    MessageSent,
    StateTransition,
)
from kip_lab.lab import Lab, LabConfig, LatencyModel, LinkConfig, Trace, TraceEvent
from kip_lab.lab import actions as a
from kip_lab.lab.metrics import compute_metrics, stability_by_step
from kip_lab.lab.trace import EventKind
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatResponse

LOSSY = LinkConfig(latency=LatencyModel(kind="uniform", low=1, high=25), drop_probability=0.02)
LOSSY_SLOW = LinkConfig(latency=LatencyModel(kind="uniform", low=1, high=30), drop_probability=0.02)


# ---------------------------------------------------------------------------- helpers


def owned(lab: Lab, name: str, topic: str = "foo") -> list[int]:
    topic_id = lab.topic_id(topic)
    return sorted(p for t, p in lab.clients[name].owned if t == topic_id)


def events(lab: Lab, actor: str | None = None, kind: str | None = None, since: int = 0) -> list[TraceEvent]:
    return [
        e
        for e in lab.trace
        if e.step > since and (actor is None or e.actor == actor) and (kind is None or e.kind.value == kind)
    ]


def sent(lab: Lab, actor: str, api: str | None = "ConsumerGroupHeartbeat", since: int = 0) -> list[TraceEvent]:
    """``actor``'s requests of ``api`` (of every API when None)."""
    return [e for e in events(lab, actor, "message_sent", since) if api is None or e.body.api == api]


def members(lab: Lab) -> set[str]:
    return set(lab.coordinator.groups["g"].members)


def faulty_run(seed: int, link: LinkConfig = LOSSY) -> Lab:
    """A few faults on a lossy, jittery network."""
    lab = Lab(seed=seed, config=LabConfig(link=link))
    lab.create_topic("foo", 6)
    for name in "ABC":
        lab.add_consumer(name, subscribed_topic_names=["foo"], request_timeout_ms=5_000)
    lab.run(until=20_000)
    lab.crash("B")
    lab.schedule(a.Restart(member="B"), at_ms=40_000)
    lab.run(until=60_000)
    lab.fail_over()
    lab.add_partitions("foo", 2)
    lab.run(until=90_000)
    return lab


# ---------------------------------------------------------------------------- faults
def test_with_nothing_due_step_refuses_and_run_stops_without_a_step() -> None:
    """``step`` and ``run`` share one path: with no timer armed and no action applied, ``step``
    raises and takes no step; ``run(steps=)`` takes none; ``run(until=)`` only moves the clock."""
    lab = Lab(seed=0)
    lab.create_topic("foo", 2)
    steps, events = lab.step_count, len(lab.trace)
    with pytest.raises(IndexError, match="no timer is armed"):
        lab.step()
    assert (lab.step_count, len(lab.trace)) == (steps, events)
    assert lab.run(steps=5) == 0 and lab.step_count == steps
    assert lab.run(until=1_000) == 1 and lab.now == 1_000  # the one step is the clock's advance
    assert lab.trace[-1].kind is EventKind.ACTION_APPLIED and lab.trace[-1].body.name == "advance_to"


def test_crash_stops_the_process_and_the_session_timeout_removes_the_member() -> None:
    lab = make_lab()
    crashed_at = lab.now
    lab.crash("A")
    assert not lab.clients["A"].alive and lab.clients["A"].fetching == {}
    assert events(lab, "lab", "fault_injected")[-1].body.fields == {"action": "crash", "member": "A"}
    lab.run(until=crashed_at + 100)  # a heartbeat A sent just before the crash may still arrive
    last_heard = max(
        e.time_ms
        for e in events(lab, "broker-0", "message_delivered")
        if e.body.source == "A" and e.body.api == "ConsumerGroupHeartbeat"
    )
    lab.run(until=last_heard + 44_999)
    assert "A" in members(lab)  # nobody told the coordinator
    assert not [e for e in sent(lab, "A") if e.time_ms > crashed_at]
    lab.run(until=last_heard + 45_001)
    timeout = [e for e in events(lab, "broker-0", "handler_result") if e.body.origin == "session timeout A"]
    assert [e.time_ms for e in timeout] == [last_heard + 45_000]  # the session timeout, from the last heartbeat
    assert members(lab) == {"B"}
    assert lab.run_until_stable()
    assert owned(lab, "B") == list(range(6))


def test_restart_brings_a_new_incarnation_that_rejoins() -> None:
    lab = make_lab()
    old = lab.clients["A"]
    lab.crash("A")
    lab.restart("A")
    new = lab.clients["A"]
    assert new is not old and new.incarnation == 1 and new.member_id == "A#2"
    assert new.state is MemberState.JOINING
    lab.run(until=lab.now + 60_000)
    assert lab.run_until_stable()
    assert members(lab) == {"A#2", "B"}  # the old member timed out; the new one is a new member
    assert len(owned(lab, "A")) == len(owned(lab, "B")) == 3


@pytest.mark.parametrize(("seed", "steps"), [(1, 11), (2, 9), (2, 28), (5, 20), (6, 24)])
def test_a_restarted_client_never_takes_an_answer_meant_for_its_previous_incarnation(seed: int, steps: int) -> None:
    """A member closed and restarted at once, with its old requests' answers still on the way.

    In Kafka the restarted process is a new ``NetworkClient`` on new connections, so
    ``NetworkClient.handleCompletedReceives`` never sees an answer to the old process's
    requests. Here both incarnations share the name ``D``: the answers reach the new one, which
    must match none of them to a request of its own (with ids that restarted at 1 it took a
    heartbeat answer for its OffsetFetch and crashed)."""
    lab = Lab(seed=seed, config=LabConfig(link=LOSSY_SLOW))
    lab.create_topic("foo", 6)
    for name in "ABCDE":
        lab.add_consumer(name, subscribed_topic_names=["foo"])
    lab.run(steps=steps)
    lab.close("D")
    lab.add_partitions("foo", 2)
    restarted_at = lab.step_count
    lab.restart("D")
    old_requests = {e.body.correlation_id for e in sent(lab, "D", api=None)}
    lab.run(until=lab.now + 60_000)

    late = [
        e for e in events(lab, "D", "message_delivered", since=restarted_at) if e.body.correlation_id in old_requests
    ]
    assert late  # answers to the old process did arrive after the restart
    assert lab.run_until_stable()
    assert lab.clients["D"].state is MemberState.STABLE
    assert members(lab) == {"A", "B", "C", "D#2", "E"}
    assert sum(len(owned(lab, name)) for name in "ABCDE") == 8


def test_close_leaves_at_once() -> None:
    lab = make_lab()
    lab.close("A")
    lab.run(until=lab.now + 10)
    assert members(lab) == {"B"}
    assert lab.clients["A"].state is MemberState.UNSUBSCRIBED
    assert lab.run_until_stable()
    assert owned(lab, "B") == list(range(6))


def test_pause_past_the_poll_timeout_leaves_and_resume_rejoins() -> None:
    lab = make_lab(max_poll_interval_ms=20_000)
    lab.run(until=lab.now + 17_000)
    paused_at = lab.now
    lab.pause("A")  # it was polling until now: the poll timer runs from here
    lab.run(until=paused_at + 19_999)
    assert "A" in members(lab) and lab.clients["A"].state is MemberState.STABLE
    lab.run(until=paused_at + 20_010)
    assert lab.clients["A"].state is MemberState.STALE and "A" not in members(lab)
    expired = [e for e in events(lab, "A", "state_transition") if e.body.trigger == "poll timer expired"]
    assert [e.time_ms for e in expired] == [paused_at + 20_000]
    assert lab.run_until_stable()
    assert owned(lab, "B") == list(range(6))
    lab.resume("A")
    assert lab.run_until_stable()
    assert "A" in members(lab) and len(owned(lab, "A")) == 3


def test_drop_messages_drops_the_next_message_and_the_request_times_out() -> None:
    lab = make_lab(enable_auto_commit=False, request_timeout_ms=2_000)
    lab.run(until=lab.now + 100)  # nothing in flight
    since = lab.step_count
    lab.drop_messages("A", 1)
    lab.run(until=lab.now + 8_000)
    dropped = events(lab, "network", "message_dropped", since)
    assert [(d.body.source, d.body.api, d.body.reason) for d in dropped] == [
        ("A", "ConsumerGroupHeartbeat", "dropped by fault")
    ]
    notes = [e.body.text for e in events(lab, "A", "note", since)]
    assert any("timed out" in text for text in notes)
    assert [e.time_ms > dropped[0].time_ms for e in sent(lab, "A", since=since)][:1] == [True]  # a retry
    assert lab.clients["A"].state is MemberState.STABLE


def test_delay_messages_adds_latency_to_the_next_messages_only() -> None:
    lab = make_lab(enable_auto_commit=False)
    since = lab.step_count
    lab.delay_messages("A", 2, 300)
    lab.run(until=lab.now + 12_000)
    on_link = [e for e in events(lab, None, "message_sent", since) if "A" in (e.body.source, e.body.destination)]
    assert [e.body.latency_ms for e in on_link[:4]] == [301, 301, 1, 1]


def test_partition_link_drops_everything_for_a_while() -> None:
    lab = make_lab(enable_auto_commit=False, request_timeout_ms=2_000)
    since = lab.step_count
    lab.partition_link("A", 6_000)
    healed = lab.now + 6_000
    lab.run(until=lab.now + 12_000)
    dropped = events(lab, "network", "message_dropped", since)
    assert dropped and all(d.body.reason == "link partitioned" for d in dropped)
    assert all(d.time_ms < healed for d in dropped)
    assert any(e.time_ms >= healed for e in sent(lab, "A", since=since))
    assert "A" in members(lab)  # shorter than the session timeout: still a member
    assert not [e for e in events(lab, "A", "state_transition", since) if e.body.to_state == "FENCED"]


def test_fail_over_rebuilds_the_same_group_on_the_next_broker() -> None:
    lab = make_lab()
    before = lab.coordinator.state_snapshot()
    old = lab.coordinator
    lab.fail_over()
    assert lab.world.coordinator_host == "broker-1" and lab.coordinator is not old
    assert old.groups == {}  # unloaded
    after = lab.coordinator.state_snapshot()
    assert after["groups"] == before["groups"] and after["offsets"] == before["offsets"]
    since = lab.step_count
    lab.run(until=lab.now + 11_000)
    assert {e.body.destination for e in sent(lab, "A", since=since)} == {"broker-1"}
    assert lab.is_stable() and lab.coordinator.groups["g"].group_epoch == before["groups"]["g"]["group_epoch"]


def test_partition_added_case_study() -> None:
    """KIP-848 "Partition Added": foo goes from 1 to 2 partitions; B gets the new one."""
    lab = make_lab(partitions=1)
    assert (owned(lab, "A"), owned(lab, "B")) == ([0], [])
    epoch = lab.coordinator.groups["g"].group_epoch
    lab.add_partitions("foo", 1)
    assert lab.run_until_stable()
    assert (owned(lab, "A"), owned(lab, "B")) == ([0], [1])
    assert lab.coordinator.groups["g"].group_epoch == epoch + 1


def test_delete_topic_takes_its_partitions_away() -> None:
    lab = Lab(seed=0)
    lab.create_topic("foo", 2)
    lab.create_topic("bar", 4)
    for name in "AB":
        lab.add_consumer(name, subscribed_topic_names=["foo", "bar"])
    assert lab.run_until_stable()
    bar = lab.topic_id("bar")
    assert sum(1 for c in lab.clients.values() for t, _ in c.owned if t == bar) == 4
    lab.delete_topic("bar")
    lab.run(until=lab.now + 6_000)
    assert lab.run_until_stable()
    assert all(t != bar for c in lab.clients.values() for t, _ in c.owned)
    assert sorted(owned(lab, "A") + owned(lab, "B")) == [0, 1]
    assert "bar" not in lab.coordinator.groups["g"].subscription_metadata


def test_recreate_topic_gives_new_partitions_that_start_from_scratch() -> None:
    lab = make_lab(partitions=2)
    old_id = lab.topic_id("foo")
    lab.run(until=lab.now + 12_000)  # some offsets committed for the old incarnation
    assert any(tp[0] == old_id and offset > 0 for c in lab.clients.values() for tp, offset in c.committed.items())
    lab.recreate_topic("foo", 4)
    new_id = lab.topic_id("foo")
    assert new_id != old_id
    lab.run(until=lab.now + 6_000)
    assert lab.run_until_stable()
    tps = [tp for c in lab.clients.values() for tp in c.owned]
    assert sorted(p for _, p in tps) == [0, 1, 2, 3] and {t for t, _ in tps} == {new_id}
    starts = [fetch for c in lab.clients.values() for fetch in c.fetching.values()]
    assert starts and all(f.offset == 0 for f in starts)  # the old topic's commits do not apply


def test_change_subscription_moves_the_member_to_another_topic() -> None:
    lab = make_lab()
    lab.create_topic("bar", 2)
    lab.change_subscription("A", topics=["bar"])
    assert lab.run_until_stable()
    assert owned(lab, "A", "bar") == [0, 1] and owned(lab, "A") == []
    assert owned(lab, "B") == list(range(6))


def test_send_request_is_a_scripted_heartbeat() -> None:
    lab = make_lab(partitions=2, members="A")
    lab.send_request(
        "S",
        "ConsumerGroupHeartbeat",
        group_id="g",
        member_id="S",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=["foo"],
        topic_partitions=[],
    )
    assert events(lab, "lab", "action_applied")[-1].body.name == "send_request"
    lab.run(until=lab.now + 5)
    response = lab.clients["S"].last_response
    assert isinstance(response, ConsumerGroupHeartbeatResponse)
    assert response.member_id == "S" and response.member_epoch == 2
    assert "S" in members(lab)


def test_scheduled_fault_happens_at_its_time() -> None:
    lab = make_lab()
    lab.schedule(a.Crash(member="A"), at_ms=lab.now + 1_234)
    expected = lab.now + 1_234
    lab.run(until=lab.now + 2_000)
    fault = events(lab, "lab", "fault_injected")[-1]
    assert fault.body.fields == {"action": "crash", "member": "A"} and fault.time_ms == expected
    assert not lab.clients["A"].alive


def test_a_refused_action_leaves_no_trace_and_no_step() -> None:
    lab = make_lab()
    steps, length = lab.step_count, len(lab.trace)
    with pytest.raises(KeyError):
        lab.crash("nobody")
    assert (lab.step_count, len(lab.trace)) == (steps, length)
    lab.step()  # the run goes on as if nothing happened
    assert not any(e.kind is EventKind.FAULT_INJECTED for e in lab.trace[length:])


def test_advance_to_traces_the_coordinators_timers() -> None:
    lab = make_lab()
    lab.crash("A")
    lab.apply(a.AdvanceTo(time_ms=lab.now + 60_000))  # one step across A's session timeout
    timers = events(lab, "coordinator", "timer_fired")
    assert [t.body.timer for t in timers] == [("session", "g", "A")]
    assert any(e.body.origin == "session timeout A" for e in events(lab, kind="handler_result"))
    assert compute_metrics(lab.trace)["records_written"] == lab.world.log.end_offset


# ---------------------------------------------------------------------------- the KIP-848 case studies
def test_basic_case_study() -> None:
    """Three members join foo (3 partitions): A [0], B [2], C [1] at group epoch 3."""
    lab = make_lab(partitions=3, members="ABC")
    assert [owned(lab, n) for n in "ABC"] == [[0], [2], [1]]
    group = lab.coordinator.groups["g"]
    assert group.group_epoch == group.assignment_epoch == 3
    assert all(lab.clients[n].member_epoch == 3 for n in "ABC")


def test_third_member_joins_then_member_failure_case_studies() -> None:
    lab = make_lab(partitions=6, members="AB")
    assert [owned(lab, n) for n in "AB"] == [[0, 1, 2], [3, 4, 5]]
    lab.add_consumer("C", subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    assert [owned(lab, n) for n in "ABC"] == [[0, 1], [3, 4], [2, 5]]
    assert lab.coordinator.groups["g"].group_epoch == 3
    lab.crash("A")
    assert lab.run_until_stable()
    assert [owned(lab, n) for n in "BC"] == [[0, 3, 4], [1, 2, 5]]
    assert lab.coordinator.groups["g"].group_epoch == 4
    assert not lab.invariants.violations


# ---------------------------------------------------------------------------- determinism and files
def test_same_seed_same_bytes_other_seed_other_trace() -> None:
    first, second = faulty_run(7), faulty_run(7)
    assert first.trace.to_jsonl() == second.trace.to_jsonl()
    assert len(first.trace) > 500
    assert any(e.body.reason == "random loss" for e in first.trace.of_type(MessageDropped))
    assert faulty_run(8).trace.to_jsonl() != first.trace.to_jsonl()


def test_fixed_latency_runs_do_not_depend_on_the_seed_for_anything_but_ids() -> None:
    fixed = LinkConfig()
    one, two = faulty_run(1, fixed), faulty_run(2, fixed)
    moves = [[(e.step, e.actor, e.body.to_state) for e in lab.trace.of_type(StateTransition)] for lab in (one, two)]
    assert moves[0] == moves[1]


def test_jsonl_and_parquet_round_trips(tmp_path: Path) -> None:
    lab = faulty_run(3)
    lab.trace.save_jsonl(tmp_path / "run.jsonl")
    lab.trace.save_parquet(tmp_path / "run.parquet")
    from_jsonl = Trace.load_jsonl(tmp_path / "run.jsonl")
    from_parquet = Trace.load_parquet(tmp_path / "run.parquet")
    assert list(from_jsonl) == list(lab.trace)
    assert list(from_parquet) == list(lab.trace)
    assert from_parquet.to_jsonl() == lab.trace.to_jsonl()
    assert compute_metrics(from_parquet) == compute_metrics(lab.trace)


def test_to_pandas_is_one_row_per_event() -> None:
    lab = make_lab(partitions=3, members="ABC")
    frame = lab.trace.to_pandas()
    assert list(frame.columns) == ["step", "time_ms", "actor", "kind", "payload"]
    assert len(frame) == len(lab.trace)
    assert frame["step"].is_monotonic_increasing and frame["time_ms"].is_monotonic_increasing
    assert set(frame["kind"]) <= {k.value for k in EventKind}
    assert json.loads(frame["payload"].iloc[0]) == lab.trace[0].payload


def test_a_message_body_is_summarised_only_when_read() -> None:
    """A run sends far more messages than anyone reads: the event keeps the model, and its
    JSON view is the same whenever it is made."""
    response = ConsumerGroupHeartbeatResponse(member_id="m", member_epoch=2)
    event = TraceEvent(3, 30, "broker-0", MessageSent(7, "broker-0", "m1", "ConsumerGroupHeartbeat", 1, 5, response))
    assert event.body.message is response
    assert event.body.body == {"member_id": "m", "member_epoch": 2}
    assert event.payload["body"] == event.body.body and event.kind is EventKind.MESSAGE_SENT
    saved = TraceEvent.from_dict(json.loads(event.to_json()))
    assert saved == event and saved.body.message == {"member_id": "m", "member_epoch": 2}


# ---------------------------------------------------------------------------- metrics on hand-made traces
def ev(step: int, time_ms: int, actor: str, body: Event) -> TraceEvent:
    return TraceEvent(step, time_ms, actor, body)


def heartbeat(message_id: int, source: str, destination: str) -> MessageSent:
    return MessageSent(message_id, source, destination, "ConsumerGroupHeartbeat", message_id, 5, None)


def lost(message_id: int) -> MessageDropped:
    return MessageDropped(message_id, "A", "broker-0", "ConsumerGroupHeartbeat", message_id, "random loss")


def owns(member: str, owned: tuple, fetching: tuple) -> AssignmentChanged:
    return AssignmentChanged(member, 1, owned=owned, fetching=fetching)


def rec(key_type: str, value: dict[str, Any] | None, **key: Any) -> dict[str, Any]:
    return {"key": {"group_id": "g", **key, "type": key_type}, "value": value}


def tps(*parts: int) -> tuple[tuple[str, int], ...]:
    return tuple(("t", p) for p in parts)


ADD_A = {"action": "add_consumer", "member": "A", "config": {"group_id": "g", "subscribed_topic_names": ["foo"]}}
ADD_B = {"action": "add_consumer", "member": "B", "config": {"group_id": "g", "subscribed_topic_names": ["foo"]}}
JOIN_A = [
    rec("ConsumerGroupMemberMetadataKey", {"group_epoch": 1, "subscribed_topic_names": ["foo"]}, member_id="A"),
    rec(
        "ConsumerGroupPartitionMetadataKey",
        {"epoch": 1, "topics": [{"topic_id": "t", "topic_name": "foo", "num_partitions": 2}]},
    ),
    rec("ConsumerGroupMetadataKey", {"epoch": 1}),
    rec("ConsumerGroupTargetAssignmentMetadataKey", {"assignment_epoch": 1}),
    rec(
        "ConsumerGroupCurrentMemberAssignmentKey",
        {"member_epoch": 1, "topic_partitions": [{"topic_id": "t", "partitions": [0, 1]}]},
        member_id="A",
    ),
]


def hand_made() -> list[TraceEvent]:
    def moved(step: int, t: int, name: str, to: str, frm: str) -> TraceEvent:
        return ev(step, t, name, StateTransition("consumer", frm, to, "x", name, 1))

    return [
        ev(1, 0, "lab", ActionApplied({"action": "create_topic", "topic": "foo", "partitions": 2})),
        ev(2, 0, "lab", ActionApplied(ADD_A)),
        moved(2, 0, "A", "JOINING", "UNSUBSCRIBED"),
        ev(3, 0, "A", heartbeat(1, "A", "broker-0")),
        ev(4, 5, "broker-0", HandlerResult("ConsumerGroupHeartbeat", written=JOIN_A)),
        ev(4, 5, "broker-0", heartbeat(2, "broker-0", "A")),
        moved(5, 10, "A", "RECONCILING", "JOINING"),
        ev(5, 10, "A", owns("A", tps(0, 1), tps(0))),
        moved(6, 20, "A", "ACKNOWLEDGING", "RECONCILING"),
        moved(7, 20, "A", "STABLE", "ACKNOWLEDGING"),
        ev(8, 30, "A", owns("A", tps(0, 1), tps(0, 1))),
        ev(9, 40, "network", lost(3)),
        ev(10, 50, "A", heartbeat(4, "A", "broker-0")),
        ev(11, 60, "network", lost(4)),
        ev(12, 100, "lab", FaultInjected({"action": "delay_messages", "member": "A"})),
        ev(13, 110, "lab", FaultInjected({"action": "crash", "member": "A"})),
        ev(13, 110, "A", owns("A", tps(0, 1), ())),
        ev(14, 120, "lab", ActionApplied(ADD_B)),
        ev(15, 150, "B", CallbackInvoked("on_partitions_revoked", ("foo-0", "foo-1"), 0, None)),
        ev(16, 160, "B", owns("B", tps(0), tps(0))),
        ev(17, 170, "invariants", InvariantViolated("single-owner", "x")),
    ]


def test_metrics_of_a_hand_made_trace() -> None:
    m = compute_metrics(hand_made(), end_ms=200)
    assert [(t["cause"], t["time_ms"], t["time_to_stable_ms"]) for t in m["triggers"]] == [
        ("group g epoch 1", 5, 25),  # stable once A fetches both partitions, at 30
        ("delay_messages A", 100, 0),  # nothing moved
        ("crash A", 110, None),  # A's member is still in the group at the end
    ]
    assert m["max_time_to_stable_ms"] == 25 and m["unsettled_triggers"] == 1 and not m["stable_at_end"]
    # foo-0: 5..10, then 110..160 (B takes it); foo-1: 5..30, then 110..200
    assert m["partition_unavailability_ms"] == {"g": {"foo-0": 5 + 50, "foo-1": 25 + 90}}
    assert m["total_unavailability_ms"] == 170
    assert m["partition_moves"] == 1  # foo-0: A, then B
    assert m["revocations"] == 2
    assert m["heartbeats_sent"] == 3  # two message_sent from A, one dropped as it was sent (not id 4 again)
    assert m["records_written"] == 5
    assert m["invariant_violations"] == 1 and m["invariant_violations_by_name"] == {"single-owner": 1}


def test_metrics_time_to_stable_waits_for_topic_changes_to_be_noticed() -> None:
    added = ev(12, 100, "lab", FaultInjected({"action": "add_partitions", "topic": "foo", "count": 1}))
    trace = [*hand_made()[:11], added]
    m = compute_metrics(trace)
    assert m["triggers"][-1]["time_to_stable_ms"] is None  # the group still has 2 of 3 partitions
    grown = [
        *trace,
        ev(
            13,
            130,
            "broker-0",
            HandlerResult(
                "timer",
                written=[
                    rec(
                        "ConsumerGroupPartitionMetadataKey",
                        {"epoch": 2, "topics": [{"topic_id": "t", "topic_name": "foo", "num_partitions": 3}]},
                    ),
                    rec("ConsumerGroupMetadataKey", {"epoch": 2}),
                    rec("ConsumerGroupTargetAssignmentMetadataKey", {"assignment_epoch": 2}),
                    rec(
                        "ConsumerGroupCurrentMemberAssignmentKey",
                        {"member_epoch": 2, "topic_partitions": [{"topic_id": "t", "partitions": [0, 1, 2]}]},
                        member_id="A",
                    ),
                ],
            ),
        ),
        ev(14, 140, "A", owns("A", tps(0, 1, 2), tps(0, 1, 2))),
    ]
    m = compute_metrics(grown)
    assert [(t["cause"], t["time_to_stable_ms"]) for t in m["triggers"][-2:]] == [
        ("add_partitions foo", 40),
        ("group g epoch 2", 10),
    ]
    assert m["partition_unavailability_ms"]["g"]["foo-2"] == 10  # from the metadata (130) to the fetch (140)


def test_metrics_of_an_empty_trace() -> None:
    m = compute_metrics([])
    assert m["triggers"] == [] and m["max_time_to_stable_ms"] is None and m["stable_at_end"]
    assert m["heartbeats_sent"] == m["records_written"] == m["partition_moves"] == 0


# ---------------------------------------------------------------------------- metrics on real runs
def test_metrics_of_the_member_failure_case_study() -> None:
    lab = make_lab(partitions=6, members="ABC")
    lab.crash("A")
    assert lab.run_until_stable()
    m = compute_metrics(lab.trace)
    crash = next(t for t in m["triggers"] if t["cause"] == "crash A")
    assert crash["stable_time_ms"] == lab.now  # the moment run_until_stable stopped
    assert 40_000 <= crash["time_to_stable_ms"] <= 45_000 + 5_100  # the session times out, one rebalance
    downtime = m["partition_unavailability_ms"]["g"]
    assert all(downtime[f"foo-{p}"] >= 40_000 for p in (0, 1))  # A's partitions waited for the timeout
    assert all(downtime[f"foo-{p}"] < 45_000 for p in (2, 3, 4, 5))
    assert m["stable_at_end"] and m["unsettled_triggers"] == 0
    handled = sum(1 for e in lab.trace.of_type(HandlerResult) if e.body.origin == "ConsumerGroupHeartbeat")
    on_the_wire = [e for e in lab.world.network.in_flight.values() if e.api == "ConsumerGroupHeartbeat"]
    assert m["heartbeats_sent"] == handled + sum(1 for e in on_the_wire if e.source in lab.clients)
    assert m["records_written"] == lab.world.log.end_offset
    revoked = sum(
        len(e.body.partitions) for e in lab.trace.of_type(CallbackInvoked) if e.body.callback == "on_partitions_revoked"
    )
    assert m["revocations"] == revoked == 4  # A gave 3 to B then 1 to C; B gave 1 to C
    assert m["partition_moves"] == 2 + 2 + 2  # to B on its join, to C on its join, A's two on the crash


def test_totals_before_are_the_metrics_of_the_trace_up_to_that_time() -> None:
    lab = make_lab(partitions=6, members="ABC")
    crashed_at = lab.now
    lab.crash("A")
    assert lab.run_until_stable()
    for at_ms in (0, crashed_at, crashed_at + 20_000, lab.now + 1_000):
        prefix = compute_metrics([e for e in lab.trace if e.time_ms < at_ms], end_ms=at_ms)
        whole = compute_metrics(lab.trace, totals_before_ms=at_ms)
        totals = {k: prefix[k] for k in ("total_unavailability_ms", "revocations", "partition_moves")}
        assert whole["totals_before"] == totals, at_ms
        assert {k: v for k, v in whole.items() if k != "totals_before"} == compute_metrics(lab.trace)
    mid_outage = compute_metrics(lab.trace, totals_before_ms=crashed_at + 20_000)["totals_before"]
    assert mid_outage["total_unavailability_ms"] >= 2 * 20_000  # A's two partitions, their windows still open


def test_metrics_see_what_the_lab_sees() -> None:
    """After every step, the trace-derived stability equals ``Lab.is_stable``."""
    lab = faulty_run(11)
    truth: dict[int, bool] = {}
    replay = Lab(seed=11, config=LabConfig(link=LOSSY))
    replay._applied = dict(lab._applied)
    while replay.step_count < lab.step_count:
        replay.step()
        truth[replay.step_count] = replay.is_stable()
    derived = stability_by_step(lab.trace)
    assert {s: derived[s] for s in truth if s in derived} == {s: truth[s] for s in truth if s in derived}
    assert any(truth.values()) and not all(truth.values())


# ---------------------------------------------------------------------------- the benchmark
@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return import_benchmark("bench_lab")


def test_quick_benchmark_runs(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["(a)", "(b)", "(b)", "(b)", "(c)", "seek:"]


def test_benchmark_b_without_auto_commit_is_the_same_group_with_heartbeats_only(bench: ModuleType) -> None:
    """The heartbeats-only row is (b)'s group minus its commits: fewer steps, no OffsetCommit."""
    steps = {}
    for auto_commit in (True, False):
        lab = bench.group(10, 100, enable_auto_commit=auto_commit)
        assert lab.run_until_stable()
        _, _, steps[auto_commit] = bench.bench_steady(lab, 100, 1)
        commits = [e for e in lab.trace.of_type(MessageSent) if e.body.api == "OffsetCommit"]
        assert bool(commits) is auto_commit
    assert 0 < steps[False] < steps[True]


def test_configure_link_gives_one_member_its_own_latency_and_loss():
    lab = make_lab(members="AB")
    start = len(lab.trace)
    lab.configure_link("B", LinkConfig(latency=LatencyModel(kind="fixed", ms=40)))
    lab.run(until=lab.now + 12_000)
    sent = [e.body for e in lab.trace[start:] if isinstance(e.body, MessageSent)]
    latency = {(m.source, m.destination): m.latency_ms for m in sent}
    assert latency[("B", "broker-0")] == latency[("broker-0", "B")] == 40
    assert latency[("A", "broker-0")] == latency[("broker-0", "A")] == 1
    lab.configure_link("A", LinkConfig(drop_probability=1.0))
    mark = len(lab.trace)
    lab.run(until=lab.now + 12_000)
    dropped = [e for e in lab.trace[mark:] if e.kind is EventKind.MESSAGE_DROPPED]
    assert dropped and all(
        e.body.reason == "random loss" and "A" in (e.body.source, e.body.destination) for e in dropped
    )
