"""Property tests of the client-side assignors (Hypothesis): coverage, balance, stickiness, KIP-429's rule.

Groups are small and messy: topics that do not exist ("gone"), partitions that no longer
exist, claims on topics a member left, stale and conflicting owners across generations.
"sticky" reads claims from its user data and "cooperative-sticky" from the subscription's
owned partitions; ``subscriptions_for`` writes the same claims in each one's place, so the
two can be compared: "sticky" computes exactly the intent that "cooperative-sticky" then
trims by withholding.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from kip_lab.assignors.client import client_assignor, partitions_transferring_ownership
from kip_lab.assignors.client.sticky import encode_sticky_user_data
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription

TopicPartition = tuple[str, int]
TOPIC_POOL = ["t0", "t1", "t2", "t3"]
GONE_TOPIC = "gone"  # subscribed to and claimed, never in the metadata
MEMBER_IDS = st.text(alphabet="abAB09-", min_size=1, max_size=3)
ALL_NAMES = ["range", "roundrobin", "sticky", "cooperative-sticky"]
STICKY_NAMES = ["sticky", "cooperative-sticky"]
PROPERTY_SETTINGS = settings(max_examples=80, deadline=None)


@dataclass(frozen=True)
class Group:
    """What the leader sees: metadata, subscriptions, and each member's claims with a generation."""

    partitions_per_topic: dict[str, int]
    topics: dict[str, list[str]]
    claims: dict[str, list[TopicPartition]]
    generations: dict[str, int]

    def subscriptions_for(self, name: str) -> dict[str, ConsumerProtocolSubscription]:
        """Claims where the assignor reads them: "sticky" in its user data, the rest in the subscription."""
        if name == "sticky":
            return {
                m: ConsumerProtocolSubscription(
                    version=3, topics=self.topics[m], user_data=encode_sticky_user_data(self.claims[m], g)
                )
                for m, g in self.generations.items()
            }
        return {
            m: ConsumerProtocolSubscription(
                version=3, topics=self.topics[m], owned_partitions=self.claims[m], generation_id=g
            )
            for m, g in self.generations.items()
        }

    def eligible(self, member_id: str) -> set[TopicPartition]:
        return {(topic, p) for topic in self.topics[member_id] for p in range(self.partitions_per_topic.get(topic, 0))}

    def subscribed_partitions(self) -> set[TopicPartition]:
        return set().union(*(self.eligible(m) for m in self.topics))

    def homogeneous(self) -> bool:
        return len({frozenset(t) for t in self.topics.values()}) <= 1

    def with_claims(self, claims: dict[str, list[TopicPartition]], generation: int) -> Group:
        return Group(self.partitions_per_topic, self.topics, claims, dict.fromkeys(self.topics, generation))


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool | None = None, messy: bool = True) -> Group:
    """``messy`` claims include stale, invalid and conflicting ones; otherwise one owner per partition."""
    topic_names = draw(st.lists(st.sampled_from(TOPIC_POOL), min_size=1, max_size=len(TOPIC_POOL), unique=True))
    sizes = {t: draw(st.integers(0, 9)) for t in topic_names}
    member_ids = draw(st.lists(MEMBER_IDS, min_size=1, max_size=7, unique=True))
    subscribable = [*topic_names, GONE_TOPIC]

    def topic_subset(min_size: int) -> list[str]:
        return sorted(set(draw(st.lists(st.sampled_from(subscribable), min_size=min_size, max_size=4))))

    same = homogeneous if homogeneous is not None else draw(st.booleans())
    shared = topic_subset(min_size=1)
    topics = {m: shared if same else topic_subset(min_size=0) for m in member_ids}
    claims: dict[str, list[TopicPartition]] = {m: [] for m in member_ids}
    owners = st.sampled_from([None, *member_ids])
    for topic in subscribable:
        for partition in range(sizes.get(topic, 3) + (draw(st.integers(0, 2)) if messy else 0)):
            claimants = [draw(owners), draw(owners) if messy else None]
            for owner in dict.fromkeys(claimants):
                if owner is not None and (messy or topic in topics[owner]):
                    claims[owner].append((topic, partition))
    generation = st.integers(1, 3) if messy else st.just(2)
    return Group(sizes, topics, claims, {m: draw(generation) for m in member_ids})


def assign(name: str, group: Group) -> dict[str, list[TopicPartition]]:
    result = client_assignor(name).assign(group.partitions_per_topic, group.subscriptions_for(name))
    assert list(result) == sorted(group.topics), "one entry per member, in member-id order"
    assert all(isinstance(a, ConsumerProtocolAssignment) for a in result.values())
    return {m: a.assigned_partitions for m, a in result.items()}


