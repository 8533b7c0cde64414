"""The client-side assignors of the classic protocol: Kafka's documented examples and KIP-429's rules.

Partitions are written ``"t0p1"`` as in Kafka's javadoc; ``assigned`` turns an assignment
back into that notation, in the order the wire keeps (sorted).
"""

from __future__ import annotations

import json

import pytest

from kip_lab.assignors.client import (
    ClientAssignorError,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    client_assignor,
    partitions_transferring_ownership,
)
from kip_lab.assignors.java_hash_order import bucket, string_hash
from kip_lab.protocol.consumer_protocol import (
    HIGHEST_CONSUMER_PROTOCOL_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)


def tp(name: str) -> tuple[str, int]:
    """``"t0p1"`` -> ``("t0", 1)``; ``"t-5"`` -> ``("t", 5)`` (the notation of KIP-429's examples)."""
    topic, _, partition = name.rpartition("p") if "-" not in name else name.rpartition("-")
    return topic, int(partition)


def sub(
    topics: list[str],
    owned: str = "",
    generation: int = -1,
    version: int = HIGHEST_CONSUMER_PROTOCOL_VERSION,
    user_data: bytes | None = None,
) -> ConsumerProtocolSubscription:
    return ConsumerProtocolSubscription(
        version=version,
        topics=topics,
        owned_partitions=[tp(name) for name in owned.split()],
        generation_id=generation,
        user_data=user_data,
    )


def assigned(result: dict[str, ConsumerProtocolAssignment]) -> dict[str, str]:
    return {
        member_id: " ".join(f"{topic}p{partition}" for topic, partition in a.assigned_partitions)
        for member_id, a in result.items()
    }


def as_owned(result: dict[str, ConsumerProtocolAssignment]) -> dict[str, str]:
    """The ``t-N`` notation for a single-topic ``t``, to feed back as owned partitions."""
    return {m: " ".join(f"{t}-{p}" for t, p in a.assigned_partitions) for m, a in result.items()}


# -- the factory and the protocol each assignor claims -----------------------------------
@pytest.mark.parametrize(
    ("name", "kind", "protocols"),
    [
        ("range", RangeAssignor, [RebalanceProtocol.EAGER]),
        ("roundrobin", RoundRobinAssignor, [RebalanceProtocol.EAGER]),
        ("sticky", StickyAssignor, [RebalanceProtocol.EAGER]),
        ("cooperative-sticky", CooperativeStickyAssignor, [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]),
    ],
)
def test_the_factory_builds_each_kafka_assignor(
    name: str, kind: type[ConsumerPartitionAssignor], protocols: list[RebalanceProtocol]
) -> None:
    assignor = client_assignor(name)
    assert type(assignor) is kind and assignor.name == name
    assert assignor.supported_protocols() == protocols
    assert assignor.version() == 0
    assert client_assignor(name) is not assignor  # each consumer holds its own (stateful) instance


def test_an_unknown_name_lists_the_known_ones() -> None:
    """The Lab's assignor factory (Kafka resolves ``partition.assignment.strategy`` in ``ConsumerConfig``): an unknown
    name lists the known ones."""
    with pytest.raises(ClientAssignorError, match=r"'uniform'; known: cooperative-sticky, range, roundrobin, sticky"):
        client_assignor("uniform")


# -- range and roundrobin: the javadoc examples --------------------------------------------
def test_range_gives_each_topic_in_consecutive_ranges() -> None:
    """Kafka ``RangeAssignor.assign``: each topic in consecutive ranges, the first members one more."""
    result = RangeAssignor().assign({"t0": 3, "t1": 3}, {"C0": sub(["t0", "t1"]), "C1": sub(["t0", "t1"])})
    assert assigned(result) == {"C0": "t0p0 t0p1 t1p0 t1p1", "C1": "t0p2 t1p2"}


