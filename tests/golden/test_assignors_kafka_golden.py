"""Kafka's own assignor unit tests, reproduced: the same member ids, topic ids, targets and expected assignments.

Each test mirrors one test method of Kafka's ``group-coordinator`` module (the class and method are
named in its docstring) and asserts the assignment that test expects, partition for partition. Kafka's
tests build members in a ``TreeMap`` (for the ids "A", "B", "C" the order a ``HashMap`` gives too) and
targets as ``HashMap``/``HashSet`` (``mkAssignment``), which is what ``MapOrder.JAVA_HASH`` iterates
as; where a test hands in an insertion-ordered target (``mkOrderedAssignment``) the spec says
``MapOrder.AS_GIVEN``. Kafka's ``RangeAssignorTest`` draws its topic ids at random; any ids do there.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from kip_lab.assignors import (
    AssignmentSpec,
    GroupAssignment,
    MapOrder,
    MemberSubscription,
    PartitionAssignorError,
    SubscriptionType,
    TopicMetadata,
    range_assign,
    uniform_assign,
)

# The topic ids Kafka's OptimizedUniformAssignmentBuilderTest and UniformHeterogeneousAssignmentBuilderTest use.
T1 = "T1-A4s3VTwiI5CTbEp6POw"
T2 = "T2-B4s3VTwiI5YHbPp6YUe"
T3 = "T3-CU8fVTLCz5YMkLoDQsa"
T4 = "T4-Tw9fVTLCz5HbPp6YQsa"
HOMOGENEOUS = SubscriptionType.HOMOGENEOUS
HETEROGENEOUS = SubscriptionType.HETEROGENEOUS

Target = Mapping[str, list[int]]


def member(topics: set[str], target: Target | None = None, instance_id: str | None = None) -> MemberSubscription:
    return MemberSubscription(frozenset(topics), dict(target or {}), instance_id=instance_id)


def spec(
    partitions: Mapping[str, int],
    members: Mapping[str, MemberSubscription],
    subscription_type: SubscriptionType,
    map_order: MapOrder = MapOrder.JAVA_HASH,
) -> AssignmentSpec:
    topics = {topic_id: TopicMetadata(topic_id, f"name-{topic_id[:2]}", n) for topic_id, n in partitions.items()}
    return AssignmentSpec(dict(members), topics, subscription_type, map_order)


def as_sets(assignment: GroupAssignment) -> dict[str, dict[str, set[int]]]:
    """Member -> topic -> partitions, as Kafka's tests compare them (sets; members without partitions left out)."""
    result = {}
    for member_id, topics in assignment.items():
        held = {topic_id: set(partitions) for topic_id, partitions in topics.items() if partitions}
        assert all(len(set(p)) == len(p) for p in topics.values()), "a partition listed twice"
        if held:
            result[member_id] = held
    return result


