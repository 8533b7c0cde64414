"""Example-based tests of the server-side assignors: the KIP's case studies and edge cases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from kip_lab.assignors import (
    AssignmentSpec,
    MapOrder,
    MemberSubscription,
    PartitionAssignor,
    PartitionAssignorError,
    RangeAssignor,
    TopicMetadata,
    UniformAssignor,
    range_assign,
    uniform_assign,
)


def make_spec(
    partitions: Mapping[str, int],
    subscriptions: Mapping[str, Sequence[str]],
    targets: Mapping[str, Mapping[str, Sequence[int]]] | None = None,
    instance_ids: Mapping[str, str] | None = None,
) -> AssignmentSpec:
    """A spec from plain values: topic -> partition count, member -> topics, member -> target."""
    targets = targets or {}
    instance_ids = instance_ids or {}
    return AssignmentSpec(
        members={
            member_id: MemberSubscription(
                subscribed_topic_ids=frozenset(topics),
                target_partitions=dict(targets.get(member_id, {})),
                instance_id=instance_ids.get(member_id),
            )
            for member_id, topics in subscriptions.items()
        },
        topics={t: TopicMetadata(topic_id=t, topic_name=f"name-{t}", num_partitions=n) for t, n in partitions.items()},
    )


def foo_spec(num_partitions: int, targets: Mapping[str, Sequence[int]]) -> AssignmentSpec:
    """Members subscribed to topic "foo" only, with the given previous targets on it."""
    return make_spec(
        {"foo": num_partitions},
        {member_id: ["foo"] for member_id in targets},
        {member_id: ({"foo": list(target)} if target else {}) for member_id, target in targets.items()},
    )


def foo_lists(num_partitions: int, targets: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
    """Run the uniform assignor on a "foo" group; return member -> its "foo" partitions."""
    assignment = uniform_assign(foo_spec(num_partitions, targets))
    assert set(assignment) == set(targets)
    return {member_id: topics.get("foo", []) for member_id, topics in assignment.items()}


class TestUniformKipCaseStudies:
    """The homogeneous checks the golden KIP scenarios depend on, as exact lists."""

    def test_first_member_gets_everything(self) -> None:
        assert foo_lists(3, {"A": []}) == {"A": [0, 1, 2]}

    def test_second_member_joins(self) -> None:
        assert foo_lists(3, {"A": [0, 1, 2], "B": []}) == {"A": [0, 1], "B": [2]}

    def test_third_member_joins(self) -> None:
        assert foo_lists(3, {"A": [0, 1], "B": [2], "C": []}) == {"A": [0], "B": [2], "C": [1]}

    def test_member_joins_six_partitions(self) -> None:
        assert foo_lists(6, {"A": [0, 1, 2], "B": [3, 4, 5], "C": []}) == {
            "A": [0, 1],
            "B": [3, 4],
            "C": [2, 5],
        }

    def test_member_leaves(self) -> None:
        assert foo_lists(6, {"B": [3, 4], "C": [2, 5]}) == {"B": [3, 4, 0], "C": [2, 5, 1]}

    def test_two_partitions_two_members(self) -> None:
        assert foo_lists(2, {"A": [0], "B": []}) == {"A": [0], "B": [1]}

    def test_member_joins_between_uneven_members(self) -> None:
        """Kafka ``UniformHomogeneousAssignmentBuilder.maybeRevokePartitions``: C keeps the first two of its
        ``HashSet`` {2, 4, 5} (2 and 4), where the KIP's table keeps 2 and 5; B gets 3 and 5."""
        assert foo_lists(6, {"A": [0, 1, 3], "C": [2, 5, 4], "B": []}) == {
            "A": [0, 1],
            "B": [3, 5],
            "C": [2, 4],
        }

    @pytest.mark.parametrize(
        ("map_order", "expected"),
        [
            (MapOrder.JAVA_HASH, {"A": [0, 1], "B": [3, 5], "C": [2, 4]}),
            (MapOrder.AS_GIVEN, {"A": [0, 1], "B": [3, 4], "C": [2, 5]}),
        ],
    )
    def test_online_migration_target_of_epoch_24(self, map_order: MapOrder, expected: dict) -> None:
        """KIP-848, section "Online Migration" (its case study, step 8): B rejoins; C's target lists [2, 5, 4].
        Kafka ``UniformHomogeneousAssignmentBuilder.maybeRevokePartitions`` reads it as a ``HashSet`` (2, 4, 5) and
        keeps 2 and 4; the KIP's table (``AS_GIVEN``, the coordinator's "kip" fidelity) keeps 2 and 5."""
        spec = foo_spec(6, {"A": [0, 1, 3], "B": [], "C": [2, 5, 4]})
        assignment = uniform_assign(AssignmentSpec(spec.members, spec.topics, map_order=map_order))
        assert {m: sorted(topics.get("foo", [])) for m, topics in assignment.items()} == expected


