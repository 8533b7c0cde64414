"""The typed trace: one event class per kind, saved as JSON and read back as the same class."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from pathlib import Path

import pandas as pd
import pytest

from kip_lab.events import (
    EVENT_TYPES,
    ActionApplied,
    AssignmentChanged,
    CallbackCompleted,
    CallbackInvoked,
    CommitResult,
    Event,
    EventKind,
    FaultInjected,
    HandlerResult,
    InvariantViolated,
    MessageDelivered,
    MessageDropped,
    MessageSent,
    Note,
    PositionSet,
    RecordsProcessed,
    ShareAckResult,
    ShareAcquired,
    ShareStateRpc,
    ShareStateWrite,
    StateTransition,
    TimerFired,
    summarize,
)
from kip_lab.lab import Lab, Trace, TraceEvent
from kip_lab.lab.trace import TraceFileError
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest

HEARTBEAT = ConsumerGroupHeartbeatRequest(group_id="g", member_id="A", member_epoch=1)
RECORD = {"key": {"group_id": "g", "type": "ConsumerGroupMetadataKey"}, "value": {"epoch": 1}}

# One event of every kind, with every optional field both given and left out somewhere.
SAMPLES: list[Event] = [
    MessageSent(1, "A", "broker-0", "ConsumerGroupHeartbeat", 1, 10, HEARTBEAT),
    MessageDelivered(1, "A", "broker-0", "ConsumerGroupHeartbeat", 1),
    MessageDropped(2, "broker-0", "A", "ConsumerGroupHeartbeat", 1, "random loss", {"member_epoch": 1}),
    MessageDropped(3, "A", "broker-0", "ConsumerGroupHeartbeat", 2, "link partitioned"),
    HandlerResult("ConsumerGroupHeartbeat", written=[RECORD]),
    HandlerResult("OffsetCommit", error="UNKNOWN_MEMBER_ID"),
    TimerFired(("session", "g", "A")),
    StateTransition("consumer", "JOINING", "RECONCILING", "heartbeat response", "A", 1),
    StateTransition("classic", "UNJOINED", "PREPARING_REBALANCE", "join", None, -1, generation_id=-1, protocol="eager"),
    CallbackInvoked("on_partitions_revoked", ("foo-0",), 100, None),
    CallbackCompleted("on_partitions_revoked", False),
    AssignmentChanged("A", 2, owned=(("t", 0),), fetching=()),
    AssignmentChanged("A", -1, owned=(), fetching=(), assigned=None, topic_names={}),
    AssignmentChanged("S", 1, share_assigned=(("t", 0), ("t", 1))),
    FaultInjected({"action": "crash", "member": "A"}),
    ActionApplied({"action": "create_topic", "topic": "foo", "partitions": 2, "produce_rate_per_s": 0.0}),
    InvariantViolated("single-owner", "t-0 owned by A and B"),
    Note("rejoin requested: assignment", {"rejoin": "assignment"}),
    ShareAcquired("sg", "S", "t", 0, ((0, 9, 1),), 0, 10),
    ShareStateWrite(
        "sg", "t", 0, "acknowledge", {"state_batches": []}, ((0, 4, "ack", "Acknowledged"),), None, (), 5, 10
    ),
    ShareStateRpc("InitializeShareGroupState", {"group_id": "sg", "topics": []}, None, ({"type": "K", "value": {}},)),
    ShareAckResult(("t", 0), (0, 1, 2), "INVALID_RECORD_STATE", "records were not acquired"),
    PositionSet("g", "A", 0, "t", 0, 120, "committed"),
    PositionSet("g", None, 1, "t", 1, 0, "earliest"),
    RecordsProcessed("g", "A", 0, (("t", 0, 120, 145, "committed"), ("t", 1, 0, 7, "continued"))),
    CommitResult("g", "A", 3, "auto", (("t", 0, 145, None), ("t", 1, 7, "GROUP_ID_NOT_FOUND"))),
    CommitResult("g", None, -1, "revocation", ()),
]


def sample_trace() -> Trace:
    return Trace(TraceEvent(step, step * 10, "actor", body) for step, body in enumerate(SAMPLES, 1))


def test_every_kind_has_one_class_and_a_sample() -> None:
    assert set(EVENT_TYPES) == set(EventKind)
    assert {type(body).kind for body in SAMPLES} == set(EventKind)
    assert all(cls.kind is kind for kind, cls in EVENT_TYPES.items())


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_every_kind_round_trips_as_the_same_class(tmp_path: Path, fmt: str) -> None:
    trace = sample_trace()
    path = tmp_path / f"trace.{fmt}"
    getattr(trace, f"save_{fmt}")(path)
    loaded = getattr(Trace, f"load_{fmt}")(path)
    assert [type(e.body) for e in loaded] == [type(body) for body in SAMPLES]
    assert list(loaded) == list(trace)
    assert loaded.to_jsonl() == trace.to_jsonl()


def test_a_saved_line_is_the_events_payload_under_its_kind() -> None:
    event = TraceEvent(4, 40, "A", StateTransition("consumer", "JOINING", "RECONCILING", "hb", "A", 3))
    assert json.loads(event.to_json()) == {
        "step": 4,
        "time_ms": 40,
        "actor": "A",
        "kind": "state_transition",
        "payload": {"machine": "consumer", "from": "JOINING", "to": "RECONCILING", "trigger": "hb", "member_id": "A"}
        | {"member_epoch": 3},
    }
    assert event.kind is EventKind.STATE_TRANSITION


def test_events_are_equal_when_they_say_the_same_thing() -> None:
    """A message event made in a run (holding the request) equals the one read back (holding its summary)."""
    read_back = MessageSent(1, "A", "b", "X", 1, 5, summarize(HEARTBEAT))
    assert MessageSent(1, "A", "b", "X", 1, 5, HEARTBEAT) == read_back
    assert MessageSent(1, "A", "b", "X", 1, 5, HEARTBEAT) != MessageSent(1, "A", "b", "X", 1, 6, HEARTBEAT)
    assert ActionApplied({"action": "crash", "member": "A"}) != FaultInjected({"action": "crash", "member": "A"})
    assert TraceEvent(1, 0, "A", Note("x")) == TraceEvent(1, 0, "A", Note("x"))
    assert TraceEvent(1, 0, "A", Note("x")) != TraceEvent(2, 0, "A", Note("x"))
    with pytest.raises(TypeError):
        hash(Note("x"))


def test_events_are_immutable_and_copy_and_pickle_to_equal_events() -> None:
    event = TraceEvent(1, 0, "A", SAMPLES[0])
    with pytest.raises(AttributeError):  # a NamedTuple's fields cannot be set
        event.step = 2  # type: ignore[misc]
    for body in SAMPLES:
        field = dataclasses.fields(body)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(body, field, None)
        assert pickle.loads(pickle.dumps(body)) == body
        assert copy.deepcopy(body) == body


def test_of_type_reads_the_events_of_a_class_and_its_subclasses() -> None:
    trace = sample_trace()
    assert [e.body for e in trace.of_type(AssignmentChanged)] == [b for b in SAMPLES if type(b) is AssignmentChanged]
    actions = trace.of_type(ActionApplied)
    assert [type(e.body) for e in actions] == [FaultInjected, ActionApplied]  # a fault is an action
    assert [e.body.name for e in actions] == ["crash", "create_topic"]
    assert len(trace.of_type(MessageSent, MessageDelivered)) == 2


def test_a_run_emits_typed_events_that_read_back_the_same(tmp_path: Path) -> None:
    lab = Lab(seed=3)
    lab.create_topic("foo", 2)
    lab.add_consumer("A", subscribed_topic_names=["foo"])
    lab.add_consumer("B", subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    owned = {e.actor: e.body.owned for e in lab.trace.of_type(AssignmentChanged)}
    assert sorted(tp for tps in owned.values() for tp in tps or ()) == [
        (lab.topic_id("foo"), 0),
        (lab.topic_id("foo"), 1),
    ]
    lab.trace.save_jsonl(tmp_path / "run.jsonl")
    assert list(Trace.load_jsonl(tmp_path / "run.jsonl")) == list(lab.trace)


# ---------------------------------------------------------------------------- bad files
def write_lines(tmp_path: Path, *events: dict) -> Path:
    path = tmp_path / "bad.jsonl"
    good = TraceEvent(1, 0, "A", Note("fine")).to_json()
    path.write_text(good + "\n" + "\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            {"step": 2, "time_ms": 0, "actor": "A", "kind": "assignment_changed", "payload": {"member_epoch": 1}},
            ":2: payload.owned: is missing",
        ),
        (
            {"step": 2, "time_ms": 0, "actor": "A", "kind": "note", "payload": {"text": 3}},
            ":2: payload.text: is 3, not a string",
        ),
        (
            {"step": 2, "time_ms": 0, "actor": "A", "kind": "noted", "payload": {}},
            ":2: kind: 'noted' is not a kind of event",
        ),
        (
            {"step": "2", "time_ms": 0, "actor": "A", "kind": "note", "payload": {"text": ""}},
            ":2: step: is '2', not int",
        ),
        (
            {
                "step": 2,
                "time_ms": 0,
                "actor": "A",
                "kind": "share_acquired",
                "payload": {"group_id": "g", "member_id": "S", "topic_id": "t", "partition": 0, "ranges": [[0, 1]]},
            },
            ":2: payload.ranges: is not a list of 3-item lists",
        ),
        ({"step": 2, "time_ms": 0, "actor": "A", "kind": "note", "payload": []}, ":2: payload: is not an object"),
        (
            {
                "step": 2,
                "time_ms": 0,
                "actor": "A",
                "kind": "position_set",
                "payload": {"group_id": "g", "incarnation": 0, "topic_id": "t", "partition": 0, "offset": 5}
                | {"reason": "guessed"},
            },
            ":2: payload.reason: is 'guessed', not one of committed, earliest, latest, seek, continued, acquired",
        ),
    ],
)
def test_a_bad_saved_event_is_refused_naming_its_line_and_field(tmp_path: Path, line: dict, message: str) -> None:
    path = write_lines(tmp_path, line)
    with pytest.raises(TraceFileError) as caught:
        Trace.load_jsonl(path)
    assert str(caught.value).startswith(f"{path}{message}")
    assert caught.value.line == 2


def test_a_line_that_is_not_json_is_refused_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(TraceEvent(1, 0, "A", Note("fine")).to_json() + "\n{not json\n", encoding="utf-8")
    with pytest.raises(TraceFileError, match=r"bad\.jsonl:2: event: cannot be read"):
        Trace.load_jsonl(path)


def test_a_bad_parquet_row_or_column_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    frame = sample_trace().to_pandas()
    frame.loc[1, "payload"] = json.dumps({"id": 1})
    frame.to_parquet(path, index=False)
    with pytest.raises(TraceFileError, match=r"bad\.parquet:2: payload\.from: is missing"):
        Trace.load_parquet(path)
    pd.DataFrame({"step": [1]}).to_parquet(path, index=False)
    with pytest.raises(TraceFileError, match=r"time_ms: the column is missing"):
        Trace.load_parquet(path)
