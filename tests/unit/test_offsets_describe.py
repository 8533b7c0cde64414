"""ConsumerGroupDescribe and OffsetCommit/OffsetFetch v9."""

from __future__ import annotations

import pytest
from conftest import GROUP, Harness, record_kinds

from kip_lab.assignors import UniformAssignor
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.protocol import (
    ClientAssignor,
    ConsumerGroupDescribeRequest,
    Errors,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
)

BOGUS_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def describe(h: Harness, *group_ids: str):
    result = h.gc.consumer_group_describe(ConsumerGroupDescribeRequest(group_ids=list(group_ids)))
    assert result.records == []
    return result.response.groups


def view(assignment) -> list[tuple[str, str, list[int]]]:
    return [(tp.topic_id, tp.topic_name, tp.partitions) for tp in assignment.topic_partitions]


def topic(name=None, topic_id=None, **offsets: int) -> OffsetCommitRequestTopic:
    """Topic(name="foo", p0=10, p3=7) -> offsets 10 and 7 for partitions 0 and 3."""
    return OffsetCommitRequestTopic(
        name=name,
        topic_id=topic_id,
        partitions=[
            OffsetCommitRequestPartition(partition_index=int(k[1:]), committed_offset=v) for k, v in offsets.items()
        ],
    )


def commit(h: Harness, topics, member_id: str = "", member_epoch: int = -1, group_id: str = GROUP):
    request = OffsetCommitRequest(
        group_id=group_id, member_id=member_id, generation_id_or_member_epoch=member_epoch, topics=topics
    )
    return h.gc.offset_commit(request)


def errors(result) -> dict[tuple[str | None, int], Errors]:
    return {
        (t.name or t.topic_id, p.partition_index): p.error_code for t in result.response.topics for p in t.partitions
    }


def fetch(
    h: Harness,
    topics=None,
    member_id=None,
    member_epoch=-1,
    group_id=GROUP,
    gc: GroupCoordinator | None = None,
):
    request = OffsetFetchRequest(
        groups=[
            OffsetFetchRequestGroup(group_id=group_id, member_id=member_id, member_epoch=member_epoch, topics=topics)
        ]
    )
    result = (gc or h.gc).offset_fetch(request)
    assert result.records == []
    (group,) = result.response.groups
    return group


def offsets(group) -> dict[tuple[str | None, int], tuple[int, Errors]]:
    return {
        (t.name or t.topic_id, p.partition_index): (p.committed_offset, p.error_code)
        for t in group.topics
        for p in t.partitions
    }


def stable(h: Harness) -> None:
    h.join("A")
    h.join("B")
    h.settle()
    assert h.member("A").member_epoch == 2


# ---------------------------------------------------------------------------------------
# ConsumerGroupDescribe
# ---------------------------------------------------------------------------------------
def test_describe_unknown_group_is_an_error_per_group(h):
    """Kafka ``GroupMetadataManager.consumerGroupDescribe``: an unknown group is GROUP_ID_NOT_FOUND for that group
    alone, the error code and nothing else (no message, no state, no members)."""
    stable(h)
    known, unknown = describe(h, GROUP, "nope")
    assert (known.group_id, known.error_code) == (GROUP, Errors.NONE)
    assert unknown == type(unknown)(group_id="nope", error_code=Errors.GROUP_ID_NOT_FOUND)
    assert (unknown.error_message, unknown.members) == (None, [])


