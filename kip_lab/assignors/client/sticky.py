"""Kafka's sticky assignors: "sticky" (EAGER only) and "cooperative-sticky" (COOPERATIVE, EAGER).

Both aim, in this order, for balance and then stickiness (KIP-54's goals, kept by KIP-429):

* balance: with equal subscriptions the partition counts differ by at most one; otherwise no
  partition could move from its member to another subscriber of its topic holding at least
  two fewer partitions;
* stickiness: each member keeps the partitions it owned, as many as balance allows.

What a member owned comes from different places. "sticky" dates from before KIP-429: under
EAGER a member has revoked everything when it joins, so the assignor writes the member's last
assignment and generation into its own user data. "cooperative-sticky" reads the subscription's
``owned_partitions`` and its ``generation_id`` (v2+; older subscriptions carry the generation in
the assignor's user data). When several members claim one partition, the claim from the
highest generation wins; equal highest generations cancel each other, so nobody is treated as
its owner (Kafka's ``AbstractStickyAssignor``).

With equal subscriptions the balancing is Kafka's "constrained" algorithm
(``constrained_assign``), which also keeps each topic balanced as members come and go.
Otherwise it is ``kip_lab.assignors.client.sticky_balance``, Kafka's general path with the same
guarantees; it is fed the resolved ownership as each member's previous
target, with topic names standing in for topic ids; there ties are broken by member id rather
than Java hash order. Rack awareness is omitted.

"cooperative-sticky" then obeys KIP-429's rule for COOPERATIVE assignors: a partition is never
given to a new owner in the round in which another member still lists it as owned. It is
left out of the new owner's assignment, the old owner revokes it, and the follow-up rebalance
hands it over.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass

from kip_lab.assignors.client.api import ConsumerPartitionAssignor, MemberPartitions, RebalanceProtocol
from kip_lab.assignors.client.sticky_balance import sticky_balance
from kip_lab.assignors.java_hash_order import capacity_after_puts, string_key_order
from kip_lab.assignors.spec import AssignmentSpec, MemberSubscription, TopicMetadata
from kip_lab.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolError,
    ConsumerProtocolSubscription,
    TopicPartition,
    partitions_from_json,
    partitions_to_json,
)

# Kafka's DEFAULT_GENERATION: no generation known (a new member, or unreadable user data).
NO_GENERATION = -1


class _AbstractStickyAssignor(ConsumerPartitionAssignor):
    """Balance, then stickiness, over the ownership claims a subclass reads from subscriptions."""

    @abstractmethod
    def _claims(self, subscription: ConsumerProtocolSubscription) -> tuple[list[TopicPartition], int]:
        """The partitions a member says it owned, and the generation it owned them in."""

    def _assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: Mapping[str, ConsumerProtocolSubscription]
    ) -> MemberPartitions:
        owned = self._resolve_ownership(partitions_per_topic, subscriptions)
        if len({frozenset(subscription.topics) for subscription in subscriptions.values()}) == 1:
            return constrained_assign(partitions_per_topic, owned)
        spec = AssignmentSpec(
            members={
                member_id: MemberSubscription(
                    subscribed_topic_ids=frozenset(subscription.topics), target_partitions=owned[member_id]
                )
                for member_id, subscription in subscriptions.items()
            },
            topics={topic: TopicMetadata(topic, topic, count) for topic, count in partitions_per_topic.items()},
        )
        return {
            member_id: [(topic, partition) for topic, partitions in held.items() for partition in partitions]
            for member_id, held in sticky_balance(spec).items()
        }

    def _resolve_ownership(
        self, partitions_per_topic: dict[str, int], subscriptions: Mapping[str, ConsumerProtocolSubscription]
    ) -> dict[str, dict[str, list[int]]]:
        """Member id -> topic -> owned partitions (ascending), one owner per partition at most.

        A claim counts only for an existing partition of a topic the claimant still subscribes
        to. Of several claims, the highest generation wins; a tie at the highest generation
        leaves the partition without an owner. The result does not depend on member order.
        """
        best: dict[TopicPartition, tuple[int, str | None]] = {}
        for member_id, subscription in subscriptions.items():
            partitions, generation = self._claims(subscription)
            subscribed = set(subscription.topics)
            for topic, partition in partitions:
                if topic not in subscribed or not 0 <= partition < partitions_per_topic.get(topic, 0):
                    continue
                current = best.get((topic, partition))
                if current is None or generation > current[0]:
                    best[(topic, partition)] = (generation, member_id)
                elif generation == current[0] and current[1] != member_id:
                    best[(topic, partition)] = (generation, None)
        owned: dict[str, dict[str, list[int]]] = {member_id: defaultdict(list) for member_id in subscriptions}
        for (topic, partition), (_, owner) in sorted(best.items()):
            if owner is not None:
                owned[owner][topic].append(partition)
        return owned


def constrained_assign(
    partitions_per_topic: dict[str, int], owned: dict[str, dict[str, list[int]]]
) -> MemberPartitions:
    """Kafka's ``AbstractStickyAssignor.ConstrainedAssignmentBuilder`` (equal subscriptions), without racks.

    Each member keeps what it owns up to its quota — taken in (partition, topic) order, so what it
    keeps is spread over the topics — and the free partitions, topic by topic, are dealt round
    robin to the members still under quota. That keeps every topic balanced, not only the totals,
    when members leave. Members keep their partitions in the order Kafka's ``HashMap`` of subscriptions
    iterates them (``owned`` in the leader's insertion order: the JoinGroup response's member order),
    which decides who keeps one partition over the lower quota; the members still under quota are
    then taken in member-id order, as Kafka sorts them.
    """
    members = string_key_order(owned, capacity_after_puts(len(owned)))
    total = sum(partitions_per_topic.values())
    quotas = _Quotas(total // len(members), -(-total // len(members)), total % len(members))
    assignment, under_min, exactly_min = _keep_owned(members, owned, quotas)
    kept = {tp for partitions in assignment.values() for tp in partitions}
    free = [(t, p) for t in sorted(partitions_per_topic) for p in range(partitions_per_topic[t]) if (t, p) not in kept]
    _deal_free(free, assignment, sorted(under_min), sorted(exactly_min), quotas.min)
    return {member_id: sorted(partitions) for member_id, partitions in assignment.items()}


@dataclass(frozen=True)
class _Quotas:
    """How many partitions a member ends with: ``min`` or ``max``; ``over_min`` members get ``max``."""

    min: int
    max: int
    over_min: int  # 0 when the quotas are equal


def _keep_owned(
    members: list[str], owned: dict[str, dict[str, list[int]]], quotas: _Quotas
) -> tuple[dict[str, list[TopicPartition]], list[str], list[str]]:
    """Each member keeps what it owns up to its quota, in ``members`` order (the first ``over_min`` members
    owning enough keep ``max``). Returns the assignment so far, the members still under the lower quota,
    and those at exactly the lower quota that may yet get one more."""
    over_min = 0
    assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in members}
    under_min: list[str] = []
    exactly_min: list[str] = []
    for member_id in members:
        mine = sorted(
            ((topic, p) for topic, partitions in owned[member_id].items() for p in partitions),
            key=lambda tp: (tp[1], tp[0]),
        )
        if len(mine) < quotas.min:
            assignment[member_id] += mine
            under_min.append(member_id)
        elif len(mine) >= quotas.max and over_min < quotas.over_min:
            over_min += 1
            if over_min == quotas.over_min:
                exactly_min.clear()
            assignment[member_id] += mine[: quotas.max]
        else:
            assignment[member_id] += mine[: quotas.min]
            if over_min < quotas.over_min:
                exactly_min.append(member_id)
    return assignment, under_min, exactly_min


def _deal_free(
    free: list[TopicPartition],
    assignment: dict[str, list[TopicPartition]],
    under_min: list[str],
    exactly_min: list[str],
    min_quota: int,
) -> None:
    """Deal the free partitions round robin to the members under the lower quota (a member reaching it
    leaves the round and waits for one more), then one each to the members waiting for the higher quota."""
    waiting_for_max = deque(exactly_min)
    position = 0  # the round robin's place in ``under_min``
    for tp in free:
        if position < len(under_min):
            member_id = under_min[position]
            position += 1
        elif under_min:
            member_id, position = under_min[0], 1
        else:
            member_id = waiting_for_max.popleft()  # the quotas guarantee one is left
        assignment[member_id].append(tp)
        if len(assignment[member_id]) == min_quota and position and under_min[position - 1] == member_id:
            position -= 1
            under_min.pop(position)
            waiting_for_max.append(member_id)


class StickyAssignor(_AbstractStickyAssignor):
    """EAGER only (kept so on purpose by KIP-429); remembers its assignment in its user data."""

    name = "sticky"

    def __init__(self) -> None:
        self._last_assignment: list[TopicPartition] | None = None
        self._generation = NO_GENERATION

    def on_assignment(self, assignment: ConsumerProtocolAssignment, generation_id: int) -> None:
        self._last_assignment = list(assignment.assigned_partitions)
        self._generation = generation_id

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        """``{"previous_assignment": {topic: [partitions]}, "generation": n}``, once assigned."""
        if self._last_assignment is None:
            return None
        return encode_sticky_user_data(self._last_assignment, self._generation)

    def _claims(self, subscription: ConsumerProtocolSubscription) -> tuple[list[TopicPartition], int]:
        return decode_sticky_user_data(subscription.user_data)


def encode_sticky_user_data(partitions: list[TopicPartition], generation: int) -> bytes:
    body = {"previous_assignment": partitions_to_json(sorted(partitions)), "generation": generation}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_sticky_user_data(user_data: bytes | None) -> tuple[list[TopicPartition], int]:
    """What a "sticky" member owned; unreadable or missing data means nothing, as in Kafka."""
    body = _json_object(user_data)
    try:
        partitions = partitions_from_json("sticky user data", "previous_assignment", body.get("previous_assignment"))
    except ConsumerProtocolError:
        return [], NO_GENERATION
    generation = body.get("generation")
    return partitions, generation if type(generation) is int else NO_GENERATION


class CooperativeStickyAssignor(_AbstractStickyAssignor):
    """COOPERATIVE first, EAGER too; stickiness from the subscription's owned partitions."""

    name = "cooperative-sticky"

    def __init__(self) -> None:
        self._generation = NO_GENERATION

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]

    def on_assignment(self, assignment: ConsumerProtocolAssignment, generation_id: int) -> None:
        self._generation = generation_id

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        """``{"generation": n}``: the generation for leaders reading a subscription older than v2."""
        return json.dumps({"generation": self._generation}, separators=(",", ":")).encode("utf-8")

    def _claims(self, subscription: ConsumerProtocolSubscription) -> tuple[list[TopicPartition], int]:
        if subscription.version >= 2:
            return subscription.owned_partitions, subscription.generation_id
        generation = _json_object(subscription.user_data).get("generation")
        return subscription.owned_partitions, generation if type(generation) is int else NO_GENERATION

    def _assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: Mapping[str, ConsumerProtocolSubscription]
    ) -> MemberPartitions:
        intended = super()._assign_partitions(partitions_per_topic, subscriptions)
        transferring = partitions_transferring_ownership(intended, subscriptions)
        return {
            member_id: [tp for tp in partitions if tp not in transferring] for member_id, partitions in intended.items()
        }


def partitions_transferring_ownership(
    assignment: Mapping[str, list[TopicPartition]], subscriptions: Mapping[str, ConsumerProtocolSubscription]
) -> dict[TopicPartition, str]:
    """Partition -> new owner, for each partition given to a member that does not list it as
    owned while another member does: the partitions a COOPERATIVE assignor must withhold."""
    claimants: dict[TopicPartition, set[str]] = defaultdict(set)
    for member_id, subscription in subscriptions.items():
        for tp in subscription.owned_partitions:
            claimants[tp].add(member_id)
    return {
        tp: member_id
        for member_id in sorted(assignment)
        for tp in assignment[member_id]
        if tp in claimants and member_id not in claimants[tp]
    }


def _json_object(user_data: bytes | None) -> dict:
    """User data as a JSON object; anything else (absent, foreign or corrupt) as empty."""
    if not user_data:
        return {}
    try:
        body = json.loads(user_data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return body if isinstance(body, dict) else {}
