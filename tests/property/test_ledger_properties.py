"""The delivery ledger's invariants hold in random faulty runs of every consumer protocol.

A Hypothesis state machine drives one Lab — three consumers of one protocol (KIP-848, classic
eager or classic cooperative) on a produced topic — through crashes and restarts, fences (a
member cut off past its session timeout), pauses, dropped commits (the next messages to the
coordinator lost) and coordinator failovers. Every step of the Lab is checked
(``raise_on_violation``): no-skip, commits-monotonic and reprocessing-explained with the
protocol's own invariants. At the end the run settles and the ledger must show every offset
below each partition's position processed at least once, and nothing skipped.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from property_profile import examples

from kip_lab.lab import Lab, LabConfig, LatencyModel, LinkConfig
from kip_lab.lab.ledger import build_ledger
from kip_lab.lab.metrics import compute_metrics

NAMES = ("A", "B", "C")
PROTOCOLS: dict[str, dict[str, Any]] = {
    "consumer": {},
    "classic-eager": {"group_protocol": "classic", "partition_assignment_strategy": ["range"]},
    "classic-cooperative": {"group_protocol": "classic", "partition_assignment_strategy": ["cooperative-sticky"]},
}
LINK = LinkConfig(latency=LatencyModel(kind="uniform", low=1, high=30), drop_probability=0.01)
names = st.sampled_from(NAMES)


class LedgerMachine(RuleBasedStateMachine):
    lab: Lab

    @initialize(protocol=st.sampled_from(sorted(PROTOCOLS)), seed=st.integers(0, 2**16))
    def start(self, protocol: str, seed: int) -> None:
        self.lab = Lab(seed=seed, config=LabConfig(raise_on_violation=True, link=LINK))
        self.lab.create_topic("foo", 4, produce_rate_per_s=50)
        for name in NAMES:
            self.lab.add_consumer(name, subscribed_topic_names=["foo"], **PROTOCOLS[protocol])
        self.lab.run(until=8_000)

    def _alive(self, name: str) -> bool:
        return bool(self.lab.clients[name].alive)

    @rule(ms=st.integers(500, 15_000))
    def run_for(self, ms: int) -> None:
        self.lab.run(until=self.lab.now + ms)

    @rule(name=names)
    def crash(self, name: str) -> None:
        if self._alive(name):
            self.lab.crash(name)

    @rule(name=names)
    def restart(self, name: str) -> None:
        self.lab.restart(name)

    @rule(name=names)
    def fence(self, name: str) -> None:
        """Cut off past the session timeout: the coordinator fences it, its partitions move on."""
        if self._alive(name):
            self.lab.partition_link(name, 50_000)

    @rule(name=names)
    def pause(self, name: str) -> None:
        if self._alive(name):
            self.lab.pause(name)

    @rule(name=names)
    def resume(self, name: str) -> None:
        if self._alive(name):
            self.lab.resume(name)

    @rule(name=names, count=st.integers(1, 4))
    def drop_commits(self, name: str, count: int) -> None:
        """The next messages to the coordinator are lost: commits (and heartbeats) among them."""
        self.lab.drop_messages(name, count)

    @rule()
    def fail_over(self) -> None:
        self.lab.fail_over()

    @invariant()
    def nothing_violated(self) -> None:
        assert self.lab.invariants.violations == []

    def teardown(self) -> None:
        lab = getattr(self, "lab", None)
        if lab is None:
            return
        for name in NAMES:
            if self._alive(name):
                lab.resume(name)
        lab.run(until=lab.now + 90_000)  # links heal, members rejoin, positions move on
        assert lab.invariants.violations == []
        ledger = build_ledger(lab.trace)
        metrics = compute_metrics(lab.trace)
        assert metrics["records_skipped"] == 0
        owed = sum(p.furthest - (p.first_start or 0) for p in ledger.partitions.values())
        assert metrics["records_processed"] - metrics["records_reprocessed"] == owed


LedgerMachine.TestCase.settings = settings(
    max_examples=examples(20),
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLedgerProperties = LedgerMachine.TestCase