def test_describe_reports_state_epochs_assignor_and_members(h):
    """Kafka ``ConsumerGroup.asDescribedGroup``, ``ConsumerGroupMember.asConsumerGroupDescribeMember``."""
    h.join("B", ["foo", "bar"], instance_id="i-b", rack_id="r2", client_id="cb", client_host="/10.0.0.2")
    h.join("A", ["foo", "bar"])
    (group,) = describe(h, GROUP)
    assert (group.group_state, group.group_epoch, group.assignment_epoch) == ("Reconciling", 2, 2)
    assert group.assignor_name == "uniform"
    assert [m.member_id for m in group.members] == ["A", "B"]  # sorted by member id
    a, b = group.members
    assert (b.instance_id, b.rack_id, b.client_id, b.client_host) == ("i-b", "r2", "cb", "/10.0.0.2")
    assert (a.instance_id, a.rack_id) == (None, None)
    assert b.subscribed_topic_names == ["bar", "foo"]
    assert (a.member_epoch, b.member_epoch) == (2, 1)
    foo, bar = h.tid("foo"), h.tid("bar")
    ids_sorted = sorted([foo, bar])
    # B has not heartbeated since A joined: it still uses everything, its target is smaller.
    assert [t for t, _, _ in view(b.assignment)] == ids_sorted
    assert {t: (n, p) for t, n, p in view(b.assignment)} == {
        foo: ("foo", [0, 1, 2, 3, 4, 5]),
        bar: ("bar", [0, 1, 2]),
    }
    b_target = {n: p for _, n, p in view(b.target_assignment)}
    a_target = {n: p for _, n, p in view(a.target_assignment)}
    assert b_target == h.target("B") and a_target == h.target("A")
    assert sorted(b_target["foo"] + a_target["foo"]) == [0, 1, 2, 3, 4, 5]
    assert [t for t, _, _ in view(a.target_assignment)] == sorted(h.tid(n) for n in a_target)
    assert view(a.assignment) == []  # A waits for B to release
    h.settle()
    (group,) = describe(h, GROUP)
    assert group.group_state == "Stable"
    assert all(view(m.assignment) == view(m.target_assignment) for m in group.members)


def test_describe_regex_member_empty_group_and_client_side_assignor(h):
    """Kafka ``ConsumerGroup.asDescribedGroup``: a regex member, an empty group; the client-side assignor as KIP-848,
    section "ConsumerGroupDescribe API" names it."""
    h.join("R", None, subscribed_topic_regex="ba.*")
    (group,) = describe(h, GROUP)
    (member,) = group.members
    assert (member.subscribed_topic_names, member.subscribed_topic_regex) == ([], "ba.*")
    assert view(member.assignment) == [(h.tid("bar"), "bar", [0, 1, 2])]
    h.heartbeat("R", member.member_epoch, client_assignors=[ClientAssignor(name="custom")])
    (group,) = describe(h, GROUP)
    assert (group.group_state, group.assignor_name) == ("Assigning", "custom")
    h.heartbeat("R", -1)
    (group,) = describe(h, GROUP)
    assert (group.group_state, group.members, group.group_epoch) == ("Empty", [], 3)


# ---------------------------------------------------------------------------------------
# OffsetCommit
# ---------------------------------------------------------------------------------------
def test_commit_with_the_member_epoch_writes_an_offset_record_with_the_topic_id(h):
    """Kafka ``OffsetMetadataManager.commitOffset`` (one batch of offset records); topic ids as KIP-848, section
    "OffsetCommit API" proposes."""
    stable(h)
    h.gc.advance(1_234)
    result = commit(h, [topic(topic_id=h.tid("foo"), p0=10, p1=11), topic(name="bar", p2=7)], "A", 2)
    assert set(errors(result).values()) == {Errors.NONE}
    assert record_kinds(result) == ["OffsetCommitKey"] * 3
    assert len(result.batches) == 1
    written = {(r.key.group, r.key.topic, r.key.partition): r.value for r in result.records}
    assert set(written) == {(GROUP, "foo", 0), (GROUP, "foo", 1), (GROUP, "bar", 2)}
    assert written[(GROUP, "foo", 0)].topic_id == h.tid("foo")
    assert written[(GROUP, "bar", 2)].topic_id == h.tid("bar")  # resolved from the name
    assert (written[(GROUP, "foo", 1)].offset, written[(GROUP, "foo", 1)].commit_timestamp) == (11, 1_234)
    group = fetch(h, [OffsetFetchRequestTopic(topic_id=h.tid("foo"), partition_indexes=[0, 1, 2])], "A", 2)
    assert group.error_code == Errors.NONE
    assert offsets(group) == {
        (h.tid("foo"), 0): (10, Errors.NONE),
        (h.tid("foo"), 1): (11, Errors.NONE),
        (h.tid("foo"), 2): (-1, Errors.NONE),
    }


