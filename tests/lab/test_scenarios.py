"""The scenario layer: the model and its errors, the runner, the shipped library, determinism."""

from __future__ import annotations

import json
import random
import sys
import types
from pathlib import Path

import pytest
import yaml

from kip_lab.events import (
    ActionApplied,
    AssignmentChanged,
    CallbackInvoked,
    EventKind,
    HandlerResult,
    MessageDelivered,
    MessageDropped,
    MessageSent,
    RecordsProcessed,
    StateTransition,
)
from kip_lab.lab.metrics import compute_metrics
from kip_lab.scenarios import (
    Scenario,
    ScenarioError,
    build_lab,
    list_library,
    load_library_scenario,
    load_scenario,
    run_scenario,
    scenario_from_yaml,
    scenario_schema,
)
from kip_lab.scenarios.model import export_schema
from kip_lab.scenarios.profiles import with_fidelity

LIBRARY = Path(__file__).resolve().parents[2] / "kip_lab" / "scenarios" / "library"
SCHEMA = Path(__file__).resolve().parents[2] / "kip_lab" / "scenarios" / "scenario.schema.json"
SHIPPED = [
    "basic",
    "classic_cooperative_rolling_bounce",
    "classic_eager_rolling_bounce",
    "classic_two_bounce_upgrade",
    "coordinator_failover",
    "lost_heartbeat",
    "member_failure",
    "online_migration",
    "partition_added",
    "rolling_bounce",
    "scripted_basic",
    "share_poison_messages",
    "slow_revocation",
    "static_member_bounce",
    "third_member_joins",
]

MINIMAL = """\
name: tiny
topics:
  - {name: foo, partitions: 2}
members:
  A: {subscribed_topic_names: [foo]}
run: {until_ms: 20000}
"""


