"""State machines and consumer groups as graphviz DOT text.

``machine_dot`` and ``group_dot`` are pure: they return DOT source built from the data
(the machine's transition table, a ``ConsumerGroup``'s replayed state, a trace's
``StateTransition``) and need nothing beyond the standard library. ``render`` is the only
function that needs the ``graphviz`` package and the ``dot`` executable, and it degrades to a
message plus the source when they are missing, so a notebook without graphviz still shows
something useful.

Output is deterministic: states in the machine's declared order, edges sorted by
(source, target) in that order with their triggers in declaration order, members sorted by
id, partitions by (topic name, partition). Every node and edge carries an ``id`` attribute
(``state:…``, ``edge:…``, ``member:…``, ``partition:…``, ``assigned:…``, ``pending:…``,
``revoking:…``) so tests and SVG styling can find them without parsing labels.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kip_lab.contract import checked, refuse
from kip_lab.events import StateTransition
from kip_lab.machines import StateMachine, Transition

FONT = "Helvetica"
# Label sizes in points. Pictures are stored at 1 pt = 1 CSS px and scaled down to the page: an
# 11 pt edge label stays at 10 px or more on a diagram up to 10% wider than a 1366 px laptop's
# notebook column, which trigger labels wrapped at LABEL_WRAP characters keep most machines within.
NODE_FONT_PT = 12
EDGE_FONT_PT = 11
LABEL_WRAP = 22
CURRENT_FILL = "#ffd54f"
TAKEN_COLOR = "#d62728"
TAKEN_MARK = "\u25b6 "  # prefixed to the trigger just taken when an edge merges several

ASSIGNED_COLOR = "#333333"
PENDING_COLOR = "#1f77b4"
REVOKING_COLOR = "#d62728"
UNOWNED_FILL = "#ffcdd2"
MEMBER_FILLS = {
    "STABLE": "#c8e6c9",
    "UNREVOKED_PARTITIONS": "#ffe0b2",
    "UNRELEASED_PARTITIONS": "#fff9c4",
    "UNKNOWN": "#e0e0e0",
}

DOT_MISSING_MESSAGE = (
    "graphviz could not render this diagram: the 'dot' executable (apt-get install graphviz) "
    "or the 'graphviz' Python package (pip install 'kip-lab[viz]') is missing. DOT source follows."
)


# ---------------------------------------------------------------------------- DOT text helpers
def quote(text: Any) -> str:
    """A DOT double-quoted string; newlines become DOT's centred line break ``\\n``."""
    s = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{s}"'


def _attrs(attrs: Mapping[str, Any]) -> str:
    if not attrs:
        return ""
    return " [" + ", ".join(f"{k}={quote(v)}" for k, v in attrs.items()) + "]"


def _node(name: str, **attrs: Any) -> str:
    return f"  {quote(name)}{_attrs(attrs)};"


def _edge(source: str, target: str, **attrs: Any) -> str:
    return f"  {quote(source)} -> {quote(target)}{_attrs(attrs)};"


def _header(name: str, graph: Mapping[str, Any]) -> list[str]:
    return [
        f"digraph {quote(name)} {{",
        f"  graph{_attrs(graph)};",
        f"  node{_attrs({'fontname': FONT, 'fontsize': NODE_FONT_PT})};",
        f"  edge{_attrs({'fontname': FONT, 'fontsize': EDGE_FONT_PT})};",
    ]


# ---------------------------------------------------------------------------- state machines
INITIAL_NODE = "__initial__"
SMALL_MACHINE_EDGES = 8  # up to this many edges a machine is drawn left to right, beyond it top to bottom
SHARED_TRIGGER_SOURCES = 4  # this many edges into one state with the same trigger: labelled once, at the state


