"""Running a scenario: build the Lab, perform the events, run, and report what happened.

``run_scenario`` returns a ``ScenarioResult``: the final assignment table, the groups'
epochs, the metrics, the invariant verdict and every expectation with its actual value. It
never asserts; the caller (a test, the CLI, a sweep) decides what a failure means.

Every run has a budget (``RunSpec.max_steps``, ``max_memory_mb``): when one is spent the run
stops where it is, and ``ScenarioResult.stopped`` says which, with the setting to raise.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kip_lab.contract import checked
from kip_lab.events import HandlerResult, InvariantViolated, MessageDropped
from kip_lab.lab import Lab, Trace
from kip_lab.lab import actions as a
from kip_lab.lab.share_invariants import at_least_once
from kip_lab.scenarios.loading import Problem, ScenarioError
from kip_lab.scenarios.model import RunSpec, Scenario, event_action, resolve_topic_refs


@dataclass(frozen=True)
class ExpectationResult:
    name: str  # the expectation, with the member for per-member ones: "assignment.A"
    expected: Any
    actual: Any
    passed: bool


@dataclass(frozen=True)
class MemberRow:
    """One member at the end: the coordinator's view, and the client's state if it is autonomous."""

    name: str
    member_id: str
    member_epoch: int | None  # None: not in the group
    assignment: dict[str, list[int]] | None  # topic name -> partitions it may use
    client_state: str | None  # None: a scripted member
    alive: bool  # False once the member's process crashed (until it restarts)


@dataclass
class ScenarioResult:
    scenario: str
    seed: int
    steps: int
    end_ms: int
    stable: bool  # Lab.is_stable() at the end
    stable_at_ms: int | None  # the first moment the Lab was stable after the last event
    time_to_stable_ms: int | None  # ... counted from the last event
    groups: dict[str, dict[str, Any]]  # group id -> state, group_epoch, assignment_epoch
    members: list[MemberRow]
    violations: list[dict[str, Any]]  # step, time_ms, invariant, explanation
    metrics: dict[str, Any] | None
    metrics_note: str | None  # why there are no metrics
    expectations: list[ExpectationResult]
    trace: Trace = field(repr=False)
    stopped: str | None = None  # why the run stopped before its end: the budget it spent

    @property
    def ok(self) -> bool:
        """The run reached its end, every expectation was met and no invariant was violated."""
        return self.stopped is None and all(e.passed for e in self.expectations) and not self.violations

    def to_dict(self) -> dict[str, Any]:
        """Everything but the trace, as JSON-ready data."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "trace"}
        data["members"] = [asdict(m) for m in self.members]
        data["expectations"] = [asdict(e) for e in self.expectations]
        data["ok"] = self.ok
        return data


@checked
def build_lab(scenario: Scenario) -> Lab:
    """A Lab with the scenario's setup applied and its ``at_ms`` events scheduled.

    Setup is steps 1..``scenario.setup_steps``. ``at_step`` events are not in the Lab: they
    belong to a stepping loop, and ``run_scenario`` applies them.
    """
    return _setup(scenario)[0]


@checked
def run_lab(scenario: Scenario) -> Lab:
    """The Lab of a whole run of the scenario (``at_step`` events included), to step through.

    Its timeline holds every step of the run, so a stepper can open it at any of them:
    ``widgets.explore(run_lab(scenario), start_step=k)``.
    """
    lab, topic_ids = _setup(scenario)
    _drive(lab, scenario, topic_ids, _Budget(scenario))
    return lab


