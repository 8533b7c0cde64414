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
from typing import Protocol, runtime_checkable

TopicId = str
MemberId = str
# topic id -> partition indexes. Order is meaningful: it is the order in which the
# partitions were given to the member, which the uniform assignor uses for stickiness.
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


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """Everything an assignor may look at."""

    members: Mapping[MemberId, MemberSubscription]
    topics: Mapping[TopicId, TopicMetadata]


# member id -> topic id -> partitions. Every member of the spec has an entry (possibly empty).
GroupAssignment = dict[MemberId, dict[TopicId, list[int]]]


class PartitionAssignorError(Exception):
    """The assignor cannot compute an assignment (``PartitionAssignorException``)."""


@runtime_checkable
class PartitionAssignor(Protocol):
    """A server-side assignor: a name and a pure ``assign`` function."""

    name: str

    def assign(self, spec: AssignmentSpec) -> GroupAssignment: ...
