"""The smallest failing scenario: shrink a run that violates an invariant to a few members and events.

What TLC and Hypothesis give their users, for scenarios: ``shrink(scenario)`` runs the
scenario, takes its first invariant violation, then tries smaller scenarios in a fixed order —
fewer events (delta debugging: halves, then quarters, ... then one at a time), fewer members
and share members, fewer topics, fewer partitions, no network faults, and a run that ends at
the violation — keeping each one that still violates *the same invariant*. It repeats until
no reduction helps. Every run is deterministic, so the search is too: the same scenario
always shrinks to the same result.

``kip-lab shrink SCENARIO --out FILE`` writes the result as a scenario file, which replays
to the violation with ``kip-lab run FILE``; ``widgets.explore(run_lab(result.scenario),
start_step=result.step)`` opens it in the stepper at the violating step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kip_lab.errors import KipLabError
from kip_lab.scenarios.loading import ScenarioError
from kip_lab.scenarios.model import Scenario
from kip_lab.scenarios.runner import run_scenario

Data = dict[str, Any]
MAX_PASSES = 8  # rounds over every reduction; each round that changes nothing ends the search


class NothingToShrink(KipLabError, ValueError):
    """The scenario's run violates no invariant."""


@dataclass(frozen=True)
class Violation:
    invariant: str
    step: int
    time_ms: int
    explanation: str


@dataclass(frozen=True)
class ShrinkResult:
    scenario: Scenario  # the smallest scenario found that still violates ``violation.invariant``
    violation: Violation  # its first violation of that invariant
    original: Violation  # the violation the search started from
    runs: int  # scenarios run during the search

    @property
    def step(self) -> int:
        return self.violation.step

    def summary(self) -> str:
        s = self.scenario
        partitions = sum(t.partitions for t in s.topics)
        return (
            f"{self.violation.invariant} still violated at step {self.violation.step} ({self.violation.time_ms} ms): "
            f"{self.violation.explanation}\n"
            f"shrunk to {len(s.members) + len(s.share_members)} members, {len(s.events)} events, "
            f"{len(s.topics)} topics with {partitions} partitions, run until {s.run.end_ms} ms "
            f"(from step {self.original.step}; {self.runs} runs tried)"
        )


def first_violation(scenario: Scenario, invariant: str | None = None) -> Violation | None:
    """The first violation (of ``invariant``, if given) when ``scenario`` runs; None if there is none
    or the scenario cannot run to one."""
    try:
        result = run_scenario(scenario)
    except ScenarioError:  # a reduced scenario whose at_step is never reached
        return None
    for v in result.violations:
        if invariant is None or v["invariant"] == invariant:
            return Violation(v["invariant"], v["step"], v["time_ms"], v["explanation"])
    return None


def shrink(scenario: Scenario, invariant: str | None = None) -> ShrinkResult:
    """The smallest scenario found that violates ``invariant`` (default: the first one the run violates)."""
    original = first_violation(scenario, invariant)
    if original is None:
        what = "no invariant" if invariant is None else f"no {invariant}"
        raise NothingToShrink(f"scenario {scenario.name!r}: its run shows {what} violation; nothing to shrink")
    search = _Search(original.invariant)
    data = scenario.model_dump(mode="json", exclude_unset=True)
    data.pop("expect", None)  # expectations do not decide a violation
    data["name"] = f"{scenario.name}-shrunk"
    kept = search.keep(data) or (scenario, original)
    for _ in range(MAX_PASSES):
        before = data
        for reduce in (_end_at_violation, _fewer_events, _fewer_members, _fewer_topics, _fewer_partitions, _calm):
            data, kept = search.improve(data, reduce, kept)
        if data == before:
            break
    best, violation = kept
    data = best.model_dump(mode="json", exclude_unset=True)
    data["description"] = f"Found by kip-lab shrink: violates {violation.invariant} at step {violation.step}."
    tidy = {key: value for key, value in data.items() if value not in ({}, [])}  # what a person would write
    return ShrinkResult(Scenario.model_validate(tidy), violation, original, search.runs)


def scenario_yaml(scenario: Scenario) -> str:
    """The scenario as a file a person would write: only the settings it sets."""
    import yaml

    return yaml.safe_dump(scenario.model_dump(mode="json", exclude_unset=True), sort_keys=False)


