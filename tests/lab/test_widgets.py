"""The stepper and the fault panel, driven from Python as a notebook user would, without a browser.

Every control is exercised through the widget (``button.click()``, ``slider.value = …``) and
checked against the Lab underneath, and against an identical Lab stepped by hand: the run is
deterministic, so step ``k`` on screen must be exactly step ``k`` of a fresh run.

Outside a kernel an ``Output`` widget keeps no outputs: JupyterLab is what turns the messages
printed or displayed inside ``with output:`` into its contents. The ``frontend`` fixture stands
in for it, so the tests can read the timeline and the error pane as a user would see them.
"""

from __future__ import annotations

import contextlib
import html
import io
import itertools
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kip_lab.errors import ArgumentError

W = pytest.importorskip("ipywidgets")
pytest.importorskip("altair")

import widgets.stepper as stepper_module  # noqa: E402
from kip_lab.coordinator import GROUP_STATE_MACHINE, RECONCILIATION_MACHINE  # noqa: E402
from kip_lab.events import HandlerResult, MessageSent, StateTransition  # noqa: E402
from kip_lab.lab import Lab  # noqa: E402
from kip_lab.lab import actions as a  # noqa: E402
from kip_lab.lab.invariants import InvariantChecker  # noqa: E402
from kip_lab.lab.share_invariants import SHARE_INVARIANTS  # noqa: E402
from kip_lab.viz.dot import CURRENT_FILL, DOT_MISSING_MESSAGE, TAKEN_COLOR  # noqa: E402
from widgets import FaultPanel, Stepper, explore  # noqa: E402
from widgets.stepper import CURSOR_SENTINEL, DIAGRAMS, TIMELINES, VEGA_LITE_MIMETYPE  # noqa: E402

GREEN, RED = "🟢", "🔴"
needs_dot = pytest.mark.skipif(
    not shutil.which("dot"), reason="graphviz's `dot` is not installed (scripts/system-deps.sh installs it)"
)


def small_lab() -> Lab:
    """Topic foo (3 partitions) read by A and B; bar (2 partitions) for subscription changes."""
    lab = Lab(seed=0)
    lab.create_topic("foo", 3)
    lab.create_topic("bar", 2)
    for name in "AB":
        lab.add_consumer(name, subscribed_topic_names=["foo"])
    assert lab.run_until_stable(timeout_ms=60_000)
    return lab


def fingerprint(lab: Lab) -> tuple:
    """What the screen shows of a step: time, group state and epochs, each client's state and partitions."""
    group = lab.coordinator.groups.get("g")
    clients = tuple(
        (name, c.state.value, c.member_epoch, tuple(sorted(c.owned)))
        for name, c in sorted(lab.clients.items())
        if hasattr(c, "state")
    )
    if group is None:
        return (lab.now, None, clients)
    return (lab.now, group.state.value, group.group_epoch, group.assignment_epoch, clients)


@pytest.fixture(scope="module")
def reference() -> list[tuple]:
    """``fingerprint`` after each step of the small run, stepped by hand on a fresh Lab (index = step)."""
    lab = Lab(seed=0)
    prints = [fingerprint(lab)]
    lab.create_topic("foo", 3)
    prints.append(fingerprint(lab))
    lab.create_topic("bar", 2)
    prints.append(fingerprint(lab))
    for name in "AB":
        lab.add_consumer(name, subscribed_topic_names=["foo"])
        prints.append(fingerprint(lab))
    horizon = small_lab().horizon
    while lab.step_count < horizon:
        lab.step()
        prints.append(fingerprint(lab))
    return prints


class _OutputStream(io.TextIOBase):
    def __init__(self, output: Any) -> None:
        self.output = output

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        last = self.output.outputs[-1:]
        if last and last[0].get("output_type") == "stream" and last[0].get("name") == "stdout":
            merged = {**last[0], "text": last[0]["text"] + text}
            self.output.outputs = (*self.output.outputs[:-1], merged)
        else:
            self.output.append_stdout(text)
        return len(text)


