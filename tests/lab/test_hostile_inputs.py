"""A hostile corpus: malformed, huge or contradictory scenario files, sweep specs and command lines.

Each case must end in a clear error (exit 2 naming the file, line or field) or a correct result,
never a traceback, in under 10 s and well under 1 GB. The small files live in ``tests/hostile/``
(their first line says ``# expect: <exit code> <words of the message>``); the large ones are
generated here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from kip_lab import cli

TESTS = Path(__file__).resolve().parents[1]
CORPUS = sorted((TESTS / "hostile").glob("*.yaml"))
SECONDS = 10
MEMORY = 1 << 30  # 1 GiB
ROOT = Path(__file__).resolve().parents[2]


def expectation(path: Path) -> tuple[int, str]:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    code, words = first.removeprefix("# expect: ").split(" ", 1)
    return int(code), words


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``kip-lab ARGV`` in this process, asserting the time and memory bounds."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        code = cli.main(argv)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    elapsed = time.monotonic() - started
    out, err = capsys.readouterr()
    assert elapsed < SECONDS, f"took {elapsed:.1f} s"
    assert peak < MEMORY, f"allocated {peak >> 20} MiB"
    assert "Traceback" not in out + err
    return code, out, err


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], words: str, code: int = 2) -> str:
    got, out, err = run_cli(argv, capsys)
    assert got == code, f"exit {got}: {out}{err}"
    assert words in err, err
    return err


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_a_hostile_scenario_file_is_refused_with_a_clear_error(path: Path, capsys: pytest.CaptureFixture[str]):
    code, words = expectation(path)
    err = refused(["validate", str(path)], capsys, words, code)
    assert err.startswith(str(path)), "the error names the file"
    assert len(err.splitlines()) <= 3, "one line per problem, not a dump"


# ---------------------------------------------------------------------------- generated files
def billion_laughs(levels: int = 9) -> str:
    text = 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for level in range(1, levels + 1):
        text += f"l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 10) + "]\n"
    return text


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("alias_bomb", "name: bomb\n" + billion_laughs(), "(an alias bomb?)"),
        ("deep_flow", "name: " + "[" * 20_000 + "]" * 20_000 + "\n", "nest"),
        ("deep_block", "name: x\n" + "".join(" " * i + "a:\n" for i in range(200)), "nested more than 64 levels"),
        ("long_json_key", '{"name": "x", "' + "k" * 1_100 + '": 1}\n', "at most 1,024 characters long"),
        ("wide_list", "name: x\ntopics: [" + ",".join(["1"] * 200_000) + "]\n", "more than 100,000 values"),
        ("oversized", "name: x\n#" + "x" * (1 << 20) + "\n", "larger than 1,048,576 bytes"),
        (
            "many_events",
            "name: x\ntopics: [{name: t, partitions: 1}]\nmembers: {A: {subscribed_topic_names: [t]}}\nevents:\n"
            + "  - {action: pause, member: A, at_ms: 1}\n" * 10_001,
            "List should have at most 10000 items",
        ),
    ],
)
def test_a_generated_hostile_file_is_refused_in_bounded_time_and_memory(name, text, words, tmp_path, capsys):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    refused(["validate", str(path)], capsys, words)


def test_a_file_that_is_not_utf8_is_refused(tmp_path, capsys):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"name: \xff\xfe\x00garbage")
    refused(["validate", str(path)], capsys, "cannot read the file")


def test_an_endless_input_is_read_only_up_to_the_limit(capsys):
    refused(["validate", "/dev/zero"], capsys, "larger than 1,048,576 bytes")


def test_a_folder_is_not_a_scenario(tmp_path, capsys):
    refused(["validate", str(tmp_path)], capsys, "it is a directory")


def test_an_out_of_range_seed_option_is_refused(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["run", "basic", "--seed", "9" * 30])
    assert exited.value.code == 2
    assert "a seed is a long" in capsys.readouterr().err


# ---------------------------------------------------------------------------- runs
def run_subprocess(args: list[str], timeout: float = SECONDS) -> tuple[int, str, str, int]:
    """``kip-lab ARGS`` in a child process: exit code, stdout, stderr, and its peak memory (bytes)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kip_lab.cli", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        process.kill()
    _, _, usage = os.wait4(process.pid, 0) if process.returncode is None else (0, 0, None)
    peak = usage.ru_maxrss * 1024 if usage is not None else _peak_of_children()
    return process.returncode, out.decode(), err.decode(), peak