def _setup(scenario: Scenario) -> tuple[Lab, dict[str, str]]:
    lab = Lab(seed=scenario.seed, config=scenario.lab.config())
    for topic in scenario.topics:
        lab.create_topic(topic.name, topic.partitions, topic.produce_rate_per_s)
    topic_ids = {topic.name: lab.topic_id(topic.name) for topic in scenario.topics}
    autonomous = {name: m for name, m in scenario.members.items() if not m.scripted}
    for name, member in autonomous.items():
        lab.add_consumer(name, member.consumer_config(), start=member.start_at_ms == 0)
    for name, share_member in scenario.share_members.items():
        lab.add_share_consumer(name, share_member)
    for name, member in autonomous.items():
        if member.start_at_ms > 0:
            lab.schedule(a.Start(member=name), member.start_at_ms)
    for event in scenario.events:
        if event.at_ms is not None:
            lab.schedule(_action(event, topic_ids), event.at_ms)
    return lab, topic_ids


def _action(event: Any, topic_ids: Mapping[str, str]) -> Any:
    action = event_action(event)
    if isinstance(action, a.SendRequest):
        action = action.model_copy(update={"body": resolve_topic_refs(action.body, topic_ids)})
    return action


@checked
def run_scenario(scenario: Scenario) -> ScenarioResult:
    """Build, run as ``scenario.run`` says, and evaluate ``scenario.expect``."""
    lab, topic_ids = _setup(scenario)
    budget = _Budget(scenario)
    quiet_at, stable_at = _drive(lab, scenario, topic_ids, budget)
    metrics, note = _metrics(lab.trace, scenario.first_event_ms)
    result = ScenarioResult(
        scenario=scenario.name,
        seed=scenario.seed,
        steps=lab.step_count,
        end_ms=lab.now,
        stable=lab.is_stable(),
        stable_at_ms=stable_at,
        time_to_stable_ms=None if stable_at is None or quiet_at is None else stable_at - quiet_at,
        groups={
            gid: {"state": g.state.value, "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch}
            for gid, g in sorted(lab.coordinator.groups.items())
        },
        members=_member_rows(lab, scenario),
        violations=[
            {"step": e.step, "time_ms": e.time_ms, "invariant": e.body.invariant, "explanation": e.body.explanation}
            for e in lab.trace.of_type(InvariantViolated)
        ],
        metrics=metrics,
        metrics_note=note,
        expectations=[],
        trace=lab.trace,
        stopped=budget.stopped,
    )
    result.expectations = _expectations(scenario, lab, result)
    return result


class _Budget:
    """A run's step and memory budget; ``spent(lab)`` is true (and ``stopped`` says why) once one runs out."""

    CHECK_MEMORY_EVERY = 1_000  # steps: reading the process's size costs about a third of a step

    def __init__(self, scenario: Scenario) -> None:
        self.max_steps = scenario.run.max_steps
        self.max_memory_mb = scenario.run.max_memory_mb
        self.base_bytes = _resident_bytes()
        self.stopped: str | None = None

    def spent(self, lab: Lab) -> bool:
        if self.stopped is None and lab.step_count >= self.max_steps:
            self.stopped = f"the step budget is spent at {lab.now} ms ({self.max_steps:,} steps, run.max_steps)"
        if self.stopped is None and lab.step_count % self.CHECK_MEMORY_EVERY == 0:
            grown_mb = (_resident_bytes() - self.base_bytes) >> 20
            if grown_mb > self.max_memory_mb:
                self.stopped = (
                    f"the memory budget is spent at {lab.now} ms, step {lab.step_count:,} "
                    f"(the process grew by {grown_mb:,} MiB; run.max_memory_mb is {self.max_memory_mb:,})"
                )
        return self.stopped is not None


def _resident_bytes() -> int:
    """The process's resident memory now (Linux), or its peak (other POSIX systems); 0 where unknown."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:  # Windows: no memory budget
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _drive(
    lab: Lab, scenario: Scenario, topic_ids: Mapping[str, str], budget: _Budget
) -> tuple[int | None, int | None]:
    """Step the Lab to the end of the run; returns (time of the last event, first stable time after it).

    ``at_step`` events are applied when the step count reaches them; the run stops at
    ``until_ms``, or (``until_stable``) at the first stable moment after every event has
    happened, or when the clock would pass ``timeout_ms``, or when its budget is spent.
    """
    spec = scenario.run
    limit = spec.until_ms if spec.until_ms is not None else spec.timeout_ms
    pending = sorted(
        ((e.at_step, i, e) for i, e in enumerate(scenario.events) if e.at_step is not None), key=lambda t: t[0]
    )
    quiet_at = stable_at = None
    while not budget.spent(lab):
        if pending and pending[0][0] == lab.step_count + 1:
            lab.apply(_action(pending.pop(0)[2], topic_ids))
            continue
        if not pending and not lab.world.scheduled:  # every event has happened
            quiet_at = lab.now if quiet_at is None else quiet_at
            if stable_at is None and lab.is_stable():
                stable_at = lab.now
                if spec.until_stable:
                    break
        due = lab.world.scheduler.peek()
        if due is None or due > limit:
            _refuse_unreached_steps(lab, scenario, pending, limit)
            break
        lab.step()
    _run_until_ms(lab, spec, budget)
    return quiet_at, stable_at


def _refuse_unreached_steps(lab: Lab, scenario: Scenario, pending: list[tuple[int, int, Any]], limit: int) -> None:
    """The run has nothing left to do before ``limit``: an ``at_step`` event still waiting would never happen."""
    if not pending:
        return
    step, index, _ = pending[0]
    raise ScenarioError(
        scenario.name,
        [
            Problem(
                f"events.{index}.at_step",
                None,
                f"step {step} is never reached: after step {lab.step_count} the run has nothing "
                f"left to do before {limit} ms",
            )
        ],
    )


def _run_until_ms(lab: Lab, spec: RunSpec, budget: _Budget) -> None:
    """Run on to ``until_ms`` (when set) unless the budget runs out first."""
    while spec.until_ms is not None and lab.now < spec.until_ms and not budget.spent(lab):
        every = budget.CHECK_MEMORY_EVERY  # stop at each multiple, where the budget looks at the memory
        lab.run(until=spec.until_ms, steps=min(every - lab.step_count % every, budget.max_steps - lab.step_count))


def _metrics(trace: Trace, first_event_ms: int | None) -> tuple[dict[str, Any] | None, str | None]:
    """``kip_lab.lab.metrics.compute_metrics(trace)`` with the totals before the first timed event
    (what a sweep subtracts to count what the fault cost), or why there are none."""
    try:
        from kip_lab.lab.metrics import compute_metrics
    except ModuleNotFoundError as exc:
        if exc.name != "kip_lab.lab.metrics":
            raise
        return None, "no metrics: kip_lab.lab.metrics is not available in this installation"
    return compute_metrics(trace, totals_before_ms=first_event_ms), None


def _by_name(lab: Lab, assignment: Mapping[str, Any]) -> dict[str, list[int]]:
    out = {}
    for topic_id, parts in assignment.items():
        topic = lab.cluster.topic_by_id(topic_id)
        if parts:
            out[topic.name if topic else topic_id] = sorted(parts)
    return dict(sorted(out.items()))


def _member_id(lab: Lab, name: str) -> str:
    client = lab.clients.get(name)
    return getattr(client, "member_id", None) or name  # a scripted member's id is its name


def _member_rows(lab: Lab, scenario: Scenario) -> list[MemberRow]:
    rows = []
    group_members = {gid: g.members for gid, g in lab.coordinator.groups.items()}
    for name, spec in scenario.members.items():
        member_id = _member_id(lab, name)
        client = lab.clients.get(name)
        found = None
        for members in group_members.values():
            found = found or members.get(member_id)
        rows.append(
            MemberRow(
                name=name,
                member_id=member_id,
                member_epoch=None if found is None else found.member_epoch,
                assignment=None if found is None else _by_name(lab, found.assigned),
                client_state=None if spec.scripted or client is None else client.state.value,
                alive=getattr(client, "alive", True),
            )
        )
    return rows


def _expectations(scenario: Scenario, lab: Lab, result: ScenarioResult) -> list[ExpectationResult]:
    """Each expectation the scenario sets, against the run: the group's, each member's, then the whole run's."""
    group = lab.coordinator.groups.get(scenario.expect.group_id)
    checks = [
        *_group_checks(scenario, lab, result, group),
        *_member_checks(scenario, lab, group),
        *_run_checks(scenario, lab, result),
    ]
    return [ExpectationResult(name, want, got, _passed(name, want, got)) for name, want, got in checks]


_Check = tuple[str, Any, Any]  # (name, expected, actual)


def _if_set(checks: list[_Check], name: str, expected: Any, actual: Any) -> None:
    """Add the check when the scenario sets the expectation (``expected`` is not None)."""
    if expected is not None:
        checks.append((name, expected, actual))


def _group_checks(scenario: Scenario, lab: Lab, result: ScenarioResult, group: Any) -> list[_Check]:
    """Whether the run ended stable; the group's state, epochs and members."""
    expect = scenario.expect
    checks: list[_Check] = []
    _if_set(checks, "stable", expect.stable, result.stable)
    state = None if expect.group_state is None else expect.group_state.value
    _if_set(checks, "group_state", state, group and group.state.value)
    _if_set(checks, "group_epoch", expect.group_epoch, group and group.group_epoch)
    _if_set(checks, "assignment_epoch", expect.assignment_epoch, group and group.assignment_epoch)
    if expect.members_in_group is not None:
        members = {} if group is None else group.members
        ids = {_member_id(lab, name): name for name in scenario.members}
        checks.append(("members_in_group", sorted(expect.members_in_group), sorted(ids.get(m, m) for m in members)))
    return checks


def _member_checks(scenario: Scenario, lab: Lab, group: Any) -> list[_Check]:
    """Each named member's assignment and epoch in the group, and its client's state."""
    expect = scenario.expect
    members = {} if group is None else group.members
    checks: list[_Check] = []
    for name, parts in (expect.assignment or {}).items():
        member = members.get(_member_id(lab, name))
        wanted = {topic: sorted(p) for topic, p in sorted(parts.items()) if p}
        checks.append((f"assignment.{name}", wanted, None if member is None else _by_name(lab, member.assigned)))
    for name, epoch in (expect.member_epochs or {}).items():
        member = members.get(_member_id(lab, name))
        checks.append((f"member_epochs.{name}", epoch, None if member is None else member.member_epoch))
    for name, state in (expect.member_states or {}).items():
        checks.append((f"member_states.{name}", state.value, lab.clients[name].state.value))
    return checks


def _run_checks(scenario: Scenario, lab: Lab, result: ScenarioResult) -> list[_Check]:
    """What the whole run did: time to stable, errors answered, messages dropped, invariants, share records."""
    expect = scenario.expect
    checks: list[_Check] = []
    if expect.max_time_to_stable_ms is not None:
        actual = result.time_to_stable_ms
        checks.append(("max_time_to_stable_ms", expect.max_time_to_stable_ms, actual))
    if expect.absent_errors is not None:
        seen = sorted({e.body.error for e in lab.trace.of_type(HandlerResult) if e.body.error is not None})
        checks.append(("absent_errors", sorted(expect.absent_errors), [e for e in seen if e in expect.absent_errors]))
    _if_set(checks, "messages_dropped", expect.messages_dropped, len(lab.trace.of_type(MessageDropped)))
    _if_set(checks, "no_invariant_violations", expect.no_invariant_violations, not result.violations)
    if expect.share_at_least_once is not None:  # walks every share-partition: only when asked
        _if_set(checks, "share_at_least_once", expect.share_at_least_once, not at_least_once(lab.world))
    archived = (result.metrics or {}).get("share_records_archived")
    _if_set(checks, "share_records_archived", expect.share_records_archived, archived)
    return checks


def _passed(name: str, expected: Any, actual: Any) -> bool:
    if name == "max_time_to_stable_ms":
        return actual is not None and actual <= expected
    if name == "absent_errors":
        return not actual
    return expected == actual