def _normalise_transition(machine: StateMachine, last: Any) -> tuple[str, str | None, str]:
    """(source, trigger or None, target) from a Transition, a trace's StateTransition, a 3-tuple or a
    (source, target) pair."""
    trigger: str | None
    if isinstance(last, Transition):
        source, trigger, target = last.source, last.trigger, last.target
    elif isinstance(last, StateTransition):
        source, trigger, target = last.from_state, last.trigger, last.to_state
    else:
        parts = tuple(last)
        if len(parts) == 3:
            source, trigger, target = parts
        elif len(parts) == 2:
            (source, target), trigger = parts, None
        else:
            raise ValueError(f"last_transition must be (source, trigger, target) or (source, target), got {last!r}")
    source, target = str(source), str(target)
    if trigger is None:
        machine.require_edge(source, target)
    else:
        machine.require(source, str(trigger), target)
    return source, None if trigger is None else str(trigger), target


def machine_edges(machine: StateMachine) -> list[tuple[str, str, list[str]]]:
    """(source, target, triggers) per connected pair, sorted by the machine's state order."""
    order = {state: i for i, state in enumerate(machine.states)}
    merged: dict[tuple[str, str], list[str]] = {}
    for t in machine.transitions:
        merged.setdefault((t.source, t.target), []).append(t.trigger)
    pairs = sorted(merged, key=lambda pair: (order[pair[0]], order[pair[1]]))
    return [(source, target, merged[(source, target)]) for source, target in pairs]


@checked
def machine_dot(
    machine: StateMachine,
    current: str | None = None,
    last_transition: Transition | StateTransition | tuple | None = None,
    *,
    rankdir: str | None = None,
    focus: bool = False,
    shared_arrows: bool = True,
) -> str:
    """The machine's table as a DOT digraph.

    One node per state (the initial state has a double border and an arrow from a start
    point); one edge per connected (source, target) pair labelled with its triggers (wrapped,
    all of them in its tooltip). Where ``SHARED_TRIGGER_SOURCES`` or more states reach one
    state by the same triggers (FATAL on "fatal error"), the target names the triggers once and
    those arrows go unlabelled — or undrawn with ``shared_arrows=False``, the target then saying
    from how many states: a whole large machine that fits a laptop's page.

    ``current`` fills that state; ``last_transition`` — a ``Transition``, a
    ``(source, trigger, target)`` or ``(source, target)`` tuple, or a trace's
    ``StateTransition`` — draws that edge bold and red and marks the trigger taken with ▶.
    Both are checked against the table: highlighting an undeclared state or edge raises.

    ``rankdir`` defaults to the layout that fits a page: left to right for a small machine,
    top to bottom for one with many edges (its trigger labels would make a row of states
    wider than a laptop screen). ``focus=True`` draws only what is one transition away from
    ``current`` (or from the initial state when there is no current one) and the edge just
    taken, so a large machine stays readable in a small panel; the whole machine is drawn
    otherwise.
    """
    if current is not None and current not in machine.states:
        raise ValueError(f"{machine.name}: current state {current!r} is not a state of the machine")
    taken = None if last_transition is None else _normalise_transition(machine, last_transition)
    states, edges = list(machine.states), machine_edges(machine)
    if focus:
        states, edges = _focused(machine, edges, current, taken)
    if rankdir is None:
        rankdir = "LR" if len(edges) <= SMALL_MACHINE_EDGES else "TB"
    shared = _shared_triggers(edges)
    if not shared_arrows:
        sources = {
            target: sum(1 for _, t, ts in edges if t == target and ts == triggers)
            for target, triggers in shared.items()
        }
        edges = [e for e in edges if shared.get(e[1]) != e[2] or (taken is not None and (taken[0], taken[2]) == e[:2])]
    lines = _header(machine.name, _machine_graph_attrs(machine, rankdir))
    notes = {
        target: f"(unlabelled arrows in:\n{_wrapped(triggers)})"
        if shared_arrows
        else f"(from {sources[target]} states, arrows not drawn:\n{_wrapped(triggers)})"
        for target, triggers in shared.items()
    }
    lines += _state_lines(machine, states, current, notes)
    lines += [
        _edge(source, target, **_edge_attrs(source, target, triggers, taken, labelled=shared.get(target) != triggers))
        for source, target, triggers in edges
    ]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _focused(
    machine: StateMachine,
    edges: list[tuple[str, str, list[str]]],
    current: str | None,
    taken: tuple[str, str | None, str] | None,
) -> tuple[list[str], list[tuple[str, str, list[str]]]]:
    """The states one transition away from the centre (and the source of the edge just taken), with their edges."""
    center = current if current is not None else machine.initial  # before the machine exists: its start
    near = {center} | {t for s, t, _ in edges if s == center} | ({taken[0]} if taken else set())
    states = [s for s in machine.states if s in near]
    return states, [(s, t, triggers) for s, t, triggers in edges if s in near and t in near and center in (s, t)]


