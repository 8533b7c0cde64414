"""kip_lab: a deterministic, steppable workbench for Apache Kafka's group protocols.

The core (this package) imports with pydantic alone; visualisation, widgets and Spark
live behind optional extras and are never imported from here.
"""

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, CoordinatorResult, GroupCoordinator, GroupState, ReconciliationState
from kip_lab.errors import KipLabError
from kip_lab.protocol import ApiError, Errors

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "ClusterMetadata",
    "CoordinatorConfig",
    "CoordinatorResult",
    "Errors",
    "GroupCoordinator",
    "GroupState",
    "KipLabError",
    "ReconciliationState",
    "__version__",
]
