"""Step through a Lab run in a notebook: controls, timeline, diagrams, records, invariant lights.

The stepper is a view over one Lab. Every control ends in ``Lab.seek`` (Back, the slider,
Play) or ``Lab.step`` (Step past the end of what has been run), then redraws:

* the timeline (ownership swimlanes over epochs, or the message sequence) with a cursor at
  the current time — the charts are built once per run and only the cursor moves;
* a diagram drawn from a machine's own table (the chosen member's client state, its
  reconciliation state on the coordinator, the group state) or the group picture;
* the records the coordinator wrote at this step, and one light per invariant.

JupyterLab swallows exceptions raised in widget callbacks, so every callback writes its
errors into the visible ``errors`` pane instead.
"""

from __future__ import annotations

import functools
import html
import json
import traceback
from collections.abc import Callable
from typing import Any

import ipywidgets as W
from IPython.display import display

from kip_lab.clients.classic_consumer import ClassicConsumer
from kip_lab.clients.classic_member_state import CLASSIC_MEMBER_MACHINE
from kip_lab.clients.member_state import CONSUMER_MEMBER_MACHINE
from kip_lab.coordinator import CLASSIC_GROUP_STATE_MACHINE, GROUP_STATE_MACHINE, RECONCILIATION_MACHINE
from kip_lab.lab import Lab, Trace
from kip_lab.lab.invariants import INVARIANTS
from kip_lab.share.group import SHARE_GROUP_STATE_MACHINE
from kip_lab.share.partition import RECORD_STATE_MACHINE
from kip_lab.viz import (
    epoch_chart,
    group_dot,
    machine_dot,
    message_sequence,
    ownership_swimlanes,
    placeholder_chart,
    record_state_strip,
    render,
    trace_frames,
)

DIAGRAMS = ("member state", "reconciliation", "group state", "group", "record state")
TIMELINES = ("ownership and epochs", "messages", "share records")
# The charts are built once per run with the cursor at this impossible time; each step only
# rewrites it in the spec text. Building Altair charts costs ~100 ms, the rewrite ~1 ms.
CURSOR_SENTINEL = -7_654_321.5
VEGA_LITE_MIMETYPE = "application/vnd.vegalite.v5+json"  # rendered offline by JupyterLab itself
RUN_AHEAD_STEPS = 200