class TestUniformHomogeneousRules:
    def test_from_scratch_each_member_takes_a_block_in_hash_map_order(self) -> None:
        """Kafka ``UniformHomogeneousAssignmentBuilder.assignRemainingPartitions``: members below quota, in
        ``HashMap`` order ("m1", "m2", "m3": buckets 4, 5, 6), each take the next partitions until full."""
        assert foo_lists(7, {"m2": [], "m1": [], "m3": []}) == {"m1": [0, 1, 2], "m2": [3, 4], "m3": [5, 6]}

    def test_extra_slots_go_to_the_first_members_in_iteration_order(self) -> None:
        """Kafka ``UniformHomogeneousAssignmentBuilder.maybeRevokePartitions``: the ``P % N`` extra slots go to the
        first members iterated ("a"), not to those holding most; "c" gives back 5 and 6, which "a" takes."""
        assert foo_lists(7, {"a": [0], "b": [1, 2], "c": [3, 4, 5, 6]}) == {
            "a": [0, 5, 6],
            "b": [1, 2],
            "c": [3, 4],
        }

    def test_previous_target_is_read_in_hash_set_order(self) -> None:
        """Kafka ``UniformHomogeneousAssignmentBuilder.maybeRevokePartitions`` iterates the ``HashSet<Integer>`` a
        target record is read into: 22 partitions in a table of 32, so 32-39 come between 0-7, and 30, 31 go."""
        held = [*range(0, 11), *range(29, 40)]
        assert foo_lists(40, {"a": held, "b": list(range(11, 29))}) == {
            "a": [0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 9, 10, 29],
            "b": [*range(11, 29), 30, 31],
        }

    def test_previous_target_as_given_when_the_spec_says_so(self) -> None:
        """``MapOrder.AS_GIVEN``: the target's own list order, as Kafka's assignor iterates an ordered set."""
        held = [*range(29, 40), *range(0, 11)]
        spec = foo_spec(40, {"a": held, "b": list(range(11, 29))})
        spec = AssignmentSpec(spec.members, spec.topics, map_order=MapOrder.AS_GIVEN)
        assignment = uniform_assign(spec)
        assert assignment["a"] == {"foo": held[:20]}
        assert assignment["b"] == {"foo": [*range(11, 29), 9, 10]}

    def test_unsubscribed_topic_is_dropped(self) -> None:
        """Kafka ``UniformHomogeneousAssignmentBuilder.maybeRevokePartitions`` removes unsubscribed topics."""
        spec = make_spec({"foo": 2, "bar": 2}, {"a": ["foo"], "b": ["foo"]}, {"a": {"bar": [0, 1]}})
        assert uniform_assign(spec) == {"a": {"foo": [0]}, "b": {"foo": [1]}}

    def test_subscription_to_missing_topic_is_refused(self) -> None:
        """Kafka ``UniformHomogeneousAssignmentBuilder.build`` throws ``PartitionAssignorException``."""
        spec = make_spec({"foo": 2}, {"a": ["foo", "missing"], "b": ["foo", "missing"]})
        with pytest.raises(PartitionAssignorError, match="topic missing which doesn't exist"):
            uniform_assign(spec)

    @pytest.mark.parametrize(
        ("targets", "message"),
        [
            ({"a": {"foo": [0, 1]}, "b": {"foo": [1]}}, "partition 1 of topic foo is in two members' previous targets"),
            ({"a": {"foo": [1, 1]}}, "partition 1 of topic foo is in two"),
            ({"a": {"foo": [4]}}, "holds partition 4 of topic foo, which has 4"),
            ({"a": {"foo": [-1]}}, "holds partition -1 of topic foo"),
        ],
    )
    @pytest.mark.parametrize("subscription", [["foo"], None])
    def test_an_inconsistent_previous_target_is_refused(self, targets, message, subscription) -> None:
        """Kafka's coordinator never builds such a target; its builders would hand the partition out twice."""
        b_topics = subscription if subscription is not None else ["foo", "bar"]  # None: heterogeneous
        spec = make_spec({"foo": 4, "bar": 1}, {"a": ["foo"], "b": b_topics}, targets)
        with pytest.raises(PartitionAssignorError, match=message):
            uniform_assign(spec)

    def test_more_members_than_partitions(self) -> None:
        """Kafka ``UniformHomogeneousAssignmentBuilder``: with fewer partitions than members, the last get none."""
        assert foo_lists(2, {"a": [], "b": [1], "c": []}) == {"a": [0], "b": [1], "c": []}

    def test_every_member_listed_even_without_partitions(self) -> None:
        spec = make_spec({"foo": 1}, {"a": [], "b": []})
        assert uniform_assign(spec) == {"a": {}, "b": {}}

    def test_empty_group(self) -> None:
        assert uniform_assign(make_spec({"foo": 3}, {})) == {}