@pytest.mark.parametrize(
    ("member_id", "member_epoch", "error"),
    [
        ("A", 1, Errors.STALE_MEMBER_EPOCH),  # a zombie from the previous epoch
        ("A", 3, Errors.STALE_MEMBER_EPOCH),
        ("Z", 2, Errors.UNKNOWN_MEMBER_ID),
        ("", -1, Errors.UNKNOWN_MEMBER_ID),  # an admin commit to a non-empty group
    ],
    ids=["zombie epoch", "future epoch", "unknown member", "admin to non-empty group"],
)
def test_commit_rejected_for_a_consumer_group(h, member_id, member_epoch, error):
    """Kafka ``ConsumerGroup.validateOffsetCommit``: an unknown member or a stale epoch is refused and nothing is
    written."""
    stable(h)
    before = h.snapshot()
    result = commit(h, [topic(topic_id=h.tid("foo"), p0=10)], member_id, member_epoch)
    assert errors(result) == {(h.tid("foo"), 0): error}
    assert result.records == []
    assert h.snapshot() == before


def test_commit_with_name_and_id_together_is_invalid_request(h):
    """KIP-848, section "OffsetCommit API" (a topic by name or by id): both at once is INVALID_REQUEST."""
    stable(h)
    result = commit(h, [topic(name="foo", topic_id=h.tid("foo"), p0=1), topic(name="bar", p0=2)], "A", 2)
    assert set(errors(result).values()) == {Errors.INVALID_REQUEST}
    assert result.records == []


def test_commit_to_an_unknown_topic_id_fails_only_that_topic(h):
    """KIP-848, section "OffsetCommit API": an unknown topic id fails that topic alone (UNKNOWN_TOPIC_ID, as Kafka's
    topic-id APIs answer)."""
    stable(h)
    result = commit(h, [topic(topic_id=BOGUS_ID, p0=1), topic(topic_id=h.tid("foo"), p0=2)], "A", 2)
    assert errors(result) == {(BOGUS_ID, 0): Errors.UNKNOWN_TOPIC_ID, (h.tid("foo"), 0): Errors.NONE}
    assert [(r.key.topic, r.key.partition) for r in result.records] == [("foo", 0)]


def test_commit_to_an_unknown_group_with_a_member_epoch_is_group_id_not_found(h):
    """Kafka ``OffsetMetadataManager.validateOffsetCommit``: a member epoch to a group that does not exist is
    GROUP_ID_NOT_FOUND."""
    result = commit(h, [topic(name="foo", p0=1)], "A", 1, group_id="nope")
    assert errors(result) == {("foo", 0): Errors.GROUP_ID_NOT_FOUND}
    assert result.records == []


def test_admin_commit_is_allowed_to_an_empty_or_unknown_group(h):
    """Kafka ``OffsetMetadataManager.validateOffsetCommit``, ``ConsumerGroup.validateOffsetCommit``: a commit without a
    member epoch goes to an empty or unknown group."""
    h.join("A")
    h.heartbeat("A", -1)
    assert h.group.members == {}
    result = commit(h, [topic(name="foo", p0=42)])
    assert errors(result) == {("foo", 0): Errors.NONE}
    assert record_kinds(result) == ["OffsetCommitKey"]
    other = commit(h, [topic(name="foo", p0=5)], group_id="standalone")
    assert errors(other) == {("foo", 0): Errors.NONE}
    assert "standalone" not in h.gc.groups  # no consumer group is created for it
    assert offsets(fetch(h, group_id="standalone")) == {("foo", 0): (5, Errors.NONE)}
    assert offsets(fetch(h)) == {("foo", 0): (42, Errors.NONE)}


