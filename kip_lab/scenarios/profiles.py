"""One scenario under both fidelity profiles, side by side: where Kafka's coordinator and the KIP text part ways.

    from kip_lab.scenarios.profiles import compare_profiles
    comparison = compare_profiles("member_failure")
    comparison.differences      # the coordinator writes that differ, in order
    comparison.rows()           # the same as plain dicts, for a table

Each run is the scenario as written except for ``lab.coordinator.fidelity``; same seed, so every
difference comes from the profile. The coordinator's writes (its ``handler_result`` events:
what produced them, the error answered, the records written) are compared in order; the n-th
write of one run is set against the n-th of the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kip_lab.events import HandlerResult
from kip_lab.lab.trace import Trace
from kip_lab.scenarios.library import load_library_scenario
from kip_lab.scenarios.model import Scenario
from kip_lab.scenarios.runner import ScenarioResult, run_scenario

PROFILES = ("kafka", "kip")


@dataclass(frozen=True)
class CoordinatorWrite:
    """One coordinator result: when, what produced it, the error it answered, the records it wrote.

    A record reads ``Type(member)``, ``~`` marking a tombstone: ``~TargetAssignmentMember(A)``.
    """

    time_ms: int
    origin: str
    error: str | None
    records: tuple[str, ...]

    def same_as(self, other: CoordinatorWrite | None) -> bool:
        """The same write, whenever it happened (the profiles may shift the clock)."""
        return other is not None and (self.origin, self.error, self.records) == (
            other.origin,
            other.error,
            other.records,
        )


@dataclass(frozen=True)
class WriteDifference:
    """The ``index``-th coordinator write of each run, where they differ (``None``: that run wrote no more)."""

    index: int
    kafka: CoordinatorWrite | None
    kip: CoordinatorWrite | None


@dataclass(frozen=True)
class ProfileComparison:
    scenario: str
    results: dict[str, ScenarioResult]  # profile -> the run's result
    writes: dict[str, list[CoordinatorWrite]]  # profile -> the coordinator's writes, in order
    differences: list[WriteDifference]

    def rows(self) -> list[dict[str, Any]]:
        """One row per difference: index, then each profile's time, origin, error and records."""
        rows = []
        for difference in self.differences:
            row: dict[str, Any] = {"index": difference.index}
            for profile in PROFILES:
                write = getattr(difference, profile)
                row[f"{profile}_time_ms"] = write.time_ms if write else None
                row[f"{profile}_origin"] = write.origin if write else None
                row[f"{profile}_error"] = write.error if write else None
                row[f"{profile}_records"] = ", ".join(write.records) if write else None
            rows.append(row)
        return rows


def coordinator_writes(trace: Trace) -> list[CoordinatorWrite]:
    """The coordinator's results in a trace, in order, leaving out those that wrote nothing and answered no error."""
    writes = []
    for event in trace.of_type(HandlerResult):
        result = event.body
        records = tuple(_record_label(r) for r in result.records)
        error = None if result.error in (None, "NONE") else result.error
        if records or error:
            writes.append(CoordinatorWrite(event.time_ms, result.origin, error, records))
    return writes


def _record_label(record: dict[str, Any]) -> str:
    key = record["key"]
    name = str(key["type"]).removeprefix("ConsumerGroup").removesuffix("Key")
    member = key.get("member_id")
    return ("~" if record.get("value") is None else "") + name + (f"({member})" if member else "")


def with_fidelity(scenario: Scenario, fidelity: str) -> Scenario:
    """``scenario`` with its coordinator under ``fidelity`` ("kafka" or "kip"), nothing else changed."""
    data = scenario.model_dump(mode="json", exclude_unset=True)
    lab = data.setdefault("lab", {})
    lab.setdefault("coordinator", {})["fidelity"] = fidelity
    return Scenario.model_validate(data)


def compare_profiles(scenario: Scenario | str) -> ProfileComparison:
    """Run ``scenario`` (or the library scenario of that name) under both profiles and set their writes side by side."""
    if isinstance(scenario, str):
        scenario = load_library_scenario(scenario)
    results = {profile: run_scenario(with_fidelity(scenario, profile)) for profile in PROFILES}
    writes = {profile: coordinator_writes(results[profile].trace) for profile in PROFILES}
    kafka, kip = writes["kafka"], writes["kip"]
    differences = []
    for index in range(max(len(kafka), len(kip))):
        left = kafka[index] if index < len(kafka) else None
        right = kip[index] if index < len(kip) else None
        if left is None or not left.same_as(right):
            differences.append(WriteDifference(index, left, right))
    return ProfileComparison(scenario.name, results, writes, differences)
