"""``kip-lab`` in-process: each command, its output, and each exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kip_lab import cli
from kip_lab.lab import Trace
from kip_lab.scenarios import list_library, load_library_scenario, load_scenario, run_scenario, scenario_schema

GOOD = """\
name: tiny
topics:
  - {name: foo, partitions: 2}
members:
  A: {subscribed_topic_names: [foo]}
  B: {subscribed_topic_names: [foo], start_at_ms: 1000}
run: {until_stable: true, timeout_ms: 60000}
expect:
  stable: true
  assignment:
    A: {foo: [0]}
    B: {foo: [1]}
"""


@pytest.fixture
def good(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(GOOD, encoding="utf-8")
    return path


def test_validate_a_good_file(good, capsys):
    assert cli.main(["validate", str(good)]) == 0
    out, err = capsys.readouterr()
    assert out == f"{good}: valid scenario 'tiny' (2 members, 0 events)\n" and err == ""


def test_validate_a_bad_file_exits_2_with_the_error_on_stderr(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("start_at_ms: 1000", "start_at_ms: -1"), encoding="utf-8")
    assert cli.main(["validate", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"{bad}:6: members.B.start_at_ms: Input should be greater than or equal to 0, got -1\n"
    assert "Traceback" not in err


def test_validate_a_missing_file_exits_2(tmp_path, capsys):
    assert cli.main(["validate", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read the file" in capsys.readouterr().err


def test_run_a_library_scenario_prints_the_summary(capsys):
    assert cli.main(["run", "member_failure"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("scenario member_failure (seed 0): ")
    assert "group g: Stable, group epoch 4, assignment epoch 4" in out
    assert "A       A          -      STABLE (crashed)  not in the group" in out
    assert "B       B          4      STABLE            foo-0, foo-3, foo-4" in out
    assert "invariants: all held" in out
    assert "expectations: 13/13 passed" in out
    assert out.rstrip().endswith("OK")


def test_run_a_file_as_json_with_a_seed_and_a_trace(good, tmp_path, capsys):
    trace = tmp_path / "out.jsonl"
    assert cli.main(["run", str(good), "--seed", "7", "--json", "--trace", str(trace)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["seed"] == 7 and data["scenario"] == "tiny"
    assert {m["name"]: m["assignment"] for m in data["members"]} == {"A": {"foo": [0]}, "B": {"foo": [1]}}
    assert all(e["passed"] for e in data["expectations"])
    expected = run_scenario(load_scenario(good).model_copy(update={"seed": 7})).trace
    assert trace.read_text(encoding="utf-8") == expected.to_jsonl()


def test_run_writes_a_parquet_trace(tmp_path, capsys):
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out = tmp_path / "basic.parquet"
    assert cli.main(["run", "basic", "--trace", str(out)]) == 0
    assert f"written to {out}" in capsys.readouterr().out
    assert Trace.load_parquet(out).to_jsonl() == run_scenario(load_library_scenario("basic")).trace.to_jsonl()


def test_a_parquet_trace_without_pandas_is_refused_before_running(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cli, "find_spec", lambda name: None)
    assert cli.main(["run", "basic", "--trace", str(tmp_path / "t.parquet")]) == 2
    assert "needs pandas and pyarrow" in capsys.readouterr().err
    assert not (tmp_path / "t.parquet").exists()


def test_failed_expectations_exit_1(good, capsys):
    good.write_text(GOOD.replace("A: {foo: [0]}", "A: {foo: [1]}"), encoding="utf-8")
    assert cli.main(["run", str(good)]) == 1
    out = capsys.readouterr().out
    assert 'FAIL assignment.A: expected {"foo": [1]}, got {"foo": [0]}' in out
    assert out.rstrip().endswith("FAILED")


def test_an_invariant_violation_exits_1(monkeypatch, capsys):
    def violated(scenario):
        result = run_scenario(scenario)
        result.violations.append({"step": 9, "time_ms": 5, "invariant": "single-owner", "explanation": "foo-0 twice"})
        return result

    monkeypatch.setattr(cli, "run_scenario", violated)
    assert cli.main(["run", "basic"]) == 1
    out = capsys.readouterr().out
    assert "invariants: VIOLATED (1)\n  step 9 at 5 ms: single-owner: foo-0 twice" in out
    assert cli.main(["run", "basic", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False


def test_run_invalid_input_exits_2(tmp_path, capsys):
    assert cli.main(["run", "no_such_scenario"]) == 2
    assert "no library scenario named 'no_such_scenario'" in capsys.readouterr().err
    assert cli.main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read the file" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmembers: {A: {}}\n", encoding="utf-8")
    assert cli.main(["run", str(bad)]) == 2
    assert capsys.readouterr().err == (
        f"{bad}:2: members.A: a consumer needs subscribed_topic_names or subscribed_topic_regex\n"
    )


def test_list_names_every_library_scenario(capsys):
    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list_library()
    assert lines[0].startswith("basic") and 'case study "Basic"' in lines[0]


def test_schema_prints_or_writes_the_json_schema(tmp_path, capsys):
    assert cli.main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == scenario_schema()
    path = tmp_path / "schema.json"
    assert cli.main(["schema", str(path)]) == 0
    assert json.loads(path.read_text(encoding="utf-8")) == scenario_schema()


def test_usage_errors_exit_2(capsys):
    for argv in ([], ["frobnicate"], ["run"], ["run", "basic", "--seed", "x"]):
        with pytest.raises(SystemExit) as info:
            cli.main(argv)
        assert info.value.code == 2
    assert "usage: kip-lab" in capsys.readouterr().err
