"""Property tests of the server-side assignors (Hypothesis).

Specs are consistent, as Kafka's coordinator builds them: subscribed topics exist and every previous
target names existing partitions, each claimed once (a target may still hold topics its member no longer
subscribes to). Exact assignments are pinned by Kafka's own unit tests (``test_assignors_kafka_golden``);
these check what must hold for any group.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from kip_lab.assignors import (
    AssignmentSpec,
    GroupAssignment,
    MemberSubscription,
    SubscriptionType,
    TopicMetadata,
    range_assign,
    uniform_assign,
)
from kip_lab.assignors.java_hash_order import (
    bucket,
    capacity_after_puts,
    capacity_for_copy,
    string_hash,
    topic_id_hash,
)

# Topic ids as Kafka writes them (Uuid.toString); GONE_TOPIC was deleted: it appears in targets only.
TOPIC_POOL = ["T1-A4s3VTwiI5CTbEp6POw", "T2-B4s3VTwiI5YHbPp6YUe", "T3-CU8fVTLCz5YMkLoDQsa", "T4-Tw9fVTLCz5HbPp6YQsa"]
GONE_TOPIC = "gone-Tw9fVTLCz5HbPp6YQ"
MEMBER_IDS = st.text(alphabet="abAB09-", min_size=1, max_size=3)
Assignor = Callable[[AssignmentSpec], GroupAssignment]
PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)


@st.composite
def specs(draw: st.DrawFn, homogeneous: bool) -> AssignmentSpec:
    """Small consistent specs; targets hold partitions of subscribed and unsubscribed topics alike."""
    topic_ids = draw(st.lists(st.sampled_from(TOPIC_POOL), min_size=1, max_size=len(TOPIC_POOL), unique=True))
    sizes = {t: draw(st.integers(0, 9)) for t in topic_ids}
    member_ids = draw(st.lists(MEMBER_IDS, max_size=7, unique=True))

    def topic_subset(min_size: int) -> frozenset[str]:
        return frozenset(draw(st.lists(st.sampled_from(topic_ids), min_size=min_size, max_size=4)))

    shared = topic_subset(min_size=1)
    subscriptions = {m: shared if homogeneous else topic_subset(min_size=0) for m in member_ids}

    targets: dict[str, dict[str, list[int]]] = {m: {} for m in member_ids}
    owners = st.sampled_from([None, *member_ids])
    for topic_id, size in [*sizes.items(), (GONE_TOPIC, 3)]:
        for partition in range(size):
            owner = draw(owners)
            if owner is not None:
                targets[owner].setdefault(topic_id, []).append(partition)
    for target in targets.values():
        for topic_id in list(target):
            target[topic_id] = draw(st.permutations(target[topic_id]))

    # Some members are static; instance ids are unique but ordered unlike member ids.
    instance_numbers = draw(st.permutations(range(len(member_ids))))
    instance_ids = {
        m: f"i{k}" if draw(st.booleans()) else None for m, k in zip(member_ids, instance_numbers, strict=True)
    }
    return AssignmentSpec(
        members={
            m: MemberSubscription(
                subscribed_topic_ids=subscriptions[m],
                target_partitions=targets[m],
                instance_id=instance_ids[m],
            )
            for m in member_ids
        },
        topics={t: TopicMetadata(topic_id=t, topic_name=t[:2], num_partitions=n) for t, n in sizes.items()},
    )


def held_before(spec: AssignmentSpec, member_id: str) -> set[tuple[str, int]]:
    """The partitions of subscribed topics in a member's previous target."""
    member = spec.members[member_id]
    return {
        (topic_id, partition)
        for topic_id, partitions in member.target_partitions.items()
        if topic_id in member.subscribed_topic_ids
        for partition in partitions
    }


def as_sets(assignment: GroupAssignment) -> dict[str, dict[str, list[int]]]:
    """The assignment with every partition list sorted: what Kafka's sets hold."""
    return {m: {t: sorted(p) for t, p in sorted(topics.items())} for m, topics in sorted(assignment.items())}


def counts(assignment: GroupAssignment) -> dict[str, int]:
    return {m: sum(map(len, topics.values())) for m, topics in assignment.items()}


def subscribers(spec: AssignmentSpec, topic_id: str) -> list[str]:
    return [m for m, member in spec.members.items() if topic_id in member.subscribed_topic_ids]


def assert_covers_exactly_once(spec: AssignmentSpec, assignment: GroupAssignment) -> None:
    assert set(assignment) == set(spec.members)
    for member_id, topics in assignment.items():
        for topic_id, partitions in topics.items():
            assert partitions, "no empty lists"
            assert topic_id in spec.topics
            assert topic_id in spec.members[member_id].subscribed_topic_ids
    for topic_id, topic in spec.topics.items():
        owned = sorted(p for topics in assignment.values() for p in topics.get(topic_id, []))
        expected = list(range(topic.num_partitions)) if subscribers(spec, topic_id) else []
        assert owned == expected, topic_id