def _peak_of_children() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def test_a_run_with_no_end_in_sight_stops_when_its_step_budget_is_spent(tmp_path):
    path = tmp_path / "forever.yaml"
    path.write_text(
        "name: forever\ntopics: [{name: t, partitions: 4}]\n"
        "members: {A: {subscribed_topic_names: [t]}, B: {subscribed_topic_names: [t]}}\n"
        "run: {until_ms: 1000000000000, max_time_ms: 1000000000000}\n",
        encoding="utf-8",
    )
    started = time.monotonic()
    code, out, err, peak = run_subprocess(["run", str(path)], timeout=60)
    assert code == 1 and "Traceback" not in out + err
    assert "STOPPED: the step budget is spent at" in out and "(100,000 steps, run.max_steps)" in out
    assert time.monotonic() - started < 60  # the budget bounds the run on a loaded machine too
    assert peak < MEMORY


def test_a_run_stops_when_its_memory_budget_is_spent(tmp_path, capsys):
    path = tmp_path / "hungry.yaml"
    path.write_text(
        "name: hungry\ntopics: [{name: t, partitions: 4}]\n"
        "members: {A: {subscribed_topic_names: [t]}, B: {subscribed_topic_names: [t]}}\n"
        "run: {until_ms: 1000000000000, max_time_ms: 1000000000000, max_steps: 100000000, max_memory_mb: 16}\n",
        encoding="utf-8",
    )
    code = cli.main(["run", str(path)])
    out = capsys.readouterr().out
    assert code == 1 and "STOPPED: the memory budget is spent at" in out and "run.max_memory_mb is 16" in out


def test_a_backtracking_failure_rule_runs_in_linear_time(tmp_path, capsys):
    """'(a+)+' against thirty a's and a digit: minutes with a backtracking engine, nothing with RE2."""
    path = tmp_path / "poison.yaml"
    path.write_text(
        "name: poison\ntopics: [{name: t, partitions: 1}]\n"
        "share_members:\n  S: {subscribed_topic_names: [t], acknowledgement: explicit,\n"
        "      failures: [{value_regex: '(a+)+', action: reject}]}\n"
        f"events: [{{action: produce_share_records, topic: t, count: 20, value_prefix: {'a' * 30}, at_ms: 100}}]\n"
        "run: {until_ms: 20000}\n",
        encoding="utf-8",
    )
    code, out, _ = run_cli(["run", str(path)], capsys)
    assert code == 0 and out.rstrip().endswith("OK")


@pytest.mark.parametrize("pattern", ["a{4294967296}", "(" * 3_000 + "a" + ")" * 3_000])
def test_patterns_that_crashed_a_backtracking_engine_validate(pattern, tmp_path, capsys):
    path = tmp_path / "patterns.yaml"
    rule = json.dumps({"value_regex": pattern, "action": "reject"})
    path.write_text(
        "name: patterns\ntopics: [{name: t, partitions: 1}]\n"
        f"share_members:\n  S: {{subscribed_topic_names: [t], acknowledgement: explicit, failures: [{rule}]}}\n",
        encoding="utf-8",
    )
    code, out, _ = run_cli(["validate", str(path)], capsys)
    assert code == 0 and "valid scenario" in out


# ---------------------------------------------------------------------------- the command line
def test_an_unwritable_trace_path_is_refused_before_the_run(capsys):
    code, out, err = run_cli(["run", "basic", "--trace", "/nonexistent/x.jsonl"], capsys)
    assert code == 2 and out == ""
    assert err == "kip-lab: /nonexistent/x.jsonl: the folder /nonexistent does not exist\n"


def test_a_trace_path_that_is_a_folder_is_refused(tmp_path, capsys):
    code, _, err = run_cli(["run", "basic", "--trace", str(tmp_path)], capsys)
    assert code == 2 and "is a folder" in err


def test_an_internal_error_is_one_line_and_debug_shows_the_traceback(monkeypatch, capsys):
    def broken(_scenario):
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli, "run_scenario", broken)
    code, _, err = run_cli(["run", "basic"], capsys)
    assert code == 3 and err == "kip-lab: internal error: RuntimeError: a bug (--debug shows the traceback)\n"
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["--debug", "run", "basic"])