def _machine_graph_attrs(machine: StateMachine, rankdir: str) -> dict[str, Any]:
    return {
        "rankdir": rankdir,
        "nodesep": 0.25,
        "ranksep": 0.35,
        "label": machine.name,
        "labelloc": "t",
        "fontname": FONT,
        "tooltip": machine.description or machine.name,
    }


def _shared_triggers(edges: list[tuple[str, str, list[str]]]) -> dict[str, list[str]]:
    """Targets that ``SHARED_TRIGGER_SOURCES`` or more states reach by the same triggers (FATAL on
    "fatal error"): those edges go unlabelled and the triggers are written once, under the target."""
    counts: dict[tuple[str, tuple[str, ...]], int] = {}
    for _source, target, triggers in edges:
        counts[target, tuple(triggers)] = counts.get((target, tuple(triggers)), 0) + 1
    return {target: list(triggers) for (target, triggers), n in counts.items() if n >= SHARED_TRIGGER_SOURCES}


def _state_lines(machine: StateMachine, states: list[str], current: str | None, notes: Mapping[str, str]) -> list[str]:
    """The state nodes (a shared trigger under its target's name); the initial state, when drawn,
    also gets its start point and arrow."""
    starts = machine.initial in states
    lines = [_node(INITIAL_NODE, id="initial", shape="point", width="0.15", label="")] if starts else []
    for state in states:
        label = f"{state}\n{notes[state]}" if state in notes else state
        attrs: dict[str, Any] = {"id": f"state:{state}", "shape": "box", "style": "rounded", "label": label}
        if state == machine.initial:
            attrs["peripheries"] = 2
        if state == current:
            attrs.update(style="rounded,filled", fillcolor=CURRENT_FILL, penwidth=2)
        lines.append(_node(state, **attrs))
    if starts:
        lines.append(_edge(INITIAL_NODE, machine.initial, id="initial-edge", arrowhead="normal"))
    return lines


def _wrapped(triggers: list[str]) -> str:
    """One trigger a line, each wrapped at ``LABEL_WRAP`` characters: narrow labels keep the machine narrow."""
    return "\n".join(line for trigger in triggers for line in textwrap.wrap(trigger, LABEL_WRAP))


def _edge_attrs(
    source: str,
    target: str,
    triggers: list[str],
    taken: tuple[str, str | None, str] | None,
    *,
    labelled: bool = True,
) -> dict[str, Any]:
    """An edge labelled with its triggers (unless ``labelled`` is off: the target names them); the
    tooltip always names them, one a line. The edge just taken is bold red and labelled, its
    trigger marked if it shares the edge."""
    just_taken = taken is not None and (taken[0], taken[2]) == (source, target)
    shown = triggers
    if just_taken and taken is not None and taken[1] is not None and len(triggers) > 1:
        shown = [TAKEN_MARK + t if t == taken[1] else t for t in triggers]
    attrs: dict[str, Any] = {
        "id": f"edge:{source}->{target}",
        "label": _wrapped(shown) if labelled or just_taken else "",
        "tooltip": "\n".join(triggers),
    }
    if just_taken:
        attrs.update(color=TAKEN_COLOR, fontcolor=TAKEN_COLOR, penwidth=2.5, style="bold")
    return attrs


# ---------------------------------------------------------------------------- consumer groups
def _topic_namer(group: Any, cluster: Any) -> Any:
    def name(topic_id: str) -> str:
        if isinstance(cluster, Mapping):
            found = cluster.get(topic_id)
            if found:
                return str(found)
        elif cluster is not None:
            topic = cluster.topic_by_id(topic_id)
            if topic is not None:
                return topic.name
        by_group = group.topic_name_of(topic_id) if hasattr(group, "topic_name_of") else None
        return by_group or topic_id

    return name


