"""Fault controls for a Stepper: change the run at the step on screen.

A fault is applied at the current step. The Lab drops the old future of the run (it forks
in place), runs on until the group settles (or a time limit), and the stepper shows the
step right after the fault so the consequences can be stepped through.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from kip_lab.lab import actions as a
from widgets.stepper import Stepper, reports_errors


class FaultPanel(W.VBox):
    def __init__(self, stepper: Stepper, *, settle_timeout_ms: int = 120_000) -> None:
        self.stepper = stepper
        self.errors = stepper.errors
        self.settle_timeout_ms = settle_timeout_ms
        lab = stepper.lab
        members = sorted(n for n, c in lab.clients.items() if hasattr(c, "state"))
        topics = lab.cluster.topic_names()
        self.member = W.Dropdown(options=members, description="member")
        self.topic = W.Dropdown(options=topics, description="topic")
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
            button.on_click(lambda _b, make=make: self.apply(make()))
            self.buttons[label] = button
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

    @reports_errors
    def apply(self, action: Any) -> None:
        lab = self.stepper.lab
        lab.apply(action)
        fault_step = lab.step_count
        lab.run_until_stable(timeout_ms=self.settle_timeout_ms)
        lab.seek(fault_step)
        self.stepper.reload()


def explore(lab: Any, **stepper_options: Any) -> W.VBox:
    """A stepper with its fault panel, ready to display in a notebook."""
    stepper = Stepper(lab, **stepper_options)
    return W.VBox([stepper, FaultPanel(stepper)])
