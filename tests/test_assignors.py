"""Example-based tests of the server-side assignors: the KIP's case studies and edge cases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from kip_lab.assignors import (
    AssignmentSpec,
    MemberSubscription,
    PartitionAssignor,
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
        assert foo_lists(6, {"A": [0, 1, 3], "C": [2, 5, 4], "B": []}) == {
            "A": [0, 1],
            "B": [3, 4],
            "C": [2, 5],
        }


class TestUniformHomogeneousRules:
    def test_from_scratch_hands_out_round_robin_in_member_id_order(self) -> None:
        # Step 4 with everybody empty: fewest first, ties by id, so partition k goes to
        # member k mod N; the extra slot goes to the lowest id.
        assert foo_lists(7, {"m2": [], "m1": [], "m3": []}) == {
            "m1": [0, 3, 6],
            "m2": [1, 4],
            "m3": [2, 5],
        }

    def test_extra_slots_go_to_the_members_holding_most(self) -> None:
        # 7 partitions over 3 members: quotas 2, 2, 2 plus one extra slot, which goes to
        # "c" (holds 4) rather than "a" (lowest id). "c" releases 6, which "a" picks up.
        assert foo_lists(7, {"a": [0], "b": [1, 2], "c": [3, 4, 5, 6]}) == {
            "a": [0, 6],
            "b": [1, 2],
            "c": [3, 4, 5],
        }

    def test_extra_slot_ties_go_to_the_lower_member_id(self) -> None:
        # 4 partitions over 3 members: one extra slot, "a" and "b" both hold 2.
        assert foo_lists(4, {"b": [0, 1], "a": [2, 3], "c": []}) == {"a": [2, 3], "b": [0], "c": [1]}

    def test_previous_target_read_in_topic_id_order_then_list_order(self) -> None:
        # Quota 2 each; "a" keeps the first two of bar [5, 1] then foo [0]: bar-5 and bar-1.
        spec = make_spec(
            {"bar": 6, "foo": 2},
            {"a": ["foo", "bar"], "b": ["foo", "bar"], "c": ["foo", "bar"], "d": ["foo", "bar"]},
            {"a": {"foo": [0], "bar": [5, 1]}},
        )
        assignment = uniform_assign(spec)
        assert assignment["a"] == {"bar": [5, 1]}
        # Unassigned in (topic, partition) order: bar-0, bar-2, bar-3, bar-4, foo-0, foo-1,
        # handed out to the least loaded (b, c, d at 0) in id order.
        assert assignment["b"] == {"bar": [0, 4]}
        assert assignment["c"] == {"bar": [2], "foo": [0]}
        assert assignment["d"] == {"bar": [3], "foo": [1]}

    def test_stale_partitions_and_topics_are_dropped(self) -> None:
        spec = make_spec(
            {"foo": 2},
            {"a": ["foo"], "b": ["foo"]},
            {"a": {"foo": [5, 0], "deleted": [0]}, "b": {"foo": [-1]}},
        )
        assert uniform_assign(spec) == {"a": {"foo": [0]}, "b": {"foo": [1]}}

    def test_unsubscribed_topic_is_dropped(self) -> None:
        spec = make_spec({"foo": 2, "bar": 2}, {"a": ["foo"], "b": ["foo"]}, {"a": {"bar": [0, 1]}})
        assert uniform_assign(spec) == {"a": {"foo": [0]}, "b": {"foo": [1]}}

    def test_subscription_to_missing_topic_is_ignored(self) -> None:
        spec = make_spec({"foo": 2}, {"a": ["foo", "missing"], "b": ["foo"]})
        assert uniform_assign(spec) == {"a": {"foo": [0]}, "b": {"foo": [1]}}

    def test_partition_claimed_twice_stays_with_the_lower_member_id(self) -> None:
        spec = make_spec({"foo": 4}, {"a": ["foo"], "b": ["foo"]}, {"b": {"foo": [0, 1]}, "a": {"foo": [1, 1]}})
        # "a" keeps 1 (once), "b" keeps 0; the rest is handed out.
        assert uniform_assign(spec) == {"a": {"foo": [1, 2]}, "b": {"foo": [0, 3]}}

    def test_more_members_than_partitions(self) -> None:
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

    def test_balances_across_overlapping_subscriptions(self) -> None:
        spec = make_spec({"t1": 6, "t2": 6}, {"a": ["t1"], "b": ["t1", "t2"], "c": ["t2"]})
        counts = {m: sum(map(len, topics.values())) for m, topics in uniform_assign(spec).items()}
        assert counts == {"a": 4, "b": 4, "c": 4}

    def test_joining_member_only_takes_what_balance_needs(self) -> None:
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
        # Givers are the most loaded (ties: lowest id) and give their last partition.
        assert assignment["d"] == {"t1": [3, 5], "t2": [5]}

    def test_balanced_valid_target_is_kept_as_is(self) -> None:
        previous = {"a": {"t1": [3, 0]}, "b": {"t1": [1], "t2": [1]}, "c": {"t2": [0], "t1": [2]}}
        spec = make_spec({"t1": 4, "t2": 2}, {"a": ["t1"], "b": ["t1", "t2"], "c": ["t1", "t2"]}, previous)
        assert uniform_assign(spec) == previous

    def test_unsubscribed_claim_does_not_win_a_contested_partition(self) -> None:
        # "a" no longer subscribes to bar, so its old claim on bar-0 must not beat "z"'s.
        spec = make_spec(
            {"foo": 1, "bar": 3},
            {"a": ["foo"], "b": ["bar"], "c": ["bar"], "z": ["bar"]},
            {"a": {"bar": [0]}, "b": {"bar": [1, 1]}, "z": {"bar": [0]}},
        )
        assert uniform_assign(spec) == {"a": {"foo": [0]}, "b": {"bar": [1]}, "c": {"bar": [2]}, "z": {"bar": [0]}}

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
        spec = make_spec({"t": 2}, {"a": ["t"], "b": ["t"]}, {"b": {"t": [0, 1, 7], "gone": [3]}})
        assert range_assign(spec) == {"a": {"t": [0]}, "b": {"t": [1]}}

    def test_more_members_than_partitions_and_missing_topic(self) -> None:
        spec = make_spec({"t": 1}, {"a": ["t", "missing"], "b": ["t"]})
        assert range_assign(spec) == {"a": {"t": [0]}, "b": {}}


@pytest.mark.parametrize(("assignor", "name"), [(UniformAssignor(), "uniform"), (RangeAssignor(), "range")])
def test_assignor_objects_follow_the_protocol(assignor: PartitionAssignor, name: str) -> None:
    assert isinstance(assignor, PartitionAssignor)
    assert assignor.name == name
    spec = foo_spec(3, {"a": [], "b": []})
    expected = uniform_assign(spec) if name == "uniform" else range_assign(spec)
    assert assignor.assign(spec) == expected
