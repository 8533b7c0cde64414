"""Step through a Lab run in a notebook: controls, what just happened, timeline, diagram, records.

The stepper is a view over one run, laid out for a laptop screen (1366 x 768): the controls,
the step counter, one plain-language line saying what the step did, a step axis, the
timeline and the diagram are visible together; the records and invariant lights sit below.

It owns its run: it steps a fork of the Lab it is given, taken at the end of what that Lab
has run, so cells that later run the notebook's Lab further never move what it shows. Its
steps are that run's and no more: Step, Next change and Play stop at its last step and say
so (a fault from the fault panel forks the stepper's run and makes a new ending). Every
control ends in ``Lab.seek``, then redraws:

* the step axis: the steps around the current one, what kind of thing happened at each, and
  a cursor on the current step, so every click moves something;
* the timeline (ownership swimlanes over epochs, or the message sequence) with a cursor at
  the current time — the charts are built once per run and only the cursor moves;
* a diagram drawn from a machine's own table (the chosen member's client state, its
  reconciliation state on the coordinator, the group state) or the group picture, scaled to
  its panel; a large machine is drawn around its current state unless *whole machine* is on;
* the records the coordinator wrote at this step, and one light per invariant that applies to
  the run (a KIP-848 run shows no share-group invariants, and so on).

JupyterLab swallows exceptions raised in widget callbacks, so every callback writes its
errors into the visible ``errors`` pane instead.

A widget is drawn only by a running kernel: a notebook opened untrusted (a clone, Binder) or
before it is run would show a line of Python instead. So the stepper is displayed with a
picture of the view it opened on (``first_view``: the counter, what happened, the step axis,
the timeline and the diagram as images), which JupyterLab shows until the widget can be drawn.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import re
import traceback
from collections.abc import Callable
from typing import Any

import ipywidgets as W
from IPython.display import display

from kip_lab.clients.classic_consumer import ClassicConsumer
from kip_lab.clients.classic_member_state import CLASSIC_MEMBER_MACHINE
from kip_lab.clients.member_state import CONSUMER_MEMBER_MACHINE
from kip_lab.contract import checked, known, refuse
from kip_lab.coordinator import CLASSIC_GROUP_STATE_MACHINE, GROUP_STATE_MACHINE, RECONCILIATION_MACHINE
from kip_lab.events import (
    ActionApplied,
    AssignmentChanged,
    CallbackCompleted,
    CallbackInvoked,
    CommitResult,
    Event,
    FaultInjected,
    HandlerResult,
    InvariantViolated,
    MessageDelivered,
    MessageDropped,
    MessageSent,
    Note,
    PositionSet,
    RecordsProcessed,
    ShareAcquired,
    ShareStateRpc,
    ShareStateWrite,
    StateTransition,
    TimerFired,
)
from kip_lab.lab import Lab, Trace, TraceEvent
from kip_lab.lab.invariants import INVARIANTS
from kip_lab.lab.ledger import LEDGER_INVARIANTS
from kip_lab.lab.share_invariants import SHARE_INVARIANTS
from kip_lab.lab.story import rereads_by_step
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
TIMELINE_WIDTH = 340  # px: with its axis and legend, the timeline's part of a 1366 px wide JupyterLab page
DIAGRAM_MAX_HEIGHT = 330  # px: with the controls and the timeline, one 768 px high screen
DIAGRAM_MAX_WIDTH = 520  # px: the diagram's part of the page in the stored first view
STEP_WINDOW = 50  # steps on the step axis at once
STEP_AXIS_WIDTH = 900  # px: scaled down to the page when narrower
RENDERED_CACHE = 256  # diagrams kept rendered (Back and Step over the same states cost nothing)
# the rule names that apply to each kind of run (see kip_lab.lab.invariants)
CLASSIC_INVARIANTS = ("single-owner", "epochs-never-go-back", "classic-assignment-disjoint", *LEDGER_INVARIANTS)
CONSUMER_INVARIANTS = (
    "single-owner",
    "epochs-never-go-back",
    "target-covers-subscriptions",
    "stable-means-converged",
    "partition-epochs-match-ownership",
    *LEDGER_INVARIANTS,
)
# what the step axis marks, in drawing order (later kinds are drawn over earlier ones)
AXIS_KINDS = {
    "message": ("#9ecae1", "a message sent, delivered or dropped"),
    "records": ("#2ca02c", "the coordinator wrote records"),
    "change": ("#ff7f0e", "a state, ownership or epoch changed"),
    "fault": ("#d62728", "a fault or a broken invariant"),
}
EPOCH_RECORDS = frozenset(
    {
        "ConsumerGroupMetadataKey",
        "ConsumerGroupMemberMetadataKey",
        "ConsumerGroupTargetAssignmentMetadataKey",
        "ConsumerGroupTargetAssignmentMemberKey",
        "ConsumerGroupCurrentMemberAssignmentKey",
        "GroupMetadataKey",
        "ShareGroupMetadataKey",
        "ShareGroupMemberMetadataKey",
        "ShareGroupTargetAssignmentMemberKey",
        "ShareGroupCurrentMemberAssignmentKey",
    }
)


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


# ---------------------------------------------------------------------- what a step did, in words
def _partitions(pairs: Any, topic_name: Callable[[str], str]) -> str:
    names = sorted(f"{topic_name(t)}-{p}" for t, p in pairs)
    return ", ".join(names) if names else "nothing"


def _message_detail(body: dict[str, Any]) -> str:
    details = []
    if "member_epoch" in body:
        details.append(f"epoch {body['member_epoch']}")
    if body.get("assignment"):
        details.append("with an assignment")
    if body.get("error_code"):
        details.append(f"error {body['error_code']}")
    return f" ({', '.join(details)})" if details else ""


def describe_event(event: TraceEvent, topic_name: Callable[[str], str] = str) -> str | None:
    """One event as a short plain-language clause, or None for bookkeeping nobody needs to read."""
    describe = _DESCRIBE.get(type(event.body))
    if describe is None:
        return f"{event.actor}: {event.kind.value.replace('_', ' ')}"
    return describe(event.actor, event.body, topic_name)


def _handler_result(actor: str, e: HandlerResult, topic_name: Callable[[str], str]) -> str | None:
    types = sorted({r["key"].get("type", "?").removesuffix("Key") for r in e.records})
    return f"{actor} wrote {', '.join(types)}" if types else None


def _action(actor: str, e: ActionApplied, topic_name: Callable[[str], str]) -> str:
    what = " ".join(str(v) for k, v in e.fields.items() if k in ("member", "topic", "count", "partitions"))
    prefix = "fault: " if isinstance(e, FaultInjected) else ""
    return f"{prefix}{e.name.replace('_', ' ')} {what}".strip()


# How the stepper words each kind of event (the actor, the event, and how to name a topic id).
_DESCRIBE: dict[type[Event], Callable[[str, Any, Callable[[str], str]], str | None]] = {
    MessageSent: lambda actor, e, _: f"{e.source} sent {e.api}{_message_detail(e.body)} to {e.destination}",
    MessageDelivered: lambda actor, e, _: f"{e.destination} received {e.source}'s {e.api}",
    MessageDropped: lambda actor, e, _: f"the network dropped {e.source}'s {e.api} to {e.destination} ({e.reason})",
    HandlerResult: _handler_result,
    TimerFired: lambda actor, e, _: f"{actor}: timer fired ({' '.join(map(str, e.timer))})",
    StateTransition: lambda actor, e, _: f"{actor}: {e.from_state} → {e.to_state} ({e.trigger})",
    AssignmentChanged: lambda actor, e, topic_name: f"{actor} now owns {_partitions(e.owned or (), topic_name)}",
    CallbackInvoked: lambda actor, e, _: f"{actor} calls {e.callback}({', '.join(e.partitions)})",
    CallbackCompleted: lambda actor, e, _: f"{actor}'s {e.callback} {'returned' if e.ok else 'failed'}",
    ActionApplied: _action,
    FaultInjected: _action,
    InvariantViolated: lambda actor, e, _: f"invariant broken: {e.invariant}",
    Note: lambda actor, e, _: f"{actor}: {e.text}",
    PositionSet: lambda actor, e, topic_name: (
        f"{actor} starts {topic_name(e.topic_id)}-{e.partition} at {e.offset} ({e.reason})"
    ),
    RecordsProcessed: lambda actor, e, _: (
        f"{actor} processed {sum(end - first for *_, first, end, _ in e.ranges)} records"
    ),
    CommitResult: lambda actor, e, _: (
        f"{actor}'s commit ({e.cause}) "
        + ("failed: " + ", ".join(sorted({err for *_, err in e.offsets if err})) if e.failed else "succeeded")
    ),
}


def describe_step(events: list, topic_name: Callable[[str], str] = str) -> str:
    """What one step did, in one line: who sent what, what changed."""
    clauses = [c for c in (describe_event(e, topic_name) for e in events) if c]
    return "; ".join(clauses) if clauses else "nothing visible happened (the start of the run, or bookkeeping)"


def axis_kind(event: Any, owned_before: dict[str, Any]) -> str | None:
    """Which step-axis mark an event earns (see ``AXIS_KINDS``); updates ``owned_before``."""
    body = event.body
    if isinstance(body, FaultInjected | InvariantViolated):
        return "fault"
    if isinstance(body, StateTransition | ShareStateWrite | ShareAcquired):
        return "change"
    if isinstance(body, AssignmentChanged):
        owned = body.owned or ()
        changed = owned_before.get(event.actor) != owned
        owned_before[event.actor] = owned
        return "change" if changed else None
    if isinstance(body, HandlerResult):
        types = {r["key"].get("type") for r in body.records}
        return "change" if types & EPOCH_RECORDS else "records" if types else None
    if isinstance(body, MessageSent | MessageDelivered | MessageDropped):
        return "message"
    return None


def step_axis_svg(marks: dict[int, str], current: int, horizon: int, width: int = STEP_AXIS_WIDTH) -> str:
    """The steps around ``current`` as a strip: a mark per step that did something, a cursor on ``current``.

    The window shows ``STEP_WINDOW`` steps and moves in whole windows, so the cursor moves
    ``width / STEP_WINDOW`` pixels on every Step and the numbers under it say where it is.
    """
    first = (current // STEP_WINDOW) * STEP_WINDOW
    last = first + STEP_WINDOW
    left, right, top = 8, width - 8, 16

    def x(step: int) -> float:
        return left + (step - first) * (right - left) / STEP_WINDOW

    order = list(AXIS_KINDS)
    parts = [
        f'<svg class="kip-step-axis" width="{width}" height="46" viewBox="0 0 {width} 46" '
        'xmlns="http://www.w3.org/2000/svg" style="max-width:100%;font:10px sans-serif">',
        f'<line x1="{left}" x2="{right}" y1="{top + 14}" y2="{top + 14}" stroke="#999"/>',
    ]
    for step in range(first, min(last, horizon) + 1):
        kind = marks.get(step)
        if kind is not None:
            color = AXIS_KINDS[kind][0]
            height = 6 + 3 * order.index(kind)
            parts.append(
                f'<rect x="{x(step) - 4:.1f}" y="{top + 14 - height}" width="8" height="{height}" fill="{color}">'
                f"<title>step {step}: {html.escape(AXIS_KINDS[kind][1])}</title></rect>"
            )
        if step % 10 == 0:
            parts.append(f'<text x="{x(step):.1f}" y="{top + 26}" text-anchor="middle" fill="#555">{step}</text>')
    cx = x(current)
    parts.append(
        f'<g class="kip-step-cursor" data-step="{current}"><line x1="{cx:.1f}" x2="{cx:.1f}" y1="{top - 2}" '
        f'y2="{top + 16}" stroke="#000" stroke-width="2"/><path d="M{cx - 5:.1f},{top - 8} h10 l-5,6 z"/></g>'
    )
    legend_x: float = left
    for color, text in AXIS_KINDS.values():
        parts.append(f'<rect x="{legend_x}" y="2" width="8" height="8" fill="{color}"/>')
        parts.append(f'<text x="{legend_x + 11}" y="10" fill="#333">{html.escape(text)}</text>')
        legend_x += 14 + 5.6 * len(text) + 12
    parts.append("</svg>")
    return "".join(parts)


def _svg_size(svg: str) -> tuple[float, float]:
    """An SVG's width and height in CSS pixels (graphviz writes points: 1 pt = 4/3 px)."""
    head = svg[svg.index("<svg") : svg.index(">", svg.index("<svg"))]
    sizes = []
    for name in ("width", "height"):
        found = re.search(rf'\b{name}="([\d.]+)(pt|px)?"', head)
        if found is None:
            raise ValueError(f"the SVG has no {name}: {head[:200]!r}")
        sizes.append(float(found.group(1)) * (4 / 3 if found.group(2) == "pt" else 1))
    return sizes[0], sizes[1]


