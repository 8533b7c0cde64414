"""kip_lab: a deterministic, steppable workbench for Apache Kafka's group protocols.

The core (this package) imports with pydantic alone; visualisation, widgets and Spark
live behind optional extras and are never imported from here. The names below are imported
when first used, so that ``import kip_lab.errors`` (and the ``kip-lab`` command's start,
which must answer Ctrl-C at once) does not wait for the coordinator to load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kip_lab.errors import ArgumentError, KipLabError

if TYPE_CHECKING:
    from kip_lab.cluster import ClusterMetadata
    from kip_lab.coordinator import (
        CoordinatorConfig,
        CoordinatorResult,
        GroupCoordinator,
        GroupState,
        ReconciliationState,
    )
    from kip_lab.protocol import ApiError, Errors

__version__ = "0.1.0"

_HOME = {
    "ApiError": "kip_lab.protocol",
    "ClusterMetadata": "kip_lab.cluster",
    "CoordinatorConfig": "kip_lab.coordinator",
    "CoordinatorResult": "kip_lab.coordinator",
    "Errors": "kip_lab.protocol",
    "GroupCoordinator": "kip_lab.coordinator",
    "GroupState": "kip_lab.coordinator",
    "ReconciliationState": "kip_lab.coordinator",
}

__all__ = [
    "ApiError",
    "ArgumentError",
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


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'kip_lab' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # imported once
    return value
