"""The balancing engine of the client-side sticky assignors ("sticky", "cooperative-sticky").

It balances first and keeps what members owned second, as Kafka's ``AbstractStickyAssignor`` does, over
the ownership the sticky assignors have resolved (fed in as each member's previous target, topic names as
topic ids). It is Kafka's ``AbstractStickyAssignor.GeneralAssignmentBuilder``, for members whose
subscriptions differ (equal subscriptions go to ``kip_lab.assignors.client.sticky.constrained_assign``,
Kafka's constrained path): keep every owned partition; hand out the rest topic by topic (most partitions per subscriber
first), each to the least-loaded subscriber; then move partitions one at a time from the most- to the
least-loaded subscriber of a topic until no move from X to Y with ``count(X) - count(Y) > 1`` is left
(each move lowers the sum of squared counts, so this ends). Ties are broken by member id, not by Java
hash order, so exact partitions can differ from Kafka's.

The input is never modified and never shared with the result: every list in the result is new.
A member subscribed to a topic that is missing from ``spec.topics`` does not get that topic (Kafka's
client-side assignors skip topics the metadata does not know).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from heapq import heapify, heappop, heappush
from itertools import chain

from kip_lab.assignors.spec import (
    AssignmentSpec,
    GroupAssignment,
    MemberId,
    MemberSubscription,
    TopicId,
    TopicMetadata,
)
from kip_lab.runtime.collector import collector_paused

# Per member (by position in member-id order): topic id -> partitions, in output order.
_Assignment = list[dict[TopicId, list[int]]]
# One step of a fill plan: the members taking turns (ascending position) and how many
# items they share; item k of the step goes to members[k % len(members)].
_FillStep = tuple[list[int], int]


def sticky_balance(spec: AssignmentSpec) -> GroupAssignment:
    """Balance the resolved ownership; pure and independent of dict order."""
    with collector_paused():
        return _balance_group(spec)


def _balance_group(spec: AssignmentSpec) -> GroupAssignment:
    member_ids = sorted(spec.members)
    subscriptions = _effective_subscriptions(member_ids, spec.members, spec.topics)
    assignment = _assign(member_ids, spec.members, spec.topics, subscriptions)
    return dict(zip(member_ids, assignment, strict=True))


def _effective_subscriptions(
    member_ids: list[MemberId],
    members: Mapping[MemberId, MemberSubscription],
    topics: Mapping[TopicId, TopicMetadata],
) -> list[frozenset[TopicId]]:
    """Each member's subscribed topics that exist (equal subscriptions are filtered once)."""
    filtered: dict[frozenset[TopicId], frozenset[TopicId]] = {}
    result = []
    for member_id in member_ids:
        subscribed = members[member_id].subscribed_topic_ids
        existing = filtered.get(subscribed)
        if existing is None:
            existing = filtered[subscribed] = frozenset(t for t in subscribed if t in topics)
        result.append(existing)
    return result


def _previous_targets(
    member_ids: list[MemberId],
    members: Mapping[MemberId, MemberSubscription],
    topics: Mapping[TopicId, TopicMetadata],
    subscriptions: list[frozenset[TopicId]],
) -> tuple[list[Mapping[TopicId, Sequence[int]]], dict[TopicId, list[Sequence[int]]]]:
    """Each member's still-valid previous target, and per topic the lists claimed in them.

    Drops topics the member no longer subscribes to, partitions that no longer exist and
    empty lists. Should two members claim the same partition (the coordinator never does
    that), the lower member id keeps it. When nothing needs dropping, the common case, the
    members' own mappings come back untouched, to be read only; the result copies them.
    """
    targets = [members[member_id].target_partitions for member_id in member_ids]
    claims, untidy = _collect_claims(targets, subscriptions)
    contested = {
        topic_id: bytearray(topics[topic_id].num_partitions)
        for topic_id, lists in claims.items()
        if not _claims_are_clean(lists, topics[topic_id].num_partitions)
    }
    for position in range(len(targets)) if contested else untidy:
        targets[position] = _tidy_target(targets[position], subscriptions[position], contested)
    if contested:
        claims, _ = _collect_claims(targets, subscriptions)
    return targets, claims