def assert_no_improving_move(spec: AssignmentSpec, assignment: GroupAssignment) -> None:
    """No partition can go from X to a subscriber Y of its topic with count(X) - count(Y) > 1."""
    count = counts(assignment)
    for topic_id in spec.topics:
        holders = [m for m, topics in assignment.items() if topics.get(topic_id)]
        fewest = min((count[m] for m in subscribers(spec, topic_id)), default=0)
        for holder in holders:
            assert count[holder] - fewest <= 1, (topic_id, holder, count)


def reordered(spec: AssignmentSpec, shuffle: Callable[[list], list]) -> AssignmentSpec:
    """The same spec with every dict and list in another order, except among keys sharing a hash bucket.

    Java iterates keys that share a bucket in insertion order, which the spec's own order stands for.
    """
    members = spec.members
    member_bucket = bucket_of(string_hash, capacity_after_puts(len(members)))

    def target(member_id: str) -> dict[str, list[int]]:
        held = members[member_id].target_partitions
        topic_bucket = bucket_of(topic_id_hash, capacity_after_puts(len(held)))
        return {
            t: keep_bucket_ties(held[t], shuffle(list(held[t])), bucket_of(int, capacity_for_copy(len(held[t]))))
            for t in keep_bucket_ties(list(held), shuffle(list(held)), topic_bucket)
        }

    return AssignmentSpec(
        members={
            m: MemberSubscription(members[m].subscribed_topic_ids, target(m), members[m].instance_id)
            for m in keep_bucket_ties(list(members), shuffle(list(members)), member_bucket)
        },
        topics={t: spec.topics[t] for t in shuffle(list(spec.topics))},
    )


def bucket_of(hash_code: Callable, capacity: int) -> Callable:
    return lambda key: bucket(hash_code(key), capacity)


def keep_bucket_ties(original: list, shuffled: list, bucket_key: Callable) -> list:
    """``shuffled``, with the keys of each bucket put back in their ``original`` relative order."""
    queues: dict[int, list] = {}
    for key in reversed(original):
        queues.setdefault(bucket_key(key), []).append(key)
    return [queues[bucket_key(key)].pop() for key in shuffled]


def with_targets(spec: AssignmentSpec, assignment: GroupAssignment) -> AssignmentSpec:
    """The same group, each member's target replaced by its entry in ``assignment``."""
    return AssignmentSpec(
        members={
            m: MemberSubscription(member.subscribed_topic_ids, assignment[m], member.instance_id)
            for m, member in spec.members.items()
        },
        topics=spec.topics,
    )


any_specs = st.one_of(specs(homogeneous=True), specs(homogeneous=False))


class TestUniformHomogeneous:
    @PROPERTY_SETTINGS
    @given(specs(homogeneous=True))
    def test_balanced_within_one(self, spec: AssignmentSpec) -> None:
        """Kafka ``UniformHomogeneousAssignmentBuilder``: quotas ``P // N``, ``P % N`` of them one more."""
        sizes = counts(uniform_assign(spec)).values()
        assert not sizes or max(sizes) - min(sizes) <= 1

    @PROPERTY_SETTINGS
    @given(specs(homogeneous=True))
    def test_keeps_as_much_of_the_previous_target_as_its_quota_allows(self, spec: AssignmentSpec) -> None:
        """Kafka ``UniformHomogeneousAssignmentBuilder.maybeRevokePartitions``: a member keeps up to its quota."""
        assignment = uniform_assign(spec)
        for member_id, topics in assignment.items():
            now = {(t, p) for t, partitions in topics.items() for p in partitions}
            before = held_before(spec, member_id)
            assert len(now & before) == min(len(now), len(before))