def errors_of(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        scenario_from_yaml(text, "s.yaml")
    return info.value


# ---------------------------------------------------------------------------- the library


def test_the_library_ships_every_scenario_by_name():
    assert list_library() == SHIPPED
    assert sorted(p.stem for p in LIBRARY.glob("*.yaml")) == SHIPPED
    for name in SHIPPED:
        assert load_library_scenario(name).name == name


@pytest.mark.parametrize("name", SHIPPED)
def test_a_dumped_scenario_validates_again_unchanged(name):
    """Notebooks edit a dumped copy: every field is then set, defaults included."""
    scenario = load_library_scenario(name)
    assert Scenario.model_validate(scenario.model_dump()) == scenario


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_scenario_meets_its_own_expectations(name):
    result = run_scenario(load_library_scenario(name))
    failed = [e for e in result.expectations if not e.passed]
    assert not failed, failed
    assert not result.violations
    assert len(result.expectations) >= 5  # every scenario says what it expects
    assert result.ok


@pytest.mark.parametrize("fidelity", ["kafka", "kip"])
@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_scenario_keeps_every_invariant_and_the_ledger_under_both_profiles(name, fidelity):
    """The delivery ledger's invariants (no-skip, commits-monotonic, reprocessing-explained) among them."""
    result = run_scenario(with_fidelity(load_library_scenario(name), fidelity))
    assert not result.violations
    metrics = compute_metrics(result.trace)
    assert metrics["invariant_violations"] == 0 and metrics["records_skipped"] == 0
    assert metrics["records_processed"] >= metrics["records_reprocessed"]
    if any(e.body.name in ("add_consumer", "add_share_consumer") for e in result.trace.of_type(ActionApplied)):
        assert result.trace.of_type(RecordsProcessed), "consumers that process records tell the ledger"


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_scenario_gives_a_byte_identical_trace_twice(name):
    scenario = load_library_scenario(name)
    assert run_scenario(scenario).trace.to_jsonl() == run_scenario(scenario).trace.to_jsonl()


def test_the_case_studies_end_in_the_kips_final_assignments():
    """The last table of each case study in KIP-848, section "Case Studies" (Kafka's uniform assignor,
    ``UniformHomogeneousAssignmentBuilder.build``, reproduces them for members A, B, C)."""
    final = {
        "basic": {"A": {"foo": [0]}, "B": {"foo": [2]}, "C": {"foo": [1]}},
        "scripted_basic": {"A": {"foo": [0]}, "B": {"foo": [2]}, "C": {"foo": [1]}},
        "third_member_joins": {"A": {"foo": [0, 1]}, "B": {"foo": [3, 4]}, "C": {"foo": [2, 5]}},
        "member_failure": {"B": {"foo": [0, 3, 4]}, "C": {"foo": [1, 2, 5]}},
        "partition_added": {"A": {"foo": [0]}, "B": {"foo": [1]}},
    }
    for name, table in final.items():
        assert load_library_scenario(name).expect.assignment == table, name


def test_member_failure_removes_the_member_one_session_timeout_after_its_last_heartbeat():
    result = run_scenario(load_library_scenario("member_failure"))
    last_heartbeat = max(
        e.time_ms
        for e in result.trace.of_type(MessageDelivered)
        if e.body.source == "A" and e.body.api == "ConsumerGroupHeartbeat"
    )
    bumps = [
        e.time_ms
        for e in result.trace.of_type(HandlerResult)
        if e.body.origin != "ConsumerGroupHeartbeat"
        and any(r["key"]["type"] == "ConsumerGroupMetadataKey" for r in e.body.records)
    ]
    assert bumps == [last_heartbeat + 45_000]


def test_lost_heartbeat_is_accepted_at_the_previous_epoch():
    trace = run_scenario(load_library_scenario("lost_heartbeat")).trace
    dropped = trace.of_type(MessageDropped)
    assert [(e.body.destination, e.body.api, e.body.body["member_epoch"]) for e in dropped] == [
        ("A", "ConsumerGroupHeartbeat", 2)
    ]
    resent = next(
        e
        for e in trace.of_type(MessageSent)
        if e.actor == "A" and e.body.api == "ConsumerGroupHeartbeat" and e.step > dropped[0].step
    )
    assert resent.body.body["member_epoch"] == 1
    answer = next(
        e
        for e in trace.of_type(MessageSent)
        if e.body.destination == "A" and e.body.api == "ConsumerGroupHeartbeat" and e.step > resent.step
    )
    assert answer.body.body["member_epoch"] == 2
    assert "error_code" not in answer.body.body


def test_coordinator_failover_happens_mid_reconciliation():
    scenario = load_library_scenario("coordinator_failover")
    lab = build_lab(scenario)
    lab.run(until=20_200)  # the failover is due at 20201 ms
    assert lab.coordinator.groups["g"].state.value == "Reconciling"
    trace = run_scenario(scenario).trace
    not_coordinator = [
        e
        for e in trace.of_type(MessageSent)
        if e.actor == "broker-0" and e.body.body.get("error_code") == 16  # NOT_COORDINATOR
    ]
    assert not_coordinator


def test_static_member_bounce_never_bumps_the_group_epoch_after_the_joins():
    result = run_scenario(load_library_scenario("static_member_bounce"))
    epochs = [
        r["value"]["epoch"]
        for e in result.trace.of_type(HandlerResult)
        for r in e.body.records
        if r["key"]["type"] == "ConsumerGroupMetadataKey"
    ]
    assert epochs == [1, 2]
    assert {m.name: m.member_id for m in result.members} == {"A": "A#2", "B": "B"}


def test_slow_revocation_removes_the_member_while_its_callback_runs():
    """Kafka ``GroupMetadataManager.scheduleConsumerGroupRebalanceTimeout`` runs from the revocation the coordinator
    hands out; the new consumer's ``on_partitions_revoked`` starts at the application's next poll() after it
    (``AsyncKafkaConsumer.processBackgroundEvents``), and A's poll timer runs from that poll. So the coordinator's
    timer expires first: A is removed mid-callback, before its own poll timer would make it leave."""
    trace = run_scenario(load_library_scenario("slow_revocation")).trace
    a_moves = [
        (e.time_ms, e.body.from_state, e.body.to_state) for e in trace.of_type(StateTransition) if e.actor == "A"
    ]
    handed_out = next(t for t, before, after in a_moves if (before, after) == ("STABLE", "RECONCILING"))
    revoked = next(e for e in trace.of_type(CallbackInvoked) if e.body.callback == "on_partitions_revoked")
    assert handed_out < revoked.time_ms  # the callback waited for A's next poll
    removals = [
        (
            e.time_ms,
            e.body.origin,
            [r["value"]["epoch"] for r in e.body.records if r["key"]["type"] == "ConsumerGroupMetadataKey"],
        )
        for e in trace.of_type(HandlerResult)
        if any(
            r["key"]["type"] == "ConsumerGroupMemberMetadataKey" and r["key"]["member_id"] == "A" and r["value"] is None
            for r in e.body.records
        )
    ]
    max_poll_interval = 10_000
    assert removals == [(handed_out - 1 + max_poll_interval, "rebalance timeout A", [3])]
    removed_at = removals[0][0]
    assert revoked.time_ms < removed_at < revoked.time_ms + max_poll_interval  # before A's poll timer, mid-callback
    assert not [m for m in a_moves if m[2] == "PREPARE_LEAVING"]  # A never left on its own
    fenced = next(t for t, before, after in a_moves if after == "FENCED")
    assert removed_at < fenced < revoked.time_ms + revoked.body.duration_ms


def test_the_library_validates_against_the_exported_json_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    for path in sorted(LIBRARY.glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text(encoding="utf-8")), schema)


