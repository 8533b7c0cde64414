"""Time travel: ``seek`` lands on exactly the state a straight run has, ``fork`` is independent,
and an action after a backward seek forks the run in place.

The reference is one straight run that records, after every step, the coordinator's state,
each client's (state, epoch, owned, fetching), the clock, the delivery ledger (its totals, and
each partition's processed ranges and last commit) and the trace. The run has faults,
slow callbacks (so continuations are pending when snapshots are taken), a lossy jittery
network and frequent snapshots, so seeks restore snapshots taken in every kind of moment.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kip_lab.clients import CallbackConfig
from kip_lab.events import FaultInjected
from kip_lab.lab import Lab, LabConfig, LatencyModel, LinkConfig
from kip_lab.lab import actions as a

CONFIG = LabConfig(
    link=LinkConfig(latency=LatencyModel(kind="uniform", low=1, high=30), drop_probability=0.02),
    snapshot_every=9,
    stepping_per_snapshot=0,
)


def capture(lab: Lab) -> tuple[Any, ...]:
    clients = {
        name: (c.state.value, c.member_epoch, sorted(c.owned), sorted(c.fetching), c.alive)
        for name, c in sorted(lab.clients.items())
        if hasattr(c, "state")
    }
    ledger = lab.invariants.ledger  # what the run's outcome counts say at this step
    outcomes = {
        (g, tp): (list(pl.processed.starts), list(pl.processed.ends), pl.last_commit)  # copies: the run goes on
        for (g, tp), pl in ledger.partitions.items()
    }
    return lab.coordinator.state_snapshot(), clients, lab.now, lab.step_count, ledger.totals(), outcomes


class RecordingLab(Lab):
    """Keeps a capture of every step it takes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.captures: dict[int, tuple[Any, ...]] = {}
        super().__init__(*args, **kwargs)
        self.captures[0] = capture(self)

    def _step_due(self, until):  # every step, whether run() or step() takes it
        stepped = super()._step_due(until)
        if stepped is not None:
            self.captures[self.step_count] = capture(self)
        return stepped


def scenario(lab: Lab) -> Lab:
    lab.create_topic("foo", 6)
    callbacks = CallbackConfig(on_partitions_revoked_ms=700, on_partitions_assigned_ms=300, on_partitions_lost_ms=200)
    for name in "ABCD":
        lab.add_consumer(
            name,
            subscribed_topic_names=["foo"],
            callbacks=callbacks,
            max_poll_interval_ms=15_000,
            request_timeout_ms=4_000,
        )
    lab.run(until=12_000)
    lab.crash("B")
    lab.pause("C")
    lab.schedule(a.Restart(member="B"), at_ms=30_000)
    lab.run(until=25_000)
    lab.fail_over()
    lab.add_partitions("foo", 2)
    lab.resume("C")
    lab.partition_link("D", 3_000)
    lab.run(until=50_000)
    lab.close("A")
    lab.run(until=60_000)
    return lab


@pytest.fixture(scope="module")
def straight() -> RecordingLab:
    lab = scenario(RecordingLab(seed=5, config=CONFIG))
    assert 300 <= lab.step_count <= 2_000
    return lab


@pytest.fixture(scope="module")
def traveller() -> Lab:
    return scenario(Lab(seed=5, config=CONFIG))


def jsonl_up_to(lab: Lab, step: int) -> str:
    return "".join(e.to_json() + "\n" for e in lab.trace if e.step <= step)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_seek_then_seek_equals_a_straight_run(straight: RecordingLab, traveller: Lab, data: st.DataObject) -> None:
    last = straight.step_count
    k = data.draw(st.integers(0, last), label="k")
    j = data.draw(st.integers(0, last), label="j")
    traveller.seek(k)
    assert capture(traveller) == straight.captures[k]
    traveller.seek(j)
    assert capture(traveller) == straight.captures[j]
    assert traveller.trace.to_jsonl() == jsonl_up_to(straight, j)