@pytest.fixture
def frontend(monkeypatch: pytest.MonkeyPatch) -> None:
    """JupyterLab's part, for tests without a kernel: what is printed or displayed inside
    ``with output:`` becomes that Output widget's ``outputs``; ``clear_output`` empties them."""
    entered: list[tuple[Any, contextlib.redirect_stdout]] = []
    real_display = stepper_module.display

    def enter(output: Any) -> Any:
        redirect = contextlib.redirect_stdout(_OutputStream(output))
        redirect.__enter__()
        entered.append((output, redirect))
        return output

    def leave(output: Any, *exc_info: Any) -> None:
        _, redirect = entered.pop()
        redirect.__exit__(None, None, None)

    def clear_output(output: Any, *args: Any, **kwargs: Any) -> None:
        output.outputs = ()

    def display(*objs: Any, raw: bool = False, **kwargs: Any) -> None:
        if not (entered and raw):
            return real_display(*objs, raw=raw, **kwargs)
        output = entered[-1][0]
        for bundle in objs:
            output.outputs = (*output.outputs, {"output_type": "display_data", "data": bundle, "metadata": {}})
        return None

    monkeypatch.setattr(W.Output, "__enter__", enter)
    monkeypatch.setattr(W.Output, "__exit__", leave)
    monkeypatch.setattr(W.Output, "clear_output", clear_output)
    monkeypatch.setattr(stepper_module, "display", display)


@pytest.fixture
def stepper(frontend: None) -> Iterator[Stepper]:
    lab = small_lab()
    stepper = Stepper(lab, start_step=lab.horizon)  # most tests start from the settled group
    yield stepper
    # A callback error is caught and shown, so it would not fail a test by itself: check the pane.
    assert stepper.errors.layout.display == "none", "a widget callback failed (see captured stdout)"


def counter_step(stepper: Stepper) -> tuple[int, int]:
    match = re.search(r"<b>step (\d+)</b> of (\d+)", stepper.counter.value)
    assert match, stepper.counter.value
    return int(match.group(1)), int(match.group(2))


def cursor_values(spec: dict) -> list[float]:
    """Every ``cursor_ms`` in a Vega-Lite spec (inline values or the named datasets Altair writes)."""
    found: list[float] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "cursor_ms" and not isinstance(value, dict | list | str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, str) and "cursor_ms" in node and node.lstrip().startswith("["):
            walk(json.loads(node))

    walk(spec)
    return found


def svg_node(svg: str, node_id: str) -> str:
    """The ``<g id=…>`` element graphviz wrote for a DOT node or edge id (ids are XML-escaped there)."""
    for match in re.finditer(r'<g id="([^"]*)" class="(?:node|edge)">(.*?)</g>', svg, re.S):
        if html.unescape(match.group(1)) == node_id:
            return match.group(2)
    raise AssertionError(f"no element {node_id!r} in the diagram")


def steps_with(lab: Lab, kind: str, actor: str | None = None) -> list[int]:
    return sorted({e.step for e in lab.trace if e.kind.value == kind and (actor is None or e.actor == actor)})


# ---------------------------------------------------------------------------------- controls
def test_opens_at_step_zero_with_the_whole_run_computed(frontend: None) -> None:
    stepper = Stepper(small_lab())
    lab = stepper.lab
    assert lab.horizon > 10 and lab.step_count == 0
    assert counter_step(stepper) == (0, lab.horizon)
    assert stepper.slider.value == 0
    assert stepper.slider.max == stepper.play.max == lab.horizon
    assert "t = 0 ms" in stepper.counter.value
    assert 'data-step="0"' in stepper.axis.value


def test_opens_at_the_start_step_given(frontend: None) -> None:
    stepper = Stepper(small_lab(), start_step=12)
    lab = stepper.lab
    assert lab.step_count == stepper.slider.value == 12
    assert counter_step(stepper) == (12, lab.horizon)
    assert f"t = {lab.now} ms" in stepper.counter.value
    assert "group epoch" in stepper.counter.value


@pytest.mark.parametrize(
    ("start", "error"), [(-1, ArgumentError), (10**6, ArgumentError), ("3", ArgumentError), (True, ArgumentError)]
)
def test_a_start_step_outside_the_run_is_refused_with_the_range(frontend: None, start: Any, error: type) -> None:
    lab = small_lab()
    with pytest.raises(error, match="start_step"):
        Stepper(lab, start_step=start)


def test_each_click_says_what_the_step_did(stepper: Stepper) -> None:
    lab = stepper.lab
    sent = next(e for e in lab.trace.of_type(MessageSent) if e.body.api == "ConsumerGroupHeartbeat")
    stepper.slider.value = sent.step
    line = stepper.happened.value
    assert f"{sent.body.source} sent ConsumerGroupHeartbeat" in line and f"to {sent.body.destination}" in line
    moved = next(e for e in lab.trace.of_type(StateTransition))
    stepper.slider.value = moved.step
    assert f"{moved.actor}: {moved.body.from_state} → {moved.body.to_state}" in html.unescape(stepper.happened.value)