def fit_svg(svg: str, max_height: int = DIAGRAM_MAX_HEIGHT) -> str:
    """A graphviz SVG scaled to its panel: as wide as the panel, never taller than ``max_height``."""
    head_end = svg.index(">", svg.index("<svg"))
    head = svg[: head_end + 1]
    head = " ".join(part for part in head.split(" ") if not part.startswith(("width=", "height=")))
    style = f'style="display:block;width:100%;height:auto;max-height:{max_height}px"'
    return head.replace("<svg", f"<svg {style}", 1) + svg[head_end + 1 :]


def own_run(lab: Lab) -> Lab:
    """A fork of ``lab`` at the end of what it has run, for a stepper to own; ``lab`` stays where it was."""
    here = lab.step_count
    lab.seek(lab.horizon)
    run = lab.fork()
    lab.seek(here)
    return run


def applicable_invariants(lab: Lab, group_id: str) -> list[str]:
    """The invariant names that can apply to this run: share, classic or consumer-group ones."""
    coordinator = lab.coordinator
    if group_id in coordinator.share_groups:
        return list(SHARE_INVARIANTS)
    classic_clients = any(isinstance(c, ClassicConsumer) for c in lab.clients.values())
    if group_id in coordinator.classic_groups and group_id not in coordinator.groups:
        return list(CLASSIC_INVARIANTS)
    names = list(CONSUMER_INVARIANTS)
    if classic_clients:
        names.append("classic-assignment-disjoint")
    return names


