"""The new consumer as the Lab runs it: its state machine, heartbeats and reconciliation.

Each test drives real consumers against the real coordinator through the simulated network
and asserts on what the trace says happened (``state_transition`` from/to/trigger,
``message_sent`` bodies, ``callback_invoked``), checked against Kafka's client
(``MemberState``, ``AbstractMembershipManager``, ``AbstractHeartbeatRequestManager``).
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest
from lab_support import make_lab

from kip_lab.clients import CONSUMER_MEMBER_MACHINE, CallbackConfig, MemberState
from kip_lab.coordinator import CoordinatorConfig
from kip_lab.events import CallbackCompleted, CallbackInvoked, MessageDelivered, MessageSent, StateTransition
from kip_lab.lab import Lab, LabConfig
from kip_lab.lab.ledger import build_ledger
from kip_lab.lab.trace import TraceEvent
from kip_lab.machines import IllegalTransition
from kip_lab.protocol import Errors
from kip_lab.protocol.common import TopicPartitions
from kip_lab.protocol.consumer_group import HeartbeatAssignment

FULL_JOIN_FIELDS = {"group_id", "member_id", "member_epoch", "rebalance_timeout_ms", "subscribed_topic_names"}


# ---------------------------------------------------------------------------- helpers


def transitions(lab: Lab, name: str, since: int = 0) -> list[tuple[str, str, str]]:
    return [
        (e.body.from_state, e.body.to_state, e.body.trigger)
        for e in lab.trace.of_type(StateTransition)
        if e.actor == name and e.step > since
    ]


def entered(event: TraceEvent, state: str) -> bool:
    """Whether ``event`` is a state transition into ``state``."""
    return isinstance(event.body, StateTransition) and event.body.to_state == state


def events(lab: Lab, name: str | None = None, kind: str | None = None, since: int = 0) -> list:
    return [
        e
        for e in lab.trace
        if e.step > since and (name is None or e.actor == name) and (kind is None or e.kind.value == kind)
    ]


def heartbeats(lab: Lab, name: str, since: int = 0) -> list:
    """The ConsumerGroupHeartbeat requests ``name`` sent (message_sent events)."""
    return [e for e in events(lab, name, "message_sent", since) if e.body.api == "ConsumerGroupHeartbeat"]


def step_until(lab: Lab, predicate, limit: int = 10_000) -> list:
    """Step until one step's events satisfy ``predicate``; returns those events."""
    for _ in range(limit):
        stepped = lab.step()
        if predicate(stepped):
            return stepped
    raise AssertionError("condition never met")


def sends(name: str, api: str = "ConsumerGroupHeartbeat"):
    return lambda evs: any(e.actor == name and isinstance(e.body, MessageSent) and e.body.api == api for e in evs)


def partitions_of(lab: Lab, name: str) -> list[int]:
    return sorted(p for _, p in lab.clients[name].owned)


def first_index(seq: list, item: Any) -> int:
    assert item in seq, f"{item} not in {seq}"
    return seq.index(item)


# ---------------------------------------------------------------------------- the state table
KAFKA_PREVIOUS_VALID_STATES = {  # MemberState.java, the static block
    "STABLE": {"JOINING", "ACKNOWLEDGING", "RECONCILING"},
    "RECONCILING": {"STABLE", "JOINING", "ACKNOWLEDGING", "RECONCILING"},
    "ACKNOWLEDGING": {"RECONCILING"},
    "FATAL": {"JOINING", "STABLE", "RECONCILING", "ACKNOWLEDGING", "PREPARE_LEAVING", "LEAVING", "UNSUBSCRIBED"},
    "FENCED": {"JOINING", "STABLE", "RECONCILING", "ACKNOWLEDGING", "PREPARE_LEAVING", "LEAVING"},
    "JOINING": {"FENCED", "UNSUBSCRIBED", "STALE"},
    "PREPARE_LEAVING": {"JOINING", "STABLE", "RECONCILING", "ACKNOWLEDGING", "UNSUBSCRIBED"},
    "LEAVING": {"PREPARE_LEAVING"},
    "UNSUBSCRIBED": {"PREPARE_LEAVING", "LEAVING", "FENCED"},
    "STALE": {"LEAVING"},
}


def test_state_table_is_kafkas_member_state_table() -> None:
    declared: dict[str, set[str]] = {}
    for t in CONSUMER_MEMBER_MACHINE.transitions:
        declared.setdefault(t.target, set()).add(t.source)
    assert declared == KAFKA_PREVIOUS_VALID_STATES
    assert CONSUMER_MEMBER_MACHINE.initial == "UNSUBSCRIBED"


def test_an_illegal_transition_raises_and_changes_nothing() -> None:
    """Kafka ``MemberState.getPreviousValidStates``: a transition outside the table is refused and the member stays as
    it was."""
    with pytest.raises(IllegalTransition):
        CONSUMER_MEMBER_MACHINE.require("UNSUBSCRIBED", "acknowledgement sent", "STABLE")
    with pytest.raises(IllegalTransition):  # a declared trigger, but it leads elsewhere
        CONSUMER_MEMBER_MACHINE.require("RECONCILING", "reconciled", "STABLE")
    lab = make_lab(members="A")
    client = lab.clients["A"]
    assert client.state is MemberState.STABLE
    with pytest.raises(IllegalTransition):
        client._transition(MemberState.ACKNOWLEDGING, "reconciled")
    with pytest.raises(IllegalTransition):
        client._transition(MemberState.STALE, "poll")
    assert client.state is MemberState.STABLE
    assert not lab.world.events  # nothing was traced for the refused moves