class TestUniformHeterogeneous:
    def test_constrained_topic_first(self) -> None:
        # bar (3 partitions, one subscriber) is placed first, then foo evens out the loads.
        spec = make_spec({"foo": 3, "bar": 3}, {"a": ["foo"], "b": ["foo", "bar"]})
        assert uniform_assign(spec) == {"a": {"foo": [0, 1, 2]}, "b": {"bar": [0, 1, 2]}}

    def test_balance_is_per_topic_along_a_chain_of_subscriptions(self) -> None:
        """Kafka ``UniformHeterogeneousAssignmentBuilder.balanceTopics`` (its javadoc's 9/10/11 example): each topic's
        subscribers differ by at most one (t1: a 3, b 4; t2: b 4, c 5), though moving one partition of each topic
        down the chain would even the totals."""
        spec = make_spec({"t1": 6, "t2": 6}, {"a": ["t1"], "b": ["t1", "t2"], "c": ["t2"]})
        counts = {m: sum(map(len, topics.values())) for m, topics in uniform_assign(spec).items()}
        assert counts == {"a": 3, "b": 4, "c": 5}

    def test_joining_member_only_takes_what_balance_needs(self) -> None:
        """Kafka ``UniformHeterogeneousAssignmentBuilder.balanceTopic``: only the newcomer gains."""
        previous = {"a": {"t1": [0, 1, 2, 3]}, "b": {"t1": [4, 5], "t2": [0, 1]}, "c": {"t2": [2, 3, 4, 5]}}
        spec = make_spec(
            {"t1": 6, "t2": 6},
            {"a": ["t1"], "b": ["t1", "t2"], "c": ["t2"], "d": ["t1", "t2"]},
            previous,
        )
        assignment = uniform_assign(spec)
        counts = sorted(sum(map(len, topics.values())) for topics in assignment.values())
        assert counts == [3, 3, 3, 3]
        # Exactly three partitions move, all of them to "d"; nobody else gains anything.
        for member_id, topics in previous.items():
            for topic_id, partitions in assignment[member_id].items():
                assert set(partitions) <= set(topics[topic_id])
        # Givers are the most loaded (ties: the last in iteration order first), each giving its highest partition.
        assert assignment["d"] == {"t1": [3, 5], "t2": [5]}

    def test_balanced_valid_target_is_kept_as_is(self) -> None:
        previous = {"a": {"t1": [3, 0]}, "b": {"t1": [1], "t2": [1]}, "c": {"t2": [0], "t1": [2]}}
        spec = make_spec({"t1": 4, "t2": 2}, {"a": ["t1"], "b": ["t1", "t2"], "c": ["t1", "t2"]}, previous)
        as_sets = {m: {t: set(p) for t, p in topics.items()} for m, topics in uniform_assign(spec).items()}
        assert as_sets == {m: {t: set(p) for t, p in topics.items()} for m, topics in previous.items()}

    def test_unsubscribed_claim_does_not_count(self) -> None:
        """Kafka ``UniformHeterogeneousAssignmentBuilder.maybeRevokePartitions``: "a" no longer subscribes to bar,
        so its old claim on bar-0 is dropped and does not clash with "z"'s."""
        spec = make_spec(
            {"foo": 1, "bar": 3},
            {"a": ["foo"], "b": ["bar"], "c": ["bar"], "z": ["bar"]},
            {"a": {"bar": [0]}, "b": {"bar": [1]}, "z": {"bar": [0]}},
        )
        assert uniform_assign(spec) == {"a": {"foo": [0]}, "b": {"bar": [1]}, "c": {"bar": [2]}, "z": {"bar": [0]}}

    def test_among_equally_loaded_givers_the_last_in_iteration_order_gives_its_highest_partition(self) -> None:
        """Kafka ``MemberAssignmentBalancer.nextMostLoadedMember`` walks the most loaded from the highest member
        index down, and ``balanceTopic`` takes that member's highest partition: "b" (after "a") gives t1-5."""
        spec = make_spec(
            {"t1": 6, "t2": 1},
            {"a": ["t1"], "b": ["t1"], "c": ["t1", "t2"]},
            {"a": {"t1": [0, 1, 2]}, "b": {"t1": [3, 4, 5]}, "c": {"t2": [0]}},
        )
        assert uniform_assign(spec) == {"a": {"t1": [0, 1, 2]}, "b": {"t1": [3, 4]}, "c": {"t1": [5], "t2": [0]}}

    def test_member_without_subscription_gets_nothing(self) -> None:
        spec = make_spec({"t1": 2}, {"a": ["t1"], "b": []}, {"b": {"t1": [0]}})
        assert uniform_assign(spec) == {"a": {"t1": [0, 1]}, "b": {}}


