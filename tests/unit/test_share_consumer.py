"""The share consumer: acknowledgement modes and batches (pure), and the consumer in the Lab."""

from __future__ import annotations

import pytest

from kip_lab.clients.share_acknowledgements import (
    AcknowledgementMode,
    Acknowledgements,
    DeliveredRecord,
    IllegalAcknowledgement,
    to_batches,
)
from kip_lab.clients.share_consumer import FailureRule
from kip_lab.events import MessageDropped, MessageSent, Note, StateTransition
from kip_lab.protocol.share import AcknowledgementBatch, AcknowledgeType

A, R, J = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


def _records(first: int, last: int, tp=("T", 0), dc: int = 1) -> list[DeliveredRecord]:
    return [DeliveredRecord(tp[0], tp[1], o, dc) for o in range(first, last + 1)]


def test_batches_one_per_contiguous_run_one_type_when_uniform():
    assert to_batches([(3, A), (0, A), (1, A), (2, A)]) == [
        AcknowledgementBatch(first_offset=0, last_offset=3, acknowledge_types=[A])
    ]
    # {0..4, types [1,1,3,1,1]}
    assert to_batches([(0, A), (1, A), (2, J), (3, A), (4, A)]) == [
        AcknowledgementBatch(first_offset=0, last_offset=4, acknowledge_types=[A, A, J, A, A])
    ]
    assert to_batches([(0, A), (5, R)]) == [
        AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=[A]),
        AcknowledgementBatch(first_offset=5, last_offset=5, acknowledge_types=[R]),
    ]


def test_implicit_mode_commit_accepts_everything_delivered():
    # poll, process without acknowledge, commitSync -> ACCEPT for the whole batch.
    acks = Acknowledgements()
    acks.on_poll(_records(0, 4))
    assert acks.take_for_commit() == {
        ("T", 0): [AcknowledgementBatch(first_offset=0, last_offset=4, acknowledge_types=[A])]
    }
    assert acks.mode is AcknowledgementMode.IMPLICIT
    assert acks.take_for_commit() == {}


def test_implicit_mode_next_poll_piggybacks_the_accepts():
    # the next poll acknowledges the previous batch.
    acks = Acknowledgements()
    acks.on_poll(_records(0, 1))
    returned = acks.on_poll(_records(2, 3))
    assert [r.offset for r in returned] == [2, 3]
    assert acks.mode is AcknowledgementMode.IMPLICIT
    assert acks.take_for_commit() == {
        ("T", 0): [AcknowledgementBatch(first_offset=0, last_offset=3, acknowledge_types=[A])]
    }


def test_modes_cannot_be_mixed():
    acks = Acknowledgements()
    first = _records(0, 1)
    acks.on_poll(first)
    acks.take_for_commit()  # implicit now
    second = _records(2, 2)
    acks.on_poll(second)
    with pytest.raises(IllegalAcknowledgement, match="cannot be mixed"):
        acks.acknowledge(second[0], A)


def test_explicit_acknowledgements_are_sent_at_commit_with_their_types():
    # ACCEPT, ACCEPT, REJECT, ACCEPT, ACCEPT, nothing sent until the commit.
    acks = Acknowledgements()
    records = acks.on_poll(_records(0, 4))
    for record, kind in zip(records, [A, A, J, A, A], strict=True):
        acks.acknowledge(record, kind)
    assert acks.mode is AcknowledgementMode.EXPLICIT
    assert acks.take_for_commit() == {
        ("T", 0): [AcknowledgementBatch(first_offset=0, last_offset=4, acknowledge_types=[A, A, J, A, A])]
    }


def test_explicit_unacknowledged_records_are_handed_back_at_the_next_poll():
    # fails at 12 -> {10..12 [A, A, J]}; 13 and 14 come back later.
    acks = Acknowledgements()
    records = acks.on_poll(_records(10, 14))
    for record, kind in zip(records[:3], [A, A, J], strict=True):
        acks.acknowledge(record, kind)
    assert acks.take_for_commit() == {
        ("T", 0): [AcknowledgementBatch(first_offset=10, last_offset=12, acknowledge_types=[A, A, J])]
    }
    again = acks.on_poll([])
    assert [r.offset for r in again] == [13, 14]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("twice", "not awaiting acknowledgement"),
        ("foreign", "not awaiting acknowledgement"),
        ("out of order", "in the order returned"),
        ("gap", "GAP is not an application acknowledgement type"),
    ],
)
def test_bad_explicit_acknowledgements_raise_clear_errors(setup, message):
    acks = Acknowledgements()
    records = acks.on_poll(_records(0, 2))
    with pytest.raises(IllegalAcknowledgement, match=message):
        if setup == "twice":
            acks.acknowledge(records[0])
            acks.acknowledge(records[0])
        elif setup == "foreign":
            acks.acknowledge(DeliveredRecord("T", 0, 99, 1))
        elif setup == "out of order":
            acks.acknowledge(records[2])
            acks.acknowledge(records[1])
        else:
            acks.acknowledge(records[0], AcknowledgeType.GAP)