def _collect_claims(
    targets: list[Mapping[TopicId, Sequence[int]]], subscriptions: list[frozenset[TopicId]]
) -> tuple[dict[TopicId, list[Sequence[int]]], list[int]]:
    """Group the non-empty subscribed target lists by topic, in member-id order.

    Also returns the positions of members whose target has entries to drop.
    """
    claims: defaultdict[TopicId, list[Sequence[int]]] = defaultdict(list)
    untidy = []
    for position, target in enumerate(targets):
        subscribed = subscriptions[position]
        if target.keys() <= subscribed and all(target.values()):
            for topic_id, partitions in target.items():
                claims[topic_id].append(partitions)
        else:
            untidy.append(position)
            for topic_id, partitions in target.items():
                if partitions and topic_id in subscribed:
                    claims[topic_id].append(partitions)
    return claims, untidy


def _claims_are_clean(lists: list[Sequence[int]], num_partitions: int) -> bool:
    """True when every claimed partition exists and is claimed once (checked at C speed)."""
    claimed = list(chain.from_iterable(lists))
    return min(claimed) >= 0 and max(claimed) < num_partitions and len(set(claimed)) == len(claimed)


def _tidy_target(
    target: Mapping[TopicId, Sequence[int]],
    subscribed: frozenset[TopicId],
    taken_by_topic: dict[TopicId, bytearray],
) -> dict[TopicId, Sequence[int]]:
    """A member's target without unsubscribed topics, empty lists and taken partitions.

    ``taken_by_topic`` marks, for contested topics only, partitions already kept by a member
    with a lower id; this member's own valid partitions get marked as it keeps them.
    """
    tidy: dict[TopicId, Sequence[int]] = {}
    for topic_id, partitions in target.items():
        if topic_id not in subscribed:
            continue
        taken = taken_by_topic.get(topic_id)
        if taken is None:
            valid = partitions
        else:
            valid = []
            for partition in partitions:
                if 0 <= partition < len(taken) and not taken[partition]:
                    taken[partition] = 1
                    valid.append(partition)
        if valid:
            tidy[topic_id] = valid
    return tidy


def _copy_sorted(target: Mapping[TopicId, Sequence[int]]) -> dict[TopicId, list[int]]:
    """A fresh copy of a target, topics in id order so that dict order never leaks through."""
    return {topic_id: list(target[topic_id]) for topic_id in sorted(target)}


def _unassigned_partitions(num_partitions: int, claimed_lists: list[Sequence[int]] | None) -> list[int]:
    """A topic's partitions nobody owned, ascending."""
    if not claimed_lists:
        return list(range(num_partitions))
    if sum(map(len, claimed_lists)) == num_partitions:
        return []
    return sorted(set(range(num_partitions)).difference(chain.from_iterable(claimed_lists)))


def _plan_fill(candidates: Iterable[int], loads: list[int], total: int) -> list[_FillStep]:
    """Plan handing out ``total`` items, each to the least-loaded candidate.

    Ties go to the lowest position. Handing items out one by one that way raises every
    candidate level by level: at level L, every candidate whose load is L gets one item, in
    position order, before anyone reaches L + 1. Between two levels where a candidate joins
    (its load) the set taking turns is fixed, so the plan is a few round-robin steps instead
    of one decision per item: linear in the number of items plus the candidates, with no heap.
    """
    if total == 0:
        return []
    joining = sorted(candidates, key=loads.__getitem__)
    steps: list[_FillStep] = []
    turns: list[int] = []
    next_join = 0
    level = loads[joining[0]]
    remaining = total
    while remaining:
        arrivals = []
        while next_join < len(joining) and loads[joining[next_join]] == level:
            arrivals.append(joining[next_join])
            next_join += 1
        turns = sorted(turns + arrivals)
        if next_join == len(joining):  # nobody joins any more: the turns take everything left
            steps.append((turns, remaining))
            break
        next_level = loads[joining[next_join]]
        share = min(remaining, len(turns) * (next_level - level))
        steps.append((turns, share))
        remaining -= share
        level = next_level
    return steps


def _hand_out(
    steps: list[_FillStep],
    topic_items: list[tuple[TopicId, list[int]]],
    assignment: _Assignment,
    loads: list[int],
) -> None:
    """Apply a fill plan to items laid out topic after topic, appending with strided slices."""
    topic_index = offset = 0
    for turns, share in steps:
        width = len(turns)
        done = 0
        while done < share:
            topic_id, items = topic_items[topic_index]
            count = min(len(items) - offset, share - done)
            stop = offset + count
            for k in range(min(width, count)):
                member = turns[(done + k) % width]
                received = items[offset + k : stop : width]
                loads[member] += len(received)
                held = assignment[member].get(topic_id)
                if held is None:
                    assignment[member][topic_id] = received
                else:
                    held.extend(received)
            done += count
            offset = stop
            if offset == len(items):
                topic_index += 1
                offset = 0