def test_ctrl_c_exits_130_with_one_line(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text(
        "name: long\ntopics: [{name: t, partitions: 4}]\n"
        "members: {A: {subscribed_topic_names: [t]}, B: {subscribed_topic_names: [t]}}\n"
        "run: {until_ms: 1000000000000, max_time_ms: 1000000000000, max_steps: 100000000}\n",
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "kip_lab.cli", "run", str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(3)  # imported and running
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=SECONDS)
    assert process.returncode == 130
    assert err.decode() == "kip-lab: interrupted\n" and out == b""


# ---------------------------------------------------------------------------- sweeps
SWEEP = {"name": "hostile", "template": "rolling_bounce", "params": {"partitions": 2}, "grid": {"members": [2]}}


def sweep_spec(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({**SWEEP, **changes}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        (
            {"params": {}, "grid": {"members": list(range(2, 302)), "partitions": list(range(1, 301))}},
            "crosses to 90,000 points",
        ),
        ({"seeds": {"count": 1_000_000}}, "seeds.count: Input should be less than or equal to 100000"),
        ({"seeds": {"count": 100_000}, "grid": {"members": [2, 3]}}, "is 200,000 runs; at most 100,000"),
    ],
)
def test_a_sweep_too_large_to_run_is_refused_at_once(changes, words, tmp_path, capsys):
    refused(
        ["sweep", str(sweep_spec(tmp_path, **changes)), "--out", str(tmp_path / "out"), "--in-process"], capsys, words
    )


def test_an_alias_bomb_in_a_sweep_spec_is_refused(tmp_path, capsys):
    path = tmp_path / "bomb.yaml"
    path.write_text("name: bomb\ntemplate: rolling_bounce\n" + billion_laughs(), encoding="utf-8")
    refused(["sweep", str(path), "--out", str(tmp_path / "out"), "--in-process"], capsys, "an alias bomb?")


def test_an_out_that_is_a_file_is_refused(tmp_path, capsys):
    out = tmp_path / "file"
    out.write_text("x", encoding="utf-8")
    spec = str(sweep_spec(tmp_path))
    refused(["sweep", spec, "--out", str(out), "--in-process"], capsys, "is a file, not a folder")
    refused(["sweep", spec, "--out", str(out / "below"), "--in-process"], capsys, "which is a file, not a folder")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="permissions do not bind root")