def test_range_splits_each_topic_among_its_own_subscribers_by_member_id() -> None:
    """Kafka ``RangeAssignor.assignPartitions``: each topic among its own subscribers, in member-id order; missing
    topics are skipped."""
    result = RangeAssignor().assign(
        {"t": 7, "u": 2, "unsubscribed": 4},
        {"m2": sub(["t"]), "m1": sub(["t", "u"]), "m3": sub(["t", "missing"])},
    )
    assert assigned(result) == {"m1": "tp0 tp1 tp2 up0 up1", "m2": "tp3 tp4", "m3": "tp5 tp6"}


def test_roundrobin_deals_sorted_partitions_over_sorted_members() -> None:
    """Kafka ``RoundRobinAssignor.assign``: sorted partitions dealt over sorted members, skipping non-subscribers."""
    result = RoundRobinAssignor().assign({"t1": 3, "t0": 3}, {"C1": sub(["t0", "t1"]), "C0": sub(["t0", "t1"])})
    assert assigned(result) == {"C0": "t0p0 t0p2 t1p1", "C1": "t0p1 t1p0 t1p2"}


def test_roundrobin_skips_members_not_subscribed_to_the_topic() -> None:
    topics = {"t0": 1, "t1": 2, "t2": 3}
    subscriptions = {"C0": sub(["t0"]), "C1": sub(["t0", "t1"]), "C2": sub(["t0", "t1", "t2"])}
    assert assigned(RoundRobinAssignor().assign(topics, subscriptions)) == {
        "C0": "t0p0",
        "C1": "t1p0",
        "C2": "t1p1 t2p0 t2p1 t2p2",
    }
    del subscriptions["C0"]
    assert assigned(RoundRobinAssignor().assign(topics, subscriptions)) == {
        "C1": "t0p0 t1p1",
        "C2": "t1p0 t2p0 t2p1 t2p2",
    }


def test_every_member_gets_an_entry_even_with_nothing_to_take() -> None:
    """Kafka ``AbstractPartitionAssignor.assign``: every member has an assignment, empty when it has nothing to take."""
    subscriptions = {"a": sub(["t"]), "b": sub(["t"]), "c": sub(["missing"])}
    for name in ("range", "roundrobin", "sticky", "cooperative-sticky"):
        result = client_assignor(name).assign({"t": 1}, subscriptions)
        assert list(result) == ["a", "b", "c"]
        assert [a.version for a in result.values()] == [HIGHEST_CONSUMER_PROTOCOL_VERSION] * 3
        assert sum(len(a.assigned_partitions) for a in result.values()) == 1
        assert result["c"].assigned_partitions == [] and result["c"].user_data is None


# -- sticky (EAGER): the javadoc examples, stickiness carried in the user data -----------
def run_sticky_rebalance(
    consumers: dict[str, StickyAssignor], topics: dict[str, int], subscribed: dict[str, list[str]], generation: int
) -> dict[str, str]:
    """One EAGER rebalance: every member revoked everything, so only its user data says what it had."""
    subscriptions = {
        m: sub(subscribed[m], user_data=consumers[m].subscription_user_data(set(subscribed[m]))) for m in consumers
    }
    leader = consumers[min(consumers)]
    result = leader.assign(topics, subscriptions)
    for member_id, assignment in result.items():
        consumers[member_id].on_assignment(assignment, generation)
    return assigned(result)


def test_sticky_example_1_from_scratch_then_c1_leaves() -> None:
    """Kafka ``AbstractStickyAssignor.ConstrainedAssignmentBuilder`` on the ``StickyAssignor`` javadoc's example 1.

    From scratch the javadoc's assignment. When C1 leaves, each survivor keeps everything it had and
    C1's partitions are dealt round robin in topic order (t0p1 to C0, which is then full, t2p0 and
    t3p1 to C2); the javadoc, written for the older algorithm, shows an equally sticky split.
    """
    topics = {t: 2 for t in ("t0", "t1", "t2", "t3")}
    every = {m: list(topics) for m in ("C0", "C1", "C2")}
    consumers = {m: StickyAssignor() for m in every}
    assert run_sticky_rebalance(consumers, topics, every, generation=1) == {
        "C0": "t0p0 t1p1 t3p0",
        "C1": "t0p1 t2p0 t3p1",
        "C2": "t1p0 t2p1",
    }
    del consumers["C1"]
    assert run_sticky_rebalance(consumers, topics, every, generation=2) == {
        "C0": "t0p0 t0p1 t1p1 t3p0",
        "C2": "t1p0 t2p0 t2p1 t3p1",
    }


