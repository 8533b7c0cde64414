"""Fault controls for a Stepper: change the run at the step on screen.

A fault is applied at the current step. The Lab drops the old future of the run (it forks
in place), runs on until the group settles (or a time limit), and the stepper shows the
step right after the fault so the consequences can be stepped through.

A button that cannot apply (no member or no topic to act on) is disabled, its tooltip says
why; everything a button does, building its action included, reports in the error pane.
"""

from __future__ import annotations

from typing import Annotated, Any

import ipywidgets as W
from pydantic import Field

from kip_lab.contract import LONG_MAX, checked
from kip_lab.lab import Lab
from kip_lab.lab import actions as a
from widgets.stepper import Stepper, reports_errors

NEEDS_A_MEMBER = ("crash", "restart", "pause", "resume", "close", "drop next message", "change subscription")
NEEDS_A_TOPIC = ("add partitions", "move share leader")


class FaultPanel(W.VBox):
    @checked
    def __init__(
        self, stepper: Stepper, *, settle_timeout_ms: Annotated[int, Field(gt=0, le=LONG_MAX)] = 120_000
    ) -> None:
        self.stepper = stepper
        self.errors = stepper.errors
        self.settle_timeout_ms = settle_timeout_ms
        topics = stepper.lab.cluster.topic_names()
        self.member = W.Dropdown(description="member")
        self.topic = W.Dropdown(description="topic")
        self.count = W.BoundedIntText(value=1, min=1, max=1000, description="count")
        self.subscription = W.Text(value=",".join(topics), description="topics")
        buttons = {
            "crash": lambda: a.Crash(member=self.member.value),
            "restart": lambda: a.Restart(member=self.member.value),
            "pause": lambda: a.Pause(member=self.member.value),
            "resume": lambda: a.Resume(member=self.member.value),
            "close": lambda: a.Close(member=self.member.value),
            "drop next message": lambda: a.DropMessages(member=self.member.value, count=1),
            "add partitions": lambda: a.AddPartitions(topic=self.topic.value, count=self.count.value),
            "fail over coordinator": lambda: a.FailOver(),
            "fail over share coordinator": lambda: a.FailOverShareCoordinator(),
            "move share leader": lambda: a.MoveShareLeader(topic=self.topic.value, partition=0),
            "change subscription": lambda: a.ChangeSubscription(
                member=self.member.value, topics=[t.strip() for t in self.subscription.value.split(",") if t.strip()]
            ),
        }
        self.buttons = {}
        for label, make in buttons.items():
            button = W.Button(description=label, layout=W.Layout(width="auto"))  # labels never cut
            button.on_click(lambda _b, make=make: self.press(make))
            self.buttons[label] = button
        self.refresh()
        rows = [
            W.HBox(
                [
                    self.member,
                    self.buttons["crash"],
                    self.buttons["restart"],
                    self.buttons["pause"],
                    self.buttons["resume"],
                    self.buttons["close"],
                    self.buttons["drop next message"],
                ]
            ),
            W.HBox([self.topic, self.count, self.buttons["add partitions"], self.buttons["fail over coordinator"]]),
            W.HBox([self.buttons["fail over share coordinator"], self.buttons["move share leader"]]),
            W.HBox([self.subscription, self.buttons["change subscription"]]),
        ]
        super().__init__([W.HTML("<b>faults, applied at the current step</b>"), *rows])

    def refresh(self) -> None:
        """Offer the Lab's members and topics now; disable the buttons that have nothing to act on."""
        lab = self.stepper.lab
        members = tuple(sorted(n for n, c in lab.clients.items() if hasattr(c, "state")))
        topics = tuple(lab.cluster.topic_names())
        for dropdown, options in ((self.member, members), (self.topic, topics)):
            if options != dropdown.options:  # setting options loses the choice: keep it if it is still there
                chosen = dropdown.value
                dropdown.options = options
                dropdown.value = chosen if chosen in options else (options[0] if options else None)
        why = {
            label: reason
            for labels, empty, reason in (
                (NEEDS_A_MEMBER, not self.member.options, "the Lab has no members to act on"),
                (NEEDS_A_TOPIC, not self.topic.options, "the Lab has no topics to act on"),
            )
            if empty
            for label in labels
        }
        for label, button in self.buttons.items():
            button.disabled = label in why
            button.tooltip = why.get(label, "")

    @reports_errors
    def press(self, make: Any) -> None:
        """A button: build its action from the controls (which may fail: shown in the pane), apply it."""
        self.apply(make())

    @reports_errors
    def apply(self, action: Any) -> None:
        lab = self.stepper.lab
        lab.apply(action)
        fault_step = lab.step_count
        lab.run_until_stable(timeout_ms=self.settle_timeout_ms)
        lab.seek(fault_step)
        self.stepper.reload()
        self.refresh()


class Explorer(W.VBox):
    """A stepper over its fault panel; displayed with the stepper's first view (see ``Stepper.first_view``)."""

    @checked
    def __init__(self, stepper: Stepper) -> None:
        self.stepper = stepper
        super().__init__([stepper, FaultPanel(stepper)])

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.stepper.with_first_view(super()._repr_mimebundle_(**kwargs))


@checked
def explore(lab: Lab, **stepper_options: Any) -> Explorer:
    """A stepper with its fault panel, ready to display in a notebook."""
    return Explorer(Stepper(lab, **stepper_options))