def test_the_committed_schema_is_the_generated_one(tmp_path):
    export_schema(tmp_path / "schema.json")
    assert (tmp_path / "schema.json").read_text(encoding="utf-8") == SCHEMA.read_text(encoding="utf-8"), (
        "regenerate with: kip-lab schema kip_lab/scenarios/scenario.schema.json"
    )
    assert json.loads(SCHEMA.read_text(encoding="utf-8")) == scenario_schema()


# ---------------------------------------------------------------------------- determinism, random scenarios


def random_scenario(seed: int) -> dict:
    """Members, topics, and crashes, closes, pauses and restarts at random times (a seeded random)."""
    rng = random.Random(seed)
    topics = [{"name": f"t{i}", "partitions": rng.randint(1, 8)} for i in range(rng.randint(1, 2))]
    members, events = {}, []
    for name in "ABCDE"[: rng.randint(2, 5)]:
        subscribed = sorted(rng.sample([t["name"] for t in topics], rng.randint(1, len(topics))))
        member = {"subscribed_topic_names": subscribed, "start_at_ms": rng.choice([0, 0, rng.randint(1, 20_000)])}
        if rng.random() < 0.3:
            member["instance_id"] = f"static-{name}"
        members[name] = member
        state, at = "alive", member["start_at_ms"]
        for _ in range(rng.randint(0, 3)):  # a plausible life: only a live process crashes, closes or pauses
            at += rng.randint(1_000, 30_000)
            action = {"alive": rng.choice(["crash", "close", "pause"]), "paused": "resume"}.get(state, "restart")
            events.append({"at_ms": at, "action": action, "member": name})
            state = {"crash": "down", "close": "down", "pause": "paused"}.get(action, "alive")
    if rng.random() < 0.5:
        events.append({"at_ms": rng.randint(1, 60_000), "action": "fail_over"})
    return {
        "name": f"random-{seed}",
        "seed": seed,
        "lab": {"link": {"latency": {"kind": "uniform", "low": 1, "high": 20}}},
        "topics": topics,
        "members": members,
        "events": events,
        "run": {"until_ms": 150_000},
    }


@pytest.mark.parametrize("seed", [1, 2, 3, 5, 8])
def test_random_scenarios_are_deterministic_and_keep_the_invariants(seed):
    first = run_scenario(Scenario.model_validate(random_scenario(seed)))
    again = run_scenario(Scenario.model_validate(random_scenario(seed)))
    assert first.trace.to_jsonl() == again.trace.to_jsonl()
    assert not first.violations


def test_different_seeds_give_different_traces():
    scenario = Scenario.model_validate(random_scenario(4))
    traces = {run_scenario(scenario.model_copy(update={"seed": s})).trace.to_jsonl() for s in (0, 1, 2)}
    assert len(traces) == 3
    assert run_scenario(Scenario.model_validate(random_scenario(6))).trace.to_jsonl() not in traces


# ---------------------------------------------------------------------------- model and loading