def test_an_out_that_cannot_be_written_is_refused(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    refused(["sweep", str(sweep_spec(tmp_path)), "--out", str(locked / "out"), "--in-process"], capsys, "not writable")


def test_a_damaged_sweep_manifest_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text('{"schema_version": 1, "spec": {"na', encoding="utf-8")
    refused(["sweep", str(sweep_spec(tmp_path)), "--out", str(out), "--in-process"], capsys, "sweep.json is damaged")


def test_resume_repairs_a_runs_file_truncated_by_a_kill(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.dataset as ds

    from kip_lab.pipeline import load_sweep, run_sweep

    spec = load_sweep({**SWEEP, "seeds": [1, 2, 3, 4]})
    run_sweep(spec, tmp_path, executor="local", batch_runs=2, progress=False)
    victim = sorted((tmp_path / "runs").rglob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # a kill mid-write
    summary = run_sweep(spec, tmp_path, executor="local", batch_runs=2, progress=False)
    assert (summary.already_done, summary.executed, summary.failed) == (2, 2, 0)
    for table in ("runs", "metrics"):
        ids = ds.dataset(tmp_path / table, partitioning="hive").to_table(columns=["run_id"]).column("run_id")
        assert sorted(ids.to_pylist()) == sorted(r.run_id for r in spec.plan()), f"{table}: each run once"


def test_resume_drops_the_rows_of_runs_whose_runs_row_never_landed(tmp_path):
    """A kill between the events/metrics writes and the runs write (what left a Spark sweep with duplicate
    events): the runs execute again, and their earlier rows go, so every table holds each run once."""
    pytest.importorskip("pyarrow")
    import pyarrow.dataset as ds

    from kip_lab.pipeline import load_sweep, run_sweep

    spec = load_sweep({**SWEEP, "seeds": [1, 2, 3], "events": True})
    run_sweep(spec, tmp_path, executor="local", batch_runs=1, progress=False)
    events_before = ds.dataset(tmp_path / "events", partitioning="hive").count_rows()
    for runs_file in sorted((tmp_path / "runs").rglob("*.parquet"))[:2]:
        runs_file.unlink()  # two batches never wrote their runs row
    summary = run_sweep(spec, tmp_path, executor="local", batch_runs=2, progress=False)  # one new batch of both
    assert summary.executed == 2
    events = ds.dataset(tmp_path / "events", partitioning="hive").to_table(columns=["run_id", "seq"]).to_pylist()
    assert len(events) == events_before == len({(e["run_id"], e["seq"]) for e in events})
    metrics = ds.dataset(tmp_path / "metrics", partitioning="hive").to_table(columns=["run_id"]).column("run_id")
    assert sorted(metrics.to_pylist()) == sorted(r.run_id for r in spec.plan())


# ---------------------------------------------------------------------------- validate's promise
WORLD = """\
name: world
topics: [{name: t, partitions: 3}, {name: u, partitions: 1}]
members:
  A: {subscribed_topic_names: [t]}
  K: {subscribed_topic_names: [t], group_protocol: classic, group_id: cg}
  P: {scripted: true}
share_members:
  S: {subscribed_topic_names: [t], group_id: sg}
run: {until_ms: 8000}
events:
"""
PER_MEMBER = [
    "crash",
    "restart",
    "close",
    "pause",
    "resume",
    "drop_messages, count: 3",
    "delay_messages, count: 3, delay_ms: 100",
    "partition_link, duration_ms: 1000",
    "configure_link, link: {drop_probability: 0.5}",
    "change_subscription, topics: [u]",
    "change_subscription, regex: 'u.*'",
]
WORLD_EVENTS = [
    "fail_over",
    "fail_over, to_broker: broker-2",
    "create_topic, topic: v, partitions: 2",
    "add_partitions, topic: t, count: 2",
    "delete_topic, topic: t",
    "recreate_topic, topic: t",
    "recreate_topic, topic: t, partitions: 1",
    "fail_over_share_coordinator",
    "move_share_leader, topic: t, partition: 2",
    "produce_share_records, topic: t, count: 5",
    "set_share_auto_offset_reset, group_id: sg, value: earliest",
    "set_share_auto_offset_reset, group_id: cg, value: earliest",
    "reset_share_group_offsets, group_id: sg, topic: t, to: datetime",
    "reset_share_group_offsets, group_id: sg, topic: t",  # nothing produced yet: every log is empty
    "reset_share_group_offsets, group_id: sg, topic: t, to: latest, partitions: [2]",
]
EVENTS = [f"{e.split(',')[0]}, member: {m}{e[len(e.split(',')[0]) :]}" for e in PER_MEMBER for m in "AKPS"]
EVENTS += WORLD_EVENTS


@pytest.mark.parametrize(
    "events", [[e] for e in EVENTS] + [[EVENTS[i], EVENTS[-1 - i]] for i in range(0, len(EVENTS), 3)], ids=str
)
def test_an_event_either_is_refused_by_validate_or_runs(events):
    """What validate accepts runs to the end: no event that passes validation breaks the run."""
    from kip_lab.scenarios import ScenarioError, run_scenario, scenario_from_yaml

    text = WORLD + "".join(f"  - {{action: {e}, at_ms: {1000 * (i + 1)}}}\n" for i, e in enumerate(events))
    try:
        scenario = scenario_from_yaml(text)
    except ScenarioError as exc:
        assert str(exc).startswith("<string>:") and "events." in str(exc)
        return
    result = run_scenario(scenario)
    assert result.stopped is None and result.end_ms == 8000


def test_the_largest_valid_scenario_validates_in_bounded_time(tmp_path, capsys):
    """10,000 events (the limit), each checked against the world it meets: linear, not quadratic."""
    path = tmp_path / "largest.yaml"
    events = "".join(f"  - {{action: add_partitions, topic: t, count: 1, at_ms: {i}}}\n" for i in range(5_000))
    events += "".join(f"  - {{action: pause, member: A, at_step: {i + 5_010}}}\n" for i in range(5_000))
    path.write_text(
        "name: largest\ntopics: [{name: t, partitions: 1}]\nmembers: {A: {subscribed_topic_names: [t]}}\n"
        f"run: {{until_ms: 100000}}\nevents:\n{events}",
        encoding="utf-8",
    )
    code, out, _ = run_cli(["validate", str(path)], capsys)
    assert code == 0 and "(1 members, 10000 events)" in out


def test_a_trace_that_cannot_be_written_after_the_run_keeps_the_summary(monkeypatch, tmp_path, capsys):
    from kip_lab.lab import Trace

    def disk_full(self, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Trace, "save_jsonl", disk_full)
    code, out, err = run_cli(["run", "basic", "--trace", str(tmp_path / "t.jsonl")], capsys)
    assert code == 2 and out.rstrip().endswith("OK") and "trace:" not in out
    assert err == f"kip-lab: {tmp_path / 't.jsonl'}: cannot write the trace: No space left on device\n"
