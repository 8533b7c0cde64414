"""Server-side partition assignors (KIP-848): the interface and the two built-in assignors."""

from kip_lab.assignors.builtin import BUILTIN_ASSIGNORS, DEFAULT_ASSIGNORS, builtin_assignors
from kip_lab.assignors.range import RANGE_ASSIGNOR_NAME, RangeAssignor, range_assign
from kip_lab.assignors.spec import (
    AssignmentSpec,
    GroupAssignment,
    MapOrder,
    MemberId,
    MemberSubscription,
    PartitionAssignor,
    PartitionAssignorError,
    SubscriptionType,
    TopicId,
    TopicMetadata,
    TopicPartitionsMap,
)
from kip_lab.assignors.uniform import UNIFORM_ASSIGNOR_NAME, UniformAssignor, uniform_assign

__all__ = [
    "BUILTIN_ASSIGNORS",
    "DEFAULT_ASSIGNORS",
    "RANGE_ASSIGNOR_NAME",
    "UNIFORM_ASSIGNOR_NAME",
    "AssignmentSpec",
    "GroupAssignment",
    "MapOrder",
    "MemberId",
    "MemberSubscription",
    "PartitionAssignor",
    "PartitionAssignorError",
    "RangeAssignor",
    "SubscriptionType",
    "TopicId",
    "TopicMetadata",
    "TopicPartitionsMap",
    "UniformAssignor",
    "builtin_assignors",
    "range_assign",
    "uniform_assign",
]