def test_an_empty_group_id_is_a_group_like_any_other(h):
    """Kafka ``GroupCoordinatorService.commitOffsets`` (offset commits for the empty group id are kept for
    backward compatibility) and ``OffsetMetadataManager.validateOffsetCommit``."""
    result = commit(h, [topic(name="foo", p0=1)], group_id="")
    assert errors(result) == {("foo", 0): Errors.NONE}
    assert offsets(fetch(h, group_id="")) == {("foo", 0): (1, Errors.NONE)}
    # The first commit made "" a simple (empty classic) group, which knows no member A.
    assert h.gc.classic_groups[""].members == {}
    refused = commit(h, [topic(name="foo", p0=2)], "A", 1, group_id="")
    assert errors(refused) == {("foo", 0): Errors.UNKNOWN_MEMBER_ID}


# ---------------------------------------------------------------------------------------
# OffsetFetch
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("member_id", "member_epoch", "error"),
    [
        ("A", 2, Errors.NONE),
        (None, -1, Errors.NONE),  # the admin client provides neither
        ("A", 1, Errors.STALE_MEMBER_EPOCH),
        ("Z", 2, Errors.UNKNOWN_MEMBER_ID),
    ],
    ids=["member", "admin", "stale epoch", "unknown member"],
)
def test_fetch_validates_the_member_only_when_given(h, member_id, member_epoch, error):
    """Kafka ``ConsumerGroup.validateOffsetFetch``: the member and its epoch are checked only when the request names a
    member."""
    stable(h)
    commit(h, [topic(name="foo", p0=3)], "A", 2)
    group = fetch(h, [OffsetFetchRequestTopic(name="foo", partition_indexes=[0])], member_id, member_epoch)
    assert group.error_code == error
    if error == Errors.NONE:
        assert offsets(group) == {("foo", 0): (3, Errors.NONE)}
    else:
        assert group.topics == []


def test_fetch_all_offsets_when_topics_is_null(h):
    """Kafka ``OffsetMetadataManager.fetchAllOffsets``: a null topic list fetches every committed offset."""
    stable(h)
    commit(h, [topic(name="foo", p1=11, p0=10), topic(name="bar", p2=22)], "A", 2)
    group = fetch(h)
    assert [t.name for t in group.topics] == ["bar", "foo"]
    assert offsets(group) == {
        ("bar", 2): (22, Errors.NONE),
        ("foo", 0): (10, Errors.NONE),
        ("foo", 1): (11, Errors.NONE),
    }


def test_recreated_topic_starts_without_offsets(h):
    """KIP-848, section "OffsetFetch API" (topic ids): a recreated topic has a new id and no offsets, as after Kafka
    deletes a deleted topic's offsets (``OffsetMetadataManager.onPartitionsDeleted``)."""
    stable(h)
    old_id = h.tid("foo")
    commit(h, [topic(topic_id=old_id, p0=10)], "A", 2)
    new_id = h.cluster.recreate_topic("foo")
    assert offsets(fetch(h, [OffsetFetchRequestTopic(topic_id=new_id, partition_indexes=[0])])) == {
        (new_id, 0): (-1, Errors.NONE)
    }
    assert offsets(fetch(h, [OffsetFetchRequestTopic(name="foo", partition_indexes=[0])])) == {
        ("foo", 0): (-1, Errors.NONE)
    }
    assert offsets(fetch(h, [OffsetFetchRequestTopic(topic_id=old_id, partition_indexes=[0])])) == {
        (old_id, 0): (-1, Errors.UNKNOWN_TOPIC_ID)
    }
    # A commit on the new incarnation is visible again.
    commit(h, [topic(topic_id=new_id, p0=3)], "A", 2)
    assert offsets(fetch(h, [OffsetFetchRequestTopic(name="foo", partition_indexes=[0])])) == {
        ("foo", 0): (3, Errors.NONE)
    }