def per_topic_counts(result: dict[str, ConsumerProtocolAssignment]) -> dict[str, set[int]]:
    """Topic -> the distinct numbers of its partitions the members hold."""
    counts: dict[str, dict[str, int]] = {}
    for member_id, assignment in result.items():
        for topic, _ in assignment.assigned_partitions:
            counts.setdefault(topic, dict.fromkeys(result, 0))[member_id] += 1
    return {topic: set(by_member.values()) for topic, by_member in counts.items()}


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
def test_each_topic_stays_balanced_from_1_to_24_members_and_down_to_2(name) -> None:
    """Kafka ``AbstractStickyAssignorTest.testTopicBalanceAfterReassignment`` (the per-topic checks), scaled:
    two topics of 24 partitions, members 1 -> 2 -> 4 -> 24 -> 2; after each rebalance (for the
    cooperative assignor, once its follow-up round has handed over what was withheld) every member
    holds the same number of partitions of each topic, as Kafka's constrained assignment keeps it."""
    topics = {"topic1": 24, "topic2": 24}
    names = [f"consumer{i:02d}" for i in range(24)]
    consumers = {m: client_assignor(name) for m in names}
    owned: dict[str, ConsumerProtocolAssignment] = {}
    generation = 0
    for members in (names[:1], names[:2], names[:4], names, names[22:]):
        for _ in range(1 if name == "sticky" else 2):
            generation += 1
            subscriptions = {
                m: sub(
                    list(topics),
                    owned=" ".join(f"{t}p{p}" for t, p in owned[m].assigned_partitions) if m in owned else "",
                    generation=generation - 1,
                    user_data=consumers[m].subscription_user_data(set(topics)),
                )
                for m in members
            }
            owned = consumers[members[0]].assign(topics, subscriptions)
            for member_id, assignment in owned.items():
                consumers[member_id].on_assignment(assignment, generation)
        share = 24 // len(members)
        assert per_topic_counts(owned) == {"topic1": {share}, "topic2": {share}}, (len(members), assigned(owned))


def test_sticky_example_2_balances_where_roundrobin_does_not_then_c0_leaves() -> None:
    """Kafka ``StickyAssignor`` javadoc, example 2: balanced where round robin is not; then C0 leaves and the others
    keep theirs."""
    topics = {"t0": 1, "t1": 2, "t2": 3}
    subscribed = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    consumers = {m: StickyAssignor() for m in subscribed}
    assert run_sticky_rebalance(consumers, topics, subscribed, generation=1) == {
        "C0": "t0p0",
        "C1": "t1p0 t1p1",
        "C2": "t2p0 t2p1 t2p2",
    }
    del consumers["C0"]
    assert run_sticky_rebalance(consumers, topics, subscribed, generation=2) == {
        "C1": "t0p0 t1p0 t1p1",
        "C2": "t2p0 t2p1 t2p2",
    }


def test_sticky_user_data_is_the_last_assignment_and_its_generation() -> None:
    """Kafka ``StickyAssignor.subscriptionUserData``: the last assignment and its generation, none before the first."""
    assignor = StickyAssignor()
    assert assignor.subscription_user_data({"t"}) is None  # nothing assigned yet
    assignor.on_assignment(ConsumerProtocolAssignment(version=3, assigned_partitions=[("t", 2), ("s", 0)]), 5)
    assert json.loads(assignor.subscription_user_data({"t"})) == {
        "previous_assignment": {"s": [0], "t": [2]},
        "generation": 5,
    }


def test_sticky_ignores_owned_partitions_and_unreadable_user_data() -> None:
    """Kafka ``StickyAssignor.memberData``: claims come from the user data only; unreadable user data means no
    claims. Under EAGER the owned list is empty anyway; "sticky" only ever trusted its user data."""
    subscriptions = {
        "a": sub(["t"], owned="t-0 t-1", generation=9, user_data=b"\x00garbage"),
        "b": sub(["t"], user_data=b'{"previous_assignment": {"t": [0, 1]}, "generation": 4}'),
    }
    assert assigned(StickyAssignor().assign({"t": 4}, subscriptions)) == {"a": "tp2 tp3", "b": "tp0 tp1"}


