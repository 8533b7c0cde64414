"""The wire benchmark runs end to end in quick mode (its checks, not its timings)."""

from __future__ import annotations

import pytest
from bench_support import import_benchmark

pytest.importorskip("kio", reason="the wire front door needs kio (pip install 'kip-lab[wire]')")
pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")


@pytest.mark.slow
def test_quick_wire_benchmark_passes_its_checks(capsys):
    bench = import_benchmark("bench_wire")
    rows = bench.run_benchmarks(quick=True)
    assert [row.verdict for row in rows] == ["PASS"] * len(rows), bench.format_table(rows)
    assert [row.case.split(" (")[0] for row in rows] == [
        "join 3 on 3",
        "join 2 on 4",
        "join 2 on 4",
        "heartbeats/s",
        "heartbeats/s",
        "heartbeats per server CPU-second",
        "heartbeats: server peak memory",
        "metadata/s",
        "metadata/s",
        "metadata per server CPU-second",
        "metadata: server peak memory",
    ]
    assert all(row.value > 0 for row in rows)


def test_client_side_stability_needs_a_balanced_cover():
    bench = import_benchmark("bench_wire")

    class Owner:
        def __init__(self, *partitions):
            self.partitions = partitions

        def assignment(self):
            return [type("TP", (), {"partition": p})() for p in self.partitions]

    assert bench._client_side_stable([Owner(0, 1), Owner(2, 3)], 4)
    assert not bench._client_side_stable([Owner(0, 1, 2, 3), Owner()], 4)  # covered, not balanced
    assert not bench._client_side_stable([Owner(0, 1), Owner(1, 3)], 4)  # not disjoint


def test_the_heartbeat_target_is_judged_on_the_best_of_the_runs(monkeypatch):
    bench = import_benchmark("bench_wire")
    runs = iter(
        [
            bench.RateRun(rate=9_000, steady=9_500, per_cpu_second=9_100, answers=90_000, peak_mib=300, ok=True),
            bench.RateRun(rate=10_200, steady=10_600, per_cpu_second=10_300, answers=102_000, peak_mib=310, ok=True),
            bench.RateRun(rate=8_000, steady=8_100, per_cpu_second=8_200, answers=80_000, peak_mib=290, ok=True),
        ]
    )
    monkeypatch.setattr(bench, "_rate_run", lambda *args: next(runs))
    whole, half, per_cpu, memory = bench.request_rate(200, 10, "heartbeats", 10_000, runs=3)
    assert (whole.value, half.value, per_cpu.value, memory.value) == (10_200, 10_600, 10_300, 310)
    assert "best of 3 runs; the others 8,100, 9,500" in half.case and half.verdict == "PASS"

    slow = iter([bench.RateRun(9_700, 9_900, 9_800, 97_000, 300, ok=True)])
    monkeypatch.setattr(bench, "_rate_run", lambda *args: next(slow))
    assert [row.verdict for row in bench.request_rate(200, 10, "heartbeats", 10_000)] == [
        "PASS",
        "FAIL",
        "PASS",
        "PASS",
    ]

    failing = iter([bench.RateRun(10_500, 10_900, 10_400, 105_000, 300, ok=False)])
    monkeypatch.setattr(bench, "_rate_run", lambda *args: next(failing))
    assert {row.verdict for row in bench.request_rate(200, 10, "heartbeats", 10_000)} == {"FAIL"}
