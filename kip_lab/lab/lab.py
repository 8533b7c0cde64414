"""The Lab: a whole cluster, its clients and its network, stepped one event at a time.

A run is a sequence of steps. A step is either the next timer on the shared scheduler (a
message delivered, a heartbeat due, a session expiring, a scheduled fault) or an action
applied from outside (``lab.crash("A")``), which is a step of its own. Each step appends its
events to the trace, then the invariants are checked.

Time travel: the World is snapshotted (``snapshot.Snapshot``) every ``snapshot_every`` steps
or more — once the work done since the last snapshot (events traced, records written and
rebalance steps: a deterministic stand-in for CPU time) is ``stepping_per_snapshot`` times
what that snapshot's size in bytes costs to pickle, so snapshots take a bounded share of any
run and a seek replays a bounded amount of work, whether the world is small or large, quiet
or rebalancing. Snapshot steps are a function of the run alone. ``seek(k)`` restores the
nearest snapshot at or before ``k`` and replays deterministically — the same timers fire in
the same order, and the actions applied from outside are re-applied at the steps
they were applied at. Applying an action after seeking back discards the old future (the
run forks in place); ``fork()`` returns an independent copy to try something else.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, model_validator

from kip_lab.clients.classic_consumer import ClassicConsumerConfig
from kip_lab.clients.consumer import ConsumerConfig
from kip_lab.clients.share_consumer import ShareConsumerConfig
from kip_lab.contract import LONG_MAX, MAX_BROKERS, MAX_STEPS, Model, checked, refuse
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.coordinator.config import lift_fidelity
from kip_lab.errors import RunOver
from kip_lab.events import InvariantViolated, Note
from kip_lab.lab import actions as a
from kip_lab.lab.invariants import CheckMode, InvariantChecker
from kip_lab.lab.network import LinkConfig
from kip_lab.lab.snapshot import Snapshot
from kip_lab.lab.stability import StabilityTracker
from kip_lab.lab.trace import Trace, TraceEvent
from kip_lab.lab.world import World
from kip_lab.runtime.collector import collector_paused
from kip_lab.share.config import SharePartitionConfig

# The work measure's weights (decision P3, fitted on a 100-member group joining, steady and
# under faults; see docs/performance.md): a step that changed what members own (a
# rebalance's step) counts as 25 traced events, two records written as one, a record a
# failover's new coordinator replays as one, and one unit of work as much CPU as pickling 430
# bytes of snapshot.
_OWNERSHIP_CHECK_WORK = 25
_RECORDS_WRITTEN_PER_WORK = 2
_SNAPSHOT_BYTES_PER_WORK = 430
_WEIGH_EVERY = 16

# The Lab's arguments, bounded as a scenario file's are (the call refuses anything else: ``@checked``).
Seed = Annotated[int, Field(ge=-LONG_MAX - 1, le=LONG_MAX)]
TimeMs = Annotated[int, Field(ge=0, le=LONG_MAX)]
Steps = Annotated[int, Field(ge=0, le=MAX_STEPS)]


class LabConfig(Model):
    """The Lab's cluster.

    ``LabConfig(fidelity="kip")`` is short for ``LabConfig(coordinator=CoordinatorConfig(fidelity="kip"))``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    brokers: int = Field(3, ge=1, le=MAX_BROKERS)
    share: SharePartitionConfig = Field(
        SharePartitionConfig(), description="share-partition leaders' group.share.* settings (KIP-932)"
    )
    link: LinkConfig = LinkConfig()
    coordinator: CoordinatorConfig = CoordinatorConfig()
    snapshot_every: int = Field(256, ge=1, le=1_000_000, description="fewest steps between time-travel snapshots")
    stepping_per_snapshot: float = Field(
        16.0,
        ge=0,
        le=1_000_000,
        description="a snapshot also waits until the work since the last one (events traced, records "
        "written, rebalance steps) is this many times that snapshot's size, weighed as CPU: snapshots cost "
        "about 1/(1 + this) of a run, and a seek replays about this many snapshots' worth of work; "
        "0: every snapshot_every steps",
    )
    raise_on_violation: bool = Field(False, description="raise InvariantViolation instead of only tracing it")
    invariants: CheckMode = Field(
        "incremental",
        description="incremental: each step checks what it touched (same verdicts); full: rescan the world every step",
    )

    _fidelity_shorthand = model_validator(mode="before")(lift_fidelity)

    @model_validator(mode="after")
    def _one_fidelity(self) -> LabConfig:
        """The share-partition leaders follow the coordinator's profile: one switch for the whole Lab."""
        if self.share.fidelity == self.coordinator.fidelity:
            return self
        if "fidelity" in self.share.model_fields_set:
            raise ValueError(
                f"share.fidelity={self.share.fidelity!r} contradicts coordinator.fidelity="
                f"{self.coordinator.fidelity!r}; set the profile once, as fidelity"
            )
        object.__setattr__(self, "share", self.share.model_copy(update={"fidelity": self.coordinator.fidelity}))
        return self

    @property
    def fidelity(self) -> str:
        """The coordinator's profile: ``"kafka"`` (Apache Kafka's behaviour) or ``"kip"`` (the KIP text's)."""
        return self.coordinator.fidelity


