"""The "uniform" server-side assignor, KIP-848's default, as Kafka's ``UniformAssignor`` computes it.

Kafka picks one of two builders by the group's subscription type:

* **Homogeneous** (every member subscribes to the same topics; Kafka's
  ``UniformHomogeneousAssignmentBuilder``). With P partitions over N members each member's quota is
  ``P // N``, and the first ``P % N`` members *in iteration order* get one more. Each member, in that
  order, keeps its previous target up to its quota (topics and partitions in iteration order) and
  gives back the rest. The partitions nobody holds (each topic's in ascending order, topics in
  iteration order), followed by the ones given back, are then dealt out in consecutive runs: each
  member below its quota, in iteration order, takes the next ones until it is full. From scratch
  that gives each member a contiguous block.
* **Heterogeneous** (Kafka's ``UniformHeterogeneousAssignmentBuilder``). Every still-subscribed
  partition of the previous target is kept. The free partitions are handed out topic by topic (most
  partitions per subscriber first, then fewest subscribers, then topic id as ``Uuid.compareTo``
  orders it), each to the least-loaded subscriber (ties: member index). Then, in up to 16 sweeps
  over the topics with two or more subscribers, partitions move from the most- to the least-loaded
  subscriber of a topic, the giver's highest partition first, until a full sweep moves nothing. The
  balance is per topic: along chains of overlapping subscriptions the totals can still differ by
  more than one.

"Iteration order" is the order of Kafka's hash maps, built as Kafka's coordinator builds them
(``kip_lab.assignors.java_hash_order`` replays Java's ``HashMap``): members as the ``HashMap<String, ...>``
holding the whole group, in the spec's order as insertion order; the subscribed topics as
``new HashSet<>(TopicIds)``, which reads them through the member's ``HashSet<String>`` of topic names;
each member's previous target as ``Assignment.fromRecord`` reads the record (topics in the spec's
order, which is the record's, into a ``HashMap``; each topic's partitions into a ``HashSet``). The
heterogeneous builder's member index is the member's position in that order. The homogeneous
builder's result lists each member's topics as Kafka's result map iterates them, which is the order
Kafka's next target record lists them in. So for the same member ids, topic ids and names and
previous targets the assignment is Kafka's, partition for partition. A spec with
``map_order=MapOrder.AS_GIVEN`` iterates the members and each target in its own order instead, as
Kafka's unit tests do with ordered maps.

The spec must be consistent, as Kafka's coordinator always makes it: a subscribed topic missing from
``spec.topics`` is refused with ``PartitionAssignorError`` (as Kafka's builders refuse it), and so is
a previous target that names a partition that does not exist or one that two members claim (Kafka's
coordinator never builds one; its builders would hand such a partition out twice).

Targets in the spec are never modified and never shared with the result: every list in the result is
new. Members come in iteration order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain

from kip_lab.assignors.java_hash_order import (
    capacity_after_puts,
    hash_order_after,
    hash_set_copy_capacity,
    partition_order,
    string_key_order,
    topic_id_hash,
    topic_id_order,
    topic_order,
)
from kip_lab.assignors.spec import (
    AssignmentSpec,
    GroupAssignment,
    MapOrder,
    MemberId,
    PartitionAssignorError,
    SubscriptionType,
    TopicId,
    TopicMetadata,
    subscription_type,
)
from kip_lab.runtime.collector import collector_paused

UNIFORM_ASSIGNOR_NAME = "uniform"

# Kafka's UniformHeterogeneousAssignmentBuilder.MAX_ITERATION_COUNT: sweeps of the balancing phase.
MAX_BALANCING_SWEEPS = 16

_UNASSIGNED = -1


class UniformAssignor:
    """Balanced, sticky assignor; see the module docstring for the exact rules."""

    name = UNIFORM_ASSIGNOR_NAME

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        return uniform_assign(spec)


def uniform_assign(spec: AssignmentSpec) -> GroupAssignment:
    """Compute the uniform target assignment, as Kafka's ``UniformAssignor.assign`` does."""
    if not spec.members:
        return {}
    with collector_paused():
        if spec.map_order is MapOrder.JAVA_HASH:
            members_in_order = string_key_order(spec.members, capacity_after_puts(len(spec.members)))
        else:
            members_in_order = list(spec.members)
        if subscription_type(spec) is SubscriptionType.HOMOGENEOUS:
            subscribed = spec.members[members_in_order[0]].subscribed_topic_ids
            _check_topics_exist(subscribed, spec.topics)
            return _assign_homogeneous(spec, members_in_order, subscribed)
        for subscribed in {member.subscribed_topic_ids for member in spec.members.values()}:
            _check_topics_exist(subscribed, spec.topics)
        return _HeterogeneousBuilder(spec, members_in_order).build()