# ---------------------------------------------------------------------- the widget
class Stepper(W.VBox):
    """Play/Pause, Back, Step, Next change, a slider over steps and a speed control around one run.

    The run is a fork of ``lab`` at the end of what it has run (``lab`` itself is left where
    it was). The stepper opens at ``start_step`` (step 0, before anything happened, by
    default); stepping forward and back is a seek, not a simulation.
    """

    @checked
    def __init__(self, lab: Lab, *, group_id: str = "g", member: str | None = None, start_step: int = 0) -> None:
        if not 0 <= start_step <= lab.horizon:
            outside = f"{start_step} is outside the run: choose a step from 0 to {lab.horizon}"
            raise refuse("Stepper", "start_step", outside)
        if member is not None:
            known("Stepper", "member", member, lab.clients)
        self.lab = own_run(lab)
        self.group_id = group_id
        self._full = Trace()
        self._rereads: dict[int, list[str]] = {}
        self._frames: Any = None
        self._specs: dict[str, str] = {}
        self._marks: dict[int, str] = {}
        self._change_steps: list[int] = []
        self._rendered: dict[str, str] = {}
        self._timeline_shown: tuple | None = None
        self.errors = W.Output(layout=W.Layout(border="1px solid #d62728", display="none"))
        self._make_controls(self.lab.horizon)
        self._make_views(self.lab, member)
        self.invariant_names = applicable_invariants(self.lab, group_id)
        self.lights = W.HTML()
        self._connect()
        super().__init__(self._panels(), layout=W.Layout(width="100%"))
        self.reload(start_step)

    def _make_controls(self, horizon: int) -> None:
        """Play, the step slider (linked to Play), the speed, and the Back, Step and Next change buttons."""
        self.play = W.Play(min=0, max=max(horizon, 1), interval=500, description="Play", show_repeat=False)
        self.slider = W.IntSlider(
            min=0,
            max=max(horizon, 1),
            description="step",
            continuous_update=False,
            layout=W.Layout(flex="1 1 auto", min_width="200px"),
        )
        W.jslink((self.play, "value"), (self.slider, "value"))
        self.speed = W.IntSlider(
            value=500, min=50, max=2000, step=50, description="ms/step", layout=W.Layout(width="230px")
        )
        self.back_button = W.Button(description="◀ Back", tooltip="one step back", layout=W.Layout(width="80px"))
        self.step_button = W.Button(
            description="Step ▶",
            tooltip="one step: one event",
            layout=W.Layout(width="80px"),
        )
        self.next_button = W.Button(
            description="Next change ▶▶",
            tooltip="to the next step that changes a state, an owner or an epoch",
            layout=W.Layout(width="140px"),
        )

    def _make_views(self, lab: Lab, member: str | None) -> None:
        """The step's counter and summary, the timeline with its choice, the diagram with its choices, the records."""
        self.counter = W.HTML()
        self.happened = W.HTML(layout=W.Layout(min_height="22px"))
        self.axis = W.HTML()
        self.timeline_choice = W.Dropdown(options=TIMELINES, value=TIMELINES[0], description="timeline")
        self.timeline = W.Output(layout=W.Layout(max_height=f"{DIAGRAM_MAX_HEIGHT + 40}px", overflow="auto"))
        members = sorted(n for n, c in lab.clients.items() if hasattr(c, "state"))
        self.member_choice = W.Dropdown(
            options=members,
            value=member or (members[0] if members else None),
            description="member",
            layout=W.Layout(width="150px"),
            style={"description_width": "55px"},
        )
        self.diagram_choice = W.Dropdown(
            options=DIAGRAMS,
            value=DIAGRAMS[0],
            description="diagram",
            layout=W.Layout(width="210px"),
            style={"description_width": "55px"},
        )
        self.whole_machine = W.Checkbox(value=False, description="whole machine", indent=False)
        self.diagram = W.HTML(layout=W.Layout(width="100%"))
        self.records = W.HTML()

    def _connect(self) -> None:
        self.speed.observe(self._on_speed, "value")
        self.slider.observe(self._on_slider, "value")
        self.back_button.on_click(self._on_back)
        self.step_button.on_click(self._on_step)
        self.next_button.on_click(self._on_next_change)
        for choice in (self.timeline_choice, self.member_choice, self.diagram_choice, self.whole_machine):
            choice.observe(self._on_view, "value")

    def _panels(self) -> list[W.Widget]:
        """Controls on top; the timeline beside the diagram; the step's records beside the invariant lights."""
        controls = W.HBox(
            [self.play, self.back_button, self.step_button, self.next_button, self.slider, self.speed],
            layout=W.Layout(flex_flow="row wrap", align_items="center"),
        )
        # the timeline at its own width (a fixed-width chart and its legends), the diagram in the rest
        timeline_panel = W.VBox(
            [self.timeline_choice, self.timeline], layout=W.Layout(flex="0 0 auto", min_width="0", overflow="hidden")
        )
        diagram_panel = W.VBox(
            [
                W.HBox(
                    [self.diagram_choice, self.member_choice, self.whole_machine],
                    layout=W.Layout(flex_flow="row wrap"),
                ),
                self.diagram,
            ],
            layout=W.Layout(flex="1 1 0", min_width="0", overflow="hidden"),
        )
        details = W.HBox(
            [
                W.VBox(
                    [W.HTML("<b>records written at this step</b>"), self.records],
                    layout=W.Layout(flex="3 1 0", min_width="0", overflow="auto"),
                ),
                W.VBox(
                    [W.HTML("<b>invariants of this run</b>"), self.lights],
                    layout=W.Layout(flex="2 1 0", min_width="0"),
                ),
            ]
        )
        return [
            controls,
            self.counter,
            self.happened,
            self.axis,
            W.HBox([timeline_panel, diagram_panel], layout=W.Layout(width="100%")),
            details,
            self.errors,
        ]

    # ------------------------------------------------------------------ run bookkeeping
    def reload(self, step: int | None = None) -> None:
        """Rebuild the frames after the run grew or forked; show ``step`` (the current one by default)."""
        here = self.lab.step_count if step is None else step
        if self.lab.horizon > self.lab.step_count:
            self.lab.seek(self.lab.horizon)
        self._full = Trace(self.lab.trace)
        self._frames = trace_frames(self._full)
        self._rereads = rereads_by_step(self._full)
        self._specs = {}
        self._timeline_shown = None
        owned: dict[str, Any] = {}
        marks: dict[int, str] = {}
        order = list(AXIS_KINDS)
        for event in self._full:
            kind = axis_kind(event, owned)
            if kind is not None and order.index(kind) >= order.index(marks.get(event.step, kind)):
                marks[event.step] = kind
        self._marks = marks
        self._change_steps = sorted(s for s, kind in marks.items() if kind in ("change", "fault"))
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
        """Show the state right after ``step`` (what every control ends in); past the run's last
        step, stay on it and say so."""
        if step > self.lab.horizon:
            self._at_the_end(f"step {self.lab.horizon} is the last step of this run")
            return
        self.lab.seek(max(0, step))
        self._set_slider(self.lab.step_count)
        self.redraw()

    def _at_the_end(self, why: str) -> None:
        """Stay where the view is and say why nothing moved."""
        self.happened.value = f"<b>the end of the run:</b> {html.escape(why)}; ◀ Back or the slider go back over it"

    def next_change_step(self) -> int | None:
        """The first step after the current one that changes a state, an owner or an epoch (or faults)."""
        later = [s for s in self._change_steps if s > self.lab.step_count]
        return later[0] if later else None

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
    def _on_next_change(self, _button: Any) -> None:
        target = self.next_change_step()
        if target is None:
            self._at_the_end(f"nothing changes after step {self.lab.step_count} (the run has {self.lab.horizon} steps)")
            return
        self.go(target)

    @reports_errors
    def _on_view(self, _change: dict) -> None:
        self.redraw()

    # ------------------------------------------------------------------ drawing
    def redraw(self) -> None:
        lab = self.lab
        group = lab.coordinator.groups.get(self.group_id) or lab.coordinator.share_groups.get(self.group_id)
        classic = lab.coordinator.classic_groups.get(self.group_id)
        shown = group or classic
        state = shown.state.value if shown else "—"
        epochs = f"group epoch {group.group_epoch}, assignment epoch {group.assignment_epoch}" if group else ""
        if classic is not None and group is None:
            epochs = f"generation {classic.generation_id}" if hasattr(classic, "generation_id") else ""
        self.counter.value = (
            f"<b>step {lab.step_count}</b> of {lab.horizon} &nbsp; t = {lab.now} ms &nbsp; "
            f"group <code>{html.escape(self.group_id)}</code>: {state} {epochs}"
        )
        told = [describe_step(list(self._full.at_step(lab.step_count)), self._topic_name)]
        told += self._rereads.get(lab.step_count, [])
        self.happened.value = "<b>what just happened:</b> " + html.escape("; ".join(told))
        self.axis.value = step_axis_svg(self._marks, lab.step_count, lab.horizon)
        # the small updates first: the browser shows them before it lays out the timeline's chart
        self._draw_diagram()
        self._draw_records()
        self._draw_lights()
        self._draw_timeline()

    def _topic_name(self, topic_id: str) -> str:
        topic = self.lab.cluster.topic_by_id(topic_id)
        return topic.name if topic is not None else topic_id

    def timeline_spec(self) -> dict:
        """The Vega-Lite spec of the chosen timeline with the cursor at the current time."""
        view = self.timeline_choice.value
        if view not in self._specs:
            width = TIMELINE_WIDTH
            if view == TIMELINES[0]:
                chart = ownership_swimlanes(self._frames, cursor_ms=CURSOR_SENTINEL, width=width) & epoch_chart(
                    self._frames, cursor_ms=CURSOR_SENTINEL, width=width, height=100
                )
            elif view == TIMELINES[1]:
                chart = message_sequence(
                    self._frames, cursor_ms=CURSOR_SENTINEL, y_axis="time", width=width, height=DIAGRAM_MAX_HEIGHT
                )
            else:
                try:
                    chart = record_state_strip(self._full, cursor_ms=CURSOR_SENTINEL, width=width, height=200)
                except ValueError as empty:
                    chart = placeholder_chart(str(empty), cursor_ms=CURSOR_SENTINEL)
            self._specs[view] = json.dumps(chart.to_dict(validate=False))
        return json.loads(self._specs[view].replace(repr(CURSOR_SENTINEL), str(self.lab.now)))

    def _draw_timeline(self) -> None:
        # The chart only changes when the time does: many steps happen in the same millisecond.
        key = (self.timeline_choice.value, self.lab.now, len(self._specs) and id(self._frames))
        if key == self._timeline_shown:
            return
        spec = self.timeline_spec()
        self.timeline.clear_output(wait=True)
        with self.timeline:
            display({VEGA_LITE_MIMETYPE: spec, "text/plain": f"timeline at t = {self.lab.now} ms"}, raw=True)
        self._timeline_shown = key

    def _draw_diagram(self) -> None:
        """The chosen diagram; a machine is drawn around its current state unless "whole machine" is ticked."""
        dot = self._diagram_dot()
        self.diagram.value = "<i>the group does not exist yet</i>" if dot is None else self._rendered_diagram(dot)

    def _diagram_dot(self) -> str | None:
        """The chosen diagram's DOT text (``None`` for the group picture before the group exists)."""
        draw = {
            "member state": self._member_state_dot,
            "reconciliation": self._reconciliation_dot,
            "group state": self._group_state_dot,
            "group": self._group_dot,
            "record state": self._record_state_dot,
        }[self.diagram_choice.value]
        return draw(not self.whole_machine.value)

    # ------------------------------------------------------------------ before the kernel runs
    def first_view(self) -> str:
        """The view on screen now as static HTML, the timeline, step axis and diagram as SVG images.

        Stored in the notebook beside the widget, it is what a viewer shows where it cannot draw
        the widget: JupyterLab before the notebook is run or trusted, GitHub, nbconvert.
        """
        import vl_convert as vlc

        def image(svg: str, width: float, alt: str) -> str:
            data = base64.b64encode(svg.encode()).decode("ascii")
            return f'<img src="data:image/svg+xml;base64,{data}" width="{round(width)}" alt="{html.escape(alt)}">'

        timeline = vlc.vegalite_to_svg(self.timeline_spec(), allowed_base_urls=[])
        cells = [image(timeline, _svg_size(timeline)[0], f"timeline at t = {self.lab.now} ms")]
        dot = self._diagram_dot()
        if dot is not None:
            diagram = self._svg(dot)
            if diagram.lstrip().startswith("<"):
                width, height = _svg_size(diagram)
                shown = min(width, DIAGRAM_MAX_WIDTH, width * DIAGRAM_MAX_HEIGHT / height)
                cells.append(image(diagram, shown, f"{self.diagram_choice.value} diagram"))
        row = "".join(f'<td style="vertical-align:top">{cell}</td>' for cell in cells)
        return (
            '<div class="kip-stepper-first-view">'
            f"<p>{self.counter.value}</p><p>{self.happened.value}</p>"
            f"<p>{image(self.axis.value, STEP_AXIS_WIDTH, f'step axis at step {self.lab.step_count}')}</p>"
            f"<table><tr>{row}</tr></table>"
            "<p><i>A picture of the stepper as it opens. Run the notebook (Run → Run All Cells) to "
            "step through the run.</i></p></div>"
        )

    def with_first_view(self, bundle: dict[str, Any]) -> dict[str, Any]:
        """A widget's display bundle with ``first_view`` beside it (HTML, and a line of text)."""
        where = f"step {self.lab.step_count} of {self.lab.horizon}, t = {self.lab.now} ms"
        return {**bundle, "text/html": self.first_view(), "text/plain": f"the stepper at {where}"}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.with_first_view(super()._repr_mimebundle_(**kwargs))

    def _chosen_client(self) -> Any:
        name = self.member_choice.value
        return self.lab.clients.get(name) if name else None

    def _member_state_dot(self, focus: bool) -> str:
        """The chosen client's member machine (classic or consumer), with the transition it took last."""
        client = self._chosen_client()
        last = self._last_transition(self.member_choice.value)
        machine = CLASSIC_MEMBER_MACHINE if isinstance(client, ClassicConsumer) else CONSUMER_MEMBER_MACHINE
        current = client.state.value if client else None
        return self._machine(machine, focus, current=current, last_transition=last)

    def _reconciliation_dot(self, focus: bool) -> str:
        """The coordinator's reconciliation state of the chosen member."""
        group = self.lab.coordinator.groups.get(self.group_id)
        client = self._chosen_client()
        member = group.members.get(client.member_id) if group and client else None
        return self._machine(RECONCILIATION_MACHINE, focus, current=member.state.value if member else None)

    def _group_state_dot(self, focus: bool) -> str:
        """The group's state machine: a share group's (three states, drawn whole), a classic or a consumer group's."""
        coordinator = self.lab.coordinator
        if self.group_id in coordinator.share_groups:
            return machine_dot(SHARE_GROUP_STATE_MACHINE, current=coordinator.share_groups[self.group_id].state.value)
        if self.group_id in coordinator.classic_groups:
            classic = coordinator.classic_groups[self.group_id]
            return self._machine(CLASSIC_GROUP_STATE_MACHINE, focus, current=classic.state.value)
        group = coordinator.groups.get(self.group_id)
        return self._machine(GROUP_STATE_MACHINE, focus, current=group.state.value if group else None)

    def _group_dot(self, focus: bool) -> str | None:
        """Members, partitions and who holds what; ``None`` before the group exists."""
        group = self.lab.coordinator.groups.get(self.group_id)
        return None if group is None else group_dot(group, self.lab.cluster)

    def _record_state_dot(self, focus: bool) -> str:
        """A share record's states (four, drawn whole)."""
        return machine_dot(RECORD_STATE_MACHINE)

    def _machine(self, machine: Any, focus: bool, **options: Any) -> str:
        """A machine's DOT; drawn around its current state, laid out left to right or top to bottom,
        whichever is narrower: the panel scales a diagram to its width, so narrower reads larger."""
        if not focus:
            return machine_dot(machine, **options)
        layouts = [machine_dot(machine, focus=True, rankdir=rankdir, **options) for rankdir in ("LR", "TB")]
        return min(layouts, key=self._natural_width)

    def _svg(self, dot: str) -> str:
        """Graphviz's SVG of ``dot`` (or the text explaining why there is none), kept for the next visit."""
        if dot not in self._rendered:
            rendered = render(dot, format="svg")
            if len(self._rendered) >= RENDERED_CACHE:
                self._rendered.clear()
            self._rendered[dot] = rendered.decode() if isinstance(rendered, bytes) else rendered
        return self._rendered[dot]

    def _natural_width(self, dot: str) -> float:
        svg = self._svg(dot)
        return _svg_size(svg)[0] if svg.lstrip().startswith("<") else 0.0

    def _rendered_diagram(self, dot: str) -> str:
        svg = self._svg(dot)
        return fit_svg(svg) if svg.lstrip().startswith("<") else f"<pre>{html.escape(svg)}</pre>"

    def _last_transition(self, member: str | None) -> StateTransition | None:
        """The member's state transition at the current step, if it made one (the last, if several)."""
        taken = [
            e.body
            for e in self._full.at_step(self.lab.step_count)
            if isinstance(e.body, StateTransition) and e.actor == member
        ]
        return taken[-1] if taken else None

    def _draw_records(self) -> None:
        rows = []
        for event in self._full.at_step(self.lab.step_count):
            body = event.body
            if isinstance(body, ShareStateWrite | ShareStateRpc):  # __share_group_state records
                for record in body.records:
                    value = html.escape(str(record["value"]))
                    rows.append(
                        f"<tr><td>{html.escape(record['type'])}</td><td>{event.actor}</td><td>{value}</td></tr>"
                    )
                continue
            for record in body.records if isinstance(body, HandlerResult) else ():
                key = dict(record["key"])
                kind = key.pop("type", "")
                value = "tombstone" if record["value"] is None else html.escape(str(record["value"]))
                rows.append(f"<tr><td>{html.escape(kind)}</td><td>{html.escape(str(key))}</td><td>{value}</td></tr>")
        table = "<table>" + "".join(rows) + "</table>"
        self.records.value = table if rows else "<i>none</i>"

    def _draw_lights(self) -> None:
        step = self.lab.step_count
        broken = {e.body.invariant for e in self._full.of_type(InvariantViolated) if e.step <= step}
        self.lights.value = "<br>".join(
            f"<span title='{html.escape(INVARIANTS[name])}'>{'🔴' if name in broken else '🟢'} "
            f"{html.escape(name)}</span>"
            for name in self.invariant_names
        )