# ---------------------------------------------------------------------------- joining
def test_first_member_joins_reconciles_acknowledges() -> None:
    """Kafka ``AbstractMembershipManager.processAssignmentReceived``, ``maybeReconcile``: JOINING, RECONCILING,
    ACKNOWLEDGING, STABLE (docs/decisions.md N5)."""
    lab = make_lab(partitions=1, members="A")
    assert transitions(lab, "A") == [
        ("UNSUBSCRIBED", "JOINING", "subscribe"),
        ("JOINING", "RECONCILING", "joined with an assignment"),
        ("RECONCILING", "ACKNOWLEDGING", "reconciled"),
        ("ACKNOWLEDGING", "STABLE", "acknowledgement sent"),
    ]
    assert partitions_of(lab, "A") == [0]
    assert lab.clients["A"].member_epoch == lab.coordinator.groups["g"].group_epoch == 1


def test_join_answered_with_an_empty_assignment_reconciles_it_once() -> None:
    """Kafka ``AbstractMembershipManager.processAssignmentReceived`` and ``revokeAndAssign``: the first
    assignment after a join is reconciled even when empty, calling on_partitions_assigned([]) once."""
    lab = make_lab(partitions=1, members="A")
    lab.add_consumer("B", subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    assert transitions(lab, "B") == [
        ("UNSUBSCRIBED", "JOINING", "subscribe"),
        ("JOINING", "RECONCILING", "joined with an assignment"),
        ("RECONCILING", "ACKNOWLEDGING", "reconciled"),
        ("ACKNOWLEDGING", "STABLE", "acknowledgement sent"),
    ]
    assert partitions_of(lab, "B") == []
    callbacks = [(e.body.callback, list(e.body.partitions)) for e in events(lab, "B", "callback_invoked")]
    assert callbacks == [("on_partitions_assigned", [])]
    lab.run(until=lab.now + 30_000)  # later heartbeats bring nothing new: no more callbacks
    assert len(events(lab, "B", "callback_invoked")) == 1


def test_stable_member_reconciles_a_new_assignment() -> None:
    """Kafka ``AbstractMembershipManager.maybeReconcile``, ``revokeAndAssign``: a new assignment is reconciled and
    acknowledged."""
    lab = make_lab()
    since = lab.step_count
    lab.add_consumer("C", subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    assert transitions(lab, "A", since) == [
        ("STABLE", "RECONCILING", "new assignment"),
        ("RECONCILING", "ACKNOWLEDGING", "reconciled"),
        ("ACKNOWLEDGING", "STABLE", "acknowledgement sent"),
    ]
    assert [partitions_of(lab, n) for n in "ABC"] == [[0, 1], [3, 4], [2, 5]]


# ---------------------------------------------------------------------------- fencing
def fence_by_partition(lab: Lab, name: str = "A", down_ms: int = 50_000) -> int:
    """Cut ``name`` off past the session timeout; returns the step of the cut."""
    since = lab.step_count
    lab.partition_link(name, down_ms)
    lab.run(until=lab.now + down_ms + 20_000)
    return since


def test_fenced_member_runs_on_partitions_lost_then_rejoins_with_epoch_zero() -> None:
    """Kafka ``AbstractMembershipManager.transitionToFenced``: ``onPartitionsLost`` for everything owned, then a rejoin
    at epoch 0 with the same member id."""
    lab = make_lab()
    owned = partitions_of(lab, "A")
    since = fence_by_partition(lab)
    moves = transitions(lab, "A", since)
    assert moves[:2] == [("STABLE", "FENCED", "fenced"), ("FENCED", "JOINING", "partitions lost, rejoin")]
    fenced = next(e for e in events(lab, "A", "state_transition", since) if e.body.to_state == "FENCED")
    rejoined = next(e for e in events(lab, "A", "state_transition", since) if e.body.to_state == "JOINING")
    lost = [e for e in events(lab, "A", "callback_invoked", since) if e.body.callback == "on_partitions_lost"]
    assert [list(e.body.partitions) for e in lost] == [[f"foo-{p}" for p in owned]]
    assert fenced.step <= lost[0].step < rejoined.step  # the rejoin waits for the callback
    assert not [e for e in events(lab, "A", "callback_invoked", since) if e.body.callback == "on_partitions_revoked"]
    rejoin = next(h for h in heartbeats(lab, "A", rejoined.step - 1))
    assert rejoin.body.body["member_epoch"] == 0
    assert rejoin.body.body["member_id"] == "A"  # same member id
    assert set(rejoin.body.body) >= FULL_JOIN_FIELDS
    assert lab.run_until_stable()
    assert sorted(partitions_of(lab, "A") + partitions_of(lab, "B")) == list(range(6))


# ---------------------------------------------------------------------------- leaving
def test_close_prepares_leaving_releases_then_leaves_with_epoch_minus_one() -> None:
    """Kafka ``AbstractMembershipManager.leaveGroup``, ``transitionToSendingLeaveGroup``: PREPARE_LEAVING, LEAVING with
    epoch -1, UNSUBSCRIBED."""
    lab = make_lab()
    since = lab.step_count
    lab.close("A")
    lab.run(until=lab.now + 100)
    assert transitions(lab, "A", since) == [
        ("STABLE", "PREPARE_LEAVING", "unsubscribe or close"),
        ("PREPARE_LEAVING", "LEAVING", "partitions released"),
        ("LEAVING", "UNSUBSCRIBED", "leave heartbeat sent"),
    ]
    a_events = events(lab, "A", since=since)
    commit = next(e for e in a_events if e.kind.value == "message_sent" and e.body.api == "OffsetCommit")
    revoke = next(e for e in a_events if e.kind.value == "callback_invoked")
    leaving = next(e for e in a_events if e.kind.value == "state_transition" and e.body.to_state == "LEAVING")
    leave = next(h for h in heartbeats(lab, "A", since) if h.body.body["member_epoch"] < 0)
    assert revoke.body.callback == "on_partitions_revoked"
    assert list(revoke.body.partitions) == ["foo-0", "foo-1", "foo-2"]
    assert commit.step < revoke.step < leaving.step < leave.step
    assert heartbeats(lab, "A", since)[-1].body.body == {"group_id": "g", "member_id": "A", "member_epoch": -1}
    assert "A" not in lab.coordinator.groups["g"].members  # gone at once, no session timeout
    assert lab.clients["A"].owned == set() and lab.clients["A"].fetching == {}
    assert lab.run_until_stable()
    assert partitions_of(lab, "B") == list(range(6))


def test_static_member_leaves_with_epoch_minus_two_and_keeps_its_place() -> None:
    """Kafka ``AbstractMembershipManager.transitionToSendingLeaveGroup``: a static member leaves with epoch -2 and the
    coordinator keeps its assignment."""
    lab = Lab(seed=0)
    lab.create_topic("foo", 4)
    lab.add_consumer("A", subscribed_topic_names=["foo"], instance_id="a-1")
    lab.add_consumer("B", subscribed_topic_names=["foo"], instance_id="b-1")
    assert lab.run_until_stable()
    since = lab.step_count
    lab.close("A")
    lab.run(until=lab.now + 100)
    body = heartbeats(lab, "A", since)[-1].body.body
    assert body["member_epoch"] == -2 and body["instance_id"] == "a-1"
    group = lab.coordinator.groups["g"]
    assert "A" in group.members  # a static member's temporary leave keeps its assignment
    assert group.group_epoch == 2


def test_close_is_a_no_op_when_already_leaving() -> None:
    """Kafka ``AbstractMembershipManager.leaveGroup``: a member already leaving ignores another close."""
    lab = make_lab(callbacks=CallbackConfig(on_partitions_revoked_ms=500))
    lab.close("A")
    lab.close("A")  # Kafka's leaveGroup: already leaving, nothing more
    lab.run(until=lab.now + 1_000)
    assert [t[1] for t in transitions(lab, "A")].count("PREPARE_LEAVING") == 1
    assert lab.clients["A"].state is MemberState.UNSUBSCRIBED


def test_leave_heartbeat_does_not_wait_for_a_heartbeat_in_flight() -> None:
    """Kafka ``AbstractHeartbeatRequestManager.poll``: the leave heartbeat goes out at once, even with a heartbeat in
    flight."""
    lab = make_lab(enable_auto_commit=False)
    lab.delay_messages("A", 1, 2_000)
    step_until(lab, sends("A"))  # A's regular heartbeat is now 2 s in flight
    sent_at = lab.now
    lab.close("A")
    lab.run(until=lab.now + 3_000)
    leave = heartbeats(lab, "A")[-1]
    assert leave.body.body["member_epoch"] == -1
    assert leave.time_ms == sent_at  # Kafka: a LEAVING member heartbeats at once, in flight or not
    assert lab.clients["A"].state is MemberState.UNSUBSCRIBED


def test_graceful_close_commits_exactly_what_was_processed() -> None:
    """No record is processed after close() begins, so the next owner starts where A stopped."""
    lab = make_lab(callbacks=CallbackConfig(on_partitions_revoked_ms=1_000))
    lab.run(until=lab.now + 2_000)
    lab.close("A")
    lab.run(until=lab.now + 12_000)
    assert lab.run_until_stable()
    lab.crash("B")  # B stops: what it processed is counted
    totals = build_ledger(lab.trace).totals()
    assert totals["records_reprocessed"] == 0 and totals["records_skipped"] == 0
    assert totals["records_processed"] > 0


# ---------------------------------------------------------------------------- poll timeout (STALE)
def test_poll_timeout_leaves_goes_stale_and_rejoins_on_resume() -> None:
    """Kafka ``AbstractMembershipManager.transitionToStale``: past ``max.poll.interval.ms`` the member leaves without
    callbacks, goes STALE and rejoins at its next poll."""
    lab = make_lab(max_poll_interval_ms=20_000)
    owned = partitions_of(lab, "A")
    since = lab.step_count
    lab.pause("A")
    lab.run(until=lab.now + 25_000)
    assert transitions(lab, "A", since) == [
        ("STABLE", "PREPARE_LEAVING", "poll timer expired"),
        ("PREPARE_LEAVING", "LEAVING", "partitions released"),
        ("LEAVING", "STALE", "leave heartbeat sent after poll timeout"),
    ]
    assert heartbeats(lab, "A", since)[-1].body.body["member_epoch"] == -1
    assert not events(lab, "A", "callback_invoked", since)  # on_partitions_lost waits for the application
    assert "A" not in lab.coordinator.groups["g"].members
    assert lab.run_until_stable()
    assert partitions_of(lab, "B") == list(range(6))

    resumed = lab.step_count
    lab.resume("A")
    lab.run(until=lab.now + 1)
    lost = events(lab, "A", "callback_invoked", resumed)
    assert [(e.body.callback, list(e.body.partitions)) for e in lost] == [
        ("on_partitions_lost", [f"foo-{p}" for p in owned])
    ]
    completed = events(lab, "A", "callback_completed", resumed)[0]
    joining = next(e for e in events(lab, "A", "state_transition", resumed) if e.body.to_state == "JOINING")
    assert joining.body.from_state == "STALE" and joining.body.trigger == "poll"
    assert completed.step <= joining.step
    assert lab.run_until_stable()
    assert sorted(partitions_of(lab, "A") + partitions_of(lab, "B")) == list(range(6))
    assert partitions_of(lab, "A")


def test_paused_member_processes_nothing_so_commits_stand_still() -> None:
    """Kafka ``CommitRequestManager.maybeAutoCommitAsync``: a paused member consumes nothing, so its auto-commits carry
    the same offsets."""
    lab = make_lab(members="A", partitions=1, auto_commit_interval_ms=1_000)
    lab.run(until=lab.now + 3_000)
    lab.pause("A")
    paused_at = lab.step_count
    lab.run(until=lab.now + 5_000)
    commits = [
        e.body.body["topics"][0]["partitions"][0]["committed_offset"]
        for e in events(lab, "A", "message_sent", paused_at)
        if e.body.api == "OffsetCommit"
    ]
    assert len(commits) >= 4 and len(set(commits)) == 1
    lab.resume("A")
    lab.run(until=lab.now + 2_000)
    assert lab.clients["A"].committed[next(iter(lab.clients["A"].owned))] > commits[0]


def test_a_commit_the_coordinator_refuses_is_not_recorded_and_reconciliation_goes_on(monkeypatch) -> None:
    """A commit answered with an error (here STALE_MEMBER_EPOCH for every commit of A) leaves what A
    knows it committed as it was; A keeps its member, and a rebalance that makes A revoke still
    completes: Kafka reconciles whatever the commit's outcome."""
    from kip_lab.coordinator.offsets import OffsetManager
    from kip_lab.protocol.errors import ApiError

    lab = make_lab(members="AB", auto_commit_interval_ms=1_000)
    lab.run(until=lab.now + 2_000)
    a, b = lab.clients["A"], lab.clients["B"]
    checked = OffsetManager._validate_commit

    def refusing_a(self, request):
        if request.member_id == a.member_id:
            raise ApiError(Errors.STALE_MEMBER_EPOCH, "refused for the test")
        return checked(self, request)

    monkeypatch.setattr(OffsetManager, "_validate_commit", refusing_a)
    a_committed, b_committed = dict(a.committed), dict(b.committed)
    since = lab.step_count
    lab.run(until=lab.now + 3_000)
    answers = [e for e in events(lab, "A", "message_delivered", since) if e.body.api == "OffsetCommit"]
    assert len(answers) >= 2
    assert a.committed == a_committed and b.committed != b_committed
    lab.add_consumer("C", subscribed_topic_names=["foo"])  # A and B each give C a partition
    assert lab.run_until_stable()
    assert a.committed == a_committed and partitions_of(lab, "C") and len(partitions_of(lab, "A")) == 2


# ---------------------------------------------------------------------------- FATAL
def test_two_static_members_with_one_instance_id_the_second_is_fatal() -> None:
    """Kafka ``AbstractMembershipManager.transitionToFatal`` on UNRELEASED_INSTANCE_ID: the second static member with
    one instance id fails (docs/rules.md SM5)."""
    lab = Lab(seed=0)
    lab.create_topic("foo", 2)
    lab.add_consumer("A", subscribed_topic_names=["foo"], instance_id="shared")
    assert lab.run_until_stable()
    lab.add_consumer("B", subscribed_topic_names=["foo"], instance_id="shared")
    lab.run(until=lab.now + 20_000)
    assert transitions(lab, "B") == [("UNSUBSCRIBED", "JOINING", "subscribe"), ("JOINING", "FATAL", "fatal error")]
    notes = [e.body.text for e in events(lab, "B", "note")]
    assert any("UNRELEASED_INSTANCE_ID" in text for text in notes)
    assert len(heartbeats(lab, "B")) == 1  # FATAL is absorbing: no more requests
    assert partitions_of(lab, "A") == [0, 1]
    assert lab.clients["A"].state is MemberState.STABLE


# ---------------------------------------------------------------------------- the heartbeat manager
def test_first_heartbeat_is_full_with_epoch_zero_later_ones_carry_only_changes() -> None:
    """Kafka ``ConsumerHeartbeatRequestManager`` (``HeartbeatState.buildRequestData``): the join carries every field,
    later heartbeats only what changed."""
    lab = make_lab(members="A", rack_id="rack-1", server_assignor="uniform")
    hbs = [h.body.body for h in heartbeats(lab, "A")]
    assert hbs[0] == {
        "group_id": "g",
        "member_id": "A",
        "member_epoch": 0,
        "rack_id": "rack-1",
        "rebalance_timeout_ms": 300_000,
        "subscribed_topic_names": ["foo"],
        "server_assignor": "uniform",
        "topic_partitions": [],
    }
    ack = hbs[1]  # after reconciling: the owned partitions changed, nothing else did
    assert set(ack) == {"group_id", "member_id", "member_epoch", "topic_partitions"}
    assert ack["member_epoch"] == 1
    assert ack["topic_partitions"][0]["partitions"] == list(range(6))
    lab.run(until=lab.now + 20_000)
    steady = [h.body.body for h in heartbeats(lab, "A")][2:]
    assert len(steady) >= 3
    assert all(body == {"group_id": "g", "member_id": "A", "member_epoch": 1} for body in steady)


def test_changed_subscription_is_sent_alone_with_the_next_heartbeat() -> None:
    """Kafka ``AbstractMembershipManager.onSubscriptionUpdated``: a member already in the group sends its new
    subscription in its next heartbeat, at the usual interval, carrying only the changed field."""
    lab = make_lab(members="A")
    lab.create_topic("bar", 2)
    lab.run(until=lab.now + 100)  # no heartbeat in flight
    last = heartbeats(lab, "A")[-1].time_ms
    since = lab.step_count
    lab.change_subscription("A", topics=["foo", "bar"])
    step_until(lab, sends("A"))
    first = heartbeats(lab, "A", since)[0]
    assert first.time_ms == last + 5_002  # not at once: the interval after the last response (1 ms each way)
    assert first.body.body == {
        "group_id": "g",
        "member_id": "A",
        "member_epoch": 1,
        "subscribed_topic_names": ["foo", "bar"],
    }
    assert lab.run_until_stable()
    assert len(lab.clients["A"].owned) == 8


def test_acknowledgement_heartbeat_goes_out_at_once() -> None:
    """Kafka ``AbstractMembershipManager.onHeartbeatRequestSkipped`` / ``AbstractHeartbeatRequestManager.poll``:
    ACKNOWLEDGING sends its heartbeat at once."""
    lab = make_lab()
    since = lab.step_count
    lab.add_consumer("C", subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    for name in "ABC":
        reconciled = [e for e in events(lab, name, "state_transition", since) if e.body.to_state == "ACKNOWLEDGING"]
        assert reconciled
        for event in reconciled:
            ack = next(h for h in heartbeats(lab, name, event.step - 1) if h.step >= event.step)
            assert ack.time_ms == event.time_ms  # not after the 5 s interval
            assert "topic_partitions" in ack.body.body


def test_heartbeat_interval_comes_from_the_coordinator() -> None:
    """Kafka ``AbstractHeartbeatRequestManager.onResponse``: the interval is the one the coordinator answers with."""
    config = LabConfig(coordinator=CoordinatorConfig(heartbeat_interval_ms=7_000))
    lab = make_lab(members="A", config=config)
    assert lab.clients["A"].heartbeat_interval_ms == 7_000
    lab.run(until=lab.now + 40_000)
    times = [h.time_ms for h in heartbeats(lab, "A")][2:]
    gaps = {b - a for a, b in itertools.pairwise(times)}
    assert gaps == {7_002}  # the interval after each response (1 ms each way)


def test_not_coordinator_during_a_failover_backs_off_then_finds_the_new_one() -> None:
    """Kafka ``CoordinatorRequestManager``, ``AbstractHeartbeatRequestManager.onErrorResponse``: NOT_COORDINATOR backs
    off, then the new coordinator is used."""
    lab = make_lab(members="A", enable_auto_commit=False, retry_backoff_ms=150)
    lab.delay_messages("A", 1, 50)
    step_until(lab, sends("A"))
    lab.fail_over()  # broker-0 stops hosting the group while A's heartbeat is on its way there
    assert lab.world.coordinator_host == "broker-1"
    since = lab.step_count
    lab.run(until=lab.now + 1_000)
    answer = next(e for e in events(lab, "broker-0", "message_sent", since) if e.body.api == "ConsumerGroupHeartbeat")
    assert answer.body.body["error_code"] == Errors.NOT_COORDINATOR
    delivered = next(e for e in events(lab, "A", "message_delivered", since) if e.body.id == answer.body.id)
    retry = heartbeats(lab, "A", since)[0]
    assert retry.body.destination == "broker-1"
    assert retry.time_ms == delivered.time_ms + 150  # backoff, then the coordinator is looked up again
    assert FULL_JOIN_FIELDS - {"member_epoch"} <= set(retry.body.body)  # a full request after an error
    assert retry.body.body["member_epoch"] == 1
    assert lab.run_until_stable()
    assert lab.clients["A"].state is MemberState.STABLE


def test_lost_response_times_out_and_the_retry_is_a_full_request() -> None:
    """Kafka ``AbstractHeartbeatRequestManager.onFailure``, ``HeartbeatState.reset``: a timed-out heartbeat is retried
    as a full request."""
    lab = make_lab(members="A", enable_auto_commit=False, request_timeout_ms=3_000)
    lab.run(until=lab.now + 4_000)
    sent = step_until(lab, sends("A"))
    request = next(e for e in sent if e.kind.value == "message_sent")
    lab.drop_messages("A", 1)  # the next message on the link: the coordinator's answer
    lab.run(until=request.time_ms + 3_500)
    dropped = events(lab, None, "message_dropped", request.step)
    assert [(d.body.source, d.body.api) for d in dropped] == [("broker-0", "ConsumerGroupHeartbeat")]
    timeout = [e for e in events(lab, "A", "note", request.step) if "timed out" in e.body.text]
    assert [e.time_ms for e in timeout] == [request.time_ms + 3_000]
    retry = heartbeats(lab, "A", request.step)[0]
    assert retry.time_ms == request.time_ms + 3_000 + 100
    assert {"rebalance_timeout_ms", "subscribed_topic_names", "topic_partitions"} <= set(retry.body.body)
    assert lab.clients["A"].state is MemberState.STABLE


def test_lost_offset_fetch_is_retried_until_the_partition_is_fetched() -> None:
    """Kafka ``CommitRequestManager.fetchOffsets`` (retried after the backoff): a lost OffsetFetch is sent again."""
    lab = Lab(seed=0)
    lab.create_topic("foo", 2)
    lab.add_consumer("A", subscribed_topic_names=["foo"], request_timeout_ms=2_000)
    step_until(lab, lambda evs: any(e.kind.value == "callback_invoked" for e in evs))
    lab.drop_messages("A", 1)  # the next message: the OffsetFetch for the new partitions
    lab.run(until=lab.now + 3_000)
    fetches = [e for e in events(lab, "A", "message_sent") if e.body.api == "OffsetFetch"]
    dropped = [e for e in events(lab, None, "message_dropped") if e.body.api == "OffsetFetch"]
    assert len(dropped) == 1 and len(fetches) == 1
    assert fetches[0].time_ms == dropped[0].time_ms + 2_000 + 100  # the request timeout, then the backoff
    assert lab.run_until_stable()
    assert set(lab.clients["A"].fetching) == lab.clients["A"].owned and len(lab.clients["A"].owned) == 2


# ---------------------------------------------------------------------------- reconciliation order
def test_commit_and_revocation_finish_before_anyone_is_assigned_the_partition() -> None:
    """Kafka ``AbstractMembershipManager.revokeAndAssign`` (``ConsumerMembershipManager.signalReconciliationStarted``
    commits first): commit and revoke before the new owner gets the partition."""
    lab = make_lab(auto_commit_interval_ms=60_000)
    since = lab.step_count
    lab.add_consumer("C", subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    a_events = events(lab, "A", since=since)
    commit = next(e for e in a_events if e.kind.value == "message_sent" and e.body.api == "OffsetCommit")
    committed = next(
        e
        for e in a_events
        if e.kind.value == "message_delivered"
        and e.body.correlation_id == commit.body.correlation_id
        and e.body.api == "OffsetCommit"
    )
    revoke = next(e for e in a_events if e.kind.value == "callback_invoked")
    revoked = next(e for e in a_events if e.kind.value == "callback_completed")
    assert revoke.body == CallbackInvoked(
        callback="on_partitions_revoked", partitions=("foo-2",), duration_ms=0, error=None
    )
    assert commit.step < committed.step <= revoke.step < revoked.step  # commit, then revoke
    assigned = {
        p: next(e for e in events(lab, "C", "callback_invoked", since) if p in e.body.partitions)
        for p in ("foo-2", "foo-5")
    }
    assert all(e.body.callback == "on_partitions_assigned" for e in assigned.values())
    assert revoked.step < assigned["foo-2"].step  # the coordinator waited for A's acknowledgement
    b_revoke = next(e for e in events(lab, "B", "callback_invoked", since))
    b_revoked = next(e for e in events(lab, "B", "callback_completed", since))
    assert list(b_revoke.body.partitions) == ["foo-5"]
    assert b_revoked.step < assigned["foo-5"].step
    assert sorted(partitions_of(lab, "C")) == [2, 5]


def forge_next_assignment(lab: Lab, monkeypatch: pytest.MonkeyPatch, member: str, partitions: list[int]) -> None:
    """Make the coordinator's next successful answer to ``member`` carry this assignment."""
    coordinator = lab.coordinator
    original = coordinator.consumer_group_heartbeat
    topic_id = lab.topic_id("foo")
    armed = [True]

    def forged(request):
        result = original(request)
        if armed[0] and request.member_id == member and result.response.error_code is Errors.NONE:
            armed[0] = False
            assignment = HeartbeatAssignment(
                assigned_topic_partitions=[TopicPartitions(topic_id=topic_id, partitions=partitions)]
            )
            result = replace(result, response=result.response.model_copy(update={"assignment": assignment}))
        return result

    monkeypatch.setattr(coordinator, "consumer_group_heartbeat", forged)


def test_one_reconciliation_revokes_then_assigns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target that both takes (foo-0) and gives (foo-2): commit, revoke, then assign."""
    lab = make_lab(partitions=4, callbacks=CallbackConfig(on_partitions_revoked_ms=300))
    assert partitions_of(lab, "A") == [0, 1]
    forge_next_assignment(lab, monkeypatch, "A", [1, 2])
    since = lab.step_count
    step_until(lab, lambda evs: any(e.actor == "A" and entered(e, "ACKNOWLEDGING") for e in evs))

    def row(e: TraceEvent) -> tuple[str, str, list[str] | None]:
        """(kind, callback or API, the partitions a callback is invoked with)."""
        if isinstance(e.body, CallbackInvoked):
            return (e.kind.value, e.body.callback, list(e.body.partitions))
        if isinstance(e.body, CallbackCompleted):
            return (e.kind.value, e.body.callback, None)
        return (e.kind.value, e.body.api, None)

    order = [
        row(e)
        for e in events(lab, "A", since=since)
        if isinstance(e.body, (CallbackInvoked, CallbackCompleted))
        or (isinstance(e.body, (MessageSent, MessageDelivered)) and e.body.api == "OffsetCommit")
    ]
    assert order == [
        ("message_sent", "OffsetCommit", None),
        ("message_delivered", "OffsetCommit", None),
        ("callback_invoked", "on_partitions_revoked", ["foo-0"]),
        ("callback_completed", "on_partitions_revoked", None),
        ("callback_invoked", "on_partitions_assigned", ["foo-2"]),
        ("callback_completed", "on_partitions_assigned", None),
    ]
    revoked = next(e for e in events(lab, "A", "callback_completed", since))
    invoked = next(e for e in events(lab, "A", "callback_invoked", since))
    assert revoked.time_ms - invoked.time_ms == 300
    assert partitions_of(lab, "A") == [1, 2]


def test_a_position_that_arrives_while_its_partition_is_being_revoked_is_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka ``AbstractMembershipManager.markPendingRevocationToPauseFetching`` (``SubscriptionState.isFetchable``
    is false for a partition pending revocation) and ``ConsumerUtils.refreshCommittedOffsets`` (positions only for
    assigned partitions): an OffsetFetch answer for a partition being revoked does not start fetching it."""
    lab = make_lab(partitions=4, callbacks=CallbackConfig(on_partitions_revoked_ms=2_000))
    assert partitions_of(lab, "A") == [0, 1]
    forge_next_assignment(lab, monkeypatch, "A", [0, 1, 2])
    step_until(
        lab,
        lambda evs: any(
            e.actor == "A" and isinstance(e.body, CallbackInvoked) and e.body.partitions == ("foo-2",) for e in evs
        ),
    )
    lab.delay_messages("A", 1, 1_000)  # the OffsetFetch for foo-2, about to go out
    forge_next_assignment(lab, monkeypatch, "A", [0, 1])  # the acknowledgement's answer takes foo-2 back
    since = lab.step_count
    lab.run(until=lab.now + 5_000)
    fetch = next(
        e
        for e in events(lab, "A", "message_delivered", since)
        if e.body.api == "OffsetFetch" and e.body.destination == "A"
    )
    revoke = next(e for e in events(lab, "A", "callback_invoked", since) if e.body.callback == "on_partitions_revoked")
    revoked = next(
        e for e in events(lab, "A", "callback_completed", since) if e.body.callback == "on_partitions_revoked"
    )
    assert list(revoke.body.partitions) == ["foo-2"]
    assert revoke.step < fetch.step < revoked.step  # the position arrived during the revocation
    a = lab.clients["A"]
    assert partitions_of(lab, "A") == [0, 1]
    assert set(a.fetching) == a.owned  # foo-2 never started fetching


def test_slow_revoke_callback_delays_the_acknowledgement() -> None:
    """Kafka ``ConsumerMembershipManager.invokeOnPartitionsRevokedCallback``: the acknowledgement waits for the
    revocation callback."""

    def run(revoke_ms: int) -> tuple[Lab, int]:
        lab = make_lab(callbacks=CallbackConfig(on_partitions_revoked_ms=revoke_ms))
        since = lab.step_count
        lab.add_consumer("C", subscribed_topic_names=["foo"])
        assert lab.run_until_stable()
        return lab, since

    slow, since = run(2_000)
    invoked = next(e for e in events(slow, "A", "callback_invoked", since))
    completed = next(e for e in events(slow, "A", "callback_completed", since))
    assert completed.time_ms - invoked.time_ms == 2_000
    # on_partitions_assigned (nothing added) is asked for when the revocation returns, and runs at A's next poll()
    assigned = next(
        e for e in events(slow, "A", "callback_completed", since) if e.body.callback == "on_partitions_assigned"
    )
    gap = slow.clients["A"].config.time_between_polls_ms
    assert assigned.time_ms == completed.time_ms + gap
    acked = next(e for e in events(slow, "A", "state_transition", since) if e.body.to_state == "ACKNOWLEDGING")
    ack = next(h for h in heartbeats(slow, "A", acked.step - 1) if h.step >= acked.step)
    assert acked.time_ms == ack.time_ms == assigned.time_ms
    c_assigned = next(e for e in events(slow, "C", "callback_invoked", since) if "foo-2" in e.body.partitions)
    assert c_assigned.time_ms > ack.time_ms  # C got foo-2 only after A let go of it
    fast, fast_since = run(0)

    def reconcile_ms(lab: Lab, since: int) -> int:
        moves = events(lab, "A", "state_transition", since)
        start = next(e for e in moves if e.body.to_state == "RECONCILING")
        done = next(e for e in moves if e.body.to_state == "ACKNOWLEDGING")
        return done.time_ms - start.time_ms

    assert reconcile_ms(slow, since) - reconcile_ms(fast, fast_since) == 2_000


def test_failing_revoke_callback_stays_reconciling_until_the_rebalance_timeout() -> None:
    """Kafka ``AbstractMembershipManager.revokeAndAssign``: a failing callback leaves the member RECONCILING; the
    coordinator's rebalance timeout removes it."""
    lab = make_lab(members="A", max_poll_interval_ms=30_000, callbacks=CallbackConfig(revoked_failures=1_000))
    since = lab.step_count
    lab.add_consumer("B", subscribed_topic_names=["foo"], max_poll_interval_ms=30_000)
    lab.run(until=lab.now + 45_000)
    failures = [e for e in events(lab, "A", "callback_invoked", since) if e.body.error]
    assert failures and all(e.body.callback == "on_partitions_revoked" for e in failures)
    assert failures[0].body.error.startswith("RuntimeError: on_partitions_revoked failed")
    removed = next(
        e for e in events(lab, "broker-0", "handler_result", since) if e.body.origin == "rebalance timeout A"
    )
    moves = transitions(lab, "A", since)
    assert moves[0] == ("STABLE", "RECONCILING", "new assignment")
    fenced = first_index(moves, ("RECONCILING", "FENCED", "fenced"))
    assert ("RECONCILING", "ACKNOWLEDGING", "reconciled") not in moves[:fenced]  # never acknowledged
    # The rebalance timeout runs from the new assignment; the callback ran at A's next poll() after it.
    reconciling = next(e for e in events(lab, "A", "state_transition", since) if e.body.to_state == "RECONCILING")
    assert 0 < failures[0].time_ms - reconciling.time_ms <= lab.clients["A"].config.time_between_polls_ms
    assert removed.time_ms - reconciling.time_ms == pytest.approx(30_000, abs=20)
    for h in heartbeats(lab, "A", since):
        if h.step < removed.step:
            assert "topic_partitions" not in h.body.body  # nothing released, nothing acked
    lost = [e for e in events(lab, "A", "callback_invoked", removed.step) if e.body.callback == "on_partitions_lost"]
    assert lost and lost[0].body.partitions == tuple(f"foo-{p}" for p in range(6))


def test_failing_assign_callback_is_retried() -> None:
    """Kafka ``AbstractMembershipManager.revokeAndAssign``: a failing assignment callback is retried on a later
    heartbeat."""
    lab = make_lab(members="A", partitions=2, callbacks=CallbackConfig(assigned_failures=1))
    failed = [e for e in events(lab, "A", "callback_invoked") if e.body.error]
    assert [e.body.callback for e in failed] == ["on_partitions_assigned"]
    assert lab.clients["A"].state is MemberState.STABLE
    assert partitions_of(lab, "A") == [0, 1]


# ---------------------------------------------------------------------------- fencing while leaving
def test_fenced_while_preparing_to_leave_unsubscribes_without_rejoining() -> None:
    """Kafka ``AbstractMembershipManager.transitionToFenced`` from PREPARE_LEAVING: through LEAVING
    (``transitionToSendingLeaveGroup``, which sets the leave epoch -1) to UNSUBSCRIBED, with no leave sent."""
    lab = make_lab(callbacks=CallbackConfig(on_partitions_revoked_ms=1_000))
    lab.partition_link("A", 50_000)
    heal = lab.now + 50_000
    step_until(lab, lambda evs: lab.now > heal and sends("A")(evs))  # A's heartbeat: A is unknown by now
    since = lab.step_count
    lab.close("A")
    lab.run(until=lab.now + 5_000)
    assert transitions(lab, "A", since) == [
        ("STABLE", "PREPARE_LEAVING", "unsubscribe or close"),
        ("PREPARE_LEAVING", "LEAVING", "fenced while leaving"),
        ("LEAVING", "UNSUBSCRIBED", "fenced while leaving"),
    ]
    assert not [e for e in events(lab, "A", "callback_invoked", since) if e.body.callback == "on_partitions_lost"]
    assert all(h.body.body["member_epoch"] >= 0 for h in heartbeats(lab, "A", since))  # no leave sent
    assert lab.clients["A"].owned == set()
    assert lab.clients["A"].member_epoch == -1


def test_close_while_fenced_drops_the_assignment_and_does_not_rejoin() -> None:
    """Kafka ``AbstractMembershipManager.leaveGroup`` from FENCED: straight to UNSUBSCRIBED, no rejoin."""
    lab = make_lab(callbacks=CallbackConfig(on_partitions_lost_ms=3_000))
    lab.partition_link("A", 50_000)
    step_until(lab, lambda evs: any(e.actor == "A" and entered(e, "FENCED") for e in evs), 100_000)
    since = lab.step_count
    lab.close("A")
    lab.run(until=lab.now + 10_000)
    assert transitions(lab, "A", since) == [("FENCED", "UNSUBSCRIBED", "unsubscribed while fenced")]
    assert lab.clients["A"].state is MemberState.UNSUBSCRIBED
    assert heartbeats(lab, "A", since) == []


def _b_joins(lab: Lab) -> tuple[dict[str, int], int]:
    """B joins the group and it settles; when A got its new assignment, ran each callback and acknowledged (the
    first of each after B joined), and the step B joined at."""
    since = lab.step_count
    lab.add_consumer("B", subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    out: dict[str, int] = {}
    for e in events(lab, "A", None, since):
        body = e.body
        if isinstance(body, StateTransition) and body.to_state in ("RECONCILING", "ACKNOWLEDGING"):
            out.setdefault(body.to_state, e.time_ms)
        elif isinstance(body, CallbackInvoked):
            out.setdefault(body.callback, e.time_ms)
    return out, since


def test_callbacks_run_at_the_applications_next_poll_not_in_the_heartbeat_response() -> None:
    """Kafka ``ConsumerMembershipManager.enqueueConsumerRebalanceListenerCallback`` (background thread) and
    ``AsyncKafkaConsumer.processBackgroundEvents`` (application thread, in ``poll()``): the heartbeat response that
    hands A a revocation starts the reconciliation, but ``on_partitions_revoked`` runs at A's next poll, and
    ``on_partitions_assigned``, asked for when the revocation returns, at the poll after that; the acknowledgement
    goes out when it returns."""
    lab = make_lab(members="A", time_between_polls_ms=200)
    times, _ = _b_joins(lab)
    assert times["RECONCILING"] < times["on_partitions_revoked"] <= times["RECONCILING"] + 200
    assert times["on_partitions_assigned"] == times["on_partitions_revoked"] + 200  # the next poll
    assert times["ACKNOWLEDGING"] == times["on_partitions_assigned"]
    # Between the response and the callback A still holds what it is losing: the coordinator has not released it.
    a = lab.clients["A"]
    assert partitions_of(lab, "A") == sorted(p for _, p in a.owned)


def test_callbacks_wait_while_the_application_does_not_poll() -> None:
    """Kafka ``AsyncKafkaConsumer.processBackgroundEvents`` runs only inside ``poll()``: while A's application is
    stuck, the reconciliation waits (A stays RECONCILING, heartbeating), and it goes on when A polls again."""
    lab = make_lab(members="A", max_poll_interval_ms=60_000)
    lab.pause("A")
    since = lab.step_count
    lab.add_consumer("B", subscribed_topic_names=["foo"])
    lab.run(until=lab.now + 20_000)
    a = lab.clients["A"]
    assert a.state is MemberState.RECONCILING
    assert not [e for e in events(lab, "A", "callback_invoked", since)]
    assert [h for h in heartbeats(lab, "A", since)]  # the background thread heartbeats meanwhile
    resumed_at = lab.now
    lab.resume("A")
    assert lab.run_until_stable()
    revoked = next(e for e in events(lab, "A", "callback_invoked", since) if e.body.callback == "on_partitions_revoked")
    assert revoked.time_ms == resumed_at


def test_callbacks_run_at_once_when_the_application_polls_back_to_back() -> None:
    """``time_between_polls_ms=0``: an application always inside ``poll()`` runs each callback as soon as the
    background thread asks for it: the revocation when the commit before it is answered, the assignment and the
    acknowledgement in the same millisecond."""
    lab = make_lab(members="A", time_between_polls_ms=0)
    times, since = _b_joins(lab)
    committed = next(
        e.time_ms
        for e in events(lab, "A", "message_delivered", since)
        if e.body.api == "OffsetCommit" and e.time_ms >= times["RECONCILING"]
    )
    assert committed == times["on_partitions_revoked"] == times["on_partitions_assigned"] == times["ACKNOWLEDGING"]