class Lab:
    """A cluster, its clients and its network; every public method checks its arguments (``@checked``)."""

    @checked
    def __init__(self, seed: Seed = 0, config: LabConfig | None = None) -> None:
        self.seed = seed
        self.config = config or LabConfig()
        self.world = World(
            seed, self.config.coordinator, self.config.link, self.config.brokers, share_config=self.config.share
        )
        self.trace = Trace()
        self.step_count = 0
        self.horizon = 0  # the furthest step this timeline has reached
        self.invariants = InvariantChecker(self.config.raise_on_violation, mode=self.config.invariants)
        self._applied: dict[int, Any] = {}  # step -> action applied from outside at that step
        self._ahead: list[TraceEvent] = []  # after a backward seek: the known events of later steps, newest first
        self._snapshots: dict[int, Snapshot] = {}
        self._stability = StabilityTracker()
        self._snapshots[0] = self._snapshot(0)

    # ------------------------------------------------------------------ views
    @property
    def now(self) -> int:
        return self.world.scheduler.now_ms

    @property
    def coordinator(self) -> GroupCoordinator:
        return self.world.coordinator

    @property
    def clients(self) -> dict[str, Any]:
        return self.world.clients

    @property
    def cluster(self):
        return self.world.cluster

    @checked
    def topic_id(self, name: str) -> str:
        return self.world.cluster.topic(name).topic_id

    # ------------------------------------------------------------------ building a run
    @checked
    def create_topic(self, name: str, partitions: int, produce_rate_per_s: float = 100.0) -> str:
        self.apply(a.CreateTopic(topic=name, partitions=partitions, produce_rate_per_s=produce_rate_per_s))
        return self.topic_id(name)

    @checked
    def add_consumer(
        self,
        name: str,
        config: ConsumerConfig | None = None,
        *,
        listener: Any = None,
        start: bool = True,
        **settings: Any,
    ) -> None:
        """Add a consumer; ``settings`` are ConsumerConfig fields, or ClassicConsumerConfig fields
        with ``group_protocol="classic"`` for a classic (KIP-429) consumer."""
        if config is None:
            config = (ClassicConsumerConfig if settings.get("group_protocol") == "classic" else ConsumerConfig)(
                **settings
            )
        if listener is not None:
            self.world.listeners[name] = listener
        self.apply(a.AddConsumer(member=name, config=config, start=start))

    @checked
    def schedule(self, action: Any, at_ms: TimeMs) -> None:
        """Perform ``action`` when the clock reaches ``at_ms`` (a scenario's timed fault)."""
        self.apply(a.ScheduleAction(at_ms=at_ms, inner=action))

    # faults and changes, on demand (each is one step)
    @checked
    def crash(self, member: str) -> None:
        self.apply(a.Crash(member=member))

    @checked
    def restart(self, member: str, config: Any = None) -> None:
        """Restart ``member`` as a new incarnation, with its config or ``config`` (an upgrade)."""
        self.apply(a.Restart(member=member, config=config))

    @checked
    def close(self, member: str) -> None:
        self.apply(a.Close(member=member))

    @checked
    def pause(self, member: str) -> None:
        self.apply(a.Pause(member=member))

    @checked
    def resume(self, member: str) -> None:
        self.apply(a.Resume(member=member))

    @checked
    def drop_messages(self, member: str, count: int = 1) -> None:
        self.apply(a.DropMessages(member=member, count=count))

    @checked
    def delay_messages(self, member: str, count: int, delay_ms: int) -> None:
        self.apply(a.DelayMessages(member=member, count=count, delay_ms=delay_ms))

    @checked
    def partition_link(self, member: str, duration_ms: TimeMs) -> None:
        self.apply(a.PartitionLink(member=member, duration_ms=duration_ms))

    @checked
    def configure_link(self, member: str, link: LinkConfig) -> None:
        """Per-link network: ``member``'s links to the brokers get their own latency and loss."""
        self.apply(a.ConfigureLink(member=member, link=link))

    @checked
    def fail_over(self, to_broker: str | None = None) -> None:
        self.apply(a.FailOver(to_broker=to_broker))

    @checked
    def add_partitions(self, topic: str, count: int) -> None:
        self.apply(a.AddPartitions(topic=topic, count=count))

    @checked
    def delete_topic(self, topic: str) -> None:
        self.apply(a.DeleteTopic(topic=topic))

    @checked
    def recreate_topic(self, topic: str, partitions: int | None = None) -> None:
        self.apply(a.RecreateTopic(topic=topic, partitions=partitions))

    @checked
    def change_subscription(self, member: str, topics: list[str] | None = None, regex: str | None = None) -> None:
        self.apply(a.ChangeSubscription(member=member, topics=topics, regex=regex))

    # share groups (KIP-932)
    @checked
    def add_share_consumer(
        self, name: str, config: ShareConsumerConfig | None = None, *, start: bool = True, **settings: Any
    ) -> None:
        """Add a share consumer; ``settings`` are ShareConsumerConfig fields."""
        self.apply(a.AddShareConsumer(member=name, config=config or ShareConsumerConfig(**settings), start=start))

    @checked
    def produce_share_records(self, topic: str, count: int, **settings: Any) -> None:
        """Produce ``count`` records to each partition of ``topic``; ``settings`` are ProduceShareRecords fields."""
        self.apply(a.ProduceShareRecords(topic=topic, count=count, **settings))

    @checked
    def fail_over_share_coordinator(self, to_broker: str | None = None) -> None:
        self.apply(a.FailOverShareCoordinator(to_broker=to_broker))

    @checked
    def move_share_leader(self, topic: str, partition: int = 0, to_broker: str | None = None) -> None:
        self.apply(a.MoveShareLeader(topic=topic, partition=partition, to_broker=to_broker))

    @checked
    def reset_share_group_offsets(self, group_id: str, topic: str, to: str = "earliest", **settings: Any) -> None:
        """Admin: reset an empty share group's start offsets (ResetShareGroupOffsets fields)."""
        self.apply(a.ResetShareGroupOffsets(group_id=group_id, topic=topic, to=to, **settings))

    @checked
    def send_request(self, member: str, api: str, **body: Any) -> None:
        self.apply(a.SendRequest(member=member, api=api, body=body))

    # ------------------------------------------------------------------ stepping
    @checked
    def apply(self, action: Any) -> list[TraceEvent]:
        """Apply an action now, as one step. After a backward seek this forks the run in place."""
        if not isinstance(action, a.LabAction):
            raise refuse(
                "Lab.apply", "action", f"an action of kip_lab.lab.actions (Crash, CreateTopic, ...), not {action!r:.60}"
            )
        return self._apply(action)

    def _apply(self, action: a.LabAction) -> list[TraceEvent]:
        """``apply`` for kip_lab's own drivers (the wire front door, its real-time clock), whose
        actions are built by kip_lab: a served run applies one for every request of a real client."""
        future = None
        if self.step_count < self.horizon:
            future = (self._applied, self._snapshots, self.horizon, self._ahead)
            self._forget_future()
        number = self.step_count + 1
        self._applied[number] = action
        try:
            return self._step()
        except Exception:
            if self.step_count < number:  # refused (an unknown member or topic): no step, no trace
                del self._applied[number]
                self.world.events.clear()
                self.world.written_key_types.clear()
                self.world.written_batches.clear()
                if future is not None:  # and the run keeps the future it had
                    self._applied, self._snapshots, self.horizon, self._ahead = future
            raise

    def _forget_future(self) -> None:
        self._applied = {k: v for k, v in self._applied.items() if k <= self.step_count}
        self._snapshots = {k: v for k, v in self._snapshots.items() if k <= self.step_count}
        self.horizon = self.step_count
        self._ahead = []

    @checked
    def has_next(self) -> bool:
        return (self.step_count + 1) in self._applied or self.world.scheduler.peek() is not None

    @checked
    def step(self) -> list[TraceEvent]:
        """Run one event; returns the events it added to the trace."""
        return self._step()

    def _step(self) -> list[TraceEvent]:
        events = self._step_due(None)
        if events is None:
            raise RunOver("no timer is armed and no action is applied at the next step")
        return events

    def _step_due(self, until: int | None) -> list[TraceEvent] | None:
        """The next step — the action applied at it, or else the next timer if one is due by
        ``until`` (any, when None) — with its events; None, and no step, when there is none."""
        number = self.step_count + 1
        world = self.world
        action = self._applied.get(number)
        if action is not None:
            self._perform(action)
        else:
            fired = world.scheduler.fire_next(until)
            if fired is None:
                return None
            world.trace_fired(fired)
            owner = fired.owner
            if owner is not world.network:  # a delivery's actor is in its event: nothing more touched
                self.invariants.timer_fired(owner)
                self._stability.touched.timer_fired(owner)
        self.step_count = number
        if number > self.horizon:  # a new step: no snapshot of it yet
            self.horizon = number
            taken = None
        else:
            taken = self._snapshots.get(number)
        events = self._flush(number)
        for name, explanation in self.invariants.check(world, events):
            world.emit("invariants", InvariantViolated(name, explanation))
        self._stability.step_done(events, world.written_batches)
        if world.written_batches:
            world.written_batches.clear()
            world.written_key_types.clear()
        if world.events:
            events += self._flush(number)
        ahead = self._ahead
        while ahead and ahead[-1].step <= number:  # replaying known steps: their events are in the trace again
            ahead.pop()
        if taken is not None:  # replaying past a snapshot taken before: the next one is spaced from it
            self._mark_snapshot(number, taken)
        elif number >= self._weigh_at:
            self._weigh(number)
        return events

    def _perform(self, action: Any) -> None:
        self.invariants.action_applied(action)
        self._stability.touched.action_applied(action)
        if isinstance(action, a.ScheduleAction):
            self.world.emit("lab", Note(f"scheduled {action.inner.action} at {action.at_ms} ms"))
            self.world.schedule_action(action.inner, action.at_ms)
        else:
            self.world.perform(action)

    def _flush(self, step: int) -> list[TraceEvent]:
        world = self.world
        now = world.scheduler.now_ms
        events = [TraceEvent(step, now, actor, body) for actor, body in world.events]
        world.events.clear()
        self.trace.record(events)
        return events

    @collector_paused()
    @checked
    def run(self, until: TimeMs | None = None, steps: Steps | None = None) -> int:
        """Step until the clock would pass ``until`` (then advance it to ``until``), or ``steps`` steps.

        Returns the number of steps taken.
        """
        if until is None and steps is None:
            raise refuse("Lab.run", "until", "give until= (ms) or steps=")
        if until is not None and until < self.now:
            raise refuse("Lab.run", "until", f"the clock is at {self.now} ms already; until must be at least that")
        taken = 0
        while (steps is None or taken < steps) and self._step_due(until) is not None:
            taken += 1
        if until is not None and self.now < until and (steps is None or taken < steps):
            self.apply(a.AdvanceTo(time_ms=until))
            taken += 1
        return taken

    @checked
    def is_stable(self) -> bool:
        """Every group Stable and every live member STABLE with nothing left to reconcile.

        Answered from what changed since the last answer (``stability.StabilityTracker``), so
        asking after every step costs what the step touched, not the size of the run."""
        return self._stability.is_stable(self.world)

    @collector_paused()
    @checked
    def run_until_stable(
        self,
        timeout_ms: Annotated[int, Field(gt=0, le=LONG_MAX)] = 600_000,
        max_steps: Annotated[int, Field(ge=1, le=MAX_STEPS)] = 1_000_000,
    ) -> bool:
        """Step until ``is_stable()`` (True) or until ``timeout_ms`` of simulated time passes (False)."""
        deadline = self.now + timeout_ms
        for _ in range(max_steps):
            if self.is_stable() and self.step_count > 0:
                return True
            due = self.world.scheduler.peek()
            if due is None or due > deadline:
                return self.is_stable()
            self._step()
        return self.is_stable()

    # ------------------------------------------------------------------ time travel
    def _snapshot(self, number: int) -> Snapshot:
        snapshot = Snapshot(self.world, self.invariants)
        self._mark_snapshot(number, snapshot)
        return snapshot

    def _weigh(self, number: int) -> None:
        """Snapshot at step ``number`` if the work since the last snapshot pays for the next one,
        else weigh again ``_WEIGH_EVERY`` steps on (a quiet step costs little more than weighing it)."""
        if not self.config.stepping_per_snapshot or self._work() >= self._snapshot_due:
            self._snapshots[number] = self._snapshot(number)
        else:
            self._weigh_at = number + _WEIGH_EVERY

    def _work(self) -> int:
        """The run's work so far, a deterministic stand-in for its CPU time: events traced, records
        written and records replayed by failovers, and the steps that changed what members own
        (weighed: a rebalance's step costs far more than its events say). All are the same at a
        step in every replay of it, so snapshots fall at the same steps in every run."""
        world = self.world
        return (
            len(self.trace)
            + world.log.end_offset // _RECORDS_WRITTEN_PER_WORK
            + world.records_loaded
            + _OWNERSHIP_CHECK_WORK * self.invariants.ownership_checks
        )

    def _mark_snapshot(self, number: int, snapshot: Snapshot) -> None:
        """Space the next snapshot from this one: weighed first ``snapshot_every`` steps on (in
        whole ``_WEIGH_EVERY``s when spaced by work), at least ``stepping_per_snapshot`` times
        this one's cost later."""
        every = self.config.snapshot_every
        if self.config.stepping_per_snapshot:
            every = -(-every // _WEIGH_EVERY) * _WEIGH_EVERY
        self._weigh_at = number + every
        cost = snapshot.size_bytes * self.config.stepping_per_snapshot / _SNAPSHOT_BYTES_PER_WORK
        self._snapshot_due: float = self._work() + cost

    def _restore(self, base: int) -> None:
        """Load the snapshot of step ``base``; the trace follows (keeping what a later seek needs)."""
        ahead = self._ahead
        if base < self.step_count:
            ahead.extend(reversed(self.trace.split_after(base)))
        else:  # forward, past the present: the events up to ``base`` are known already
            known = []
            while ahead and ahead[-1].step <= base:
                known.append(ahead.pop())
            self.trace.record(known)
        snapshot = self._snapshots[base]
        self.world, self.invariants = snapshot.restore()
        self._stability = StabilityTracker()
        self.step_count = base
        self._mark_snapshot(base, snapshot)

    @collector_paused()
    @checked
    def seek(self, step: Steps) -> None:
        """Put the Lab in the state it had right after ``step`` (earlier or later than now)."""
        if step < self.step_count or (step > self.step_count and step <= self.horizon):
            base = max(k for k in self._snapshots if k <= step)
            if not (base <= self.step_count <= step):
                self._restore(base)
        while self.step_count < step:
            if not self.has_next():
                raise refuse("Lab.seek", "step", f"the run ends at step {self.step_count}; cannot seek to {step}")
            self._step()

    @collector_paused()
    @checked
    def fork(self) -> Lab:
        """An independent copy of this Lab at this step, with the same past."""
        twin = Lab.__new__(Lab)
        twin.seed = self.seed
        twin.config = self.config
        twin.world, twin.invariants = Snapshot(self.world, self.invariants).restore()
        twin._stability = StabilityTracker()
        twin.trace = Trace(self.trace)
        twin.trace.truncate_after(self.step_count)
        twin.step_count = self.step_count
        twin.horizon = self.step_count
        twin._applied = {k: v for k, v in self._applied.items() if k <= self.step_count}
        twin._snapshots = {k: v for k, v in self._snapshots.items() if k <= self.step_count}
        twin._ahead = []
        twin._weigh_at = self._weigh_at  # spaced from this Lab's last snapshot, which the twin has
        twin._snapshot_due = self._snapshot_due
        return twin