class TestOptimizedUniformAssignmentBuilderTest:
    """Kafka's ``OptimizedUniformAssignmentBuilderTest`` (the homogeneous ``UniformHomogeneousAssignmentBuilder``)."""

    def test_one_member_no_topic_subscription(self) -> None:
        """``testOneMemberNoTopicSubscription``: nothing to assign."""
        assignment = uniform_assign(spec({T1: 3}, {"A": member(set())}, HOMOGENEOUS))
        assert as_sets(assignment) == {}

    def test_one_member_subscribed_to_nonexistent_topic(self) -> None:
        """``testOneMemberSubscribedToNonexistentTopic``: ``PartitionAssignorException``."""
        with pytest.raises(PartitionAssignorError, match=T2):
            uniform_assign(spec({T1: 3}, {"A": member({T2})}, HOMOGENEOUS))

    def test_first_assignment_two_members_two_topics(self) -> None:
        """``testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks``: topic 3 comes first in ``HashSet`` order."""
        members = {"A": member({T1, T3}), "B": member({T1, T3})}
        assignment = uniform_assign(spec({T1: 3, T3: 2}, members, HOMOGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0}, T3: {0, 1}}, "B": {T1: {1, 2}}}

    def test_first_assignment_more_members_than_partitions(self) -> None:
        """``testFirstAssignmentNumMembersGreaterThanTotalNumPartitions``."""
        members = {m: member({T3}) for m in "ABC"}
        assignment = uniform_assign(spec({T3: 2}, members, HOMOGENEOUS))
        assert as_sets(assignment) == {"A": {T3: {0}}, "B": {T3: {1}}}

    def test_reassignment_given_unbalanced_previous_assignment(self) -> None:
        """``testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment`` (ordered targets)."""
        members = {
            "A": member({T1, T2}, {T1: [0, 1], T2: [0, 1]}),
            "B": member({T1, T2}, {T1: [2], T2: [2]}),
        }
        assignment = uniform_assign(spec({T1: 3, T2: 3}, members, HOMOGENEOUS, MapOrder.AS_GIVEN))
        assert as_sets(assignment) == {"A": {T1: {0, 1}, T2: {0}}, "B": {T1: {2}, T2: {1, 2}}}

    def test_reassignment_when_partitions_are_added(self) -> None:
        """``testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics`` (ordered targets)."""
        members = {
            "A": member({T1, T2}, {T1: [0, 2], T2: [0]}),
            "B": member({T1, T2}, {T1: [1], T2: [1, 2]}),
        }
        assignment = uniform_assign(spec({T1: 6, T2: 5}, members, HOMOGENEOUS, MapOrder.AS_GIVEN))
        assert as_sets(assignment) == {"A": {T1: {0, 2, 3}, T2: {0, 3, 4}}, "B": {T1: {1, 4, 5}, T2: {1, 2}}}

    def test_reassignment_when_one_member_added(self) -> None:
        """``testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics`` (ordered targets)."""
        members = {
            "A": member({T1, T2}, {T1: [0, 2], T2: [0]}),
            "B": member({T1, T2}, {T1: [1], T2: [1, 2]}),
            "C": member({T1, T2}),
        }
        assignment = uniform_assign(spec({T1: 3, T2: 3}, members, HOMOGENEOUS, MapOrder.AS_GIVEN))
        assert as_sets(assignment) == {"A": {T1: {0, 2}}, "B": {T1: {1}, T2: {1}}, "C": {T2: {0, 2}}}

    def test_reassignment_when_one_member_removed(self) -> None:
        """``testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics``."""
        members = {
            "A": member({T1, T2}, {T1: [0], T2: [0]}),
            "B": member({T1, T2}, {T1: [1], T2: [1]}),
        }
        assignment = uniform_assign(spec({T1: 3, T2: 3}, members, HOMOGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0}, T2: {0, 2}}, "B": {T1: {1, 2}, T2: {1}}}

    def test_reassignment_when_one_subscription_removed(self) -> None:
        """``testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics``."""
        members = {
            "A": member({T2}, {T1: [0], T2: [0]}),
            "B": member({T2}, {T1: [1], T2: [1]}),
        }
        assignment = uniform_assign(spec({T1: 2, T2: 2}, members, HOMOGENEOUS))
        assert as_sets(assignment) == {"A": {T2: {0}}, "B": {T2: {1}}}