def reports_errors(method: Callable) -> Callable:
    """Run a widget callback with its exceptions shown in the stepper's error pane."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception:  # shown to the user, never swallowed
            self.errors.append_stderr(traceback.format_exc())
            self.errors.layout.display = "block"
            return None

    return wrapper


class Stepper(W.VBox):
    """Play/Pause, Step, Back, a slider over steps and a speed control around one ``Lab``."""

    def __init__(
        self, lab: Lab, *, group_id: str = "g", member: str | None = None, start_step: int | None = None
    ) -> None:
        """``start_step``: open at this step (running the Lab on to it if it has not got there yet)."""
        self.lab = lab
        self.group_id = group_id
        self._full = Trace()
        self._frames: Any = None
        self._specs: dict[str, str] = {}
        self.errors = W.Output(layout=W.Layout(border="1px solid #d62728", display="none"))
        self.play = W.Play(min=0, max=max(lab.horizon, 1), interval=400, description="Play")
        self.slider = W.IntSlider(
            min=0, max=max(lab.horizon, 1), description="step", continuous_update=False, layout=W.Layout(width="60%")
        )
        W.jslink((self.play, "value"), (self.slider, "value"))
        self.speed = W.IntSlider(
            value=400, min=50, max=2000, step=50, description="ms/step", layout=W.Layout(width="30%")
        )
        self.back_button = W.Button(description="◀ Back", tooltip="seek one step back")
        self.step_button = W.Button(description="Step ▶", tooltip="one more step (runs the Lab past its end)")
        self.counter = W.HTML()
        self.timeline_choice = W.ToggleButtons(options=TIMELINES, value=TIMELINES[0])
        self.timeline = W.Output()
        members = sorted(n for n, c in lab.clients.items() if hasattr(c, "state"))
        self.member_choice = W.Dropdown(
            options=members, value=member or (members[0] if members else None), description="member"
        )
        self.diagram_choice = W.ToggleButtons(options=DIAGRAMS, value=DIAGRAMS[0])
        self.diagram = W.HTML()
        self.records = W.HTML()
        self.lights = W.HTML()

        self.speed.observe(self._on_speed, "value")
        self.slider.observe(self._on_slider, "value")
        self.back_button.on_click(self._on_back)
        self.step_button.on_click(self._on_step)
        self.timeline_choice.observe(self._on_view, "value")
        self.member_choice.observe(self._on_view, "value")
        self.diagram_choice.observe(self._on_view, "value")

        controls = W.HBox([self.play, self.back_button, self.step_button, self.slider, self.speed])
        pictures = W.HBox(
            [
                W.VBox([self.diagram_choice, self.member_choice, self.diagram]),
                W.VBox(
                    [
                        W.HTML("<b>records written at this step</b>"),
                        self.records,
                        W.HTML("<b>invariants</b>"),
                        self.lights,
                    ]
                ),
            ]
        )
        super().__init__([controls, self.counter, self.timeline_choice, self.timeline, pictures, self.errors])
        self.reload()
        if start_step is not None:
            self.go(start_step)

    # ------------------------------------------------------------------ run bookkeeping
    def reload(self) -> None:
        """Rebuild the frames after the run grew or forked; keep the current step."""
        here = self.lab.step_count
        if self.lab.horizon > here:
            self.lab.seek(self.lab.horizon)
        self._full = Trace(self.lab.trace)
        self._frames = trace_frames(self._full)
        self._specs = {}
        self.lab.seek(here)
        top = max(self.lab.horizon, 1)
        self.play.max = top
        self.slider.max = top
        self._set_slider(here)
        self.redraw()

    def _set_slider(self, value: int) -> None:
        self.slider.unobserve(self._on_slider, "value")
        self.slider.value = value
        self.slider.observe(self._on_slider, "value")

    def go(self, step: int) -> None:
        """Show the state right after ``step`` (what every control ends in)."""
        if step > self.lab.horizon:
            # Past the end of what has been run: run ahead a chunk at once, so the frames and
            # charts are rebuilt once per chunk rather than once per click.
            self.lab.seek(self.lab.horizon)
            target = max(step, self.lab.horizon + RUN_AHEAD_STEPS)
            while self.lab.step_count < target and self.lab.has_next():
                self.lab.step()
            self.lab.seek(min(step, self.lab.horizon))
            self.reload()
            return
        self.lab.seek(max(0, step))
        self._set_slider(self.lab.step_count)
        self.redraw()

    # ------------------------------------------------------------------ callbacks
    @reports_errors
    def _on_speed(self, change: dict) -> None:
        self.play.interval = change["new"]

    @reports_errors
    def _on_slider(self, change: dict) -> None:
        self.go(change["new"])

    @reports_errors
    def _on_back(self, _button: Any) -> None:
        self.go(self.lab.step_count - 1)

    @reports_errors
    def _on_step(self, _button: Any) -> None:
        self.go(self.lab.step_count + 1)

    @reports_errors
    def _on_view(self, _change: dict) -> None:
        self.redraw()

    # ------------------------------------------------------------------ drawing
    def redraw(self) -> None:
        lab = self.lab
        group = lab.coordinator.groups.get(self.group_id) or lab.coordinator.share_groups.get(self.group_id)
        state = group.state.value if group else "—"
        epochs = f"group epoch {group.group_epoch}, assignment epoch {group.assignment_epoch}" if group else ""
        self.counter.value = (
            f"<b>step {lab.step_count}</b> of {lab.horizon} &nbsp; t = {lab.now} ms &nbsp; "
            f"group <code>{html.escape(self.group_id)}</code>: {state} {epochs}"
        )
        self._draw_timeline()
        self._draw_diagram()
        self._draw_records()
        self._draw_lights()

    def timeline_spec(self) -> dict:
        """The Vega-Lite spec of the chosen timeline with the cursor at the current time."""
        view = self.timeline_choice.value
        if view not in self._specs:
            if view == TIMELINES[0]:
                chart = ownership_swimlanes(self._frames, cursor_ms=CURSOR_SENTINEL) & epoch_chart(
                    self._frames, cursor_ms=CURSOR_SENTINEL
                )
            elif view == TIMELINES[1]:
                chart = message_sequence(self._frames, cursor_ms=CURSOR_SENTINEL, y_axis="time")
            else:
                try:
                    chart = record_state_strip(self._full, cursor_ms=CURSOR_SENTINEL)
                except ValueError as empty:
                    chart = placeholder_chart(str(empty), cursor_ms=CURSOR_SENTINEL)
            self._specs[view] = json.dumps(chart.to_dict(validate=False))
        return json.loads(self._specs[view].replace(repr(CURSOR_SENTINEL), str(self.lab.now)))

    def _draw_timeline(self) -> None:
        spec = self.timeline_spec()
        self.timeline.clear_output(wait=True)
        with self.timeline:
            display({VEGA_LITE_MIMETYPE: spec, "text/plain": f"timeline at t = {self.lab.now} ms"}, raw=True)

    def _draw_diagram(self) -> None:
        choice = self.diagram_choice.value
        group = self.lab.coordinator.groups.get(self.group_id)
        name = self.member_choice.value
        client = self.lab.clients.get(name) if name else None
        if choice == "member state":
            last = self._last_transition(name)
            machine = CLASSIC_MEMBER_MACHINE if isinstance(client, ClassicConsumer) else CONSUMER_MEMBER_MACHINE
            dot = machine_dot(machine, current=client.state.value if client else None, last_transition=last)
        elif choice == "reconciliation":
            member = group.members.get(client.member_id) if group and client else None
            dot = machine_dot(RECONCILIATION_MACHINE, current=member.state.value if member else None)
        elif choice == "group state" and self.group_id in self.lab.coordinator.share_groups:
            share_group = self.lab.coordinator.share_groups[self.group_id]
            dot = machine_dot(SHARE_GROUP_STATE_MACHINE, current=share_group.state.value)
        elif choice == "group state" and self.group_id in self.lab.coordinator.classic_groups:
            classic = self.lab.coordinator.classic_groups[self.group_id]
            dot = machine_dot(CLASSIC_GROUP_STATE_MACHINE, current=classic.state.value)
        elif choice == "group state":
            dot = machine_dot(GROUP_STATE_MACHINE, current=group.state.value if group else None)
        elif choice == "record state":
            dot = machine_dot(RECORD_STATE_MACHINE)
        else:
            if group is None:
                self.diagram.value = "<i>the group does not exist yet</i>"
                return
            dot = group_dot(group, self.lab.cluster)
        rendered = render(dot, format="svg")
        if isinstance(rendered, bytes):
            rendered = rendered.decode()
        self.diagram.value = rendered if rendered.lstrip().startswith("<") else f"<pre>{html.escape(rendered)}</pre>"

    def _last_transition(self, member: str | None) -> dict | None:
        step = self.lab.step_count
        for event in reversed(self._full):
            if event.step > step:
                continue
            if event.kind.value == "state_transition" and event.actor == member:
                return event.payload if event.step == step else None
        return None

    def _draw_records(self) -> None:
        rows = []
        for event in self._full.at_step(self.lab.step_count):
            if event.kind.value in ("share_state_write", "share_state_rpc"):  # __share_group_state records
                for record in event.payload.get("records", []):
                    value = html.escape(str(record["value"]))
                    rows.append(
                        f"<tr><td>{html.escape(record['type'])}</td><td>{event.actor}</td><td>{value}</td></tr>"
                    )
                continue
            for record in event.payload.get("records", []) if event.kind.value == "handler_result" else ():
                key = dict(record["key"])
                kind = key.pop("type", "")
                value = "tombstone" if record["value"] is None else html.escape(str(record["value"]))
                rows.append(f"<tr><td>{html.escape(kind)}</td><td>{html.escape(str(key))}</td><td>{value}</td></tr>")
        self.records.value = "<table>" + "".join(rows) + "</table>" if rows else "<i>none</i>"

    def _draw_lights(self) -> None:
        step = self.lab.step_count
        broken = {
            e.payload.get("invariant") for e in self._full if e.kind.value == "invariant_violated" and e.step <= step
        }
        self.lights.value = "<br>".join(
            f"<span title='{html.escape(text)}'>{'🔴' if name in broken else '🟢'} {html.escape(name)}</span>"
            for name, text in INVARIANTS.items()
        )
