"""``kip-lab shrink``: a run that violates an invariant is reduced to a smallest scenario that still does.

The coordinator is broken on purpose the way tests/lab/test_invariants.py breaks it: Kafka's
``ConsumerGroup`` keeps each partition's owner epoch as ownership changes (the class's
``updateMember`` / partition epochs bookkeeping); here it forgets what member C holds, which the
``partition-epochs-match-ownership`` invariant catches.
"""

from __future__ import annotations

import pytest

from kip_lab import cli
from kip_lab.coordinator.group import ConsumerGroup
from kip_lab.scenarios import load_scenario, run_scenario, scenario_from_yaml
from kip_lab.scenarios.shrink import NothingToShrink, scenario_yaml, shrink

BIG = """\
name: big
topics:
  - {name: foo, partitions: 12}
  - {name: bar, partitions: 4}
members:
  A: {subscribed_topic_names: [foo, bar]}
  B: {subscribed_topic_names: [foo]}
  C: {subscribed_topic_names: [foo], start_at_ms: 2000}
  D: {subscribed_topic_names: [foo, bar], start_at_ms: 4000}
  E: {subscribed_topic_names: [bar]}
  F: {subscribed_topic_names: [foo], start_at_ms: 8000}
lab:
  link: {latency: {ms: 2}}
events:
  - {action: pause, member: E, at_ms: 1000}
  - {action: resume, member: E, at_ms: 1500}
  - {action: drop_messages, member: B, count: 2, at_ms: 3000}
  - {action: add_partitions, topic: bar, count: 2, at_ms: 5000}
  - {action: crash, member: A, at_ms: 20000}
  - {action: restart, member: A, at_ms: 30000}
  - {action: partition_link, member: F, duration_ms: 3000, at_ms: 40000}
  - {action: fail_over, at_ms: 50000}
run: {until_ms: 90000}
"""
INVARIANT = "partition-epochs-match-ownership"


@pytest.fixture
def broken_coordinator(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ConsumerGroup._set_ownership

    def set_ownership(self, old, new):
        if new is not None and new.member_id == "C" and new.assigned:
            return real(self, old, None)  # forgets to record what C now holds
        return real(self, old, new)

    monkeypatch.setattr(ConsumerGroup, "_set_ownership", set_ownership)


def test_a_broken_coordinator_shrinks_to_a_few_members_and_events_that_replay_the_violation(broken_coordinator):
    big = scenario_from_yaml(BIG)
    assert run_scenario(big).violations[0]["invariant"] == INVARIANT
    result = shrink(big)
    small = result.scenario
    assert result.violation.invariant == INVARIANT and result.original.invariant == INVARIANT
    assert len(small.members) <= 3 and len(small.events) <= 2
    assert sum(t.partitions for t in small.topics) < 16 and small.run.end_ms < 90_000
    assert result.violation.step < result.original.step
    replayed = run_scenario(scenario_from_yaml(scenario_yaml(small)))  # as written to a file
    first = replayed.violations[0]
    assert (first["invariant"], first["step"]) == (INVARIANT, result.step)


def test_shrinking_is_deterministic(broken_coordinator):
    big = scenario_from_yaml(BIG)
    assert scenario_yaml(shrink(big).scenario) == scenario_yaml(shrink(big).scenario)


def test_a_scenario_that_violates_nothing_has_nothing_to_shrink():
    with pytest.raises(NothingToShrink, match="no invariant violation"):
        shrink(scenario_from_yaml(BIG))


def test_the_shrink_command_writes_a_scenario_that_replays_the_violation(broken_coordinator, tmp_path, capsys):
    source = tmp_path / "big.yaml"
    source.write_text(BIG, encoding="utf-8")
    out = tmp_path / "small.yaml"
    assert cli.main(["shrink", str(source), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{INVARIANT} still violated at step" in printed and f"kip-lab run {out}" in printed
    replayed = run_scenario(load_scenario(out))
    assert replayed.violations[0]["invariant"] == INVARIANT


def test_the_shrink_command_exits_1_when_nothing_is_violated(tmp_path, capsys):
    assert cli.main(["shrink", "basic", "--out", str(tmp_path / "x.yaml")]) == 1
    assert "nothing to shrink" in capsys.readouterr().err
    assert not (tmp_path / "x.yaml").exists()
