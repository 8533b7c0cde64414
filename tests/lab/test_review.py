"""Design reviews: the deployment templates, ``kip_lab.review.compare`` and ``kip-lab compare``.

The report's numbers are checked against ``compute_metrics`` run here on runs made here, not
against the review's own bookkeeping; the templates are checked by what their runs do (who is in
the group at the end, what moved), not by the events they list.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

pytest.importorskip("altair")
pytest.importorskip("vl_convert")

from kip_lab import cli
from kip_lab.events import AssignmentChanged, FaultInjected, PositionSet, StateTransition
from kip_lab.lab.metrics import compute_metrics
from kip_lab.lab.story import client_story
from kip_lab.review import OUTCOMES, Outcome, ReviewError, Variant, compare
from kip_lab.review.compare import Cell, verdict_sentences
from kip_lab.review.report import player_frames
from kip_lab.scenarios import ScenarioError, run_scenario, scenario_from_yaml
from kip_lab.scenarios import templates as t

# A review whose seeds differ: latencies drawn from 1-40 ms.
JITTERY = {
    "name": "restart-review",
    "template": "rolling_restart",
    "params": {"members": 4, "partitions": 8, "restart_every_ms": 15_000},
    "lab": {"link": {"latency": {"kind": "uniform", "low": 1, "high": 40}}},
}


@pytest.fixture(scope="module")
def review(tmp_path_factory):
    return compare(JITTERY, {"static": [False, True]}, seeds=3, out=tmp_path_factory.mktemp("review"))


# ---------------------------------------------------------------------------- templates
def _in_group(result) -> list[str]:
    return sorted(m.name for m in result.members if m.member_epoch is not None)


def test_every_template_runs_to_a_stable_group_without_violations():
    built = {
        "rolling_restart": t.rolling_restart(members=3),
        "scale": t.scale(members=3, by=2),
        "slow_consumer": t.slow_consumer(members=3),
        "coordinator_failover": t.coordinator_failover(members=3, joining=1),
        "upgrade_from_classic": t.upgrade_from_classic(members=3),
        "partition_burst": t.partition_burst(members=3),
    }
    assert sorted(built) == sorted(t.TEMPLATES)
    for name, scenario in built.items():
        result = run_scenario(scenario)
        assert result.stable and not result.violations and result.stopped is None, name
        assert scenario.description, name


def test_a_static_rolling_restart_moves_nothing_and_a_dynamic_one_does():
    dynamic = run_scenario(t.rolling_restart(members=4))
    static = run_scenario(t.rolling_restart(members=4, static=True))
    first = t.RollingRestart().first_event_ms

    def moves_after(result) -> int:
        metrics = compute_metrics(result.trace, totals_before_ms=first)
        return metrics["partition_moves"] - metrics["totals_before"]["partition_moves"]

    assert moves_after(static) == 0 < moves_after(dynamic)
    assert static.groups["g"]["group_epoch"] == 4  # four joins; a static member's return bumps nothing
    assert dynamic.groups["g"]["group_epoch"] == 4 + 2 * 4  # each restart: a leave and a join


def test_scaling_out_and_in_ends_with_the_new_group_size():
    grown = run_scenario(t.scale(members=3, by=2))
    shrunk = run_scenario(t.scale(members=5, by=-2))
    assert _in_group(grown) == ["m00", "m01", "m02", "m03", "m04"]
    assert _in_group(shrunk) == ["m00", "m01", "m02"]


def test_a_slow_consumer_leaves_past_max_poll_interval_and_rejoins():
    result = run_scenario(t.slow_consumer(members=2, max_poll_interval_ms=60_000, stall_ms=90_000))
    story = [(e.time_ms, e.body.trigger) for e in result.trace.of_type(StateTransition) if e.actor == "m00"]
    left = [time for time, trigger in story if trigger == "poll timer expired"]
    assert left == [30_000 + 60_000]
    assert _in_group(result) == ["m00", "m01"]


def test_an_upgrade_from_classic_ends_with_every_member_on_the_consumer_protocol():
    mixed = run_scenario(t.upgrade_from_classic(members=4, upgraded=2))
    full = run_scenario(t.upgrade_from_classic(members=4))
    for result, classic in ((mixed, {"m02", "m03"}), (full, set())):
        last = {e.actor: e.body.machine for e in result.trace.of_type(StateTransition)}
        assert {name for name, machine in last.items() if "classic" in machine.lower()} == classic
        assert _in_group(result) == ["m00", "m01", "m02", "m03"] and not result.violations


def test_a_partition_burst_gets_every_added_partition_assigned():
    result = run_scenario(t.partition_burst(members=3, partitions=6, adds=3, count=2))
    owned = {p for e in result.trace.of_type(AssignmentChanged) for p in e.body.owned}
    assert len({p for m in result.members for ps in (m.assignment or {}).values() for p in ps}) == 12
    assert len(owned) == 12


def test_a_coordinator_failover_is_the_run_s_fault():
    result = run_scenario(t.coordinator_failover(members=3, joining=1))
    faults = [(e.time_ms, e.body.name) for e in result.trace.of_type(FaultInjected)]
    assert faults == [(30_010, "fail_over")]
    assert _in_group(result) == ["m00", "m01", "m02", "m03"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"membres": 3}, "params.membres: rolling_restart has no parameter 'membres' (did you mean 'members'?)"),
        ({"members": 0}, "params.members: Input should be greater than or equal to 1, got 0"),
        ({"members": 2, "restarts": 3}, "params.restarts: restarts (3) cannot exceed members (2)"),
        ({"assignor": "sticky"}, "params.assignor: 'sticky' is not a server assignor"),
        ({"protocol": "classic", "assignor": "fair"}, "params.assignor: unknown client-side assignor 'fair'"),
    ],
)
def test_bad_template_parameters_are_named(params, message):
    with pytest.raises(ScenarioError) as raised:
        t.rolling_restart(**params)
    assert message in str(raised.value)


def test_a_template_in_yaml_is_validated_with_the_line_of_the_bad_parameter():
    text = "name: r\ntemplate: scale\nparams:\n  members: 3\n  by: -3\n"
    with pytest.raises(ScenarioError) as raised:
        scenario_from_yaml(text, "r.yaml")
    assert str(raised.value) == "r.yaml:5: params.by: removing 3 of 3 members leaves none; keep at least one"
    with pytest.raises(ScenarioError, match=r"r.yaml:2: template: unknown template 'rolling'; templates: "):
        scenario_from_yaml("name: r\ntemplate: rolling\n", "r.yaml")
    with pytest.raises(ScenarioError, match=r"r.yaml:3: members: the scale template builds the topics, members"):
        scenario_from_yaml("name: r\ntemplate: scale\nmembers: {A: {subscribed_topic_names: [x]}}\n", "r.yaml")
    with pytest.raises(ScenarioError, match=r"r.yaml:2: params: parameters of no template"):
        scenario_from_yaml("name: r\nparams: {members: 3}\n", "r.yaml")


def test_a_template_file_s_own_lab_and_expect_are_kept():
    scenario = scenario_from_yaml(
        "name: r\ntemplate: rolling_restart\nparams: {members: 2, assignment_interval_ms: 1000}\n"
        "lab: {link: {latency: {ms: 7}}}\nexpect: {stable: true}\n"
    )
    assert scenario.lab.link.latency.ms == 7
    assert scenario.lab.coordinator.assignment_interval_ms == 1000  # the template's, beside the file's link
    assert scenario.expect.stable is True and sorted(scenario.members) == ["m00", "m01"]
    assert scenario_from_yaml(scenario.model_dump_json()) == scenario  # a dump reads back the same


# ---------------------------------------------------------------------------- compare
def _expected(review, key: str, variant: int) -> list[float]:
    """``compute_metrics`` of fresh runs of the variant, counted from the first event as the review says."""
    values = []
    scenario = review.variants[variant].scenario
    for seed in review.seeds:
        trace = run_scenario(scenario.model_copy(update={"seed": seed})).trace
        metrics = compute_metrics(trace, totals_before_ms=scenario.first_event_ms)
        before = metrics["totals_before"].get(key)
        values.append(metrics[key] - before if before is not None else metrics[key])
    return values


def test_the_review_s_numbers_are_compute_metrics_of_the_same_runs(review):
    assert [v.label for v in review.variants] == ["static=false", "static=true"]
    assert [o.key for o in review.outcomes] == [o.key for o in OUTCOMES if o.key in review.runs[0].metrics]
    ledger = {"records_reprocessed", "records_skipped", "processing_pause_ms", "commits_failed", "max_lag_records"}
    assert ledger <= {o.key for o in review.outcomes}  # the delivery ledger's rows, as compute_metrics reports them
    html = (review.written or Path()).read_text(encoding="utf-8")
    seeds_differ = False
    for outcome in review.outcomes:
        for variant in review.variants:
            expected = _expected(review, outcome.key, variant.index)
            cell = review.cells()[outcome.key][variant.index]
            assert list(cell.values) == expected, (outcome.key, variant.label)
            assert (cell.median, cell.low, cell.high) == (statistics.median(expected), min(expected), max(expected))
            shown = re.search(
                rf'<tr data-outcome="{outcome.key}">.*?<td data-variant="{variant.index}" data-median="([^"]*)" '
                rf'data-min="([^"]*)" data-max="([^"]*)"',
                html,
            )
            assert shown is not None and [float(x) for x in shown.groups()] == [cell.median, cell.low, cell.high]
            seeds_differ |= cell.low != cell.high
    assert seeds_differ  # the jitter makes the seeds matter: the spreads are real


def test_the_best_of_each_row_is_marked_and_the_verdicts_come_from_the_medians(review):
    cells = review.cells()
    moves = cells["partition_moves"]
    assert moves[1].median == 0 < moves[0].median  # static members come back to their partitions
    assert [c.best for c in moves] == [False, True]
    for outcome in review.outcomes:
        medians = {c.median for c in cells[outcome.key]}
        marked = [c.median for c in cells[outcome.key] if c.best]
        assert marked == ([] if len(medians) == 1 else [min(medians)] * len(marked))
    sentence = next(s for s in review.verdicts if s.startswith("Partition moves:"))
    assert sentence.startswith(
        f"Partition moves: static=true is best (median 0 moves), static=false worst "
        f"(median {moves[0].median:,.0f} moves)"
    )


def test_the_report_is_one_file_with_nothing_to_fetch(review):
    html = review.written.read_text(encoding="utf-8")
    markup = re.sub(r"(<script[^>]*>).*?</script>", r"\1</script>", html, flags=re.S)  # the page, scripts emptied
    assert markup.count("<script") == 3 and not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=", markup)
    assert "@import" not in markup and "url(" not in markup
    assert "fidelity profile kafka" in html and "<code>static</code> ∈ {false, true}" in html
    assert html.count('class="player"') == 2


def test_player_frames_tell_the_whole_story_step_by_step_and_merge_when_there_are_too_many(review):
    trace = run_scenario(t.rolling_restart(members=4, partitions=8, protocol="classic")).trace
    frames = player_frames(trace, max_frames=10_000)
    told = [line.strip() for line in client_story(trace, rereads=True).splitlines()]
    assert [line for frame in frames for line in frame["lines"]] == told
    rereads = [(frame["step"], line) for frame in frames for line in frame["lines"] if "re-reads" in line]
    assert rereads and all(any(e.step == step for e in trace.of_type(PositionSet)) for step, _ in rereads)
    times = [f["time_ms"] for f in frames]
    assert times == sorted(times) and all(str(f["time_ms"]) == f["lines"][-1].split()[0] for f in frames)
    few = player_frames(trace, max_frames=10)
    assert len(few) <= 10 and few[-1]["step"] == frames[-1]["step"]


def test_a_bad_variant_is_refused_before_anything_runs():
    with pytest.raises(ScenarioError, match=r"lab\.coordinator\.session_timeout_ms: Input should be greater than 0"):
        compare("rolling_bounce", {"lab.coordinator.session_timeout_ms": [0, 45_000]}, seeds=1)
    with pytest.raises(ScenarioError, match=r"lab\.coordinator\.sesion_timeout_ms: Extra inputs"):
        compare("rolling_bounce", {"lab.coordinator.sesion_timeout_ms": [1, 2]}, seeds=1)
    with pytest.raises(ReviewError, match="a value is given twice"):
        compare("rolling_bounce", {"lab.brokers": [3, 3]}, seeds=1)
    with pytest.raises(ReviewError, match="at most 64"):
        compare("rolling_bounce", {f"k{i}": [0, 1] for i in range(7)}, seeds=1)
    with pytest.raises(ReviewError, match="seeds: give 1 to 100"):
        compare("rolling_bounce", {"lab.brokers": [3, 4]}, seeds=0)


def test_kip_lab_compare_writes_the_report(tmp_path, capsys):
    out = tmp_path / "review"
    code = cli.main(
        [
            "compare",
            "rolling_bounce",
            "--vary",
            "members.*.server_assignor=uniform,range",
            "--seeds",
            "2",
            "--out",
            str(out),
        ]
    )
    printed, _ = capsys.readouterr()
    assert code == 0 and (out / "report.html").exists()
    assert "Partition moves: server_assignor=range is best" in printed
    assert f"report written to {out / 'report.html'} (4 runs in " in printed
    assert cli.main(["compare", "rolling_bounce", "--vary", "seeds", "--out", str(out)]) == 2
    assert "--vary seeds: write KEY=V1,V2" in capsys.readouterr().err
    report = str(out / "report.html")
    assert cli.main(["compare", "rolling_bounce", "--vary", "lab.brokers=3,4", "--out", report]) == 2
    assert f"--out {report} is a file" in capsys.readouterr().err
    assert cli.main(["compare", "rolling_bounce", "--vary", "lab.brokers=0,3", "--out", str(out)]) == 2
    assert "lab.brokers: Input should be greater than or equal to 1" in capsys.readouterr().err


def test_verdicts_name_a_group_of_variants_by_what_they_share_and_only_they():
    values = [("classic", False), ("classic", True), ("consumer", False), ("consumer", True)]
    variants = [
        Variant(i, {"protocol": p, "static": s}, f"protocol={p} · static={str(s).lower()}", None)
        for i, (p, s) in enumerate(values)
    ]
    outcome = Outcome("partition_moves", "partition moves", "moves")
    moves = [Cell(m, m, m, (m,)) for m in (20, 0, 18, 0)]
    sentences = verdict_sentences([outcome], variants, {"partition_moves": moves}, seeds=1)
    assert sentences == [
        "Overall, the variants with static=true are best on 1 of the 1 outcomes that differ.",
        "Partition moves: the variants with static=true are best (median 0 moves), "
        "protocol=classic · static=false worst (median 20 moves).",
    ]
    moves = [Cell(m, m, m, (m,)) for m in (20, 0, 0, 0)]
    sentence = verdict_sentences([outcome], variants, {"partition_moves": moves}, seeds=1)[1]
    assert sentence.startswith("Partition moves: every variant but those with protocol=classic and static=false is")