def test_seek_past_the_end_is_refused(traveller: Lab, straight: RecordingLab) -> None:
    traveller.seek(straight.step_count)
    with pytest.raises(ValueError):
        traveller.seek(-1)
    assert capture(traveller) == straight.captures[straight.step_count]


def test_fork_is_an_independent_copy(straight: RecordingLab) -> None:
    lab = scenario(Lab(seed=5, config=CONFIG))
    lab.seek(200)
    twin = lab.fork()
    assert capture(twin) == capture(lab) == straight.captures[200]
    assert twin.trace.to_jsonl() == lab.trace.to_jsonl()
    twin.crash("D")
    twin.run(until=twin.now + 20_000)
    assert capture(lab) == straight.captures[200]  # the original did not move
    assert twin.world is not lab.world and twin.clients["D"] is not lab.clients["D"]
    assert lab.clients["D"].alive and not twin.clients["D"].alive
    lab.seek(straight.step_count)  # and its own future is intact
    assert capture(lab) == straight.captures[straight.step_count]
    assert lab.trace.to_jsonl() == straight.trace.to_jsonl()


def test_an_action_after_a_backward_seek_forks_in_place(straight: RecordingLab) -> None:
    lab = scenario(Lab(seed=5, config=CONFIG))
    end = lab.step_count
    lab.seek(150)
    lab.crash("D")
    assert lab.step_count == lab.horizon == 151  # the old future is gone
    assert all(e.step <= 151 for e in lab.trace)
    lab.run(until=70_000)
    assert not lab.clients["D"].alive
    assert lab.trace.to_jsonl() != straight.trace.to_jsonl()
    # The new timeline is as deterministic as the first: the same moves give the same bytes.
    again = scenario(Lab(seed=5, config=CONFIG))
    again.seek(150)
    again.crash("D")
    again.run(until=70_000)
    assert again.trace.to_jsonl() == lab.trace.to_jsonl()
    assert end != lab.step_count or capture(lab) != straight.captures[end]
    lab.seek(151)
    assert lab.trace[-1].step == 151
    assert [e.body.fields for e in lab.trace.at_step(151) if isinstance(e.body, FaultInjected)] == [
        {"action": "crash", "member": "D"}
    ]


