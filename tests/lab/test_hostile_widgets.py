"""Fault buttons on a Lab that gives them nothing to act on: disabled with a reason, and whatever a button
does — building its action included — reports in the stepper's error pane instead of raising."""

from __future__ import annotations

import pytest

W = pytest.importorskip("ipywidgets")
pytest.importorskip("altair")

from kip_lab.lab import Lab  # noqa: E402
from kip_lab.lab import actions as a  # noqa: E402
from widgets import FaultPanel, Stepper  # noqa: E402
from widgets.faults import NEEDS_A_MEMBER, NEEDS_A_TOPIC  # noqa: E402


def shown(stepper: Stepper) -> str:
    return "".join(o.get("text", "") for o in stepper.errors.outputs)


def test_on_an_empty_lab_the_buttons_that_need_a_member_or_topic_are_disabled_and_say_why() -> None:
    panel = FaultPanel(Stepper(Lab(seed=0)))
    for label in NEEDS_A_MEMBER:
        assert panel.buttons[label].disabled and panel.buttons[label].tooltip == "the Lab has no members to act on"
    for label in NEEDS_A_TOPIC:
        assert panel.buttons[label].disabled and panel.buttons[label].tooltip == "the Lab has no topics to act on"
    assert not panel.buttons["fail over coordinator"].disabled


def test_every_button_on_an_empty_lab_reports_in_the_pane_and_raises_nothing() -> None:
    stepper = Stepper(Lab(seed=0))
    panel = FaultPanel(stepper)
    for button in panel.buttons.values():  # click() calls the handler even on a disabled button
        button.click()
    text = shown(stepper)
    assert text.count("Traceback") >= len(NEEDS_A_MEMBER) + len(NEEDS_A_TOPIC)  # each refused, in the pane
    assert stepper.errors.layout.display == "block"


def test_a_failure_building_the_action_lands_in_the_pane() -> None:
    stepper = Stepper(Lab(seed=0))
    panel = FaultPanel(stepper)
    panel.press(lambda: a.Crash(member=None))
    assert "InvalidArgument" in shown(stepper) and "member" in shown(stepper)


def test_buttons_are_enabled_once_the_lab_has_members_and_topics() -> None:
    lab = Lab(seed=0)
    stepper = Stepper(lab)
    panel = FaultPanel(stepper)
    panel.apply(a.CreateTopic(topic="foo", partitions=2))
    assert not panel.buttons["add partitions"].disabled and panel.buttons["crash"].disabled
    panel.apply(a.AddConsumer(member="A", config={"subscribed_topic_names": ["foo"]}))
    assert not panel.buttons["crash"].disabled and panel.member.value == "A"
    assert stepper.errors.layout.display == "none"


def test_the_stepper_opens_a_shrunk_scenario_at_the_violating_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """``start_step`` runs the Lab on to the step and shows it: the step ``kip-lab shrink`` reports."""
    from kip_lab.coordinator.group import ConsumerGroup
    from kip_lab.scenarios import run_lab, run_scenario, scenario_from_yaml

    real = ConsumerGroup._set_ownership

    def set_ownership(self, old, new):  # the broken coordinator of tests/lab/test_shrink.py
        return real(self, old, None if new is not None and new.member_id == "C" and new.assigned else new)

    monkeypatch.setattr(ConsumerGroup, "_set_ownership", set_ownership)
    scenario = scenario_from_yaml(
        "name: s\ntopics: [{name: foo, partitions: 6}]\nmembers:\n  A: {subscribed_topic_names: [foo]}\n"
        "  B: {subscribed_topic_names: [foo]}\n  C: {subscribed_topic_names: [foo], start_at_ms: 2000}\n"
        "run: {until_ms: 5000}\n"
    )
    step = run_scenario(scenario).violations[0]["step"]
    stepper = Stepper(run_lab(scenario), start_step=step)
    assert stepper.lab.step_count == stepper.slider.value == step
    assert any(e.kind.value == "invariant_violated" for e in stepper.lab.trace.at_step(step))