def _check_topics_exist(subscribed: frozenset[TopicId], topics: Mapping[TopicId, TopicMetadata]) -> None:
    if not subscribed <= topics.keys():
        missing = min(subscribed - topics.keys())
        raise PartitionAssignorError(
            f"Members are subscribed to topic {missing} which doesn't exist in the topic metadata."
        )


def _free_partitions(topic_id: TopicId, num_partitions: int, claimed_lists: list[Sequence[int]]) -> list[int]:
    """A topic's partitions no previous target holds, ascending; refuses claims on missing or shared partitions."""
    if not claimed_lists:
        return list(range(num_partitions))
    claimed = list(chain.from_iterable(claimed_lists))
    distinct = set(claimed)
    if len(distinct) != len(claimed) or min(distinct) < 0 or max(distinct) >= num_partitions:
        seen: set[int] = set()
        for partition in claimed:
            if partition in seen or not 0 <= partition < num_partitions:
                raise _refused_claim(topic_id, num_partitions, partition)
            seen.add(partition)
    if len(distinct) == num_partitions:
        return []
    return sorted(set(range(num_partitions)).difference(distinct))


def _refused_claim(topic_id: TopicId, num_partitions: int, partition: int) -> PartitionAssignorError:
    """The error for a previous target that holds a partition that does not exist or that another holds."""
    if not 0 <= partition < num_partitions:
        return PartitionAssignorError(
            f"a previous target holds partition {partition} of topic {topic_id}, which has {num_partitions}"
        )
    return PartitionAssignorError(f"partition {partition} of topic {topic_id} is in two members' previous targets")


# ------------------------------------------------------------------------------------------ homogeneous
def _assign_homogeneous(
    spec: AssignmentSpec, members_in_order: list[MemberId], subscribed: frozenset[TopicId]
) -> GroupAssignment:
    """Kafka's ``UniformHomogeneousAssignmentBuilder.build``: quotas, keep, give back, deal out."""
    if not subscribed:
        return {member_id: {} for member_id in members_in_order}
    members = spec.members
    hashed = spec.map_order is MapOrder.JAVA_HASH
    total = sum(spec.topics[topic_id].num_partitions for topic_id in subscribed)
    member_count = len(members_in_order)
    minimum_quota, members_with_one_more = divmod(total, member_count)
    # The first members in order may take one partition more than the others.
    quotas = [minimum_quota + 1] * members_with_one_more + [minimum_quota] * (member_count - members_with_one_more)

    # One pass over the members, in order: what each keeps, and every partition a previous target held.
    claims: dict[TopicId, list[Sequence[int]]] = {topic_id: [] for topic_id in subscribed}
    given_back: list[tuple[TopicId, list[int]]] = []
    assignment: GroupAssignment = {}
    copied: dict[MemberId, list[TopicId]] = {}  # members whose result is a copy of their target's map
    unfilled: list[tuple[MemberId, int]] = []
    for member_id, quota in zip(members_in_order, quotas, strict=True):
        target = members[member_id].target_partitions
        # ``Assignment.fromRecord``: the record's topics put into a new HashMap, in the record's order.
        in_order = topic_order(target) if hashed and len(target) > 1 else list(target)
        kept: dict[TopicId, list[int]] = {}
        held = 0
        for topic_id in in_order:
            partitions = target[topic_id]
            if topic_id in subscribed and partitions:  # Kafka drops the topics nobody subscribes to any more
                claims[topic_id].append(partitions)
                kept[topic_id] = list(partitions)
                held += len(partitions)
        if held > quota:
            kept = _keep_up_to_quota(kept, quota, given_back, hashed)
            held = quota
        assignment[member_id] = kept
        if len(kept) < len(target) or held < quota:
            copied[member_id] = in_order
        if held < quota:
            unfilled.append((member_id, quota - held))

    # Dealt in this order: every topic's partitions nobody held (topics in iteration order), then those given back.
    to_deal = []
    for topic_id in _subscribed_topics_in_order(spec, subscribed):
        free = _free_partitions(topic_id, spec.topics[topic_id].num_partitions, claims[topic_id])
        if free:
            to_deal.append((topic_id, free))
    to_deal += given_back
    _deal_out(to_deal, unfilled, assignment)
    if hashed:
        for member_id, in_order in copied.items():
            if len(assignment[member_id]) > 1:
                assignment[member_id] = _as_kafka_result_map(in_order, assignment[member_id])
    return assignment