def test_seek_with_a_listener_pickle_cannot_copy() -> None:
    """A user's listener defined in a function cannot be pickled: snapshots fall back to deep copies."""

    class Slow:
        def on_partitions_revoked(self, partitions: list[str]) -> int:
            return 400

        def on_partitions_assigned(self, partitions: list[str]) -> int:
            return 100

        def on_partitions_lost(self, partitions: list[str]) -> int:
            return 0

    def build() -> Lab:
        lab = Lab(seed=2, config=LabConfig(snapshot_every=5, stepping_per_snapshot=0))
        lab.create_topic("foo", 4)
        for name in "AB":
            lab.add_consumer(name, subscribed_topic_names=["foo"], listener=Slow())
        lab.run(until=20_000)
        lab.add_consumer("C", subscribed_topic_names=["foo"], listener=Slow())
        lab.run(until=40_000)
        return lab

    straight, lab = build(), build()
    end = lab.step_count
    for target in (end // 3, end // 2, 7, end):
        lab.seek(target)
        assert lab.trace.to_jsonl() == jsonl_up_to(straight, target)
    assert capture(lab) == capture(straight)


def test_a_refused_action_after_a_backward_seek_keeps_the_future(straight: RecordingLab) -> None:
    lab = scenario(Lab(seed=5, config=CONFIG))
    end = lab.step_count
    lab.seek(100)
    with pytest.raises(KeyError):
        lab.crash("nobody")
    assert lab.step_count == 100 and lab.horizon == end
    lab.seek(end)
    assert capture(lab) == straight.captures[end]
    assert lab.trace.to_jsonl() == straight.trace.to_jsonl()


def test_snapshot_steps_depend_on_the_run_alone() -> None:
    """Snapshots are spaced by the run's own work: a second run, and a run that seeks back
    and steps over its snapshots again, snapshot at the same steps; a quiet stretch spaces them wider than a
    rebalance does."""

    def run(seeks: bool) -> list[int]:
        lab = Lab(seed=4, config=LabConfig(snapshot_every=16))
        lab.create_topic("foo", 60)
        for i in range(6):
            lab.add_consumer(f"c{i}", subscribed_topic_names=["foo"])
        lab.run(steps=1_500)
        lab.crash("c2")
        lab.run(steps=1_500)
        if seeks:  # back, then stepping over the snapshots taken the first time, to where it was
            end = lab.step_count
            lab.seek(2_200)
            lab.seek(700)
            lab.run(steps=end - 700)
        lab.run(steps=500)
        return sorted(lab._snapshots)

    steps = run(seeks=False)
    assert len(steps) > 5
    assert run(seeks=False) == steps
    assert run(seeks=True) == steps
    gaps = [b - a for a, b in pairwise(steps)]
    assert max(gaps) > min(gaps)  # spaced by work, not by a fixed count of steps


def test_a_failover_counts_the_log_its_new_coordinator_replays_as_work() -> None:
    """Rebuilding the coordinator from the log costs what replaying it costs, whatever the step
    traces: the work measure counts each replayed record, so the next snapshot comes sooner
    and a seek across the failover replays less; a replay of the failover counts it again the same."""
    lab = Lab(seed=2, config=LabConfig(snapshot_every=16))
    lab.create_topic("foo", 30)
    for i in range(3):
        lab.add_consumer(f"c{i}", subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    lab.run(until=lab.now + 20_000)
    log_end, events, work, checks = (
        lab.world.log.end_offset,
        len(lab.trace),
        lab._work(),
        lab.invariants.ownership_checks,
    )
    assert log_end > 100 and lab.world.records_loaded == 0
    lab.fail_over()
    assert lab.world.records_loaded == log_end
    written = lab.world.log.end_offset // 2 - log_end // 2
    rebalancing = 25 * (lab.invariants.ownership_checks - checks)
    assert lab._work() - work == (len(lab.trace) - events) + written + log_end + rebalancing
    at = lab.step_count
    lab.run(steps=50)
    lab.seek(at - 1)
    lab.seek(at + 10)
    assert lab.world.records_loaded == log_end


def test_a_snapshot_keeps_its_offsets_and_members_while_the_run_goes_on() -> None:
    """Committed offsets and coordinator members are shared with the snapshot, not pickled one
    by one: later commits and reconciliations must not reach into it, and every restore is its
    own copy."""
    from kip_lab.lab.snapshot import Snapshot

    lab = Lab(seed=3)
    lab.create_topic("foo", 8)
    for name in ("a", "b"):
        lab.add_consumer(name, subscribed_topic_names=["foo"], auto_commit_interval_ms=500)
    assert lab.run_until_stable()
    lab.run(until=lab.now + 3_000)
    offsets_then = {g: dict(o) for g, o in lab.world.coordinator.offsets.items()}
    members_then = dict(lab.world.coordinator.groups["g"].members)
    assert offsets_then and members_then
    snapshot = Snapshot(lab.world, lab.invariants)

    lab.add_consumer("c", subscribed_topic_names=["foo"], auto_commit_interval_ms=500)  # a rebalance
    lab.run(until=lab.now + 5_000)
    assert {g: dict(o) for g, o in lab.world.coordinator.offsets.items()} != offsets_then

    first, _ = snapshot.restore()
    assert {g: dict(o) for g, o in first.coordinator.offsets.items()} == offsets_then
    assert first.coordinator.groups["g"].members == members_then
    first.coordinator.offsets["g"].clear()  # one restore changed ...
    second, _ = snapshot.restore()
    assert {g: dict(o) for g, o in second.coordinator.offsets.items()} == offsets_then  # ... not the next
