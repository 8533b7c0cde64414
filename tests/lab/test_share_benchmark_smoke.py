"""The share benchmark runs end to end in quick mode (correctness only, not timing)."""

from __future__ import annotations

from types import ModuleType

import pytest
from bench_support import import_benchmark


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return import_benchmark("bench_share")


def test_quick_mode_runs_checked_cases(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--quick", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "acquire+accept 20,000 records" in out and "replay a 2,000-record" in out


def test_state_log_has_the_requested_size_and_both_record_kinds(bench: ModuleType) -> None:
    log, coordinator = bench.share_state_log(1_200, partitions=10)
    assert len(log) == 1_200
    kinds = {type(entry.record.key).__name__ for entry in log}
    assert kinds == {"ShareSnapshotKey", "ShareUpdateKey"}
    assert len(coordinator.states) == 10