def test_close_releases_what_an_implicit_consumer_was_given():
    acks = Acknowledgements()
    acks.on_poll(_records(0, 1))
    acks.on_poll(_records(2, 3))  # 0-1 accepted implicitly, 2-3 delivered
    assert acks.take_for_close() == {
        ("T", 0): [AcknowledgementBatch(first_offset=0, last_offset=3, acknowledge_types=[A, A, R, R])]
    }


def test_close_sends_explicit_pending_and_releases_the_rest():
    acks = Acknowledgements()
    records = acks.on_poll(_records(0, 2))
    acks.acknowledge(records[0], J)
    assert acks.take_for_close() == {
        ("T", 0): [AcknowledgementBatch(first_offset=0, last_offset=2, acknowledge_types=[J, R, R])]
    }


# -- the share consumer in the Lab ------------------------------------------------------------------
def _lab(**consumer):
    from kip_lab.lab.lab import Lab, LabConfig
    from kip_lab.share.config import SharePartitionConfig

    lab = Lab(seed=4, config=LabConfig(share=SharePartitionConfig(record_lock_duration_ms=3_000)))
    lab.create_topic("T", 1, produce_rate_per_s=0)
    lab.add_share_consumer("A", group_id="q", subscribed_topic_names=["T"], **consumer)
    lab.run(until=6_000)
    lab.produce_share_records("T", 10, batch_size=5)
    return lab


def _requests(lab, api: str) -> list:
    return [e for e in lab.trace.of_type(MessageSent) if e.body.api == api]


@pytest.mark.parametrize("commit", ["poll", "sync", "async"])
def test_every_commit_mode_acknowledges_everything_and_reports_to_the_callback(commit):
    lab = _lab(commit=commit, max_poll_records=5)
    lab.run(until=20_000)
    consumer = lab.clients["A"]
    assert consumer.outcomes == {"accept": 10}
    reported = sorted(o for r in consumer.commit_results if r["error"] is None for o in r["offsets"])
    assert reported == list(range(10))
    acknowledges = [e for e in _requests(lab, "ShareAcknowledge") if e.body.source == "A"]
    if commit == "poll":
        assert not acknowledges  # piggy-backed on the next ShareFetch
    else:
        assert len(acknowledges) == 2  # one per batch of 5
    sp = lab.world.share.share_partition("q", (lab.topic_id("T"), 0))
    assert sp.spso == 10


def test_commit_sync_waits_for_the_answer_before_polling_again():
    lab = _lab(commit="sync", max_poll_records=5, processing_ms_per_record=1.0)
    lab.run(until=20_000)
    sent = [e for e in lab.trace.of_type(MessageSent) if e.body.source == "A"]
    apis = [e.body.api for e in sent if e.body.api in ("ShareFetch", "ShareAcknowledge")]
    first_ack = apis.index("ShareAcknowledge")
    assert apis[first_ack + 1] == "ShareFetch"
    acked_at = next(e for e in lab.trace if e.kind.value == "share_ack_result" and e.actor == "A").time_ms
    next_fetch = [e.time_ms for e in sent if e.body.api == "ShareFetch" and e.time_ms >= acked_at - 1]
    assert next_fetch and next_fetch[0] >= acked_at  # no fetch while the commit was out


def test_close_releases_what_an_implicit_consumer_holds():
    lab = _lab(processing_ms_per_record=1_000.0, max_poll_records=5)
    lab.run(until=6_500)
    sp = lab.world.share.share_partition("q", (lab.topic_id("T"), 0))
    assert sp.owner_at(0) is not None
    lab.close("A")
    lab.run(until=7_000)
    assert sp.owner_at(0) is None and sp.state_at(0) == ("Available", 1)
    assert lab.clients["A"].state.value == "UNSUBSCRIBED"
    assert "A" not in {n for n, c in lab.clients.items() if c.member_id in lab.coordinator.share_groups["q"].members}


def test_late_acknowledgements_are_reported_failed_to_the_callback():
    lab = _lab(
        acknowledgement="explicit",
        failures=[FailureRule(offsets=[0], action="hang", hang_ms=5_000)],
        max_poll_records=5,
    )
    lab.run(until=30_000)
    failed = [r for r in lab.clients["A"].commit_results if r["error"] == "INVALID_RECORD_STATE"]
    assert failed and 0 in failed[0]["offsets"]