def _pairs(assignment: Mapping[str, Iterable[int]]) -> set[tuple[str, int]]:
    return {(t, int(p)) for t, parts in assignment.items() for p in parts}


@dataclass(frozen=True)
class _PartitionNames:
    """How the group diagram sorts, identifies and labels a (topic id, partition)."""

    topic_name: Callable[[str], str]

    def key(self, tp: tuple[str, int]) -> tuple[str, str, int]:
        return (self.topic_name(tp[0]), tp[0], tp[1])

    def node(self, tp: tuple[str, int]) -> str:
        return f"partition:{tp[0]}:{tp[1]}"

    def label(self, tp: tuple[str, int]) -> str:
        return f"{self.topic_name(tp[0])}-{tp[1]}"


@checked
def group_dot(group: Any, cluster: Any = None, *, rankdir: str = "LR") -> str:
    """A consumer group's members, partitions and who holds what, as a DOT digraph.

    ``group`` is a ``kip_lab.coordinator.ConsumerGroup`` (the coordinator's replayed state).
    ``cluster`` (a ``ClusterMetadata``, or a mapping topic id -> name) names topics; without
    it the group's own partition metadata is used, then the raw topic id.

    Edges member -> partition:

    * ``assigned`` (solid): the member may use the partition now;
    * ``pending`` (dashed, blue): in the member's target but not assigned yet — either
      still held by another member (not yet released) or not yet handed over because the
      member has not reconciled to the new target (the tooltip says which);
    * ``revoking`` (bold red, tee arrowhead): the member was told to give it up and has
      not confirmed yet (``pending_revocation``).

    Members are labelled with their epoch and reconciliation state; partitions nobody holds
    are filled red. The graph label carries the group state, group epoch and assignment epoch.
    """
    if not hasattr(group, "target_of"):
        raise refuse("group_dot", "group", f"a consumer group (gc.groups[group_id]), not {type(group).__name__}")
    names = _PartitionNames(_topic_namer(group, cluster))
    members = sorted(group.members.values(), key=lambda m: m.member_id)
    targets = {member.member_id: _pairs(group.target_of(member.member_id)) for member in members}
    partitions = sorted(_group_partitions(group, members, targets), key=names.key)
    held = {tp for m in members for tp in _pairs(m.owned())}

    lines = _header(f"group {group.group_id}", _group_graph_attrs(group, rankdir))
    lines += _subgraph("members", [_member_node(group, member) for member in members])
    lines += _subgraph("partitions", [_partition_node(tp, held, names) for tp in partitions])
    for member in members:
        lines += _member_edges(member, targets[member.member_id], held, names)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _group_partitions(
    group: Any, members: list[Any], targets: Mapping[str, set[tuple[str, int]]]
) -> set[tuple[str, int]]:
    """Every partition of the subscribed topics, plus any a member holds, is revoking or is targeted."""
    partitions: set[tuple[str, int]] = set()
    for _name, (topic_id, count) in getattr(group, "subscription_metadata", {}).items():
        partitions.update((topic_id, p) for p in range(count))
    for member in members:
        partitions |= _pairs(member.assigned) | _pairs(member.pending_revocation) | targets[member.member_id]
    return partitions


def _group_graph_attrs(group: Any, rankdir: str) -> dict[str, Any]:
    """Layout, and a title with the group's state and epochs and a key to the edge styles."""
    state_name = getattr(group.state, "value", group.state)
    return {
        "rankdir": rankdir,
        "labelloc": "t",
        "fontname": FONT,
        "nodesep": "0.25",
        "ranksep": "1.4",
        "label": (
            f"group {group.group_id} \u00b7 {state_name}\n"
            f"group epoch {group.group_epoch} \u00b7 assignment epoch {group.assignment_epoch}\n"
            "solid: assigned \u00b7 dashed: pending (target not yet usable) \u00b7 bold red: revoking"
        ),
    }


def _subgraph(label: str, nodes: list[str]) -> list[str]:
    """A dashed box around ``nodes``, titled ``label``."""
    return [
        f'  subgraph "cluster_{label}" {{',
        f"    graph{_attrs({'label': label, 'style': 'dashed', 'color': '#9e9e9e'})};",
        *("  " + node for node in nodes),
        "  }",
    ]


