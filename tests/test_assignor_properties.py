"""Property tests of the server-side assignors (Hypothesis).

The homogeneous uniform assignor is also checked against ``reference_homogeneous``, a
literal, slow transcription of the reference algorithm, partition by partition.
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
    TopicMetadata,
    range_assign,
    uniform_assign,
)

TOPIC_POOL = ["t0", "t1", "t2", "t3"]
GONE_TOPIC = "gone"  # appears in subscriptions and targets, never in the metadata
MEMBER_IDS = st.text(alphabet="abAB09-", min_size=1, max_size=3)
Assignor = Callable[[AssignmentSpec], GroupAssignment]
PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)


@st.composite
def specs(draw: st.DrawFn, homogeneous: bool, conflicts: bool = False) -> AssignmentSpec:
    """Small specs whose targets mix valid, stale and (optionally) doubly claimed partitions."""
    topic_ids = draw(st.lists(st.sampled_from(TOPIC_POOL), min_size=1, max_size=len(TOPIC_POOL), unique=True))
    sizes = {t: draw(st.integers(0, 9)) for t in topic_ids}
    member_ids = draw(st.lists(MEMBER_IDS, max_size=7, unique=True))
    subscribable = [*topic_ids, GONE_TOPIC]

    def topic_subset(min_size: int) -> frozenset[str]:
        return frozenset(draw(st.lists(st.sampled_from(subscribable), min_size=min_size, max_size=4)))

    shared = topic_subset(min_size=1)
    subscriptions = {m: shared if homogeneous else topic_subset(min_size=0) for m in member_ids}

    # The previous world: more partitions than exist now (shrunk or deleted topics).
    targets: dict[str, dict[str, list[int]]] = {m: {} for m in member_ids}
    owners = st.sampled_from([None, *member_ids])
    for topic_id in subscribable:
        for partition in range(sizes.get(topic_id, 3) + draw(st.integers(0, 2))):
            claimants = [draw(owners), draw(owners) if conflicts else None]
            for owner in dict.fromkeys(claimants):
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
        topics={t: TopicMetadata(topic_id=t, topic_name=t.upper(), num_partitions=n) for t, n in sizes.items()},
    )


def valid_previous(spec: AssignmentSpec, member_id: str) -> list[tuple[str, int]]:
    """A member's previous target sequence, with stale and already-claimed entries dropped.

    Claims are settled in member-id order, as the assignors promise.
    """
    taken: set[tuple[str, int]] = set()
    for other in sorted(spec.members):
        sequence = []
        member = spec.members[other]
        for topic_id in sorted(member.target_partitions):
            if topic_id not in spec.topics or topic_id not in member.subscribed_topic_ids:
                continue
            for partition in member.target_partitions[topic_id]:
                if 0 <= partition < spec.topics[topic_id].num_partitions and (topic_id, partition) not in taken:
                    taken.add((topic_id, partition))
                    sequence.append((topic_id, partition))
        if other == member_id:
            return sequence
    raise KeyError(member_id)


def reference_homogeneous(spec: AssignmentSpec) -> GroupAssignment:
    """The homogeneous reference algorithm, one partition at a time."""
    member_ids = sorted(spec.members)
    if not member_ids:
        return {}
    subscribed = sorted(t for t in spec.members[member_ids[0]].subscribed_topic_ids if t in spec.topics)
    everything = [(t, p) for t in subscribed for p in range(spec.topics[t].num_partitions)]
    previous = {m: valid_previous(spec, m) for m in member_ids}

    base, extra = divmod(len(everything), len(member_ids))
    by_holding = sorted(member_ids, key=lambda m: (-len(previous[m]), m))
    quota = {m: base + (1 if by_holding.index(m) < extra else 0) for m in member_ids}

    owned = {m: previous[m][: quota[m]] for m in member_ids}
    kept = {tp for sequence in owned.values() for tp in sequence}
    for topic_partition in everything:
        if topic_partition in kept:
            continue
        below_quota = [m for m in member_ids if len(owned[m]) < quota[m]]
        receiver = min(below_quota, key=lambda m: (len(owned[m]), m))
        owned[receiver].append(topic_partition)

    result: GroupAssignment = {}
    for member_id in member_ids:
        topics: dict[str, list[int]] = {}
        for topic_id, partition in owned[member_id]:
            topics.setdefault(topic_id, []).append(partition)
        result[member_id] = topics
    return result


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
    """The same spec with every dict (members, topics, each target) in another order."""
    return AssignmentSpec(
        members={
            m: MemberSubscription(
                subscribed_topic_ids=spec.members[m].subscribed_topic_ids,
                target_partitions={
                    t: spec.members[m].target_partitions[t] for t in shuffle(list(spec.members[m].target_partitions))
                },
                instance_id=spec.members[m].instance_id,
            )
            for m in shuffle(list(spec.members))
        },
        topics={t: spec.topics[t] for t in shuffle(list(spec.topics))},
    )


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
    @given(specs(homogeneous=True, conflicts=True))
    def test_equals_the_slow_reference(self, spec: AssignmentSpec) -> None:
        assert uniform_assign(spec) == reference_homogeneous(spec)

    @PROPERTY_SETTINGS
    @given(specs(homogeneous=True))
    def test_balanced_within_one(self, spec: AssignmentSpec) -> None:
        sizes = counts(uniform_assign(spec)).values()
        assert not sizes or max(sizes) - min(sizes) <= 1

    @PROPERTY_SETTINGS
    @given(specs(homogeneous=True))
    def test_keeps_as_much_of_the_previous_target_as_its_quota_allows(self, spec: AssignmentSpec) -> None:
        assignment = uniform_assign(spec)
        for member_id, topics in assignment.items():
            now = {(t, p) for t, partitions in topics.items() for p in partitions}
            before = valid_previous(spec, member_id)
            quota = len(now)
            assert len(now & set(before)) == min(quota, len(before))
            assert set(before[:quota]) <= now


class TestUniformAnySubscriptions:
    @PROPERTY_SETTINGS
    @given(st.one_of(specs(homogeneous=True, conflicts=True), specs(homogeneous=False, conflicts=True)))
    def test_covers_every_partition_once_and_only_for_subscribers(self, spec: AssignmentSpec) -> None:
        assert_covers_exactly_once(spec, uniform_assign(spec))

    @PROPERTY_SETTINGS
    @given(any_specs)
    def test_no_partition_could_move_to_a_less_loaded_subscriber(self, spec: AssignmentSpec) -> None:
        assert_no_improving_move(spec, uniform_assign(spec))

    @PROPERTY_SETTINGS
    @given(specs(homogeneous=False))
    def test_keeps_every_previous_partition_that_balance_allows(self, spec: AssignmentSpec) -> None:
        # A member only loses a still-valid previous partition if it had more than a
        # subscriber of that topic has at the end, plus one.
        assignment = uniform_assign(spec)
        count = counts(assignment)
        for member_id in spec.members:
            lost = [(t, p) for t, p in valid_previous(spec, member_id) if p not in assignment[member_id].get(t, [])]
            for topic_id, _ in lost:
                fewest = min(count[m] for m in subscribers(spec, topic_id))
                assert count[member_id] >= fewest, (member_id, topic_id, count)

    @PROPERTY_SETTINGS
    @given(any_specs, st.randoms())
    def test_stale_and_losing_claims_leave_a_settled_assignment_alone(self, spec: AssignmentSpec, random) -> None:
        settled = uniform_assign(spec)
        owners = {(t, p): m for m, topics in settled.items() for t, partitions in topics.items() for p in partitions}
        noisy = {}
        for member_id, member in spec.members.items():
            target = {t: list(partitions) for t, partitions in settled[member_id].items()}
            for (topic_id, partition), owner in owners.items():
                if owner < member_id and random.random() < 0.3:  # the lower id owns it
                    target.setdefault(topic_id, []).append(partition)
            for topic_id in [*spec.topics, GONE_TOPIC]:
                if topic_id not in member.subscribed_topic_ids:
                    target[topic_id] = [0, 1]
                elif topic_id in spec.topics:
                    target.setdefault(topic_id, []).append(spec.topics[topic_id].num_partitions)
            noisy[member_id] = target
        assert uniform_assign(with_targets(spec, noisy)) == settled

    @PROPERTY_SETTINGS
    @given(any_specs)
    def test_idempotent_on_its_own_output(self, spec: AssignmentSpec) -> None:
        assignment = uniform_assign(spec)
        assert uniform_assign(with_targets(spec, assignment)) == assignment

    @PROPERTY_SETTINGS
    @given(
        st.one_of(specs(homogeneous=True, conflicts=True), specs(homogeneous=False, conflicts=True)),
        st.randoms(),
    )
    def test_dict_order_never_shows(self, spec: AssignmentSpec, random) -> None:
        def shuffle(items: list) -> list:
            random.shuffle(items)
            return items

        # json.dumps keeps dict order, so this also compares the order of keys.
        assert json.dumps(uniform_assign(reordered(spec, shuffle))) == json.dumps(uniform_assign(spec))


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
@given(st.one_of(specs(homogeneous=True, conflicts=True), specs(homogeneous=False, conflicts=True)))
def test_assignors_neither_change_nor_share_the_spec(spec: AssignmentSpec) -> None:
    before = repr(spec)
    for assignor in (uniform_assign, range_assign):
        assignment = assignor(spec)
        for topics in assignment.values():
            for partitions in topics.values():
                partitions.append(-1)
        assert repr(spec) == before, assignor.__name__