def test_a_fenced_member_rejoins_with_epoch_zero_and_its_member_id():
    lab = _lab()
    lab.run(until=8_000)
    consumer = lab.clients["A"]
    member_id = consumer.member_id
    lab.pause("A")
    lab.run(until=60_000)  # the session timeout removes it
    assert member_id not in lab.coordinator.share_groups["q"].members
    lab.resume("A")
    lab.run(until=70_000)
    assert consumer.member_id == member_id and member_id in lab.coordinator.share_groups["q"].members
    transitions = [e.body.trigger for e in lab.trace.of_type(StateTransition) if e.actor == "A"]
    assert "fenced" in transitions and "partitions lost, rejoin" in transitions


def test_a_classic_groups_id_is_not_a_share_groups():
    from kip_lab.coordinator import GroupCoordinator
    from kip_lab.protocol.classic_group import JoinGroupRequest, JoinGroupRequestProtocol
    from kip_lab.protocol.share_group import ShareGroupHeartbeatRequest

    coordinator = GroupCoordinator()
    coordinator.cluster.create_topic("T", 1)
    coordinator.join_group(
        JoinGroupRequest(group_id="c", session_timeout_ms=45_000, protocols=[JoinGroupRequestProtocol(name="range")])
    )
    response = coordinator.share_group_heartbeat(
        ShareGroupHeartbeatRequest(group_id="c", member_epoch=0, subscribed_topic_names=["T"])
    ).response
    assert response.error_code.name == "GROUP_ID_NOT_FOUND"


def test_failure_rules_need_explicit_acknowledgement_and_a_valid_pattern():
    from pydantic import ValidationError

    from kip_lab.clients.share_consumer import ShareConsumerConfig

    with pytest.raises(ValidationError, match="need acknowledgement='explicit'"):
        ShareConsumerConfig(subscribed_topic_names=["T"], failures=[FailureRule(offsets=[1], action="reject")])
    with pytest.raises(ValidationError, match="not a valid RE2 regular expression"):
        FailureRule(value_regex="(", action="reject")
    with pytest.raises(ValidationError, match="needs value_regex or offsets"):
        FailureRule(action="reject")


def test_a_failure_rule_matches_with_re2_in_linear_time():
    """A catastrophic-backtracking pattern ('(a+)+' against 30 a's and a b) answers at once with RE2;
    patterns RE2 refuses (lookaround, backreferences) are refused when the rule is made."""
    import time

    from pydantic import ValidationError

    from kip_lab.clients.share_acknowledgements import DeliveredRecord

    rule = FailureRule(value_regex="(a+)+", action="reject")
    started = time.monotonic()
    assert not rule.matches(DeliveredRecord("t", 0, 0, 1, value="a" * 30 + "b"))
    assert rule.matches(DeliveredRecord("t", 0, 1, 1, value="a" * 30))
    assert time.monotonic() - started < 1
    for pattern in ("(?=a)a", r"(a)\1", "x" * 10_001):
        with pytest.raises(ValidationError, match="value_regex"):
            FailureRule(value_regex=pattern, action="reject")


def test_close_also_releases_records_fetched_but_not_yet_polled():
    acks = Acknowledgements()
    acks.on_poll(_records(0, 1))
    assert acks.take_for_close(_records(2, 3)) == {
        ("T", 0): [AcknowledgementBatch(first_offset=0, last_offset=3, acknowledge_types=[R])]
    }


def test_a_lost_share_fetch_times_out_and_the_session_reopens_at_epoch_zero():
    lab = _lab(max_poll_records=5)
    lab.partition_link("A", 2_000)  # the next ShareFetch (the session's second) is dropped
    lab.run(until=60_000)
    config = lab.clients["A"].config
    (lost,) = [e for e in lab.trace.of_type(MessageDropped) if e.body.api == "ShareFetch"]
    timed_out = [e for e in lab.trace.of_type(Note) if e.actor == "A" and "timed out" in e.body.text]
    assert [e.body.text for e in timed_out] == [f"ShareFetch request {lost.body.correlation_id} timed out"]
    assert timed_out[0].time_ms == lost.time_ms + config.request_timeout_ms
    after = [e for e in _requests(lab, "ShareFetch") if e.body.source == "A" and e.step > timed_out[0].step]
    assert after[0].time_ms == timed_out[0].time_ms + config.retry_backoff_ms
    assert [f.body.body["share_session_epoch"] for f in after[:3]] == [0, 1, 2]  # the session opened again
    assert lab.clients["A"].outcomes == {"accept": 10}
    assert lab.world.share.share_partition("q", (lab.topic_id("T"), 0)).spso == 10