class TestRange:
    def test_kafka_example_co_partitions(self) -> None:
        spec = make_spec({"t1": 3, "t2": 3}, {"M0": ["t1", "t2"], "M1": ["t1", "t2"]})
        assert range_assign(spec) == {"M0": {"t1": [0, 1], "t2": [0, 1]}, "M1": {"t1": [2], "t2": [2]}}

    def test_kafka_example_different_subscriptions(self) -> None:
        spec = make_spec(
            {"t1": 3, "t2": 3, "t3": 2},
            {"A": ["t1", "t2"], "B": ["t3"], "C": ["t2", "t3"]},
        )
        assert range_assign(spec) == {
            "A": {"t1": [0, 1, 2], "t2": [0, 1]},
            "B": {"t3": [0]},
            "C": {"t2": [2], "t3": [1]},
        }

    def test_static_members_first_by_instance_id(self) -> None:
        spec = make_spec(
            {"t": 5},
            {"a": ["t"], "b": ["t"], "c": ["t"]},
            instance_ids={"a": "i-2", "c": "i-1"},
        )
        assert range_assign(spec) == {"c": {"t": [0, 1]}, "a": {"t": [2, 3]}, "b": {"t": [4]}}

    def test_static_member_keeps_its_range_under_a_new_member_id(self) -> None:
        before = make_spec({"t": 5}, {"a": ["t"], "b": ["t"], "c": ["t"]}, instance_ids={"a": "A", "c": "C"})
        after = make_spec({"t": 5}, {"z": ["t"], "b": ["t"], "c": ["t"]}, instance_ids={"z": "A", "c": "C"})
        assert range_assign(after)["z"] == range_assign(before)["a"]

    def test_previous_target_is_ignored(self) -> None:
        """Kafka ``RangeAssignor`` (October 2024) has no stickiness."""
        spec = make_spec({"t": 2}, {"a": ["t"], "b": ["t"]}, {"b": {"t": [0, 1], "gone": [3]}})
        assert range_assign(spec) == {"a": {"t": [0]}, "b": {"t": [1]}}

    def test_more_members_than_partitions(self) -> None:
        spec = make_spec({"t": 1}, {"a": ["t"], "b": ["t"]})
        assert range_assign(spec) == {"a": {"t": [0]}, "b": {}}

    def test_missing_topic_is_refused(self) -> None:
        """Kafka ``RangeAssignor.assignHeterogeneousGroup`` throws ``PartitionAssignorException``."""
        spec = make_spec({"t": 1}, {"a": ["t", "missing"], "b": ["t"]})
        with pytest.raises(PartitionAssignorError, match="Member a is subscribed to a non-existent topic missing"):
            range_assign(spec)


@pytest.mark.parametrize(("assignor", "name"), [(UniformAssignor(), "uniform"), (RangeAssignor(), "range")])
def test_assignor_objects_follow_the_protocol(assignor: PartitionAssignor, name: str) -> None:
    """Kafka ``ConsumerGroupPartitionAssignor``: each server assignor has its name and assigns a spec."""
    assert isinstance(assignor, PartitionAssignor)
    assert assignor.name == name
    spec = foo_spec(3, {"a": [], "b": []})
    expected = uniform_assign(spec) if name == "uniform" else range_assign(spec)
    assert assignor.assign(spec) == expected