def owner_of(assignment: dict[str, list[TopicPartition]]) -> dict[TopicPartition, str]:
    owners: dict[TopicPartition, str] = {}
    for member_id, partitions in assignment.items():
        for tp in partitions:
            assert tp not in owners, f"{tp} assigned to {owners[tp]} and {member_id}"
            owners[tp] = member_id
    return owners


def check_only_subscribers_get_partitions(group: Group, assignment: dict[str, list[TopicPartition]]) -> None:
    for member_id, partitions in assignment.items():
        assert set(partitions) <= group.eligible(member_id), f"{member_id} got a partition it cannot take"


def check_balanced(group: Group, assignment: dict[str, list[TopicPartition]]) -> None:
    """Kafka's sticky balance: no partition could go to a subscriber holding two fewer."""
    counts = {m: len(p) for m, p in assignment.items()}
    if group.homogeneous():
        assert max(counts.values()) - min(counts.values()) <= 1, counts
        return
    for member_id, partitions in assignment.items():
        for tp in partitions:
            for other in assignment:
                if tp in group.eligible(other):
                    assert counts[member_id] - counts[other] <= 1, (tp, member_id, other, counts)


def resolved_ownership(group: Group) -> dict[str, set[TopicPartition]]:
    """Reference reading of the claims: valid ones only; the unique highest generation owns."""
    claimants: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member_id, claims in group.claims.items():
        for tp in set(claims) & group.eligible(member_id):
            claimants.setdefault(tp, []).append((group.generations[member_id], member_id))
    owned: dict[str, set[TopicPartition]] = {m: set() for m in group.claims}
    for tp, claims in claimants.items():
        top = max(generation for generation, _ in claims)
        winners = [m for generation, m in claims if generation == top]
        if len(winners) == 1:
            owned[winners[0]].add(tp)
    return owned


# -- coverage ------------------------------------------------------------------------------
@PROPERTY_SETTINGS
@given(group=groups(), name=st.sampled_from(["range", "roundrobin", "sticky"]))
def test_eager_assignors_assign_every_subscribed_partition_exactly_once(group: Group, name: str) -> None:
    assignment = assign(name, group)
    assert set(owner_of(assignment)) == group.subscribed_partitions()
    check_only_subscribers_get_partitions(group, assignment)


@PROPERTY_SETTINGS
@given(group=groups())
def test_cooperative_sticky_withholds_exactly_the_partitions_changing_owner(group: Group) -> None:
    """KIP-429: intent ("sticky" on the same claims) minus every partition whose new owner does
    not claim it while another member does; no partition ever goes to a new owner it is claimed from."""
    intent = assign("sticky", group)
    subscriptions = group.subscriptions_for("cooperative-sticky")
    withheld = partitions_transferring_ownership(intent, subscriptions)
    final = assign("cooperative-sticky", group)
    assert final == {m: [tp for tp in p if tp not in withheld] for m, p in intent.items()}
    claimed_by = {m: set(s.owned_partitions) for m, s in subscriptions.items()}
    for member_id, partitions in final.items():
        for tp in partitions:
            others = [m for m in claimed_by if m != member_id and tp in claimed_by[m]]
            assert not others or tp in claimed_by[member_id], f"{tp} given to {member_id} while {others} own it"
    for tp, new_owner in withheld.items():
        assert tp not in claimed_by[new_owner] and any(tp in c for c in claimed_by.values())
    check_only_subscribers_get_partitions(group, final)


@PROPERTY_SETTINGS
@given(group=groups(homogeneous=True, messy=False))
def test_cooperative_sticky_converges_in_the_follow_up_rebalance(group: Group) -> None:
    """Equal subscriptions: once the old owners revoked, the next round covers everything and revokes nothing."""
    first = assign("cooperative-sticky", group)
    follow_up = group.with_claims(first, generation=3)
    second = assign("cooperative-sticky", follow_up)
    assert set(owner_of(second)) == group.subscribed_partitions()
    assert all(set(first[m]) <= set(second[m]) for m in first)


# -- balance -------------------------------------------------------------------------------
@PROPERTY_SETTINGS
@given(group=groups())
def test_the_sticky_intent_is_balanced(group: Group) -> None:
    """Both sticky assignors' intent (cooperative-sticky then withholds, see above)."""
    check_balanced(group, assign("sticky", group))


