"""Sweeps without Spark: the spec (bad input named before anything starts), templates, run ids, the in-process
executor's tables, failed runs and their ``kip-lab run`` reproduction, resuming an interrupted sweep."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pyarrow.dataset as ds
import pytest
from pipeline_support import CHECKED_METRICS, FAILING, Interrupt

from kip_lab import cli
from kip_lab.pipeline import SweepOutputError, finished_runs, load_sweep, run_sweep
from kip_lab.pipeline import session as spark_setup
from kip_lab.pipeline.execute import metric_values
from kip_lab.pipeline.schema import EVENT_COLUMNS, METRIC_COLUMNS, RUN_COLUMNS, SCHEMA_VERSION, describe
from kip_lab.pipeline.templates import TEMPLATES, member_names
from kip_lab.scenarios import ScenarioError, load_scenario, run_scenario

SMALL = {
    "name": "small",
    "template": "rolling_bounce",
    "params": {"partitions": 4},
    "grid": {"members": [2, 3]},
    "seeds": [1, 2],
}


def table(out: Path, name: str):
    return ds.dataset(out / name, format="parquet", partitioning="hive").to_table().to_pandas()


# ---------------------------------------------------------------------------- the spec
@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"grid": {"members": [3, 0]}}, "grid.members", "greater than or equal to 1"),
        ({"grid": {"membrs": [3]}}, "grid.membrs", "rolling_bounce has no parameter 'membrs'"),
        ({"grid": {"protocol": ["consumer", "static"]}}, "grid.protocol", "unknown protocol 'static'"),
        ({"grid": {"protocol": ["eager"], "assignor": ["uniform"]}}, "grid.assignor", "not one of the eager"),
        ({"grid": {"assignor": ["sticky"]}}, "grid.assignor", "not one of the consumer protocol's"),
        ({"grid": {"loss": [1.5]}}, "grid.loss", "less than 1"),
        ({"grid": {"members": []}}, "grid.members", "needs at least one value"),
        ({"grid": {"members": [2, 2]}}, "grid.members", "lists a value twice"),
        ({"params": {"members": 2}, "grid": {"members": [3]}}, "grid.members", "also in params"),
        ({"params": {"bounces": 9}}, "params.bounces", "bounces (9) cannot exceed members"),
        ({"params": {"fault": "crash"}}, "params.fault", "rolling_bounce has no parameter 'fault'"),
        ({"template": "nope"}, "template", "unknown template 'nope'"),
        ({"seeds": {"count": 0}}, "seeds.count", "greater than or equal to 1"),
        ({"seeds": [1, 1]}, "seeds", "lists a seed twice"),
        ({"colour": "red"}, "colour", "unknown field"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field(change, field, words):
    with pytest.raises(ScenarioError) as caught:
        load_sweep({**SMALL, **change})
    assert f"<sweep>: {field}: " in str(caught.value)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"grid": {"lab.link.drop_probability": [0.5, 2]}}, "grid.lab.link.drop_probability", "2: Input should be"),
        ({"grid": {"lab.brokrs": [2]}}, "grid.lab.brokrs", "Extra inputs are not permitted"),
        ({"scenario": "no_such_scenario"}, "scenario", "no library scenario named 'no_such_scenario'"),
    ],
)
def test_a_bad_scenario_sweep_is_refused_naming_the_field(change, field, words):
    spec = {"name": "s", "scenario": "basic", "seeds": [0], **change}
    with pytest.raises(ScenarioError) as caught:
        load_sweep(spec)
    assert f"{field}: " in str(caught.value) and words in str(caught.value)


def test_the_cli_refuses_a_bad_spec_before_spark_starts(tmp_path, monkeypatch, capsys):
    started = []
    monkeypatch.setattr(spark_setup, "spark_session", lambda *a, **k: started.append(1))
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ntemplate: rolling_bounce\ngrid: {members: [3, -1]}\n", encoding="utf-8")
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    assert f"{path}: grid.members: -1: Input should be greater than or equal to 1" in capsys.readouterr().err
    assert started == [] and not (tmp_path / "out").exists()


def test_the_plan_crosses_grid_and_seeds_with_ids_from_what_a_run_is():
    spec = load_sweep({**SMALL, "grid": {"members": [2, 3], "loss": [0.0, 0.1]}})
    plan = spec.plan()
    assert [(spec.points[r.point]["members"], spec.points[r.point]["loss"], r.seed) for r in plan] == [
        (m, loss, seed) for loss in (0.0, 0.1) for m in (2, 3) for seed in (1, 2)
    ]
    assert len({r.run_id for r in plan}) == 8
    # the same run in another spec (another grid order, an extra seed) has the same id
    other = load_sweep({**SMALL, "grid": {"loss": [0.1, 0.0], "members": [3, 2]}, "seeds": [2, 1, 7]})
    assert {r.run_id for r in plan} < {r.run_id for r in other.plan()}
    # a default given explicitly is the same run; another value is another run
    explicit = load_sweep({**SMALL, "params": {"partitions": 4, "latency_ms": 1.0}})
    assert {r.run_id for r in explicit.plan()} == {r.run_id for r in load_sweep(SMALL).plan()}
    assert not {r.run_id for r in load_sweep({**SMALL, "params": {"partitions": 5}}).plan()} & {r.run_id for r in plan}


def test_rolling_bounce_closes_and_restarts_each_member_in_turn():
    scenario = TEMPLATES["rolling_bounce"].scenario(
        {"members": 3, "partitions": 6, "first_bounce_at_ms": 1000, "bounce_every_ms": 500, "restart_after_ms": 200},
        seed=9,
    )
    assert scenario.seed == 9 and list(scenario.members) == ["m000", "m001", "m002"]
    assert [(e.at_ms, e.action, e.member) for e in scenario.events] == [
        (1000, "close", "m000"),
        (1200, "restart", "m000"),
        (1500, "close", "m001"),
        (1700, "restart", "m001"),
        (2000, "close", "m002"),
        (2200, "restart", "m002"),
    ]
    assert scenario.run.until_stable and scenario.run.timeout_ms == 2200 + 120_000
    assert scenario.topics[0].partitions == 6


def test_member_failures_and_the_network_parameters_reach_the_scenario():
    scenario = TEMPLATES["member_failures"].scenario(
        {
            "members": 4,
            "failures": 2,
            "fault": "crash",
            "restart_after_ms": 7000,
            "failure_every_ms": 100,
            "latency_ms": 10,
            "jitter_ms": 4,
            "loss": 0.02,
            "session_timeout_ms": 10_000,
            "assignor": "range",
        },
        seed=1,
    )
    assert [(e.at_ms, e.action, e.member) for e in scenario.events] == [
        (15_000, "crash", "m000"),
        (15_100, "crash", "m001"),
        (22_000, "restart", "m000"),
        (22_100, "restart", "m001"),
    ]
    link = scenario.lab.link
    assert (link.latency.kind, link.latency.low, link.latency.high, link.drop_probability) == ("uniform", 6, 14, 0.02)
    assert scenario.lab.coordinator.session_timeout_ms == 10_000
    assert {m.server_assignor for m in scenario.members.values()} == {"range"}
    cut = TEMPLATES["member_failures"].scenario({"members": 2, "fault": "partition_link", "outage_ms": 5000}, 0)
    assert [(e.action, e.member, e.duration_ms) for e in cut.events] == [("partition_link", "m000", 5000)]


def test_the_protocol_dimension_writes_kip848_eager_and_cooperative_members():
    spec = load_sweep({**SMALL, "grid": {"protocol": ["consumer", "eager", "cooperative"]}, "seeds": [0]})
    members = [next(iter(spec.scenario_for(p, 0).members.values())) for p in range(3)]
    assert [(m.group_protocol, m.server_assignor, m.partition_assignment_strategy) for m in members] == [
        ("consumer", "uniform", None),
        ("classic", None, ["range"]),
        ("classic", None, ["cooperative-sticky"]),
    ]
    assert [spec.protocol(p) for p in range(3)] == ["consumer", "eager", "cooperative"]


def test_share_lock_timeouts_builds_share_consumers_with_the_acknowledgement_behaviour():
    spec = load_sweep(
        {
            "name": "share",
            "template": "share_lock_timeouts",
            "params": {"members": 2, "records": 20, "hang_ms": 9000},
            "grid": {"record_lock_duration_ms": [2000, 30_000], "failure": ["hang", "release"]},
            "seeds": [0],
        }
    )
    scenario = spec.scenario_for(0, 0)
    assert spec.protocol(0) == "share" and scenario.lab.share.record_lock_duration_ms == 2000
    consumer = scenario.share_members["s000"]
    assert list(scenario.share_members) == ["s000", "s001"] and consumer.acknowledgement == "explicit"
    assert [(f.value_regex, f.action, f.hang_ms) for f in consumer.failures] == [("poison-.*", "hang", 9000)]
    produce = scenario.events[0]
    assert (produce.action, produce.count, produce.poison_every) == ("produce_share_records", 20, 10)
    with pytest.raises(ScenarioError, match=r"grid\.failure: 'release': release is an explicit acknowledgement"):
        load_sweep(
            {
                **SMALL,
                "template": "share_lock_timeouts",
                "params": {"acknowledgement": "implicit"},
                "grid": {"failure": ["hang", "release"]},
            }
        )


def test_member_names_sort_in_member_order():
    names = member_names(1001)
    assert names == sorted(names) and names[0] == "m0000" and names[-1] == "m1000"


def test_a_scenario_sweep_applies_its_overrides():
    spec = load_sweep(
        {
            "name": "s",
            "scenario": "member_failure",
            "grid": {"lab.coordinator.session_timeout_ms": [45_000, 50_000]},
            "seeds": [4],
        }
    )
    assert spec.family == "scenario-member_failure"
    timeouts = [spec.scenario_for(p, 4).lab.coordinator.session_timeout_ms for p in range(2)]
    assert timeouts == [45_000, 50_000]
    assert spec.scenario_for(1, 4).seed == 4 and spec.scenario_for(1, 4).members.keys() == {"A", "B", "C"}


# ---------------------------------------------------------------------------- the in-process executor
def test_the_local_executor_writes_each_run_s_metrics_as_run_scenario_computes_them(tmp_path):
    spec = load_sweep({**SMALL, "events": True})
    summary = run_sweep(spec, tmp_path, executor="local", progress=False)
    assert (summary.planned, summary.executed, summary.failed) == (4, 4, 0)
    runs, metrics, events = table(tmp_path, "runs"), table(tmp_path, "metrics"), table(tmp_path, "events")
    assert sorted(runs["run_id"]) == sorted(r.run_id for r in spec.plan()) == sorted(metrics["run_id"])
    assert set(runs["status"]) == {"ok"} and set(runs["schema_version"]) == {SCHEMA_VERSION}
    assert set(runs["template"]) == {"rolling_bounce"} and set(runs["protocol"]) == {"consumer"}
    for run in spec.plan():
        result = run_scenario(spec.scenario_for(run.point, run.seed))
        row = metrics[metrics["run_id"] == run.run_id].iloc[0]
        expected = metric_values(result)
        for name in CHECKED_METRICS:
            assert row[name] == expected[name], name
        assert expected["max_time_to_stable_ms"] == result.metrics["max_time_to_stable_ms"]
        assert row["revocations"] == result.metrics["revocations"] > 0
        trace = events[events["run_id"] == run.run_id].sort_values("seq")
        assert len(trace) == len(result.trace)
        assert list(trace["kind"]) == [e.kind.value for e in result.trace]
        assert [json.loads(p) for p in trace["payload"][:5]] == [
            json.loads(json.dumps(e.payload, default=str)) for e in result.trace[:5]
        ]
        assert runs.loc[runs["run_id"] == run.run_id, "members"].item() == spec.points[run.point]["members"]


def test_the_after_first_event_metrics_count_what_the_fault_cost_not_the_group_forming():
    """A KIP-848 member crashes and never returns: after the crash nobody revokes anything, exactly its
    partitions move, and each of them is unavailable from the crash until the session expires."""
    scenario = TEMPLATES["member_failures"].scenario({"members": 6, "partitions": 12, "session_timeout_ms": 10_000}, 1)
    result = run_scenario(scenario)
    values = metric_values(result)
    assert result.metrics["revocations"] > 0 and values["revocations_after_first_event"] == 0
    assert result.metrics["partition_moves"] > 2 and values["moves_after_first_event"] == 2  # 12 / 6 partitions
    crash = next(t for t in result.metrics["triggers"] if t["cause"] == "crash m000")
    assert crash["time_ms"] == 15_000 and crash["time_to_stable_ms"] > 0
    gap = values["unavailability_after_first_event_ms"]
    assert 2 * (crash["time_to_stable_ms"] - 50) <= gap <= 2 * crash["time_to_stable_ms"]
    assert gap < result.metrics["total_unavailability_ms"]  # the startup's gaps are not in it
    no_events = TEMPLATES["rolling_bounce"].scenario({"members": 2, "bounces": 1}, 0).model_copy(update={"events": []})
    assert values.keys() == metric_values(run_scenario(no_events)).keys()
    assert metric_values(run_scenario(no_events))["revocations_after_first_event"] is None


def test_the_tables_have_the_documented_columns_and_schema_version(tmp_path):
    run_sweep(load_sweep({**SMALL, "events": True}), tmp_path, executor="local", progress=False)
    documented = describe()
    for name, columns, extra in (
        ("runs", RUN_COLUMNS, ["members", "partitions"]),  # the parameters the spec names
        ("metrics", METRIC_COLUMNS, []),
        ("events", EVENT_COLUMNS, []),
    ):
        frame = table(tmp_path, name)
        assert sorted(frame.columns) == sorted([c for c, _, _ in columns] + extra), name
        assert set(frame["schema_version"]) == {SCHEMA_VERSION}
        assert all(f"  {column} " in documented for column, _, _ in columns)
    assert json.loads((tmp_path / "sweep.json").read_text())["schema_version"] == SCHEMA_VERSION
    assert sorted(p.name for p in (tmp_path / "metrics").iterdir()) == ["template=rolling_bounce"]
    assert [p.name for p in (tmp_path / "metrics" / "template=rolling_bounce").iterdir()] == ["protocol=consumer"]


def test_a_failing_run_is_recorded_with_its_error_and_a_command_that_reproduces_it(tmp_path, capsys):
    spec = load_sweep(FAILING)
    summary = run_sweep(spec, tmp_path, executor="local", progress=False)
    assert (summary.executed, summary.failed) == (2, 1)
    runs = table(tmp_path, "runs").set_index("run_until_ms")
    failed, ok = runs.loc[2], runs.loc[1000]
    assert failed["status"] == "failed" and ok["status"] == "ok" and pd.isna(ok["error"])
    assert "ScenarioError" in failed["error"] and "is never reached" in failed["error"]
    assert failed["seed"] == 3
    scenario_file = tmp_path / "failed" / f"{failed['run_id']}.yaml"
    assert failed["repro"] == f"kip-lab run {scenario_file} --seed 3"
    assert summary.failed_repro == [failed["repro"]]
    assert list(table(tmp_path, "metrics")["run_id"]) == [ok["run_id"]]  # no metrics for a failed run
    assert load_scenario(scenario_file) == spec.scenario_for(int(failed["point"]), 3)
    capsys.readouterr()
    assert cli.main(failed["repro"].split()[1:]) == 2  # the same failure, from the command line
    assert "is never reached" in capsys.readouterr().err


def test_the_sweep_command_in_process_exits_1_and_prints_the_repro_command_when_a_run_fails(tmp_path, capsys):
    path = tmp_path / "failing.yaml"
    path.write_text(json.dumps(FAILING), encoding="utf-8")  # JSON is YAML
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "out"), "--in-process"]) == 1
    out, err = capsys.readouterr()
    assert "2 runs (0 already done, 2 executed, 1 failed)" in out
    assert f"  failed: kip-lab run {tmp_path / 'out' / 'failed'}" in out and "--seed 3" in out
    assert "sweep failing [" in err and "2/2 runs, 1 failed" in err
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "out"), "--in-process"]) == 0  # all finished


def test_an_interrupted_sweep_resumes_without_redoing_finished_runs(tmp_path):
    spec = load_sweep({**SMALL, "seeds": [1, 2, 3]})
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path, executor="local", batch_runs=2, progress=Interrupt(after=4))
    first = table(tmp_path, "runs")
    assert len(first) == 2  # the first batch is written; the second was interrupted before its write
    assert finished_runs(tmp_path) == set(first["run_id"])
    summary = run_sweep(spec, tmp_path, executor="local", batch_runs=2, progress=False)
    assert (summary.planned, summary.already_done, summary.executed) == (6, 2, 4)
    runs = table(tmp_path, "runs")
    assert sorted(runs["run_id"]) == sorted(r.run_id for r in spec.plan())  # each once
    again = runs.set_index("run_id").loc[list(first["run_id"])]
    assert list(again["wall_ms"]) == list(first["wall_ms"])  # the finished rows were not rewritten
    assert len(table(tmp_path, "metrics")) == 6
    assert run_sweep(spec, tmp_path, executor="local", progress=False).executed == 0


def test_an_output_folder_holds_one_sweep(tmp_path):
    run_sweep(load_sweep({**SMALL, "seeds": [1]}), tmp_path, executor="local", progress=False)
    with pytest.raises(SweepOutputError, match="holds the sweep 'small' with another spec"):
        run_sweep(load_sweep({**SMALL, "seeds": [5]}), tmp_path, executor="local", progress=False)


def test_progress_is_plain_text_on_stderr_style_streams(tmp_path):
    stream = io.StringIO()
    run_sweep(load_sweep(SMALL), tmp_path, executor="local", progress=stream)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("sweep small [------------------------------] 0/4 runs")
    assert lines[-1].startswith("sweep small [##############################] 4/4 runs")