class TestUniformAnySubscriptions:
    @PROPERTY_SETTINGS
    @given(any_specs)
    def test_covers_every_partition_once_and_only_for_subscribers(self, spec: AssignmentSpec) -> None:
        """Kafka ``UniformAssignor.assign``: every subscribed partition goes to one subscriber."""
        assert_covers_exactly_once(spec, uniform_assign(spec))

    @PROPERTY_SETTINGS
    @given(any_specs)
    def test_no_partition_could_move_to_a_less_loaded_subscriber(self, spec: AssignmentSpec) -> None:
        """Kafka ``UniformHeterogeneousAssignmentBuilder.balance``: per topic, within one (small groups converge)."""
        assert_no_improving_move(spec, uniform_assign(spec))

    @PROPERTY_SETTINGS
    @given(specs(homogeneous=False))
    def test_keeps_every_previous_partition_that_balance_allows(self, spec: AssignmentSpec) -> None:
        """Kafka ``UniformHeterogeneousAssignmentBuilder``: partitions only move from the most loaded."""
        assignment = uniform_assign(spec)
        count = counts(assignment)
        for member_id in spec.members:
            lost = [(t, p) for t, p in held_before(spec, member_id) if p not in assignment[member_id].get(t, [])]
            for topic_id, _ in lost:
                fewest = min(count[m] for m in subscribers(spec, topic_id))
                assert count[member_id] >= fewest, (member_id, topic_id, count)

    @PROPERTY_SETTINGS
    @given(any_specs)
    def test_idempotent_on_its_own_output(self, spec: AssignmentSpec) -> None:
        """Kafka ``UniformAssignor``: a balanced target is kept as it is."""
        assignment = uniform_assign(spec)
        assert as_sets(uniform_assign(with_targets(spec, assignment))) == as_sets(assignment)

    @PROPERTY_SETTINGS
    @given(any_specs, st.randoms())
    def test_dict_order_never_shows(self, spec: AssignmentSpec, random) -> None:
        """Under ``MapOrder.JAVA_HASH`` the order of Kafka's hash maps decides; the spec's order only among keys
        sharing a bucket (Java's insertion order)."""

        def shuffle(items: list) -> list:
            random.shuffle(items)
            return items

        shuffled = uniform_assign(reordered(spec, shuffle))
        assert json.dumps(as_sets(shuffled)) == json.dumps(as_sets(uniform_assign(spec)))
        assert list(shuffled) == list(uniform_assign(spec))

    @PROPERTY_SETTINGS
    @given(any_specs)
    def test_the_heterogeneous_builder_serves_any_group(self, spec: AssignmentSpec) -> None:
        """Kafka ``UniformAssignor.assign`` picks the builder by ``GroupSpec.subscriptionType``; the heterogeneous
        one covers equal subscriptions too, and balances them within one."""
        assignment = uniform_assign(AssignmentSpec(spec.members, spec.topics, SubscriptionType.HETEROGENEOUS))
        assert_covers_exactly_once(spec, assignment)
        assert_no_improving_move(spec, assignment)


class TestRange:
    @PROPERTY_SETTINGS
    @given(any_specs)
    def test_covers_every_partition_once_and_only_for_subscribers(self, spec: AssignmentSpec) -> None:
        assert_covers_exactly_once(spec, range_assign(spec))

    @PROPERTY_SETTINGS
    @given(any_specs)
    def test_contiguous_ranges_balanced_per_topic_in_member_order(self, spec: AssignmentSpec) -> None:
        assignment = range_assign(spec)
        static = sorted((member.instance_id, m) for m, member in spec.members.items() if member.instance_id)
        dynamic = sorted(m for m, member in spec.members.items() if member.instance_id is None)
        order = [m for _, m in static] + dynamic
        for topic_id, topic in spec.topics.items():
            ranges = [assignment[m].get(topic_id, []) for m in order if m in subscribers(spec, topic_id)]
            if ranges:
                assert [p for r in ranges for p in r] == list(range(topic.num_partitions))
            sizes = [len(r) for r in ranges]
            assert sizes == sorted(sizes, reverse=True)
            assert not sizes or sizes[0] - sizes[-1] <= 1

    @PROPERTY_SETTINGS
    @given(any_specs)
    def test_co_partitions_topics_with_equal_size_and_subscribers(self, spec: AssignmentSpec) -> None:
        assignment = range_assign(spec)
        for first in spec.topics:
            for second in spec.topics:
                same_size = spec.topics[first].num_partitions == spec.topics[second].num_partitions
                if same_size and set(subscribers(spec, first)) == set(subscribers(spec, second)):
                    for topics in assignment.values():
                        assert topics.get(first) == topics.get(second)

    @PROPERTY_SETTINGS
    @given(any_specs, st.randoms())
    def test_idempotent_and_independent_of_dict_order(self, spec: AssignmentSpec, random) -> None:
        def shuffle(items: list) -> list:
            random.shuffle(items)
            return items

        assignment = range_assign(spec)
        assert range_assign(with_targets(spec, assignment)) == assignment
        assert json.dumps(range_assign(reordered(spec, shuffle))) == json.dumps(assignment)


@PROPERTY_SETTINGS
@given(any_specs)
def test_assignors_neither_change_nor_share_the_spec(spec: AssignmentSpec) -> None:
    before = repr(spec)
    for assignor in (uniform_assign, range_assign):
        assignment = assignor(spec)
        for topics in assignment.values():
            for partitions in topics.values():
                partitions.append(-1)
        assert repr(spec) == before, assignor.__name__
