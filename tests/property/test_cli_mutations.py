"""``kip-lab run`` on a library scenario with one random change: a run's verdict or one clear line, nothing else.

Each example takes a library scenario file, changes one thing in it (a value replaced by a
wrong type, a number out of range, a control character; a field removed; an unknown field
added), keeps the run's step budget small, and runs it through the command's ``main()`` in this
process. The command may exit 0 (the run passed), 1 (the run's own expectations or invariants
failed, or its budget ran out) or 2 with exactly one line on stderr naming the problem; an
internal error (3), a traceback or a second line fails the test.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kip_lab import cli
from kip_lab.scenarios import list_library
from tests.property_profile import examples

LIBRARY = Path(cli.__file__).parent / "scenarios" / "library"
SMALL = ["basic", "member_failure", "partition_added", "third_member_joins", "lost_heartbeat", "scripted_basic"]
STEP_BUDGET = 20_000  # a mutated run is cut short, not left to run for minutes

WRONG = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2, 100_000, 100_001, 2**63 - 1, 2**63, 1.5, -0.0, "010", "20:00", "yes"]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.sampled_from("aA0_-.:\x1b[]{}\n é"), max_size=10),
    st.none(),
    st.booleans(),
    st.lists(st.integers(min_value=-3, max_value=300), max_size=3),
    st.just({}),
    st.just({"unknown": 1}),
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a scenario's data a change can go: each key of each mapping, each item of each list."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@st.composite
def mutated_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from([n for n in SMALL if n in list_library()]))
    data = yaml.safe_load((LIBRARY / f"{name}.yaml").read_text(encoding="utf-8"))
    path = draw(st.sampled_from(_paths(data)))
    *parents, last = path
    holder = data
    for key in parents:
        holder = holder[key]
    change = draw(st.sampled_from(["replace", "remove", "add"] if isinstance(holder, dict) else ["replace"]))
    if change == "replace":
        holder[last] = draw(WRONG)
    elif change == "remove":
        del holder[last]
    else:
        holder["unknown_field"] = draw(WRONG)
    if isinstance(data.get("run"), dict) and path[0] != "run":
        data["run"]["max_steps"] = min(data["run"].get("max_steps", STEP_BUDGET), STEP_BUDGET)
    return data


@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
@given(scenario=mutated_scenarios())
def test_a_mutated_scenario_gets_a_verdict_or_one_clear_line(scenario: dict[str, Any], capsys) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mutated.yaml"
        text = yaml.safe_dump(scenario, allow_unicode=False)
        path.write_text(text, encoding="utf-8")
        capsys.readouterr()
        code = cli.main(["run", str(path)])
        out, err = capsys.readouterr()
    assert code in (0, 1, 2), (code, err)
    if code == 2:  # one line per field at fault ("file:line: field: message"); a wrong leaf is one field
        lines = err.splitlines()
        fields = [line.split(": ")[1] for line in lines]
        assert all(line.startswith(str(path)) for line in lines) and len(set(fields)) == len(lines), err
        if len(lines) > 1:  # a whole mapping replaced: its missing and unknown fields
            assert any(": unknown field" in line or "Field required" in line for line in lines), err
    else:
        assert out.rstrip().endswith(("OK", "FAILED")), out[-300:]
    assert "Traceback" not in err


def test_the_mutations_reach_every_kind_of_change() -> None:
    """The strategy can touch any field of a library scenario (not only the top level)."""
    data = yaml.safe_load((LIBRARY / "basic.yaml").read_text(encoding="utf-8"))
    paths = _paths(data)
    assert ("topics", 0, "partitions") in paths and any(len(p) >= 3 and p[0] == "members" for p in paths)
    assert not math.isnan(len(paths))


pytestmark = pytest.mark.filterwarnings("ignore")