# -- cooperative-sticky: a partition changing owner takes two rounds -------------------------
def test_cooperative_sticky_withholds_a_moving_partition_for_one_round() -> None:
    """Kafka ``CooperativeStickyAssignor.adjustAssignment``: C1 = {a-0, b-0}; C2 joins; both topics have one
    partition. b-0 is withheld from C2 until C1 has revoked it (KIP-429, "CooperativeStickyAssignor and
    custom COOPERATIVE Assignors")."""
    topics = {"a": 1, "b": 1}
    round_1 = {"C1": sub(["a", "b"], owned="a-0 b-0", generation=1), "C2": sub(["a", "b"])}
    # Step 3: intent C1{a-0} C2{b-0}; b-0 changes owner, so it is withheld; final C1{a-0} C2{}.
    intent = {"C1": [("a", 0)], "C2": [("b", 0)]}
    assert partitions_transferring_ownership(intent, round_1) == {("b", 0): "C2"}
    assert assigned(CooperativeStickyAssignor().assign(topics, round_1)) == {"C1": "ap0", "C2": ""}
    # Steps 6-8: C1 revoked b-0 and rejoins owning a-0; b-0 is now ready to migrate.
    round_2 = {"C1": sub(["a", "b"], owned="a-0", generation=2), "C2": sub(["a", "b"], generation=2)}
    assert assigned(CooperativeStickyAssignor().assign(topics, round_2)) == {"C1": "ap0", "C2": "bp0"}


def test_scale_out_to_three_members_cooperative_and_eager() -> None:
    """Kafka ``CooperativeStickyAssignor`` and ``StickyAssignor``: t has 6 partitions, C1 = t-0..2,
    C2 = t-3..5, C3 joins."""
    topics = {"t": 6}
    round_1 = {
        "C1": sub(["t"], owned="t-0 t-1 t-2", generation=1),
        "C2": sub(["t"], owned="t-3 t-4 t-5", generation=1),
        "C3": sub(["t"]),
    }
    gen_2 = CooperativeStickyAssignor().assign(topics, round_1)
    assert assigned(gen_2) == {"C1": "tp0 tp1", "C2": "tp3 tp4", "C3": ""}  # t-2 and t-5 withheld
    owned = as_owned(gen_2)
    round_2 = {m: sub(["t"], owned=owned[m], generation=2) for m in round_1}
    gen_3 = CooperativeStickyAssignor().assign(topics, round_2)
    assert assigned(gen_3) == {"C1": "tp0 tp1", "C2": "tp3 tp4", "C3": "tp2 tp5"}
    round_3 = {m: sub(["t"], owned=as_owned(gen_3)[m], generation=3) for m in round_1}
    assert assigned(CooperativeStickyAssignor().assign(topics, round_3)) == assigned(gen_3)  # converged

    # EAGER: everyone revoked first, so nothing is withheld and C3 is served in one round,
    # with the same intent: 4 of the 6 partitions go back to the member that just revoked them.
    consumers = {m: StickyAssignor() for m in ("C1", "C2")}
    for member_id, partitions in (("C1", "t-0 t-1 t-2"), ("C2", "t-3 t-4 t-5")):
        consumers[member_id].on_assignment(
            ConsumerProtocolAssignment(version=3, assigned_partitions=[tp(p) for p in partitions.split()]), 1
        )
    consumers["C3"] = StickyAssignor()
    assert run_sticky_rebalance(consumers, topics, {m: ["t"] for m in consumers}, generation=2) == assigned(gen_3)


def test_cooperative_sticky_in_eager_mode_has_nothing_to_withhold() -> None:
    """Kafka ``CooperativeStickyAssignor.adjustAssignment``: under EAGER nobody claims anything, so nothing is
    withheld. Under EAGER members join owning nothing: a plain balanced assignment, from scratch."""
    subscriptions = {m: sub(["t"], generation=3) for m in ("C1", "C2", "C3")}
    assert assigned(CooperativeStickyAssignor().assign({"t": 6}, subscriptions)) == {
        "C1": "tp0 tp3",
        "C2": "tp1 tp4",
        "C3": "tp2 tp5",
    }


