"""Every library scenario's trace, byte for byte: a refactor must not change what a run records.

Each library scenario runs under both fidelity profiles, and a few also with assignment
batching on; the SHA-256 of each saved trace (JSON Lines) is compared with
``trace_hashes.json`` beside this file. When a change is meant to alter behaviour, regenerate
the file and say in the commit which traces changed and why:

    .venv/bin/python tests/golden/test_trace_hashes.py --update
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from kip_lab.scenarios.library import list_library, load_library_scenario
from kip_lab.scenarios.model import Scenario
from kip_lab.scenarios.runner import run_lab

HASHES = Path(__file__).with_name("trace_hashes.json")
BATCHED = ("third_member_joins", "rolling_bounce", "online_migration", "share_poison_messages")


def _variant(name: str, fidelity: str, assignment_interval_ms: int) -> Scenario:
    scenario = load_library_scenario(name)
    lab = scenario.lab
    coordinator = lab.coordinator.model_copy(
        update={
            "fidelity": fidelity,
            "assignment_interval_ms": assignment_interval_ms,
            "max_assignment_interval_ms": max(assignment_interval_ms, lab.coordinator.max_assignment_interval_ms),
            "share_assignment_interval_ms": assignment_interval_ms,
            "share_max_assignment_interval_ms": max(
                assignment_interval_ms, lab.coordinator.share_max_assignment_interval_ms
            ),
        }
    )
    share = lab.share.model_copy(update={"fidelity": fidelity})
    return scenario.model_copy(update={"lab": lab.model_copy(update={"coordinator": coordinator, "share": share})})


def _cases() -> list[tuple[str, str, int]]:
    cases = [(name, fidelity, 0) for name in list_library() for fidelity in ("kafka", "kip")]
    return cases + [(name, "kafka", 1000) for name in BATCHED]


def _key(name: str, fidelity: str, interval: int) -> str:
    return f"{name}/{fidelity}" + (f"/batched-{interval}ms" if interval else "")


def _hash(name: str, fidelity: str, interval: int) -> str:
    trace = run_lab(_variant(name, fidelity, interval)).trace
    return f"{hashlib.sha256(trace.to_jsonl().encode()).hexdigest()} ({len(trace)} events)"


@pytest.mark.parametrize(("name", "fidelity", "interval"), _cases(), ids=lambda v: str(v))
def test_trace_is_unchanged(name: str, fidelity: str, interval: int) -> None:
    """The saved trace hashes to the stored hash; a difference means the run records something else."""
    expected = json.loads(HASHES.read_text())
    key = _key(name, fidelity, interval)
    assert key in expected, f"no stored hash for {key}: run this file with --update"
    assert _hash(name, fidelity, interval) == expected[key]


def test_every_stored_hash_has_a_case() -> None:
    """A scenario removed from the library leaves no stale hash behind."""
    assert set(json.loads(HASHES.read_text())) == {_key(*case) for case in _cases()}


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/golden/test_trace_hashes.py --update")
    HASHES.write_text(json.dumps({_key(*c): _hash(*c) for c in _cases()}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {HASHES}")