def _subscribed_topics_in_order(spec: AssignmentSpec, subscribed: frozenset[TopicId]) -> list[TopicId]:
    """The builder's ``subscribedTopicIds``, as Kafka builds it and iterates it.

    ``new HashSet<>(TopicIds)``: a ``TopicIds`` iterates the member's subscribed topic names (a
    ``HashSet<String>`` made from the heartbeat's list, ``ConsumerGroupMember``) and gives each name's
    topic id. The heartbeat's list stands here as the member's names in sorted order, as kip_lab's
    coordinator keeps them.
    """
    names = {spec.topics[topic_id].topic_name: topic_id for topic_id in subscribed}
    capacity = hash_set_copy_capacity(len(names))
    return topic_order([names[name] for name in string_key_order(sorted(names), capacity)], capacity)


def _as_kafka_result_map(in_order: list[TopicId], topics: dict[TopicId, list[int]]) -> dict[TopicId, list[int]]:
    """A member's new target in the order of Kafka's result map, which the next target record lists.

    A member that keeps all of its target and gains nothing gets the very map ``Assignment.fromRecord``
    made (``in_order``); any other gets a copy (``AssignorHelpers.deepCopyAssignment``: ``new
    HashMap<>(size)``, the old topics put in their order), which loses the dropped topics and gains the
    dealt ones in the order they were dealt (``topics``' order).
    """
    dropped = {topic_id for topic_id in in_order if topic_id not in topics}
    order = hash_order_after(in_order, dropped, list(topics), topic_id_hash, topic_id_order, len(in_order))
    return {topic_id: topics[topic_id] for topic_id in order}


def _keep_up_to_quota(
    held: dict[TopicId, list[int]], quota: int, given_back: list[tuple[TopicId, list[int]]], hashed: bool
) -> dict[TopicId, list[int]]:
    """The first ``quota`` partitions a member holds, in iteration order; the rest go to ``given_back``.

    ``held`` comes in the order of the target's ``HashMap<Uuid, Set<Integer>>``; under ``JAVA_HASH`` a
    topic's partitions come as the ``HashSet<Integer>`` read from the record's list iterates them.
    """
    kept: dict[TopicId, list[int]] = {}
    for topic_id, partitions in held.items():
        if len(partitions) <= quota:
            kept[topic_id] = partitions
            quota -= len(partitions)
            continue
        in_order = partition_order(partitions, hash_set_copy_capacity(len(partitions))) if hashed else partitions
        if quota:
            kept[topic_id] = in_order[:quota]
        given_back.append((topic_id, in_order[quota:]))
        quota = 0
    return kept


def _deal_out(
    to_deal: list[tuple[TopicId, list[int]]], unfilled: list[tuple[MemberId, int]], assignment: GroupAssignment
) -> None:
    """Each member below its quota, in order, takes the next partitions until it is full."""
    segments = iter(to_deal)
    topic_id, partitions = next(segments, (None, []))
    offset = 0
    for member_id, room in unfilled:
        held = assignment[member_id]
        while room and topic_id is not None:
            taken = partitions[offset : offset + room]
            offset += len(taken)
            room -= len(taken)
            if topic_id in held:
                held[topic_id] += taken
            else:
                held[topic_id] = taken
            if offset == len(partitions):
                topic_id, partitions = next(segments, (None, []))
                offset = 0
    if topic_id is not None:
        raise PartitionAssignorError("Partitions were left unassigned")