# -- ownership claims: generations, stale and conflicting owners ---------------------------
def test_the_higher_generation_wins_a_doubly_claimed_partition() -> None:
    """Kafka ``AbstractStickyAssignor.allSubscriptionsEqual``: of two claims, the higher generation wins."""
    subscriptions = {
        "zombie": sub(["t"], owned="t-0 t-1", generation=3),  # kicked out, has not noticed yet
        "fresh": sub(["t"], owned="t-0", generation=4),
    }
    result = CooperativeStickyAssignor().assign({"t": 2}, subscriptions)
    # fresh keeps t-0 although zombie claims it too; t-1 stays with zombie.
    assert assigned(result) == {"fresh": "tp0", "zombie": "tp1"}


def test_equal_generations_cancel_each_other_and_the_partition_is_withheld() -> None:
    """Kafka ``AbstractStickyAssignor.allSubscriptionsEqual`` (``partitionsWithMultiplePreviousOwners``): equal
    generations cancel each other."""
    subscriptions = {
        "a": sub(["t"], owned="t-0 t-1 t-2", generation=5),
        "b": sub(["t"], owned="t-2", generation=5),
        "c": sub(["t"], generation=5),
    }
    result = CooperativeStickyAssignor().assign({"t": 3}, subscriptions)
    # For the assignor nobody owns t-2, and a keeps only t-0 (quota 1): intent a{t-0} b{t-1}
    # c{t-2}. Both moves go to members that do not claim the partition while a (and b) do,
    # so both are withheld until the claimants have revoked them.
    assert assigned(result) == {"a": "tp0", "b": "", "c": ""}


def test_a_v1_subscription_carries_its_generation_in_the_user_data() -> None:
    """Kafka ``CooperativeStickyAssignor.subscriptionUserData``, ``memberData``: below v2 the generation comes from the
    user data."""
    assignor = CooperativeStickyAssignor()
    assert json.loads(assignor.subscription_user_data({"t"})) == {"generation": -1}
    assignor.on_assignment(ConsumerProtocolAssignment(version=3), 7)
    user_data = assignor.subscription_user_data({"t"})
    assert json.loads(user_data) == {"generation": 7}
    subscriptions = {
        "old": sub(["t"], owned="t-0", version=1, user_data=b'{"generation": 6}'),
        "new": sub(["t"], owned="t-0", version=1, user_data=user_data),
    }
    # Generation 7 beats 6 for t-0; t-1 is claimed by nobody, so old takes it at once.
    assert assigned(assignor.assign({"t": 2}, subscriptions)) == {"new": "tp0", "old": "tp1"}


def test_a_v0_member_loses_its_owned_partitions_so_they_move_at_once() -> None:
    """KIP-429's upgrade hazard: a v0 subscription cannot say what the member owns."""
    owned = ConsumerProtocolSubscription.decode(sub(["t"], owned="t-0 t-1", generation=2, version=0).encode())
    subscriptions = {"a-old": owned, "b": sub(["t"], generation=2)}
    result = CooperativeStickyAssignor().assign({"t": 2}, subscriptions)
    assert assigned(result) == {"a-old": "tp0", "b": "tp1"}  # t-1 handed over while a-old still holds it


def test_claims_on_deleted_partitions_and_unsubscribed_topics_do_not_count() -> None:
    """Kafka ``AbstractStickyAssignor.allSubscriptionsEqual``,
    ``GeneralAssignmentBuilder.prepopulateCurrentAssignments``: claims on partitions that no longer exist or on
    unsubscribed topics do not count."""
    subscriptions = {
        "a": sub(["t"], owned="t-5 u-0", generation=1),  # t shrank to 2 partitions; a left u
        "b": sub(["t", "u"], generation=1),
    }
    result = CooperativeStickyAssignor().assign({"t": 2, "u": 1}, subscriptions)
    # a owns nothing valid: intent a{t-0, t-1} b{u-0}; a still lists u-0, so b waits for it.
    assert assigned(result) == {"a": "tp0 tp1", "b": ""}