def test_offsets_survive_failover(h):
    """Kafka ``OffsetMetadataManager.replay``: the offsets are rebuilt from the log; a later commit wins."""
    stable(h)
    commit(h, [topic(topic_id=h.tid("foo"), p0=10, p5=15), topic(name="bar", p1=1)], "A", 2)
    commit(h, [topic(topic_id=h.tid("foo"), p0=12)], "B", 2)  # a later commit wins
    reloaded = GroupCoordinator.from_log(h.gc.log.truncated(h.gc.log.batch_count), h.gc.config, h.cluster)
    assert reloaded.state_snapshot() == h.snapshot()
    assert reloaded.offsets == h.gc.offsets
    expected = {("bar", 1): (1, Errors.NONE), ("foo", 0): (12, Errors.NONE), ("foo", 5): (15, Errors.NONE)}
    assert offsets(fetch(h, gc=reloaded)) == expected == offsets(fetch(h))


def test_offset_commit_value_dumps_like_a_message() -> None:
    """A plain value record gives the views and the trace what a pydantic Message would:
    every field, or only those that differ from their defaults."""
    from kip_lab.events import summarize
    from kip_lab.protocol.records import OffsetCommitValue

    plain = OffsetCommitValue(offset=42, commit_timestamp=1_000)
    assert plain.model_dump() == {
        "offset": 42,
        "commit_timestamp": 1_000,
        "leader_epoch": -1,
        "metadata": None,
        "topic_id": None,
    }
    assert plain.model_dump(exclude_defaults=True) == summarize(plain) == {"offset": 42, "commit_timestamp": 1_000}
    full = OffsetCommitValue(7, 5, leader_epoch=3, metadata="m", topic_id="t1")
    assert summarize(full) == {"offset": 7, "commit_timestamp": 5, "leader_epoch": 3, "metadata": "m", "topic_id": "t1"}


def test_commit_request_partitions_are_checked_by_their_topic_and_dump_as_fields() -> None:
    """A request's partition is a plain value, but the topic holding it validates every field
    by name, refuses unknown ones, and dumps it as a dict like a pydantic Message."""
    from pydantic import ValidationError

    from kip_lab.events import summarize

    topic = OffsetCommitRequestTopic(
        topic_id="t1",
        partitions=[(3, 9), {"partition_index": 4, "committed_offset": "1", "committed_leader_epoch": 2}],
    )
    assert topic.partitions == [OffsetCommitRequestPartition(3, 9), OffsetCommitRequestPartition(4, 1, 2)]
    assert summarize(topic) == {
        "topic_id": "t1",
        "partitions": [
            {"partition_index": 3, "committed_offset": 9},
            {"partition_index": 4, "committed_offset": 1, "committed_leader_epoch": 2},
        ],
    }
    assert topic.model_dump()["partitions"][0] == {
        "partition_index": 3,
        "committed_offset": 9,
        "committed_leader_epoch": -1,
        "committed_metadata": None,
    }
    assert OffsetCommitRequestTopic.model_validate_json(topic.model_dump_json()) == topic
    with pytest.raises(ValidationError) as refused:
        OffsetCommitRequestTopic(
            topic_id="t1",
            partitions=[
                OffsetCommitRequestPartition(partition_index="x", committed_offset=1),
                {"partition_index": 1, "committed_offset": 2, "offset": 3},
                {"partition_index": 2},
            ],
        )
    errors = {(".".join(map(str, e["loc"])), e["type"]) for e in refused.value.errors()}
    assert errors == {
        ("partitions.0.partition_index", "int_parsing"),
        ("partitions.1.offset", "extra_forbidden"),
        ("partitions.2.committed_offset", "missing"),
    }


