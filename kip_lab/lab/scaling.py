"""A large group joining, with and without assignment batching: the comparison a notebook shows.

Kafka 4.3 computes a group's target at most once per ``group.consumer.assignment.interval.ms``
(``CoordinatorConfig.assignment_interval_ms`` here). Without it every join bumps the group
epoch and the next heartbeat recomputes the whole target, so a group of n members joining
computes n targets, each as large as the group; with it, a handful. ``join_with_and_without_batching``
runs the same join both ways and returns one row per run.
"""

from __future__ import annotations

import time
from typing import Any

from kip_lab.coordinator import CoordinatorConfig
from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.lab.network import LatencyModel, LinkConfig
from kip_lab.protocol.records import ConsumerGroupTargetAssignmentMetadataKey


def targets_computed(lab: Lab) -> int:
    """How many target assignments the coordinator wrote in the run: one metadata record each in its
    ``__consumer_offsets`` log (which a new coordinator keeps writing to after a failover)."""
    return sum(1 for entry in lab.coordinator.log if type(entry.record.key) is ConsumerGroupTargetAssignmentMetadataKey)


def joined_lab(
    members: int, partitions: int, interval_ms: int, seed: int = 1, latency_ms: float = 10.0
) -> tuple[Lab, bool]:
    """``members`` consumers of one topic of ``partitions`` start together and run until stable:
    the Lab (its trace) and whether it settled."""
    config = LabConfig(
        link=LinkConfig(latency=LatencyModel(ms=latency_ms)),
        coordinator=CoordinatorConfig(assignment_interval_ms=interval_ms),
    )
    lab = Lab(seed=seed, config=config)
    lab.create_topic("foo", partitions)
    for i in range(members):
        lab.add_consumer(f"m{i:05d}", subscribed_topic_names=["foo"])
    return lab, lab.run_until_stable()


def join_run(
    members: int, partitions: int, interval_ms: int, seed: int = 1, latency_ms: float = 10.0
) -> dict[str, Any]:
    """``joined_lab``, measured: one row of the comparison."""
    cpu, wall = time.process_time(), time.perf_counter()
    lab, stable = joined_lab(members, partitions, interval_ms, seed, latency_ms)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "assignment_interval_ms": interval_ms,
        "members": members,
        "partitions": partitions,
        "stable": stable,
        "time_to_stable_ms": lab.now,
        "steps": lab.step_count,
        "targets_computed": targets_computed(lab),
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "violations": len(lab.invariants.violations),
    }


def join_with_and_without_batching(members: int = 1_000, partitions: int = 10_000, interval_ms: int = 1_000):
    """The same join with batching off (0) and at ``interval_ms``: a pandas DataFrame, one row each.

    ``time_to_stable_ms`` is simulated time (batching trades a little of it for far fewer target
    computations); ``cpu_s`` and ``wall_s`` are what the run cost this machine.
    """
    import pandas as pd

    return pd.DataFrame([join_run(members, partitions, interval) for interval in (0, interval_ms)])