def _member_node(group: Any, member: Any) -> str:
    """A member with its static id, epoch and reconciliation state, and its target epoch while it lags."""
    state_value = getattr(member.state, "value", member.state)
    label = member.member_id
    if getattr(member, "instance_id", None):
        label += f"\n(static: {member.instance_id})"
    label += f"\nepoch {member.member_epoch} \u00b7 {state_value}"
    if member.member_epoch != group.assignment_epoch:
        label += f"\n(target epoch {group.assignment_epoch})"
    return _node(
        f"member:{member.member_id}",
        id=f"member:{member.member_id}",
        shape="box",
        style="rounded,filled",
        fillcolor=MEMBER_FILLS.get(str(state_value), "#ffffff"),
        label=label,
    )


def _partition_node(tp: tuple[str, int], held: set[tuple[str, int]], names: _PartitionNames) -> str:
    attrs: dict[str, Any] = {"id": names.node(tp), "shape": "ellipse", "label": names.label(tp)}
    if tp not in held:
        attrs.update(style="filled", fillcolor=UNOWNED_FILL, tooltip=f"{names.label(tp)}: held by no member")
    return _node(names.node(tp), **attrs)


def _member_edges(
    member: Any, target: set[tuple[str, int]], held: set[tuple[str, int]], names: _PartitionNames
) -> list[str]:
    """The member's assigned, then pending, then revoking edges, each kind in partition order."""
    mid = member.member_id
    assigned = _pairs(member.assigned)
    revoking = _pairs(member.pending_revocation)
    pending = target - assigned - revoking

    def edge(kind: str, tp: tuple[str, int], tooltip: str, **style: Any) -> str:
        return _edge(f"member:{mid}", names.node(tp), id=f"{kind}:{mid}:{names.label(tp)}", **style, tooltip=tooltip)

    def why_pending(tp: tuple[str, int]) -> str:
        return "not yet released by its previous owner" if tp in held else "not yet reconciled"

    lines = [
        edge("assigned", tp, f"{mid} holds {names.label(tp)}", color=ASSIGNED_COLOR, style="solid")
        for tp in sorted(assigned, key=names.key)
    ]
    lines += [
        edge(
            "pending",
            tp,
            f"{names.label(tp)} is in {mid}'s target, {why_pending(tp)}",
            color=PENDING_COLOR,
            style="dashed",
        )
        for tp in sorted(pending, key=names.key)
    ]
    lines += [
        edge(
            "revoking",
            tp,
            f"{mid} must revoke {names.label(tp)}",
            color=REVOKING_COLOR,
            style="bold",
            penwidth=2,
            arrowhead="tee",
        )
        for tp in sorted(revoking, key=names.key)
    ]
    return lines


# ---------------------------------------------------------------------------- rendering
TEXT_FORMATS = {"svg", "dot", "gv", "plain", "plain-ext", "json", "xdot", "canon"}


@checked
def render(dot_source: str, format: str = "svg", engine: str = "dot") -> str | bytes:
    """Lay out ``dot_source`` with graphviz: text for SVG and other text formats, bytes otherwise.

    If the ``graphviz`` package or the ``dot`` executable is missing this does not raise: it
    returns ``DOT_MISSING_MESSAGE``, a blank line and the DOT source, so the caller can show it.
    """
    try:
        import graphviz
    except ImportError:
        return f"{DOT_MISSING_MESSAGE}\n\n{dot_source}"
    try:
        out = graphviz.Source(dot_source, engine=engine).pipe(format=format)
    except graphviz.ExecutableNotFound:
        return f"{DOT_MISSING_MESSAGE}\n\n{dot_source}"
    except (graphviz.CalledProcessError, ValueError) as exc:  # not DOT graphviz can read, or an unknown format/engine
        detail = exc.stderr.decode("utf-8", "replace").strip() if isinstance(exc, graphviz.CalledProcessError) else exc
        raise refuse("render", "dot_source", f"graphviz refused it: {str(detail)[:200]}") from None
    return out.decode("utf-8") if format in TEXT_FORMATS else out