def test_the_clients_commit_request_is_what_validation_would_build(monkeypatch) -> None:
    """The consumer builds its OffsetCommit without validating it: each must equal the
    request validating its own dump gives back, its partitions the NamedTuple they claim to be."""
    from lab_support import make_lab

    from kip_lab.lab.network import Network

    sent = []
    send = Network.send

    def recording(self, source, destination, api, payload, correlation_id):
        if isinstance(payload, OffsetCommitRequest):
            sent.append(payload)
        return send(self, source, destination, api, payload, correlation_id)

    monkeypatch.setattr(Network, "send", recording)
    lab = make_lab(members="AB", partitions=6, auto_commit_interval_ms=1_000)
    assert lab.run_until_stable()
    sent.clear()  # from here on each member commits what it owns: 3 partitions
    lab.run(until=lab.now + 3_000)
    assert len(sent) >= 4
    for request in sent:
        assert OffsetCommitRequest.model_validate(request.model_dump()) == request
        assert all(type(p) is OffsetCommitRequestPartition for t in request.topics for p in t.partitions)
        owner = next(c for c in lab.clients.values() if c.member_id == request.member_id)
        assert {(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions} == set(owner.owned)
        for topic in request.topics:
            for p in topic.partitions:
                assert 0 < p.committed_offset <= lab.world.log_end_offset((topic.topic_id, p.partition_index), lab.now)


# -- behaviours that follow Kafka's request checks ---------------------------------------
def test_commit_to_an_unknown_topic_or_partition_is_refused_per_partition(h):
    """Kafka ``KafkaApis.handleOffsetCommitRequest``: UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the
    cluster does not have; the other partitions are committed."""
    h.join("A")
    h.settle()
    result = commit(h, [topic("foo", p0=5, p6=1), topic("nope", p0=3)], "A", h.member("A").member_epoch)
    assert errors(result) == {
        ("foo", 0): Errors.NONE,
        ("foo", 6): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert [(r.key.topic, r.key.partition) for r in result.records] == [("foo", 0)]
    assert offsets(fetch(h, [OffsetFetchRequestTopic(name="nope", partition_indexes=[0])]))[("nope", 0)][0] == -1


def test_commit_of_unknown_partitions_only_does_not_check_the_member(h):
    """Kafka ``KafkaApis.handleOffsetCommitRequest`` answers unknown partitions itself: with none left, the
    coordinator (and its member epoch check) is not asked."""
    h.join("A")
    h.settle()
    result = commit(h, [topic("nope", p0=3)], "A", member_epoch=99)
    assert errors(result) == {("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert errors(commit(h, [topic("foo", p0=3)], "A", member_epoch=99)) == {("foo", 0): Errors.STALE_MEMBER_EPOCH}


def test_commit_with_metadata_over_the_limit_is_offset_metadata_too_large(make_harness):
    """Kafka ``OffsetMetadataManager.commitOffset`` / ``isMetadataInvalid``: metadata longer than
    offset.metadata.max.bytes (4096 by default) fails that partition alone."""
    h = make_harness(CoordinatorConfig(offset_metadata_max_bytes=4))
    assert CoordinatorConfig().offset_metadata_max_bytes == 4096
    partitions = [
        OffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_metadata="abcd"),
        OffsetCommitRequestPartition(partition_index=1, committed_offset=2, committed_metadata="abcde"),
    ]
    result = commit(h, [OffsetCommitRequestTopic(name="foo", partitions=partitions)])
    assert errors(result) == {("foo", 0): Errors.NONE, ("foo", 1): Errors.OFFSET_METADATA_TOO_LARGE}
    assert [r.key.partition for r in result.records] == [0]


def test_describe_names_a_server_assignor_the_coordinator_no_longer_has(h):
    """Kafka ``ConsumerGroup.asDescribedGroup`` reports the members' preferred assignor by name, configured or
    not; computing a target with it is UNKNOWN_SERVER_ERROR naming it, and the group is unchanged."""
    h.join("A", server_assignor="range")
    h.settle()
    log = h.gc.log.truncated(h.gc.log.batch_count)
    only_uniform = GroupCoordinator.from_log(log, h.gc.config, h.cluster, assignors=[UniformAssignor()])
    h.gc = only_uniform
    (group,) = describe(h, GROUP)
    assert group.error_code == Errors.NONE
    assert group.assignor_name == "range"
    before = h.snapshot()
    result = h.join("B")
    assert result.response.error_code == Errors.UNKNOWN_SERVER_ERROR
    assert "range" in result.response.error_message
    assert h.snapshot() == before