# ------------------------------------------------------------------------------------------ heterogeneous
class _LoadBalancer:
    """Kafka's ``MemberAssignmentBalancer``: the least- and most-loaded subscribers of one topic.

    Members are sorted by load (ties: member index). Two ranges are tracked: at the bottom the
    members with the least load, handed one partition each in turn before the level rises; at the
    top the most loaded, each giving up one in turn (from the highest index down) before the level
    falls. Each call assumes the previous hand-out or give-up happened.
    """

    def __init__(self, loads: list[int]) -> None:
        self.loads = loads
        self.sorted_members: list[int] = []

    def initialize(self, members: list[int]) -> int:
        """Start on a topic's subscribers; returns the spread between the most and least loaded."""
        loads = self.loads
        self.sorted_members = sorted(members, key=lambda m: (loads[m], m))
        first, last = self.sorted_members[0], self.sorted_members[-1]
        self.least_loaded_end = 0  # exclusive
        self.least_loaded_level = loads[first] - 1
        self.next_least_loaded = 0
        self.most_loaded_start = len(self.sorted_members)  # inclusive
        self.most_loaded_end = len(self.sorted_members)  # exclusive
        self.most_loaded_level = loads[last] + 1
        self.next_most_loaded = len(self.sorted_members) - 1
        return loads[last] - loads[first]

    def take_least_loaded(self) -> int:
        """The member to hand the next partition to."""
        members, loads = self.sorted_members, self.loads
        if self.next_least_loaded >= self.least_loaded_end:
            self.least_loaded_level += 1
            end = self.least_loaded_end
            while end < len(members) and loads[members[end]] == self.least_loaded_level:
                end += 1
            self.least_loaded_end = end
            self.next_least_loaded = 0
        member = members[self.next_least_loaded]
        self.next_least_loaded += 1
        return member

    def take_most_loaded(self) -> int:
        """The member to take the next partition from, or -1 when none is left."""
        members, loads = self.sorted_members, self.loads
        if self.next_most_loaded < self.most_loaded_start:
            if self.most_loaded_end <= self.most_loaded_start and self.most_loaded_start > 0:
                # Every member of the range was excluded: restart the level from the next one down.
                self.most_loaded_level = loads[members[self.most_loaded_start - 1]]
            else:
                self.most_loaded_level -= 1
            while self.most_loaded_start > 0 and loads[members[self.most_loaded_start - 1]] == self.most_loaded_level:
                self.most_loaded_start -= 1
            self.next_most_loaded = self.most_loaded_end - 1
        if self.next_most_loaded < 0:
            return _UNASSIGNED
        member = members[self.next_most_loaded]
        self.next_most_loaded -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drop the member ``take_most_loaded`` just returned (it holds nothing of the topic)."""
        members = self.sorted_members
        excluded = self.next_most_loaded + 1
        members[excluded], members[self.most_loaded_end - 1] = members[self.most_loaded_end - 1], members[excluded]
        self.most_loaded_end -= 1

    def is_balanced(self) -> bool:
        return self.most_loaded_level - self.least_loaded_level <= 1


class _HeterogeneousBuilder:
    """Kafka's ``UniformHeterogeneousAssignmentBuilder``; members are indexes into the iteration order."""

    def __init__(self, spec: AssignmentSpec, members_in_order: list[MemberId]) -> None:
        self.spec = spec
        self.member_ids = members_in_order
        self.subscribers: dict[TopicId, list[int]] = {}
        for index, member_id in enumerate(members_in_order):
            for topic_id in spec.members[member_id].subscribed_topic_ids:
                self.subscribers.setdefault(topic_id, []).append(index)
        self.num_partitions = {topic_id: spec.topics[topic_id].num_partitions for topic_id in self.subscribers}
        self.owners = {topic_id: [_UNASSIGNED] * count for topic_id, count in self.num_partitions.items()}
        self.loads = [0] * len(members_in_order)

    def build(self) -> GroupAssignment:
        self._keep_subscribed_targets()
        self._assign_free_partitions()
        self._balance()
        return self._result()

    def _topic_rank(self, topic_id: TopicId) -> tuple[float, int, tuple]:
        """Most partitions per subscriber first, then fewest subscribers, then ``Uuid.compareTo`` order."""
        subscriber_count = len(self.subscribers[topic_id])
        return (-self.num_partitions[topic_id] / subscriber_count, subscriber_count, topic_id_order(topic_id))

    def _keep_subscribed_targets(self) -> None:
        for index, member_id in enumerate(self.member_ids):
            member = self.spec.members[member_id]
            for topic_id, partitions in member.target_partitions.items():
                if topic_id not in member.subscribed_topic_ids:
                    continue
                owners = self.owners[topic_id]
                for partition in partitions:
                    if not 0 <= partition < len(owners) or owners[partition] != _UNASSIGNED:
                        raise _refused_claim(topic_id, len(owners), partition)
                    owners[partition] = index
                self.loads[index] += len(partitions)

    def _assign_free_partitions(self) -> None:
        balancer = _LoadBalancer(self.loads)
        for topic_id in sorted(self.subscribers, key=self._topic_rank):
            free = [partition for partition, owner in enumerate(self.owners[topic_id]) if owner == _UNASSIGNED]
            if free:
                balancer.initialize(self.subscribers[topic_id])
                for partition in free:
                    self._move(topic_id, partition, balancer.take_least_loaded())

    def _balance(self) -> None:
        """Sweep the shared topics until one whole sweep moves nothing, at most ``MAX_BALANCING_SWEEPS`` times."""
        shared = sorted((t for t, members in self.subscribers.items() if len(members) >= 2), key=self._topic_rank)
        balancer = _LoadBalancer(self.loads)
        last_moved = -1
        for _ in range(MAX_BALANCING_SWEEPS):
            for index, topic_id in enumerate(shared):
                if index == last_moved:
                    return
                if self._balance_topic(topic_id, balancer) > 0 or last_moved == -1:
                    last_moved = index

    def _balance_topic(self, topic_id: TopicId, balancer: _LoadBalancer) -> int:
        """Move this topic's partitions from its most- to its least-loaded subscribers; returns how many moved."""
        if balancer.initialize(self.subscribers[topic_id]) <= 1:
            return 0
        owners = self.owners[topic_id]
        by_owner = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}  # exclusive
        for position, partition in enumerate(by_owner):
            start.setdefault(owners[partition], position)
            end[owners[partition]] = position + 1
        moved = 0
        while not balancer.is_balanced():
            giver = balancer.take_most_loaded()
            while giver != _UNASSIGNED and end.get(giver, 0) - start.get(giver, 0) <= 0:
                balancer.exclude_most_loaded()
                giver = balancer.take_most_loaded()
            if giver == _UNASSIGNED:
                break
            end[giver] -= 1
            partition = by_owner[end[giver]]
            receiver = balancer.take_least_loaded()
            if balancer.is_balanced():
                break
            self._move(topic_id, partition, receiver)
            moved += 1
        return moved

    def _move(self, topic_id: TopicId, partition: int, member: int) -> None:
        owners = self.owners[topic_id]
        if owners[partition] != _UNASSIGNED:
            self.loads[owners[partition]] -= 1
        owners[partition] = member
        self.loads[member] += 1

    def _result(self) -> GroupAssignment:
        """Members in iteration order; each member's kept topics first, partitions ascending."""
        held: list[dict[TopicId, list[int]]] = [{} for _ in self.member_ids]
        for index, member_id in enumerate(self.member_ids):
            for topic_id in self.spec.members[member_id].target_partitions:
                if topic_id in self.spec.members[member_id].subscribed_topic_ids:
                    held[index][topic_id] = []
        for topic_id in sorted(self.owners, key=topic_id_order):
            for partition, owner in enumerate(self.owners[topic_id]):
                held[owner].setdefault(topic_id, []).append(partition)
        return {
            member_id: {topic_id: partitions for topic_id, partitions in topics.items() if partitions}
            for member_id, topics in zip(self.member_ids, held, strict=True)
        }