def test_yaml_and_python_describe_the_same_scenario(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(MINIMAL, encoding="utf-8")
    assert load_scenario(path) == Scenario.model_validate(yaml.safe_load(MINIMAL))
    for name in SHIPPED:
        data = yaml.safe_load((LIBRARY / f"{name}.yaml").read_text(encoding="utf-8"))
        assert Scenario.model_validate(data) == load_library_scenario(name)


def test_setup_steps_count_topics_members_delayed_starts_and_timed_events():
    scenario = scenario_from_yaml(
        MINIMAL.replace("members:", "members:\n  B: {subscribed_topic_names: [foo], start_at_ms: 5}")
        + "events:\n  - {at_ms: 7, action: crash, member: A}\n"
    )
    assert scenario.setup_steps == 1 + 2 + 1 + 1
    lab = build_lab(scenario)
    assert lab.step_count == scenario.setup_steps


def test_at_step_applies_the_action_as_that_step():
    scenario = load_library_scenario("scripted_basic")
    trace = run_scenario(scenario).trace
    for event in scenario.events:
        applied = [e.body for e in trace.at_step(event.at_step) if e.kind is EventKind.ACTION_APPLIED]
        assert [action.member for action in applied] == [event.member]
        assert applied[0].fields["body"]["member_epoch"] == event.body["member_epoch"]


def test_topic_references_in_request_bodies_become_topic_ids():
    scenario = load_library_scenario("scripted_basic")
    lab = build_lab(scenario)
    trace = run_scenario(scenario).trace
    bodies = [e.body.fields["body"] for e in trace.of_type(ActionApplied) if e.body.fields.get("body")]
    assert {"topic_id": lab.topic_id("foo"), "partitions": [0, 1, 2]} in bodies[1]["topic_partitions"]
    assert all("topic" not in tp for b in bodies for tp in b.get("topic_partitions", []))


def test_an_unreachable_step_is_an_error():
    text = """\
name: unreachable
topics: [{name: foo, partitions: 1}]
members: {S: {scripted: true}}
events:
  - {at_step: 90, action: send_request, member: S, body: {group_id: g, member_id: S, member_epoch: 0}}
run: {until_ms: 100}
"""
    with pytest.raises(ScenarioError, match=r"events\.0\.at_step: step 90 is never reached"):
        run_scenario(scenario_from_yaml(text))


def test_a_failed_expectation_reports_the_actual_value():
    scenario = load_library_scenario("basic")
    wrong = scenario.model_copy(update={"expect": scenario.expect.model_copy(update={"group_epoch": 7})})
    result = run_scenario(wrong)
    assert not result.ok
    failed = [e for e in result.expectations if not e.passed]
    assert [(e.name, e.expected, e.actual) for e in failed] == [("group_epoch", 7, 3)]


def test_a_run_that_never_settles_reports_no_time_to_stable():
    text = MINIMAL.replace("run: {until_ms: 20000}", "run: {until_stable: true, timeout_ms: 1}")
    text += "expect: {stable: true, max_time_to_stable_ms: 1000}\n"
    result = run_scenario(scenario_from_yaml(text))
    assert (result.stable, result.stable_at_ms, result.time_to_stable_ms) == (False, None, None)
    assert [(e.name, e.passed) for e in result.expectations] == [("stable", False), ("max_time_to_stable_ms", False)]


def test_is_stable_waits_for_a_partition_change_the_group_has_not_seen():
    lab = build_lab(load_library_scenario("partition_added"))
    lab.run(until=19_999)
    assert lab.is_stable()
    lab.run(until=20_000)  # the partition is added; no heartbeat has told the coordinator yet
    assert not lab.is_stable()


def test_metrics_come_from_kip_lab_lab_metrics_when_it_exists(monkeypatch):
    module = types.ModuleType("kip_lab.lab.metrics")
    module.compute_metrics = lambda trace, **_: {"events": len(trace)}
    monkeypatch.setitem(sys.modules, "kip_lab.lab.metrics", module)
    result = run_scenario(scenario_from_yaml(MINIMAL))
    assert result.metrics == {"events": len(result.trace)} and result.metrics_note is None
    monkeypatch.setitem(sys.modules, "kip_lab.lab.metrics", None)  # as if it were not installed
    result = run_scenario(scenario_from_yaml(MINIMAL))
    assert result.metrics is None and "kip_lab.lab.metrics is not available" in result.metrics_note


def test_the_result_is_json_ready():
    data = run_scenario(load_library_scenario("member_failure")).to_dict()
    assert json.loads(json.dumps(data))["ok"] is True
    assert "trace" not in data
    assert {m["name"]: m["alive"] for m in data["members"]} == {"A": False, "B": True, "C": True}


# ---------------------------------------------------------------------------- bad input


def test_malformed_yaml_names_the_file_and_line():
    error = errors_of("name: x\nmembers:\n  A: [unclosed\n")
    assert str(error).startswith("s.yaml:4: not valid YAML")


def test_an_invalid_value_names_the_field_path_its_line_and_what_was_expected():
    text = MINIMAL.replace(
        "A: {subscribed_topic_names: [foo]}", "A:\n    subscribed_topic_names: [foo]\n    max_poll_interval_ms: -5"
    )
    error = errors_of(text)
    assert str(error) == "s.yaml:7: members.A.max_poll_interval_ms: Input should be greater than 0, got -5"
    assert [(p.path, p.line) for p in error.problems] == [("members.A.max_poll_interval_ms", 7)]


def test_an_unknown_field_suggests_the_allowed_ones():
    error = errors_of(
        MINIMAL.replace(
            "A: {subscribed_topic_names: [foo]}", "A: {subscribed_topic_names: [foo], max_pol_interval_ms: 1}"
        )
    )
    assert "s.yaml:5: members.A.max_pol_interval_ms: unknown field (did you mean 'max_poll_interval_ms'?)" in str(error)
    error = errors_of(MINIMAL + "events:\n  - {at_ms: 1, action: crash, membr: A}\n")
    allowed = "expected one of: action, at_ms, at_step, member"
    assert f"s.yaml:8: events.0.membr: unknown field (did you mean 'member'?); {allowed}" in str(error)
    assert "s.yaml:8: events.0.member: Field required" in str(error)
    error = errors_of(MINIMAL + "colour: blue\n")
    assert "s.yaml:7: colour: unknown field; expected one of: description, events, expect, lab, members," in str(error)


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (
            "  - {at_ms: 1, action: crsh, member: A}",
            "s.yaml:8: events.0.action: unknown action 'crsh'; expected one of: 'crash'",
        ),
        ("  - {action: crash, member: A}", "s.yaml:8: events.0: an event needs exactly one of at_ms or at_step"),
        ("  - {at_ms: 1, at_step: 9, action: crash, member: A}", "s.yaml:8: events.0: an event needs exactly one"),
        ("  - {at_ms: 1, action: crash, member: Z}", "s.yaml:8: events.0.member: no member named 'Z'; members: ['A']"),
        (
            "  - {at_step: 2, action: crash, member: A}",
            "s.yaml:8: events.0.at_step: step 2 is taken by setup (steps 1-2)",
        ),
        (
            "  - {at_ms: 1, action: send_request, member: A, body: {group_id: g, member_epoch: 0}}",
            "s.yaml:8: events.0.member: send_request needs a scripted member",
        ),
        ("  - {at_ms: 1, action: delete_topic, topic: bar}", "s.yaml:8: events.0.topic: no topic named 'bar'"),
        ("  - {at_ms: 1, action: fail_over, to_broker: broker-7}", "events.0.to_broker: no broker named 'broker-7'"),
        ("  - {at_ms: 20001, action: close, member: A}", "events.0.at_ms: the run ends at 20000 ms (run.until_ms)"),
        (
            "  - {at_ms: 1, action: add_partitions, topic: foo, count: 0}",
            "s.yaml:8: events.0.count: Input should be greater than or equal to 1, got 0",
        ),
    ],
)
def test_bad_events_are_reported_where_they_are(events, expected):
    assert expected in str(errors_of(MINIMAL + "events:\n" + events + "\n"))


