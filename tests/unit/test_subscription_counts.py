"""The consumer group's subscription counts: kept on replay, read by the heartbeat instead of the members.

Kafka ``ModernGroup`` keeps ``subscribedTopicNames`` (topic name -> members subscribing) and
``ConsumerGroup`` keeps ``serverAssignors`` the same way (Kafka 4.0 its regexes too), updated
from each member's old and new value; ``consumerGroupHeartbeat`` computes the would-be subscription
metadata and preferred assignor from them (``computeSubscribedTopicNames``,
``computePreferredServerAssignor``) without reading every member. kip_lab's ``SubscriptionCounts``
does the same, and also counts the KIP's client-side assignors.
"""

from __future__ import annotations

import pytest
from conftest import GROUP, Harness
from migration_support import MigrationCase

from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.coordinator.group import SubscriptionCounts
from kip_lab.coordinator.member import ConsumerGroupMember
from kip_lab.protocol import ClientAssignor, Errors


def assignors(*names: str) -> tuple[ClientAssignor, ...]:
    return tuple(ClientAssignor(name=name, minimum_version=0, maximum_version=1) for name in names)


def test_counts_follow_joins_changes_and_leaves_and_survive_failover() -> None:
    """Kafka ``ModernGroup.maybeUpdateSubscribedTopicNames`` and ``ConsumerGroup.maybeUpdateServerAssignors``:
    the counts move with each member's change (a name nobody subscribes to any more is gone), and a
    coordinator rebuilt from the log (``GroupCoordinator.from_log``) counts the same."""
    h = Harness()
    h.join("A", ("foo", "bar"), server_assignor="range")
    h.join("B", ("foo",))
    h.join("C", None, subscribed_topic_regex="ba.*", server_assignor="range")
    counts = h.group.subscriptions
    assert (counts.members, counts.topic_names, counts.regexes) == (3, {"foo": 2, "bar": 1}, {"ba.*": 1})
    assert counts.server_assignors == {"range": 2}
    h.heartbeat("A", h.member("A").member_epoch, subscribed_topic_names=["foo"], server_assignor="uniform")
    left = h.heartbeat("B", -1)
    assert left.response.error_code == Errors.NONE
    counts = h.group.subscriptions
    assert (counts.members, counts.topic_names, counts.regexes) == (2, {"foo": 1}, {"ba.*": 1})
    assert counts.server_assignors == {"range": 1, "uniform": 1}
    assert counts == SubscriptionCounts.of(h.group.members.values())
    reloaded = GroupCoordinator.from_log(h.gc.log, h.gc.config, h.cluster, load=False)
    assert reloaded.groups[GROUP].subscriptions == counts


def test_changed_counts_a_would_be_group_and_leaves_the_kept_counts_alone() -> None:
    """Kafka ``ModernGroup.computeSubscribedTopicNames(oldMember, newMember)``: a copy with the one
    member's change applied."""
    a = ConsumerGroupMember("A", subscribed_topic_names=("foo",), server_assignor="range")
    b = ConsumerGroupMember("B", subscribed_topic_names=("foo", "bar"))
    kept = SubscriptionCounts.of([a, b])
    b2 = ConsumerGroupMember("B", subscribed_topic_names=("baz",), server_assignor="uniform")
    would_be = kept.changed(removed=[b], added=[b2])
    assert would_be == SubscriptionCounts.of([a, b2])
    assert would_be.topic_names == {"foo": 1, "baz": 1} and would_be.server_assignors == {"range": 1, "uniform": 1}
    assert kept == SubscriptionCounts.of([a, b])


@pytest.mark.parametrize(
    ("lists", "chosen"),
    [
        ([(), ()], None),  # server-side mode
        ([("x", "y"), ("y", "x")], "x"),  # positions 0+1 each: a tie, broken by name
        ([("y", "x"), ("y", "x"), ("x", "y")], "y"),  # y: 0+0+1, x: 1+1+0
        ([("x", "y", "x"), ("y",)], "y"),  # x is not listed by every member; a repeat counts once
    ],
)
def test_the_client_side_assignor_comes_from_the_counts(lists, chosen) -> None:
    """The rule of ``ClientSideAssignment._client_side_assignor`` (KIP-848 "Client Side Mode"): one common
    to every member, lowest total position, ties by name — read from the counts."""
    members = [ConsumerGroupMember(f"m{i}", client_assignors=assignors(*names)) for i, names in enumerate(lists)]
    assert GroupCoordinator._client_side_assignor(SubscriptionCounts.of(members)) == chosen


def test_no_common_client_side_assignor_is_unsupported() -> None:
    """KIP-848 "Client Side Mode": the client-side assignor must be supported by every member."""
    members = [
        ConsumerGroupMember("A", client_assignors=assignors("x")),
        ConsumerGroupMember("B", client_assignors=()),
    ]
    with pytest.raises(Exception, match="No client-side assignor is supported by every member") as raised:
        GroupCoordinator._client_side_assignor(SubscriptionCounts.of(members))
    assert raised.value.error is Errors.UNSUPPORTED_ASSIGNOR


class _UnreadableMembers(dict):
    """A members dict that refuses to be walked: reading one member by id is fine, listing them is not."""

    def _walked(self, *args, **kwargs):
        raise AssertionError("the heartbeat walked every member")

    __iter__ = values = items = keys = _walked  # type: ignore[assignment]


def test_a_batched_join_reads_no_other_member() -> None:
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat`` with batching: a join while the target is
    held back bumps the group epoch and checks the subscription metadata and assignors from the kept
    counts and the joining member alone, so its cost does not grow with the group. (A join that adds a
    topic to the partition metadata rebuilds every member's assignor input: that work is the group's.)"""
    h = Harness(CoordinatorConfig(assignment_interval_ms=1_000))
    for member_id in ("A", "B", "C"):
        h.join(member_id)
    group = h.group
    assert group.group_epoch > group.assignment_epoch  # the target waits for the interval
    group.members = _UnreadableMembers(group.members)
    joined = h.join("D", ("foo",))
    assert joined.response.error_code == Errors.NONE
    assert dict.__len__(group.members) == 4 and group.group_epoch == 4


def test_a_converted_group_counts_its_classic_members() -> None:
    """Kafka ``ConsumerGroup.numClassicProtocolMembers``: after the online upgrade the classic members are
    counted; the downgrade check reads that count (``validateOnlineDowngradeWithFencedMember``)."""
    case = MigrationCase()
    assert case.consumer_join("A").response.error_code == Errors.NONE
    counts = case.gc.groups[GROUP].subscriptions
    assert (counts.members, counts.classic_members) == (3, 2)
    assert counts == SubscriptionCounts.of(case.gc.groups[GROUP].members.values())
