"""The client-side assignor interface of the classic protocol (Kafka's ``ConsumerPartitionAssignor``).

In a classic group the coordinator only elects a leader; the leader's consumer runs the
assignor over every member's embedded subscription and hands the result back in SyncGroup.
Each consumer holds its own assignor instance, which is why an assignor may keep state
between rebalances (what it was given, in which generation) and put it in its user data.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from enum import StrEnum
from typing import ClassVar

from kip_lab.errors import KipLabError
from kip_lab.protocol.consumer_protocol import (
    HIGHEST_CONSUMER_PROTOCOL_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartition,
)

# A member's partitions as the assignors compute them, before they are wrapped for the wire.
MemberPartitions = dict[str, list[TopicPartition]]


class RebalanceProtocol(StrEnum):
    """KIP-429's two ways to hand partitions over (Kafka ids 0 and 1)."""

    EAGER = "EAGER"  # revoke everything before joining; the assignor may reshuffle freely
    COOPERATIVE = "COOPERATIVE"  # keep what you own; a partition moves only after its owner revoked it


class ClientAssignorError(KipLabError, ValueError):
    """Bad input to a client-side assignor, or an unknown assignor name."""


class ConsumerPartitionAssignor(ABC):
    """A named assignment strategy the leader runs over the group's subscriptions.

    Subclasses implement :meth:`_assign_partitions`; :meth:`assign` validates the input,
    keeps only the topics someone subscribes to (a subscribed topic missing from the
    metadata is skipped, as Kafka's ``AbstractPartitionAssignor`` does) and wraps the result.
    """

    name: ClassVar[str]

    def supported_protocols(self) -> list[RebalanceProtocol]:
        """The protocols whose rules this assignor obeys, most preferred first."""
        return [RebalanceProtocol.EAGER]

    def version(self) -> int:
        return 0

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        """Opaque bytes this member adds to its subscription (none by default)."""
        return None

    def on_assignment(self, assignment: ConsumerProtocolAssignment, generation_id: int) -> None:
        """Told by this member's consumer what the leader gave it, and in which generation."""
        return None

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, ConsumerProtocolSubscription],
    ) -> dict[str, ConsumerProtocolAssignment]:
        """Member id -> assignment, one entry per subscribed member, in member-id order."""
        _check_input(partitions_per_topic, subscriptions)
        subscribed = set().union(*(subscription.topics for subscription in subscriptions.values()))
        existing = {topic: count for topic, count in sorted(partitions_per_topic.items()) if topic in subscribed}
        partitions = self._assign_partitions(existing, subscriptions)
        # Built, not validated: the partitions come from the checked input, each assigned once; sorted
        # here as the model keeps them (already in order for range and roundrobin, so that is one pass).
        return {
            member_id: ConsumerProtocolAssignment.model_construct(
                version=HIGHEST_CONSUMER_PROTOCOL_VERSION, assigned_partitions=sorted(partitions[member_id])
            )
            for member_id in sorted(subscriptions)
        }

    @abstractmethod
    def _assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: Mapping[str, ConsumerProtocolSubscription]
    ) -> MemberPartitions:
        """Member id -> partitions, for every member; only subscribed, existing topics are passed."""


def _check_input(partitions_per_topic: object, subscriptions: object) -> None:
    if not isinstance(partitions_per_topic, Mapping):
        raise ClientAssignorError(
            f"partitions_per_topic must map topic names to partition counts, not {partitions_per_topic!r}"
        )
    for topic, count in partitions_per_topic.items():
        if not isinstance(topic, str) or not topic:
            raise ClientAssignorError(f"partitions_per_topic: topic names must be non-empty strings, got {topic!r}")
        if type(count) is not int or count < 0:
            raise ClientAssignorError(f"partitions_per_topic[{topic!r}] must be a partition count >= 0, got {count!r}")
    if not isinstance(subscriptions, Mapping):
        raise ClientAssignorError(f"subscriptions must map member ids to subscriptions, not {subscriptions!r}")
    for member_id, subscription in subscriptions.items():
        if not isinstance(member_id, str) or not member_id:
            raise ClientAssignorError(f"subscriptions: member ids must be non-empty strings, got {member_id!r}")
        if not isinstance(subscription, ConsumerProtocolSubscription):
            raise ClientAssignorError(
                f"subscriptions[{member_id!r}] must be a ConsumerProtocolSubscription,"
                f" got {type(subscription).__name__}"
            )