def test_scripted_members_and_their_requests_are_checked():
    scripted = "name: s\ntopics: [{name: foo, partitions: 1}]\nmembers:\n  S: {scripted: true}\nevents:\n"
    error = errors_of(scripted.replace("{scripted: true}", "{scripted: true, group_id: h}"))
    assert "s.yaml:4: members.S: a scripted member takes no consumer settings; remove group_id" in str(error)
    error = errors_of(scripted + "  - {at_ms: 1, action: crash, member: S}\n")
    assert "s.yaml:6: events.0.member: crash acts on a consumer; 'S' is a scripted member" in str(error)
    body = "{group_id: g, member_id: S, member_epoch: oops}"
    error = errors_of(scripted + f"  - {{at_ms: 1, action: send_request, member: S, body: {body}}}\n")
    assert "s.yaml:6: events.0.body.member_epoch: ConsumerGroupHeartbeat: Input should be a valid integer" in str(error)
    body = "{group_id: g, member_id: S, member_epoch: 0, topic_partitions: [{topic: bar, partitions: [0]}]}"
    error = errors_of(scripted + f"  - {{at_ms: 1, action: send_request, member: S, body: {body}}}\n")
    assert "events.0.body.topic_partitions.0.topic: unknown topic 'bar'; topics: ['foo']" in str(error)
    body = "{group_id: g, member_id: T, member_epoch: 0}"
    error = errors_of(scripted + f"  - {{at_ms: 1, action: send_request, member: S, body: {body}}}\n")
    assert "events.0.body.member_id: a scripted member's requests use its name 'S'" in str(error)