def test_step_axis_cursor_moves_on_every_step(stepper: Stepper) -> None:
    stepper.slider.value = 1
    positions = []
    for _ in range(5):
        stepper.step_button.click()
        cursor = re.search(r'class="kip-step-cursor" data-step="(\d+)"><line x1="([\d.]+)"', stepper.axis.value)
        assert cursor and int(cursor.group(1)) == stepper.lab.step_count
        positions.append(float(cursor.group(2)))
    assert stepper.lab.step_count == 6
    assert all(b > a for a, b in itertools.pairwise(positions)), positions


def test_next_change_jumps_to_the_next_state_ownership_or_epoch_change(stepper: Stepper) -> None:
    lab = stepper.lab
    changes = {e.step for e in lab.trace if e.kind.value == "state_transition"}
    here = 0
    stepper.slider.value = here
    for _ in range(4):
        stepper.next_button.click()
        assert lab.step_count > here
        events = list(lab.trace.at_step(lab.step_count))
        assert any(stepper_module.axis_kind(e, {}) in ("change", "fault") for e in events), events
        assert not [s for s in changes if here < s < lab.step_count], "a state change was skipped"
        here = lab.step_count


def test_only_the_invariants_of_the_run_are_lit(stepper: Stepper) -> None:
    shown = stepper.lights.value
    assert "single-owner" in shown and "stable-means-converged" in shown
    assert not any(name in shown for name in SHARE_INVARIANTS)
    assert "classic-assignment-disjoint" not in shown


def test_large_machines_are_drawn_around_the_current_state_and_scaled_to_the_panel(stepper: Stepper) -> None:
    stepper.slider.value = stepper.lab.horizon
    svg = stepper.diagram.value
    assert 'style="display:block;width:100%' in svg and 'width="' not in svg.split(">", 1)[0]
    assert 'id="state:STABLE"' in svg.replace("&#45;", "-") or "state:STABLE" in html.unescape(svg)
    assert "state:FATAL" in html.unescape(svg)  # one transition away from STABLE
    assert "state:STALE" not in html.unescape(svg)  # not one transition away
    stepper.whole_machine.value = True
    assert "state:STALE" in html.unescape(stepper.diagram.value)


def test_step_and_back_buttons(stepper: Stepper, reference: list[tuple]) -> None:
    lab = stepper.lab
    stepper.slider.value = 10
    stepper.back_button.click()
    assert lab.step_count == stepper.slider.value == 9
    assert counter_step(stepper) == (9, lab.horizon)
    assert fingerprint(lab) == reference[9]
    for expected in (10, 11, 12):
        stepper.step_button.click()
        assert lab.step_count == stepper.slider.value == expected
        assert counter_step(stepper)[0] == expected
        assert fingerprint(lab) == reference[expected]
        assert f"t = {lab.now} ms" in stepper.counter.value


def test_back_stops_at_step_zero(stepper: Stepper) -> None:
    stepper.slider.value = 1
    stepper.back_button.click()
    stepper.back_button.click()
    assert stepper.lab.step_count == stepper.slider.value == 0
    assert counter_step(stepper)[0] == 0
    assert "group <code>g</code>: —" in stepper.counter.value  # no group before anyone joined


def test_slider_jumps_seek_both_ways(stepper: Stepper, reference: list[tuple]) -> None:
    lab = stepper.lab
    for step in (3, 25, 7, lab.horizon, 0, 18):
        stepper.slider.value = step
        assert lab.step_count == step
        assert counter_step(stepper) == (step, lab.horizon)
        assert fingerprint(lab) == reference[step], f"step {step} differs from a fresh run"


def test_step_and_next_change_at_the_end_of_the_run_stay_there_and_say_so(stepper: Stepper) -> None:
    lab = stepper.lab
    end = lab.horizon
    trace_length = len(lab.trace)
    for button in (stepper.step_button, stepper.next_button, stepper.step_button, stepper.next_button):
        button.click()
        assert lab.step_count == stepper.slider.value == end
        assert counter_step(stepper) == (end, end)
        assert "the end of the run" in stepper.happened.value
    assert lab.horizon == stepper.slider.max == stepper.play.max == end, "clicks must not extend the run"
    assert len(lab.trace) == trace_length
    stepper.back_button.click()
    assert counter_step(stepper) == (end - 1, end)