def test_sticky_keeps_the_extra_partition_for_the_member_kafkas_hash_map_iterates_first() -> None:
    """Kafka ``AbstractStickyAssignor.ConstrainedAssignmentBuilder.assignOwnedPartitions``: members keep what
    they own in the order of the leader's ``HashMap`` of subscriptions, so when two members own the higher
    quota and only one may keep it, the one in the lower ``String.hashCode`` bucket keeps it, whatever the
    member ids' alphabetical order."""
    assert bucket(string_hash("consumer-b"), 16) < bucket(string_hash("consumer-a"), 16)
    owning = {
        "consumer-a": b'{"previous_assignment": {"t": [0, 1]}, "generation": 1}',
        "consumer-b": b'{"previous_assignment": {"t": [2, 3]}, "generation": 1}',
    }
    subscriptions = {member: sub(["t"], user_data=data) for member, data in owning.items()}
    subscriptions["consumer-c"] = sub(["t"])
    # 4 partitions over 3 members: one member keeps 2. consumer-a keeps its lowest partition, t-0.
    assert assigned(StickyAssignor().assign({"t": 4}, subscriptions)) == {
        "consumer-a": "tp0",
        "consumer-b": "tp2 tp3",
        "consumer-c": "tp1",
    }


def test_the_result_does_not_depend_on_member_order() -> None:
    """Kafka's client assignors: for member ids in different ``HashMap`` buckets (these are) the input order does not
    change the result."""
    subscriptions = {
        "m3": sub(["t", "u"], owned="t-1 u-2", generation=2),
        "m1": sub(["t"], owned="t-0 t-2", generation=2),
        "m2": sub(["u"], owned="u-0", generation=1),
        "m0": sub(["t", "u"]),
    }
    reordered = dict(reversed(subscriptions.items()))
    for name in ("range", "roundrobin", "sticky", "cooperative-sticky"):
        assert client_assignor(name).assign({"u": 3, "t": 4}, subscriptions) == client_assignor(name).assign(
            {"t": 4, "u": 3}, reordered
        )


# -- bad input ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("partitions_per_topic", "subscriptions", "message"),
    [
        ({"t": -1}, {"a": sub(["t"])}, r"partitions_per_topic\['t'\] must be a partition count >= 0, got -1"),
        ({"t": "3"}, {"a": sub(["t"])}, r"partitions_per_topic\['t'\] must be a partition count >= 0, got '3'"),
        ({"": 3}, {"a": sub(["t"])}, "topic names must be non-empty strings"),
        ([("t", 3)], {"a": sub(["t"])}, "partitions_per_topic must map topic names to partition counts"),
        ({"t": 3}, {"a": ["t"]}, r"subscriptions\['a'\] must be a ConsumerProtocolSubscription, got list"),
        ({"t": 3}, {"": sub(["t"])}, "member ids must be non-empty strings"),
        ({"t": 3}, None, "subscriptions must map member ids to subscriptions"),
    ],
)
def test_bad_input_is_named(partitions_per_topic: object, subscriptions: object, message: str) -> None:
    """The Lab's input checks (Kafka's assignors trust the coordinator's input): bad input is refused naming what is
    wrong."""
    for name in ("range", "cooperative-sticky"):
        with pytest.raises(ClientAssignorError, match=message):
            client_assignor(name).assign(partitions_per_topic, subscriptions)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_assignments_are_built_as_validation_would_build_them(name: str) -> None:
    """The assignments are made without validating each partition; they equal validated ones field for field."""
    topics = {"a": 5, "b": 3, "c": 2}
    subscriptions = {"m2": sub(["a", "b"], owned="bp2 ap4"), "m1": sub(["a", "c"], owned="ap0"), "m3": sub(["b"])}
    for member_id, assignment in client_assignor(name).assign(topics, subscriptions).items():
        validated = ConsumerProtocolAssignment.model_validate(assignment.model_dump())
        assert assignment == validated, member_id
        assert assignment.assigned_partitions == sorted(set(assignment.assigned_partitions))