class _Search:
    """Runs candidates; remembers how many."""

    def __init__(self, invariant: str) -> None:
        self.invariant = invariant
        self.runs = 0

    def keep(self, data: Data) -> tuple[Scenario, Violation] | None:
        """The candidate as a scenario with its violation, if it is valid and still violates the invariant."""
        try:
            scenario = Scenario.model_validate(data)
        except ValidationError:
            return None
        self.runs += 1
        violation = first_violation(scenario, self.invariant)
        return None if violation is None else (scenario, violation)

    def improve(
        self, data: Data, reduce: Callable[[Data, Violation], Iterator[Data]], kept: tuple[Scenario, Violation]
    ) -> tuple[Data, tuple[Scenario, Violation]]:
        """Move to the first smaller candidate that still violates, and start the reduction again from
        there, until none of its candidates does."""
        while True:
            for candidate in reduce(data, kept[1]):
                found = None if candidate == data else self.keep(candidate)
                if found is not None:
                    data, kept = candidate, found
                    break
            else:
                return data, kept


# Each reduction yields smaller versions of the data it is given, the likeliest to help first.


def _end_at_violation(data: Data, violation: Violation) -> Iterator[Data]:
    """Run only until the violation: drop what happens after it and end the run at its time."""
    candidate = {**data}
    candidate["events"] = [
        e
        for e in data.get("events", [])
        if (e.get("at_ms") is None or e["at_ms"] <= violation.time_ms)
        and (e.get("at_step") is None or e["at_step"] <= violation.step)
    ]
    run = {k: v for k, v in data.get("run", {}).items() if k.startswith("max_")}
    candidate["run"] = {**run, "until_ms": max(violation.time_ms, 1)}
    candidate["members"] = {
        name: member
        for name, member in data.get("members", {}).items()
        if member.get("start_at_ms", 0) <= violation.time_ms
    }
    yield candidate


def _fewer_events(data: Data, violation: Violation) -> Iterator[Data]:
    """Delta debugging over the events: without each half, then each quarter, ... then each one."""
    events = data.get("events", [])
    chunk = len(events)
    while chunk:
        for start in range(0, len(events), chunk):
            yield {**data, "events": events[:start] + events[start + chunk :]}
        chunk //= 2


def _fewer_members(data: Data, violation: Violation) -> Iterator[Data]:
    """Without each member (last first), and the events that act on it."""
    for field in ("members", "share_members"):
        for name in reversed(list(data.get(field, {}))):
            yield _without(data, field, name, _acts_on_member(name))


def _fewer_topics(data: Data, violation: Violation) -> Iterator[Data]:
    """Without each topic, its events, and its name in every subscription."""
    for index in reversed(range(len(data.get("topics", [])))):
        name = data["topics"][index]["name"]
        candidate = {**data, "topics": data["topics"][:index] + data["topics"][index + 1 :]}
        candidate["events"] = [e for e in data.get("events", []) if e.get("topic") != name]
        for field in ("members", "share_members"):
            candidate[field] = {member: _unsubscribe(config, name) for member, config in data.get(field, {}).items()}
        yield candidate


def _fewer_partitions(data: Data, violation: Violation) -> Iterator[Data]:
    """Each topic with 1 partition, then 2, ... up to half of what it has."""
    for index, topic in enumerate(data.get("topics", [])):
        for count in sorted({1, 2, 3, topic["partitions"] // 2}):
            if 1 <= count < topic["partitions"]:
                topics = [*data["topics"]]
                topics[index] = {**topic, "partitions": count}
                yield {**data, "topics": topics}


def _calm(data: Data, violation: Violation) -> Iterator[Data]:
    """A perfect network (no loss, default latencies); members that start at once."""
    if "link" in data.get("lab", {}):
        yield {**data, "lab": {k: v for k, v in data["lab"].items() if k != "link"}}
    for name, member in data.get("members", {}).items():
        if member.get("start_at_ms"):
            yield {**data, "members": {**data["members"], name: {**member, "start_at_ms": 0}}}


def _acts_on_member(name: str) -> Callable[[Data], bool]:
    return lambda event: event.get("member") == name


def _without(data: Data, field: str, name: str, acts_on: Callable[[Data], bool]) -> Data:
    candidate = {**data, field: {k: v for k, v in data[field].items() if k != name}}
    candidate["events"] = [e for e in data.get("events", []) if not acts_on(e)]
    return candidate


def _unsubscribe(config: Data, topic: str) -> Data:
    names = config.get("subscribed_topic_names")
    if not names or topic not in names:
        return config
    return {**config, "subscribed_topic_names": [n for n in names if n != topic]}