def test_the_stepper_owns_its_run(frontend: None) -> None:
    """Cells that run the notebook's Lab further (or seek it) never move what the stepper shows."""
    lab = small_lab()
    end = lab.horizon
    lab.seek(5)
    stepper = Stepper(lab)
    assert stepper.lab is not lab and lab.step_count == 5, "the given Lab stays where it was"
    assert stepper.lab.horizon == end
    stepper.step_button.click()
    before = (stepper.counter.value, stepper.happened.value, fingerprint(stepper.lab))
    lab.seek(end)
    lab.crash("A")
    lab.run(steps=50)
    assert lab.horizon > end
    assert (stepper.counter.value, stepper.happened.value, fingerprint(stepper.lab)) == before
    stepper.step_button.click()
    assert counter_step(stepper) == (2, end)


def test_play_interval_follows_speed(stepper: Stepper) -> None:
    assert stepper.play.interval == stepper.speed.value
    for ms in (100, 1500, 50):
        stepper.speed.value = ms
        assert stepper.play.interval == ms
    assert (stepper.play.min, stepper.play.max) == (stepper.slider.min, stepper.slider.max)


# ---------------------------------------------------------------------------------- timeline
@pytest.mark.parametrize("view", TIMELINES)
def test_timeline_cursor_is_the_labs_time(stepper: Stepper, view: str) -> None:
    lab = stepper.lab
    stepper.timeline_choice.value = view
    seen = set()
    for step in (0, 6, 12, lab.horizon):
        stepper.slider.value = step
        spec = stepper.timeline_spec()
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v5")  # a name, never fetched
        cursors = cursor_values(spec)
        assert cursors, f"{view}: no cursor in the spec"
        assert set(cursors) == {lab.now}, (view, step, cursors)
        assert repr(CURSOR_SENTINEL) not in json.dumps(spec)
        seen.add(lab.now)
    assert len(seen) > 2  # the cursor really moved


def test_timeline_output_shows_one_chart_at_the_labs_time(stepper: Stepper) -> None:
    lab = stepper.lab
    for step in (4, 12, 11, lab.horizon):
        stepper.slider.value = step
        shown = stepper.timeline.outputs
        assert len(shown) == 1, "each step replaces the chart"
        bundle = shown[0]["data"]
        assert bundle["text/plain"] == f"timeline at t = {lab.now} ms"
        assert set(cursor_values(bundle[VEGA_LITE_MIMETYPE])) == {lab.now}
    stepper.timeline_choice.value = TIMELINES[1]
    (shown,) = stepper.timeline.outputs
    assert "vconcat" not in shown["data"][VEGA_LITE_MIMETYPE]  # the message sequence now
    assert set(cursor_values(shown["data"][VEGA_LITE_MIMETYPE])) == {lab.now}


def test_timeline_spec_renders_offline(stepper: Stepper) -> None:
    vlc = pytest.importorskip("vl_convert")
    stepper.slider.value = 12
    svg = vlc.vegalite_to_svg(stepper.timeline_spec(), allowed_base_urls=[])
    assert svg.lstrip().startswith("<svg") and "partition ownership" in svg


# ---------------------------------------------------------------------------------- diagrams
@needs_dot
def test_member_state_diagram_highlights_the_clients_state(stepper: Stepper) -> None:
    lab = stepper.lab
    for step in (3, lab.horizon):
        stepper.slider.value = step
        state = lab.clients["A"].state.value
        svg = stepper.diagram.value
        assert "<svg" in svg
        assert CURRENT_FILL in svg_node(svg, f"state:{state}")
        assert svg.count(CURRENT_FILL) == 1, "exactly one state is highlighted"


@needs_dot
def test_member_state_diagram_marks_the_transition_just_taken(stepper: Stepper) -> None:
    lab = stepper.lab
    stepper.member_choice.value = "B"
    step = steps_with(lab, "state_transition", "B")[1]
    stepper.slider.value = step
    event = next(e.body for e in lab.trace.at_step(step) if isinstance(e.body, StateTransition) and e.actor == "B")
    edge = svg_node(stepper.diagram.value, f"edge:{event.from_state}->{event.to_state}")
    assert TAKEN_COLOR in edge
    stepper.step_button.click()  # nothing happened to B at the next step: no edge is marked
    if step + 1 not in steps_with(lab, "state_transition", "B"):
        assert TAKEN_COLOR not in stepper.diagram.value