def _assign(
    member_ids: list[MemberId],
    members: Mapping[MemberId, MemberSubscription],
    topics: Mapping[TopicId, TopicMetadata],
    subscriptions: list[frozenset[TopicId]],
) -> _Assignment:
    """Keep valid targets, fill the least loaded, then rebalance topic by topic (Kafka's general path)."""
    subscribers: dict[TopicId, list[int]] = {}
    for position, subscribed in enumerate(subscriptions):
        for topic_id in subscribed:
            subscribers.setdefault(topic_id, []).append(position)

    targets, claims = _previous_targets(member_ids, members, topics, subscriptions)
    assignment = [_copy_sorted(target) for target in targets]
    loads = [sum(map(len, held.values())) for held in assignment]

    # Kafka's order: most partitions per subscriber first, then fewest subscribers; constrained
    # topics go first so that widely subscribed ones can even out the loads afterwards.
    topic_order = sorted(
        subscribers,
        key=lambda t: (-Fraction(topics[t].num_partitions, len(subscribers[t])), len(subscribers[t]), t),
    )
    for topic_id in topic_order:
        unassigned = _unassigned_partitions(topics[topic_id].num_partitions, claims.get(topic_id))
        if unassigned:
            steps = _plan_fill(subscribers[topic_id], loads, len(unassigned))
            _hand_out(steps, [(topic_id, unassigned)], assignment, loads)

    _balance([t for t in topic_order if len(subscribers[t]) > 1], subscribers, assignment, loads)
    return assignment


def _balance(
    topic_order: list[TopicId],
    subscribers: dict[TopicId, list[int]],
    assignment: _Assignment,
    loads: list[int],
) -> None:
    """Sweep the topics until a whole round finds every topic balanced."""
    if not topic_order:
        return
    balanced_in_a_row = 0
    index = 0
    while balanced_in_a_row < len(topic_order):
        moved = _balance_topic(topic_order[index], subscribers[topic_order[index]], assignment, loads)
        # A topic that just moved partitions is balanced itself, so it counts as one.
        balanced_in_a_row = 1 if moved else balanced_in_a_row + 1
        index = (index + 1) % len(topic_order)


def _balance_topic(topic_id: TopicId, topic_subscribers: list[int], assignment: _Assignment, loads: list[int]) -> bool:
    """Move this topic's partitions from most- to least-loaded subscribers while that helps.

    The giver is the most loaded holder (ties: member id), the receiver the least loaded
    subscriber (ties: member id), and the partition the giver's last one, which is its most
    recently added. Heaps with lazily discarded stale entries keep each move O(log N).
    """
    least = min(loads[m] for m in topic_subscribers)
    holders = [m for m in topic_subscribers if topic_id in assignment[m]]
    if not holders or max(loads[m] for m in holders) - least <= 1:
        return False
    givers = [(-loads[m], m) for m in holders]
    receivers = [(loads[m], m) for m in topic_subscribers]
    heapify(givers)
    heapify(receivers)
    moved = False
    while True:
        giver = _pop_giver(givers, topic_id, assignment, loads)
        receiver = _pop_receiver(receivers, loads)
        if loads[giver] - loads[receiver] <= 1:
            return moved
        moved = True
        _move_last_partition(topic_id, giver, receiver, assignment, loads)
        for member in (giver, receiver):
            heappush(receivers, (loads[member], member))
            if topic_id in assignment[member]:
                heappush(givers, (-loads[member], member))


def _pop_giver(givers: list[tuple[int, int]], topic_id: TopicId, assignment: _Assignment, loads: list[int]) -> int:
    """The most loaded member still holding a partition of the topic; stale heap entries are dropped."""
    while True:
        negative_load, member = heappop(givers)
        if -negative_load == loads[member] and topic_id in assignment[member]:
            return member


def _pop_receiver(receivers: list[tuple[int, int]], loads: list[int]) -> int:
    """The least loaded subscriber; stale heap entries are dropped."""
    while True:
        load, member = heappop(receivers)
        if load == loads[member]:
            return member


def _move_last_partition(
    topic_id: TopicId, giver: int, receiver: int, assignment: _Assignment, loads: list[int]
) -> None:
    """The giver's most recently added partition of the topic goes to the receiver."""
    given = assignment[giver][topic_id]
    partition = given.pop()
    if not given:
        del assignment[giver][topic_id]
    assignment[receiver].setdefault(topic_id, []).append(partition)
    loads[giver] -= 1
    loads[receiver] += 1