@PROPERTY_SETTINGS
@given(group=groups(homogeneous=True))
def test_roundrobin_and_range_balance_equal_subscriptions(group: Group) -> None:
    counts = [len(p) for p in assign("roundrobin", group).values()]
    assert max(counts) - min(counts) <= 1
    by_topic: dict[str, list[int]] = {}
    for partitions in assign("range", group).values():
        for topic in group.partitions_per_topic:
            by_topic.setdefault(topic, []).append(sum(1 for t, _ in partitions if t == topic))
    assert all(max(c) - min(c) <= 1 for t, c in by_topic.items() if t in next(iter(group.topics.values())))


# -- stickiness ----------------------------------------------------------------------------
@PROPERTY_SETTINGS
@given(group=groups(homogeneous=True), name=st.sampled_from(STICKY_NAMES), joiners=st.integers(0, 2))
def test_equal_subscriptions_keep_as_much_as_balance_allows(group: Group, name: str, joiners: int) -> None:
    """Each member keeps min(what it owned, what it gets), and the extra slots go to those
    owning most, so no balanced assignment keeps more (an optimum computed independently).
    cooperative-sticky keeps the same: it only withholds partitions that change owner.
    What a member owned is the claims' reading: the unique highest generation wins."""
    newcomers = [f"~new-{k}" for k in range(joiners)]  # they own nothing
    shared = next(iter(group.topics.values()))
    group = Group(
        group.partitions_per_topic,
        group.topics | dict.fromkeys(newcomers, shared),
        group.claims | {m: [] for m in newcomers},
        group.generations | dict.fromkeys(newcomers, 2),
    )
    assignment = assign(name, group)
    owned = resolved_ownership(group)
    intent = assign("sticky", group)
    for member_id, partitions in intent.items():
        assert len(owned[member_id] & set(partitions)) == min(len(owned[member_id]), len(partitions))
    total = len(group.subscribed_partitions())
    quota, extra = divmod(total, len(group.topics))
    by_owned = sorted((len(o) for o in owned.values()), reverse=True)
    best_kept = sum(min(n, quota + (1 if i < extra else 0)) for i, n in enumerate(by_owned))
    assert sum(len(owned[m] & set(p)) for m, p in assignment.items()) == best_kept


@PROPERTY_SETTINGS
@given(group=groups(messy=False), name=st.sampled_from(STICKY_NAMES))
def test_when_nothing_changes_nothing_moves(group: Group, name: str) -> None:
    settled = assign("sticky", group)
    again = assign(name, group.with_claims(settled, generation=4))
    assert again == settled


@PROPERTY_SETTINGS
@given(group=groups(homogeneous=True, messy=False), name=st.sampled_from(STICKY_NAMES))
def test_one_member_joining_or_leaving_moves_only_what_balance_requires(group: Group, name: str) -> None:
    settled = assign(name, group.with_claims({m: [] for m in group.topics}, generation=1))
    members = sorted(group.topics)
    shared = group.topics[members[0]]
    total = len(group.subscribed_partitions())

    joined = Group(
        group.partitions_per_topic,
        group.topics | {"~joiner": shared},
        settled | {"~joiner": []},
        dict.fromkeys([*members, "~joiner"], 2),
    )
    intent = assign("sticky", joined)
    moved = sum(len(set(settled[m]) - set(intent[m])) for m in members)
    assert moved == len(intent["~joiner"]) <= -(-total // (len(members) + 1))
    if name == "cooperative-sticky":  # the joiner waits one round for everything that moves
        assert assign(name, joined)["~joiner"] == []

    rest = members[1:]  # members[0] leaves
    left = Group(
        group.partitions_per_topic,
        {m: shared for m in rest},
        {m: settled[m] for m in rest},
        dict.fromkeys(rest, 2),
    )
    after = assign(name, left)
    assert all(set(settled[m]) <= set(after[m]) for m in rest)  # the survivors keep everything
    if rest:
        assert set(owner_of(after)) == group.subscribed_partitions()  # the leaver's partitions found homes


# -- determinism ---------------------------------------------------------------------------
@PROPERTY_SETTINGS
@given(group=groups(), name=st.sampled_from(ALL_NAMES), seed=st.integers(0, 2**16))
def test_the_result_depends_on_contents_not_on_order(group: Group, name: str, seed: int) -> None:
    subscriptions = group.subscriptions_for(name)
    order = list(subscriptions)
    random.Random(seed).shuffle(order)
    metadata = list(group.partitions_per_topic.items())
    random.Random(seed + 1).shuffle(metadata)
    first = client_assignor(name).assign(group.partitions_per_topic, subscriptions)
    second = client_assignor(name).assign(dict(metadata), {m: subscriptions[m] for m in order})
    assert first == second
    assert [a.encode() for a in first.values()] == [a.encode() for a in second.values()]