class TestUniformHeterogeneousAssignmentBuilderTest:
    """Kafka's ``UniformHeterogeneousAssignmentBuilderTest`` (members in sorted order, as its ``TestGroupSpecImpl``)."""

    def test_two_members_no_topic_subscription(self) -> None:
        """``testTwoMembersNoTopicSubscription``."""
        members = {"A": member(set()), "B": member(set())}
        assert as_sets(uniform_assign(spec({T1: 3}, members, HETEROGENEOUS))) == {}

    def test_two_members_subscribed_to_nonexistent_topics(self) -> None:
        """``testTwoMembersSubscribedToNonexistentTopics``: ``PartitionAssignorException``."""
        members = {"A": member({T3}), "B": member({T2})}
        with pytest.raises(PartitionAssignorError, match="doesn't exist in the topic metadata"):
            uniform_assign(spec({T1: 3}, members, HETEROGENEOUS))

    def test_first_assignment_two_members_two_topics(self) -> None:
        """``testFirstAssignmentTwoMembersTwoTopics``."""
        members = {"A": member({T1, T3}), "B": member({T3})}
        assignment = uniform_assign(spec({T1: 3, T3: 6}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0, 1, 2}, T3: {4}}, "B": {T3: {0, 1, 2, 3, 5}}}

    def test_first_assignment_more_members_than_partitions(self) -> None:
        """``testFirstAssignmentNumMembersGreaterThanTotalNumPartitions``."""
        members = {"A": member({T3}), "B": member({T3}), "C": member({T1})}
        assignment = uniform_assign(spec({T3: 1, T1: 2}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {"A": {T3: {0}}, "C": {T1: {0, 1}}}

    def test_reassignment_given_unbalanced_previous_assignment(self) -> None:
        """``testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment``."""
        members = {
            "A": member({T1}, {T1: [0, 1, 2]}),
            "B": member({T1, T2}, {T1: [3], T2: [0]}),
            "C": member({T1, T2, T3}, {T1: [4, 5], T2: [1, 2, 3], T3: [0, 1, 2, 3]}),
        }
        assignment = uniform_assign(spec({T1: 6, T2: 4, T3: 4}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {
            "A": {T1: {0, 1, 2, 5}},
            "B": {T1: {3}, T2: {0, 1, 2, 3}},
            "C": {T1: {4}, T3: {0, 1, 2, 3}},
        }

    def test_reassignment_when_partitions_are_added(self) -> None:
        """``testReassignmentWhenPartitionsAreAddedForTwoMembers``."""
        members = {
            "A": member({T1, T3}, {T1: [0, 1, 2, 3], T3: [0, 1]}),
            "B": member({T1, T2, T3, T4}, {T2: [0, 1, 2], T4: [0, 1, 2]}),
        }
        assignment = uniform_assign(spec({T1: 6, T2: 5, T3: 3, T4: 3}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {
            "A": {T1: {0, 1, 2, 3, 4, 5}, T3: {0, 1, 2}},
            "B": {T2: {0, 1, 2, 3, 4}, T4: {0, 1, 2}},
        }

    def test_reassignment_when_one_member_and_partitions_are_added(self) -> None:
        """``testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics``."""
        members = {
            "A": member({T1}, {T1: [0, 2], T2: [0]}),
            "B": member({T1, T2}, {T1: [1], T2: [1, 2]}),
            "C": member({T1, T2}),
        }
        assignment = uniform_assign(spec({T1: 6, T2: 7}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {
            "A": {T1: {0, 2, 3, 4, 5}},
            "B": {T1: {1}, T2: {1, 2, 6}},
            "C": {T2: {0, 3, 4, 5}},
        }

    def test_reassignment_when_one_member_removed(self) -> None:
        """``testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics``."""
        members = {
            "A": member({T1, T3}, {T1: [0, 1, 2], T3: [0, 1]}),
            "B": member({T2}, {T2: [3, 4, 5, 6]}),
        }
        assignment = uniform_assign(spec({T1: 3, T2: 8, T3: 3}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0, 1, 2}, T3: {0, 1, 2}}, "B": {T2: set(range(8))}}

    def test_reassignment_when_one_subscription_removed(self) -> None:
        """``testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics``."""
        members = {
            "A": member({T1}, {T1: [0, 2], T2: [1, 3]}),
            "B": member({T1, T2}, {T1: [1], T2: [0, 2, 4]}),
        }
        assignment = uniform_assign(spec({T1: 3, T2: 5}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0, 1, 2}}, "B": {T2: {0, 1, 2, 3, 4}}}

    def test_reassignment_when_partitions_run_out(self) -> None:
        """``testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions`` (equal subscriptions)."""
        members = {
            "A": member({T1, T2, T3}, {T1: [0, 1], T2: [0, 1], T3: [0, 1]}),
            "B": member({T1, T2, T3}),
        }
        assignment = uniform_assign(spec({T1: 2, T2: 2, T3: 2}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {"A": {T2: {0}, T3: {0, 1}}, "B": {T1: {0, 1}, T2: {1}}}

    def test_first_assignment_with_a_member_without_subscriptions(self) -> None:
        """``testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions``."""
        members = {"A": member({T1}), "B": member(set())}
        assignment = uniform_assign(spec({T1: 3}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0, 1, 2}}}


class TestRangeAssignorTest:
    """Kafka's ``RangeAssignorTest`` (server-side ``RangeAssignor``)."""

    def test_one_member_no_topic(self) -> None:
        """``testOneMemberNoTopic``."""
        assert as_sets(range_assign(spec({T1: 3}, {"A": member(set())}, HOMOGENEOUS))) == {}

    def test_one_member_subscribed_to_nonexistent_topic(self) -> None:
        """``testOneMemberSubscribedToNonExistentTopic``: ``PartitionAssignorException``."""
        with pytest.raises(PartitionAssignorError, match="non-existent topic"):
            range_assign(spec({T1: 3}, {"A": member({T2})}, HOMOGENEOUS))

    def test_first_assignment_same_subscriptions(self) -> None:
        """``testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions``."""
        members = {"A": member({T1, T3}), "B": member({T1, T3})}
        assignment = range_assign(spec({T1: 3, T3: 2}, members, HOMOGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0, 1}, T3: {0}}, "B": {T1: {2}, T3: {1}}}

    def test_first_assignment_different_subscriptions(self) -> None:
        """``testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions``."""
        members = {"A": member({T1, T2}), "B": member({T3}), "C": member({T2, T3})}
        assignment = range_assign(spec({T1: 3, T2: 3, T3: 2}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0, 1, 2}, T2: {0, 1}}, "B": {T3: {0}}, "C": {T2: {2}, T3: {1}}}

    def test_first_assignment_more_members_than_partitions(self) -> None:
        """``testFirstAssignmentNumMembersGreaterThanNumPartitions``."""
        members = {m: member({T1, T3}) for m in "ABC"}
        assignment = range_assign(spec({T1: 3, T3: 2}, members, HOMOGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0}, T3: {0}}, "B": {T1: {1}, T3: {1}}, "C": {T1: {2}}}

    def test_static_membership(self) -> None:
        """``testStaticMembership``: a static member back under a new member id gets the same partitions."""
        before = {"A": member({T1}, instance_id="instanceA"), "B": member({T1}, instance_id="instanceB")}
        after = {"memberA1": member({T1}, instance_id="instanceA"), "B": before["B"]}
        initial = range_assign(spec({T1: 3}, before, HOMOGENEOUS))
        again = range_assign(spec({T1: 3}, after, HOMOGENEOUS))
        assert again["memberA1"] == initial["A"] and again["B"] == initial["B"]

    def test_mixed_static_membership(self) -> None:
        """``testMixedStaticMembership``: static members first by instance id, the dynamic one last."""
        before = {
            "A": member({T1}, instance_id="instanceA"),
            "C": member({T1}, instance_id="instanceC"),
            "B": member({T1}),
        }
        after = {"memberA1": member({T1}, instance_id="instanceA"), "C": before["C"], "B": before["B"]}
        initial = range_assign(spec({T1: 5}, before, HOMOGENEOUS))
        again = range_assign(spec({T1: 5}, after, HOMOGENEOUS))
        assert again["memberA1"] == initial["A"] and again["B"] == initial["B"] and again["C"] == initial["C"]

    def test_reassignment_when_one_member_added_more_members_than_partitions(self) -> None:
        """``testReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded``."""
        members = {
            "A": member({T1, T2}, {T1: [0], T2: [0]}),
            "B": member({T1, T2}, {T1: [1], T2: [1]}),
            "C": member({T1, T2}),
        }
        assignment = range_assign(spec({T1: 2, T2: 2}, members, HOMOGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0}, T2: {0}}, "B": {T1: {1}, T2: {1}}}

    def test_reassignment_when_one_partition_added(self) -> None:
        """``testReassignmentWhenOnePartitionAddedForTwoMembersTwoTopics``."""
        members = {
            "A": member({T1, T2}, {T1: [0, 1], T2: [0, 1]}),
            "B": member({T1, T2}, {T1: [2], T2: [2]}),
        }
        assignment = range_assign(spec({T1: 4, T2: 4}, members, HOMOGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0, 1}, T2: {0, 1}}, "B": {T1: {2, 3}, T2: {2, 3}}}

    def test_reassignment_when_one_member_added(self) -> None:
        """``testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics``."""
        members = {
            "A": member({T1, T2}, {T1: [0, 1], T2: [0, 1]}),
            "B": member({T1, T2}, {T1: [2], T2: [2]}),
            "C": member({T1, T2}),
        }
        assignment = range_assign(spec({T1: 3, T2: 3}, members, HOMOGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0}, T2: {0}}, "B": {T1: {1}, T2: {1}}, "C": {T1: {2}, T2: {2}}}

    def test_reassignment_when_one_member_and_one_partition_added(self) -> None:
        """``testReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics``."""
        members = {
            "A": member({T1, T2}, {T1: [0, 1], T2: [0, 1]}),
            "B": member({T1, T2}, {T1: [2], T2: [2]}),
            "C": member({T1}),
        }
        assignment = range_assign(spec({T1: 4, T2: 3}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {"A": {T1: {0, 1}, T2: {0, 1}}, "B": {T1: {2}, T2: {2}}, "C": {T1: {3}}}

    def test_reassignment_when_one_member_removed(self) -> None:
        """``testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithTwoMembersTwoTopics``."""
        members = {"B": member({T1, T2}, {T1: [2], T2: [2]})}
        assignment = range_assign(spec({T1: 3, T2: 3}, members, HOMOGENEOUS))
        assert as_sets(assignment) == {"B": {T1: {0, 1, 2}, T2: {0, 1, 2}}}

    def test_reassignment_when_subscriptions_removed(self) -> None:
        """``testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics``."""
        members = {
            "A": member({T1}, {T1: [0, 1, 2], T2: [0]}),
            "B": member({T1, T2, T3}, {T2: [1]}),
            "C": member({T2}, {T2: [2], T3: [0, 1]}),
        }
        assignment = range_assign(spec({T1: 3, T2: 3, T3: 2}, members, HETEROGENEOUS))
        assert as_sets(assignment) == {
            "A": {T1: {0, 1}},
            "B": {T1: {2}, T2: {0, 1}, T3: {0, 1}},
            "C": {T2: {2}},
        }


class TestHashMapOrderInsideABucket:
    """Kafka's ``UniformHomogeneousAssignmentBuilder`` iterates ``HashSet``/``HashMap``s of topic ids; inside one
    bucket Java keeps insertion order, so what matters is what each collection is built from, in which order.

    ``tests/unit/test_java_hash_order_against_java.py`` checks the orders themselves against Java on generated,
    bucket-colliding keys; these tests check that the builder uses them where Kafka's code does.
    """

    # Two topic ids in bucket 7 of 16, X after Y by ``Uuid.compareTo``; and one in bucket 4, one in 14.
    X, Y = "RXx2nznYZEGZwOW9vPvIWw", "HSiMR7GCnC4hnJXqncwR3g"
    B4, B14 = "N86Ry94fwbDqa0TxMENt1w", "Kf5pvZ6M66agfR3sJbGwhw"

    def test_topics_sharing_a_bucket_come_in_the_subscribed_names_order(self) -> None:
        """``UniformHomogeneousAssignmentBuilder.<init>``: ``new HashSet<>(TopicIds)``, which iterates the member's
        subscribed names (``ConsumerGroupMember``'s ``HashSet<String>``); "Aa" and "BB" share the hash 2112, so
        they come as listed, and so do their ids: X (named "Aa") before Y, although Y < X by ``compareTo``."""
        topics = {
            self.X: TopicMetadata(self.X, "Aa", 1),
            self.Y: TopicMetadata(self.Y, "BB", 1),
        }
        members = {m: member({self.X, self.Y}) for m in "AB"}
        assignment = uniform_assign(AssignmentSpec(members, topics, HOMOGENEOUS))
        assert assignment == {"A": {self.X: [0]}, "B": {self.Y: [0]}}
        renamed = {self.X: TopicMetadata(self.X, "BB", 1), self.Y: TopicMetadata(self.Y, "Aa", 1)}
        assert uniform_assign(AssignmentSpec(members, renamed, HOMOGENEOUS)) == {"A": {self.Y: [0]}, "B": {self.X: [0]}}

    def test_a_new_target_lists_its_topics_as_kafkas_map_iterates_them(self) -> None:
        """``AssignorHelpers.deepCopyAssignment`` makes ``new HashMap<>(0)`` for a member with no target; three topics
        put into it leave a table of 4, so buckets 4, 7, 14 of 16 come out as 0, 3, 2 of 4 (Java prints
        B4, B14, X for these puts). The target record lists them in that order
        (``GroupCoordinatorRecordHelpers.newConsumerGroupTargetAssignmentRecord``)."""
        topics = {t: TopicMetadata(t, f"t-{t[:3]}", 1) for t in (self.B4, self.X, self.B14)}
        assignment = uniform_assign(AssignmentSpec({"A": member({self.B4, self.X, self.B14})}, topics, HOMOGENEOUS))
        assert list(assignment["A"]) == [self.B4, self.B14, self.X]

    def test_a_kept_target_reads_its_topics_in_the_record_order(self) -> None:
        """``Assignment.fromRecord`` puts the record's topics into a new ``HashMap`` in the record's order, and
        ``maybeRevokePartitions`` keeps the first ones up to the quota: X and Y share a bucket, so the one the
        record lists first is kept."""
        topics = {self.X: TopicMetadata(self.X, "x", 1), self.Y: TopicMetadata(self.Y, "y", 1)}
        for first, second in ((self.X, self.Y), (self.Y, self.X)):
            members = {"A": member({self.X, self.Y}, {first: [0], second: [0]}), "B": member({self.X, self.Y})}
            assignment = uniform_assign(AssignmentSpec(members, topics, HOMOGENEOUS))
            assert assignment == {"A": {first: [0]}, "B": {second: [0]}}
