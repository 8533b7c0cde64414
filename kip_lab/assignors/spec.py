"""The server-side assignor interface (KIP-848 "PartitionAssignor", newer wording).

An assignor is a pure function: ``AssignmentSpec`` in, ``GroupAssignment`` out. The spec
carries each member's *current target* (not what it owns), so stickiness is relative to
the previous target, as the KIP's newer interface says.

These are plain frozen dataclasses rather than pydantic models on purpose: an assignor
sees up to 100,000 partitions per call and the KIP's own benchmark sizes would spend most
of their time in validation. The coordinator builds them from already-validated state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from kip_lab.errors import KipLabError

TopicId = str
MemberId = str
# topic id -> partition indexes, in the order of the member's target record (Kafka reads a record
# into its HashSet in that order). It decides which partitions a member over its quota keeps, under
# MapOrder.AS_GIVEN, and among partitions sharing a hash bucket under MapOrder.JAVA_HASH.
TopicPartitionsMap = Mapping[TopicId, Sequence[int]]


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member as the assignor sees it (``AssignmentMemberSpec``)."""

    subscribed_topic_ids: frozenset[TopicId]
    target_partitions: TopicPartitionsMap = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A subscribed topic (``AssignmentTopicMetadata``)."""

    topic_id: TopicId
    topic_name: str
    num_partitions: int


class SubscriptionType(StrEnum):
    """Whether every member subscribes to the same topics (Kafka's ``SubscriptionType``)."""

    HOMOGENEOUS = "HOMOGENEOUS"
    HETEROGENEOUS = "HETEROGENEOUS"


class MapOrder(StrEnum):
    """In which order an assignor iterates the members and each member's previous target.

    Kafka's assignors iterate the maps and sets they are handed. In Kafka's coordinator those are a
    ``HashMap`` of the members and, per member, the ``HashMap<Uuid, HashSet<Integer>>`` its target
    record is read into, so ``JAVA_HASH`` (the default) iterates as those would
    (``kip_lab.assignors.java_hash_order``). ``AS_GIVEN`` iterates the spec's own mapping and list
    order instead, as Kafka's unit tests do where they hand the assignor ordered maps.
    """

    JAVA_HASH = "JAVA_HASH"
    AS_GIVEN = "AS_GIVEN"


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """Everything an assignor may look at (Kafka's ``GroupSpec`` and ``SubscribedTopicDescriber``).

    ``subscription_type`` is the group's, as Kafka's group keeps it up to date; when it is not
    given, the assignor compares the members' subscriptions itself.
    """

    members: Mapping[MemberId, MemberSubscription]
    topics: Mapping[TopicId, TopicMetadata]
    subscription_type: SubscriptionType | None = None
    map_order: MapOrder = MapOrder.JAVA_HASH


def subscription_type(spec: AssignmentSpec) -> SubscriptionType:
    """The spec's subscription type, or, when it gives none, whether all members subscribe to the same topics."""
    if spec.subscription_type is not None:
        return spec.subscription_type
    subscriptions = iter(spec.members.values())
    first = next(subscriptions).subscribed_topic_ids if spec.members else frozenset()
    if all(member.subscribed_topic_ids == first for member in subscriptions):
        return SubscriptionType.HOMOGENEOUS
    return SubscriptionType.HETEROGENEOUS


# member id -> topic id -> partitions. Every member of the spec has an entry (possibly empty).
GroupAssignment = dict[MemberId, dict[TopicId, list[int]]]


class PartitionAssignorError(KipLabError):
    """The assignor cannot compute an assignment (``PartitionAssignorException``)."""


@runtime_checkable
class PartitionAssignor(Protocol):
    """A server-side assignor: a name and a pure ``assign`` function."""

    name: str

    def assign(self, spec: AssignmentSpec) -> GroupAssignment: ...
