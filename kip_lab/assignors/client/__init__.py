"""Client-side assignors of the classic protocol: the leader's consumer runs them (KIP-429).

``client_assignor(name)`` builds one by its Kafka name: "range", "roundrobin", "sticky" or
"cooperative-sticky".
"""

from kip_lab.assignors.client.api import (
    ClientAssignorError,
    ConsumerPartitionAssignor,
    MemberPartitions,
    RebalanceProtocol,
)
from kip_lab.assignors.client.range import RangeAssignor
from kip_lab.assignors.client.round_robin import RoundRobinAssignor
from kip_lab.assignors.client.sticky import (
    CooperativeStickyAssignor,
    StickyAssignor,
    partitions_transferring_ownership,
)
from kip_lab.contract import checked

_ASSIGNORS: dict[str, type[ConsumerPartitionAssignor]] = {
    assignor.name: assignor
    for assignor in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


@checked
def client_assignor(name: str) -> ConsumerPartitionAssignor:
    """A fresh assignor instance (each consumer holds its own: the sticky ones keep state)."""
    assignor = _ASSIGNORS.get(name)
    if assignor is None:
        raise ClientAssignorError(f"unknown client-side assignor {name!r}; known: {', '.join(sorted(_ASSIGNORS))}")
    return assignor()


__all__ = [
    "ClientAssignorError",
    "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor",
    "MemberPartitions",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "client_assignor",
    "partitions_transferring_ownership",
]