def test_expectations_name_known_members():
    error = errors_of(MINIMAL + "expect:\n  assignment:\n    Z: {foo: [0]}\n")
    assert "s.yaml:9: expect.assignment.Z: no member named 'Z'" in str(error)
    error = errors_of(MINIMAL + "expect: {member_states: {A: SLEEPY}}\n")
    assert "s.yaml:7: expect.member_states.A: Input should be 'UNSUBSCRIBED'" in str(error)


def test_other_bad_files(tmp_path):
    duplicate = MINIMAL.replace("members:\n", "members:\n  A: {}\n", 1)
    assert str(errors_of(duplicate)) == "s.yaml:6: members.A: duplicate key"
    assert str(errors_of("")) == "s.yaml: expected a mapping with name, topics, members, events, ..."
    assert str(errors_of("- a list\n")) == "s.yaml:1: expected a mapping with name, topics, members, events, ..."
    assert str(errors_of("topics: []\n")) == "s.yaml:1: name: Field required"
    bounds = errors_of(MINIMAL + "lab:\n  coordinator:\n    session_timeout_ms: 1\n")
    assert str(bounds) == "s.yaml:8: lab.coordinator: session_timeout_ms=1 must lie in [45000, 60000]"
    with pytest.raises(ScenarioError, match="cannot read the file"):
        load_scenario(tmp_path / "missing.yaml")
    with pytest.raises(ScenarioError, match="no library scenario named 'nope'"):
        load_library_scenario("nope")


def test_the_documented_example_runs_and_meets_its_expectations():
    api = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
    section = api.split("## Scenarios and the command line", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert run_scenario(scenario_from_yaml(example, "docs/api.md")).ok


SHARE_SUBSCRIPTION = """\
name: share-subscription
topics: [{name: orders, partitions: 1}, {name: audit, partitions: 2}]
share_members: {S: {subscribed_topic_names: [orders], group_id: queue}}
events:
  - {at_ms: 8000, action: change_subscription, member: S, topics: [orders, audit]}
run: {until_ms: 30000}
"""


def test_a_share_member_may_change_its_subscription_in_a_scenario():
    """Kafka ``ShareConsumerImpl.subscribe`` with a new list: the scenario validates, runs, and S ends on both
    topics."""
    result = run_scenario(scenario_from_yaml(SHARE_SUBSCRIPTION))
    assert result.stopped is None and result.stable and not result.violations
    lab = build_lab(scenario_from_yaml(SHARE_SUBSCRIPTION))
    orders, audit = lab.topic_id("orders"), lab.topic_id("audit")
    changes = [e for e in result.trace.of_type(AssignmentChanged) if e.actor == "S"]
    before = [e.body.share_assigned for e in changes if e.time_ms < 8000]
    held = [e.body.share_assigned for e in changes]
    assert before[-1] == ((orders, 0),)
    assert sorted(held[-1]) == sorted([(orders, 0), (audit, 0), (audit, 1)])


@pytest.mark.parametrize(
    ("change", "where", "words"),
    [
        ("regex: 'ord.*'", "events.0.regex", "'S' is a share consumer: it subscribes to topic names"),
        ("topics: []", "events.0.topics", "'S' is a share consumer: it needs at least one topic"),
    ],
)
def test_a_share_member_subscription_change_needs_topic_names(change, where, words):
    """``KafkaShareConsumer.subscribe`` takes topic names only: a pattern or no topics is refused at validation."""
    text = SHARE_SUBSCRIPTION.replace("topics: [orders, audit]}", change + "}")
    with pytest.raises(ScenarioError, match=rf"{where}: {words}"):
        scenario_from_yaml(text)
