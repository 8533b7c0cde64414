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
