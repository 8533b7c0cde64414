"""KIP-932 share groups: share-partition leaders, share sessions, the persister and the share coordinator.

The share-partition side lives in ``partition`` (record states, locks, delivery counts),
``session`` and ``leader`` (ShareFetch / ShareAcknowledge), ``persister`` (the leader's
client of the share coordinator) and ``coordinator`` (the ``__share_group_state`` shard).
"""

from kip_lab.share.config import ShareCoordinatorConfig, SharePartitionConfig
from kip_lab.share.coordinator import ShareCoordinator
from kip_lab.share.leader import SharePartitionLeader
from kip_lab.share.partition import RECORD_STATE_MACHINE, PendingWrite, SharePartition
from kip_lab.share.persister import CoordinatorPersister
from kip_lab.share.state_batches import DurableState
from kip_lab.share.topic_log import TopicLog

__all__ = [
    "RECORD_STATE_MACHINE",
    "CoordinatorPersister",
    "DurableState",
    "PendingWrite",
    "ShareCoordinator",
    "ShareCoordinatorConfig",
    "SharePartition",
    "SharePartitionConfig",
    "SharePartitionLeader",
    "TopicLog",
]