@needs_dot
def test_group_and_reconciliation_diagrams(stepper: Stepper) -> None:
    lab = stepper.lab
    stepper.slider.value = lab.horizon
    group = lab.coordinator.groups["g"]
    stepper.diagram_choice.value = "group state"
    assert GROUP_STATE_MACHINE.name in stepper.diagram.value
    assert CURRENT_FILL in svg_node(stepper.diagram.value, f"state:{group.state.value}")
    stepper.diagram_choice.value = "reconciliation"
    member = group.members[lab.clients["A"].member_id]
    assert RECONCILIATION_MACHINE.name in stepper.diagram.value
    assert CURRENT_FILL in svg_node(stepper.diagram.value, f"state:{member.state.value}")
    stepper.diagram_choice.value = "group"
    assert "<svg" in stepper.diagram.value
    assert 'id="member:' in stepper.diagram.value and 'id="partition:' in stepper.diagram.value
    stepper.slider.value = 0
    assert "does not exist yet" in stepper.diagram.value


def test_every_view_draws_at_every_step(stepper: Stepper) -> None:
    """No combination of diagram, member and timeline fails anywhere in the run."""
    lab = stepper.lab
    for view in DIAGRAMS:
        stepper.diagram_choice.value = view
        for member in stepper.member_choice.options:
            stepper.member_choice.value = member
            for step in range(0, lab.horizon + 1, 3):
                stepper.slider.value = step
                assert stepper.diagram.value
    stepper.timeline_choice.value = TIMELINES[1]
    stepper.slider.value = 1


def test_diagram_shows_the_dot_source_when_dot_is_missing(
    stepper: Stepper, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` executable to be found
    stepper.slider.value = 8
    shown = stepper.diagram.value
    assert shown.startswith("<pre>") and "<svg" not in shown
    text = html.unescape(shown)
    assert DOT_MISSING_MESSAGE in text
    assert "digraph" in text and f'"state:{stepper.lab.clients["A"].state.value}"' in text


# ---------------------------------------------------------------------------------- records, lights
def test_records_written_at_this_step(stepper: Stepper) -> None:
    lab = stepper.lab
    writes = {
        e.step: [r["key"]["type"] for r in e.body.records] for e in lab.trace.of_type(HandlerResult) if e.body.records
    }
    assert writes, "the run wrote no records"
    step = min(writes)
    stepper.slider.value = step
    table = stepper.records.value
    assert table.startswith("<table>")
    assert table.count("<tr>") == len(writes[step])
    for key_type in writes[step]:
        assert f"<td>{key_type}</td>" in table
    quiet = next(s for s in range(1, lab.horizon + 1) if s not in writes)
    stepper.slider.value = quiet
    assert stepper.records.value == "<i>none</i>"


def test_invariant_lights_green_on_a_healthy_run(stepper: Stepper) -> None:
    lab = stepper.lab
    for step in (0, 10, lab.horizon):
        stepper.slider.value = step
        assert stepper.lights.value.count(GREEN) == len(stepper_module.CONSUMER_INVARIANTS)
        assert RED not in stepper.lights.value
    for name in stepper_module.CONSUMER_INVARIANTS:
        assert name in stepper.lights.value


def test_invariant_light_turns_red_from_the_violating_step(frontend: None, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = small_lab()
    bad_step = lab.horizon + 1
    real_check = InvariantChecker.check

    def check(self: InvariantChecker, world: Any, events: Any) -> list[tuple[str, str]]:
        found = real_check(self, world, events)
        if world.scheduler.now_ms == violated_at:  # forced: as if two members owned a partition here
            found = [*found, ("single-owner", "forced by the test")]
        return found

    lab.seek(lab.horizon)
    probe = lab.fork()
    probe.step()
    violated_at = probe.now
    monkeypatch.setattr(InvariantChecker, "check", check)  # the class: a seek restores a pickled checker
    lab.run(steps=3)
    stepper = Stepper(lab, start_step=bad_step - 1)
    assert RED not in stepper.lights.value  # before the violation
    stepper.step_button.click()
    assert stepper.lab.step_count == bad_step
    lights = stepper.lights.value
    assert f"{RED} single-owner" in lights
    assert lights.count(GREEN) == len(stepper_module.CONSUMER_INVARIANTS) - 1
    stepper.back_button.click()
    assert RED not in stepper.lights.value
    stepper.step_button.click()
    assert f"{RED} single-owner" in stepper.lights.value


# ---------------------------------------------------------------------------------- faults
def events_after(lab: Lab, after: int) -> list[tuple]:
    return [
        (e.step, e.time_ms, e.actor, e.kind.value, json.dumps(e.payload, sort_keys=True))
        for e in lab.trace
        if e.step > after
    ]


def apply_fault(stepper: Stepper, at_step: int, press: str, **fields: Any) -> tuple[FaultPanel, list[tuple], int]:
    """Seek to ``at_step``, set the panel's fields, press a button; returns the old future and horizon."""
    lab = stepper.lab
    old_horizon = lab.horizon
    lab.seek(old_horizon)
    old_future = events_after(lab, at_step)
    panel = FaultPanel(stepper)
    stepper.slider.value = at_step
    for name, value in fields.items():
        getattr(panel, name).value = value
    panel.buttons[press].click()
    assert stepper.errors.layout.display == "none"
    return panel, old_future, old_horizon


def assert_forked(stepper: Stepper, at_step: int, old_future: list[tuple], old_horizon: int, action: str) -> None:
    lab = stepper.lab
    assert lab.step_count == stepper.slider.value == at_step + 1, "the stepper shows the step right after the fault"
    assert counter_step(stepper) == (at_step + 1, lab.horizon)
    assert stepper.slider.max == stepper.play.max == lab.horizon != old_horizon
    fault = [e for e in lab.trace.at_step(at_step + 1) if e.kind.value in ("fault_injected", "action_applied")]
    assert [e.body.name for e in fault] == [action]
    lab.seek(lab.horizon)
    assert events_after(lab, at_step) != old_future, "the steps after the fault are a new future"


def test_crash_forks_the_run(stepper: Stepper) -> None:
    at = 20
    _, old_future, old_horizon = apply_fault(stepper, at, "crash", member="A")
    assert_forked(stepper, at, old_future, old_horizon, "crash")
    lab = stepper.lab
    assert not lab.clients["A"].alive
    group = lab.coordinator.groups["g"]
    assert lab.clients["A"].member_id not in group.members, "A's session expired and it left the group"
    assert lab.is_stable()


def test_fail_over_forks_the_run(stepper: Stepper) -> None:
    at = 15
    before = stepper.lab.world.coordinator_host
    _, old_future, old_horizon = apply_fault(stepper, at, "fail over coordinator")
    assert_forked(stepper, at, old_future, old_horizon, "fail_over")
    lab = stepper.lab
    assert lab.world.coordinator_host != before
    assert lab.is_stable()


def test_add_partitions_forks_the_run(stepper: Stepper) -> None:
    at = stepper.lab.horizon - 3
    _, old_future, old_horizon = apply_fault(stepper, at, "add partitions", topic="foo", count=2)
    assert_forked(stepper, at, old_future, old_horizon, "add_partitions")
    lab = stepper.lab
    owned = sorted(p for c in lab.clients.values() for t, p in c.owned if t == lab.topic_id("foo"))
    assert owned == [0, 1, 2, 3, 4]


def test_change_subscription(stepper: Stepper) -> None:
    at = stepper.lab.horizon
    _, old_future, old_horizon = apply_fault(stepper, at, "change subscription", member="A", subscription="foo, bar")
    assert_forked(stepper, at, old_future, old_horizon, "change_subscription")
    lab = stepper.lab
    member = lab.coordinator.groups["g"].members[lab.clients["A"].member_id]
    assert sorted(member.subscribed_topic_names) == ["bar", "foo"]
    assert {t for t, _ in lab.clients["A"].owned} >= {lab.topic_id("bar")}
    assert lab.is_stable()


def test_explore_puts_a_fault_panel_under_the_stepper() -> None:
    box = explore(small_lab(), member="B")
    stepper, panel = box.children
    assert isinstance(stepper, Stepper) and isinstance(panel, FaultPanel)
    assert panel.stepper is stepper and panel.errors is stepper.errors
    assert stepper.member_choice.value == "B"
    assert set(panel.buttons) >= {"crash", "fail over coordinator", "add partitions", "change subscription"}


# ---------------------------------------------------------------------------------- errors
def error_text(output: Any) -> str:
    return "".join(o.get("text", "") for o in output.outputs)


def break_seek(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    def seek(step: int) -> None:
        raise RuntimeError(f"boom at {step}")

    monkeypatch.setattr(lab, "seek", seek)


def test_callback_errors_are_shown_not_raised(frontend: None, monkeypatch: pytest.MonkeyPatch) -> None:
    stepper = Stepper(small_lab())
    assert stepper.errors.outputs == () and stepper.errors.layout.display == "none"
    break_seek(stepper.lab, monkeypatch)
    stepper.slider.value = 3  # an observer: traitlets would re-raise whatever escaped it
    stepper.back_button.click()  # a click handler
    stepper.speed.value = 100  # a callback that works still works
    assert stepper.play.interval == 100
    assert stepper.errors.layout.display == "block"
    shown = error_text(stepper.errors)
    assert "Traceback" in shown and "RuntimeError: boom at 3" in shown
    assert shown.count("RuntimeError: boom") == 2


def test_fault_errors_are_shown_not_raised(stepper: Stepper) -> None:
    panel = FaultPanel(stepper)
    step = stepper.lab.step_count
    panel.apply(a.Crash(member="nobody"))  # refused by the Lab
    assert stepper.errors.layout.display == "block"
    assert "no member named 'nobody'" in error_text(stepper.errors)
    assert stepper.lab.step_count == step
    stepper.errors.layout.display = "none"  # expected here: keep the fixture's check quiet


def test_callback_errors_land_in_the_error_outputs_without_a_frontend(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stepper = Stepper(small_lab())
    capsys.readouterr()
    break_seek(stepper.lab, monkeypatch)
    stepper.slider.value = 3
    assert "RuntimeError: boom at 3" in error_text(stepper.errors)


def test_a_refused_fault_keeps_the_run(stepper: Stepper) -> None:
    """Refused after seeking back, a fault must not cost the run its future (nor the slider its range)."""
    lab = stepper.lab
    end = lab.horizon
    stepper.slider.value = 10
    FaultPanel(stepper).apply(a.Crash(member="nobody"))
    stepper.errors.layout.display = "none"
    assert lab.horizon == stepper.slider.max == end
    stepper.slider.value = end
    assert lab.step_count == end


# ---------------------------------------------------------------------------------- benchmark
def test_widget_benchmark_quick_mode_runs() -> None:
    """``benchmarks/bench_widgets.py --quick`` end to end (its own process: it sets up an IPython shell)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_widgets", "--quick", "--clicks", "3"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert "median ms" in lines[0]
    assert [line.split(":")[0] for line in lines[1:]] == ["basic (3 members, 3 partitions)"] * 2


@needs_dot
def test_a_classic_consumer_shows_the_classic_machines() -> None:
    from kip_lab.clients import CLASSIC_MEMBER_MACHINE
    from kip_lab.coordinator import CLASSIC_GROUP_STATE_MACHINE

    lab = Lab(seed=0)
    lab.create_topic("foo", 2)
    for name in ("A", "B"):
        lab.add_consumer(name, group_protocol="classic", subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    stepper = Stepper(lab, member="A")
    stepper.slider.value = lab.horizon
    stepper.diagram_choice.value = "member state"
    assert CLASSIC_MEMBER_MACHINE.name in stepper.diagram.value
    assert CURRENT_FILL in svg_node(stepper.diagram.value, "state:STABLE")
    stepper.diagram_choice.value = "group state"
    assert CLASSIC_GROUP_STATE_MACHINE.name in stepper.diagram.value
    assert CURRENT_FILL in svg_node(stepper.diagram.value, "state:Stable")


@needs_dot
def test_a_machine_drawn_around_its_state_takes_the_narrower_layout(stepper: Stepper) -> None:
    """The panel scales a diagram to its width: of left-to-right and top-to-bottom, the narrower reads larger."""
    for step in (3, 12, stepper.lab.horizon):
        stepper.slider.value = step
        dot = stepper._diagram_dot()
        chosen = re.search(r'rankdir="(LR|TB)"', dot).group(1)
        flipped = "TB" if chosen == "LR" else "LR"
        other = dot.replace(f'rankdir="{chosen}"', f'rankdir="{flipped}"')
        assert stepper._natural_width(dot) <= stepper._natural_width(other), step
