"""The DOT builders: the diagrams are drawn from the machines' tables and nothing else.

Assertions read the DOT text back (a small parser below, and graphviz's own parse when the
``dot`` executable is installed), never pixels.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import defaultdict

import pytest

from kip_lab.clients import CLASSIC_MEMBER_MACHINE, CONSUMER_MEMBER_MACHINE
from kip_lab.coordinator import GROUP_STATE_MACHINE, RECONCILIATION_MACHINE
from kip_lab.errors import ArgumentError
from kip_lab.events import StateTransition
from kip_lab.lab import Lab
from kip_lab.machines import IllegalTransition, StateMachine, Transition
from kip_lab.viz.dot import (
    DOT_MISSING_MESSAGE,
    INITIAL_NODE,
    TAKEN_COLOR,
    TAKEN_MARK,
    group_dot,
    machine_dot,
    render,
)

MACHINES = [RECONCILIATION_MACHINE, GROUP_STATE_MACHINE, CONSUMER_MEMBER_MACHINE, CLASSIC_MEMBER_MACHINE]
HAS_DOT = shutil.which("dot") is not None

# ---------------------------------------------------------------------------- a tiny DOT reader
_STR = r'"((?:[^"\\]|\\.)*)"'
_NODE = re.compile(rf"^\s*{_STR}\s*(?:\[(.*)\])?;$")
_EDGE = re.compile(rf"^\s*{_STR}\s*->\s*{_STR}\s*(?:\[(.*)\])?;$")
_ATTR = re.compile(rf"(\w+)={_STR}")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def _attrs(text: str | None) -> dict[str, str]:
    return {k: _unescape(v) for k, v in _ATTR.findall(text or "")}


def parse_dot(source: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str, dict[str, str]]]]:
    """(nodes by name with their attributes, edges as (source, target, attributes))."""
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict[str, str]]] = []
    for line in source.splitlines():
        if m := _EDGE.match(line):
            edges.append((_unescape(m.group(1)), _unescape(m.group(2)), _attrs(m.group(3))))
        elif m := _NODE.match(line):
            nodes[_unescape(m.group(1))] = _attrs(m.group(2))
    return nodes, edges


def table_pairs(machine: StateMachine) -> dict[tuple[str, str], list[str]]:
    pairs: dict[tuple[str, str], list[str]] = defaultdict(list)
    for t in machine.transitions:
        pairs[(t.source, t.target)].append(t.trigger)
    return dict(pairs)


# ---------------------------------------------------------------------------- machines
@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_machine_dot_is_exactly_the_table(machine):
    nodes, edges = parse_dot(machine_dot(machine))
    # every state, and only states (plus the start point)
    assert set(nodes) == {*machine.states, INITIAL_NODE}
    for state in machine.states:
        assert nodes[state]["label"].split("\n")[0] == state
        assert nodes[state]["id"] == f"state:{state}"
    # the initial state: a double border and the one arrow from the start point
    assert nodes[machine.initial].get("peripheries") == "2"
    assert [s for s, n in nodes.items() if n.get("peripheries") == "2"] == [machine.initial]
    initial_edges = [(s, t) for s, t, _ in edges if s == INITIAL_NODE]
    assert initial_edges == [(INITIAL_NODE, machine.initial)]
    # one edge per (source, target) pair, its triggers one per line in the tooltip: nothing more, nothing less
    drawn = {(s, t): a["tooltip"].split("\n") for s, t, a in edges if s != INITIAL_NODE}
    for s, t, a in edges:  # the label: the same words (wrapped), or none where the target names them
        if s != INITIAL_NODE:
            named_at_target = nodes[t]["label"].split("\n", 1)[1:]
            words = (
                a["label"].split() or " ".join(named_at_target).replace("(unlabelled arrows in:", "").strip(")").split()
            )
            assert words == a["tooltip"].split(), (s, t, a, named_at_target)
    assert len(drawn) == len([e for e in edges if e[0] != INITIAL_NODE]), "a pair drawn twice"
    assert {pair: sorted(ts) for pair, ts in drawn.items()} == {
        pair: sorted(ts) for pair, ts in table_pairs(machine).items()
    }
    all_triggers = [t for ts in drawn.values() for t in ts]
    assert len(all_triggers) == len(machine.transitions)
    # nothing highlighted unless asked
    assert all("filled" not in n.get("style", "") for n in nodes.values())
    assert all("color" not in a for _, _, a in edges)


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_machine_dot_is_deterministic_and_independent_of_table_order(machine):
    assert machine_dot(machine) == machine_dot(machine)
    shuffled = StateMachine(
        machine.name, machine.states, machine.initial, tuple(reversed(machine.transitions)), machine.description
    )
    pairs = [(s, t) for s, t, _ in parse_dot(machine_dot(machine))[1]]
    assert pairs == [(s, t) for s, t, _ in parse_dot(machine_dot(shuffled))[1]]
    order = {s: i for i, s in enumerate(machine.states)}
    body = [p for p in pairs if p[0] != INITIAL_NODE]
    assert body == sorted(body, key=lambda p: (order[p[0]], order[p[1]]))


def test_current_state_is_filled_and_only_it():
    nodes, _ = parse_dot(machine_dot(GROUP_STATE_MACHINE, current="Reconciling"))
    filled = [s for s, a in nodes.items() if "filled" in a.get("style", "")]
    assert filled == ["Reconciling"]
    assert nodes["Reconciling"]["fillcolor"]


def test_last_transition_edge_is_marked():
    dot = machine_dot(
        GROUP_STATE_MACHINE,
        current="Stable",
        last_transition=("Reconciling", "last member reconciled", "Stable"),
    )
    _, edges = parse_dot(dot)
    marked = [(s, t) for s, t, a in edges if a.get("color") == TAKEN_COLOR]
    assert marked == [("Reconciling", "Stable")]
    attrs = next(a for s, t, a in edges if (s, t) == ("Reconciling", "Stable"))
    assert attrs["style"] == "bold"
    assert float(attrs["penwidth"]) > 1


def test_taken_trigger_is_singled_out_on_a_merged_edge():
    # UNSUBSCRIBED -> PREPARE_LEAVING has one trigger; JOINING -> PREPARE_LEAVING has two.
    step = Transition("JOINING", "poll timer expired", "PREPARE_LEAVING")
    _, edges = parse_dot(machine_dot(CONSUMER_MEMBER_MACHINE, last_transition=step))
    label = next(a["label"] for s, t, a in edges if (s, t) == ("JOINING", "PREPARE_LEAVING")).split("\n")
    assert sorted(label) == sorted([TAKEN_MARK + "poll timer expired", "unsubscribe or close"])
    # a state transition from the trace works the same way
    taken = StateTransition("consumer", "STABLE", "RECONCILING", "new assignment", "m-1", 3)
    _, edges = parse_dot(machine_dot(CONSUMER_MEMBER_MACHINE, current="RECONCILING", last_transition=taken))
    assert [(s, t) for s, t, a in edges if a.get("color") == TAKEN_COLOR] == [("STABLE", "RECONCILING")]


def test_highlighting_something_the_table_does_not_declare_is_refused():
    with pytest.raises(ValueError, match="not a state"):
        machine_dot(GROUP_STATE_MACHINE, current="Rebalancing")
    with pytest.raises(IllegalTransition):
        machine_dot(GROUP_STATE_MACHINE, last_transition=("Dead", "revive", "Stable"))
    with pytest.raises(IllegalTransition):
        machine_dot(GROUP_STATE_MACHINE, last_transition=("Empty", "Reconciling"))


@pytest.mark.skipif(not HAS_DOT, reason="graphviz 'dot' executable not installed")
@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_graphviz_reads_the_same_edges(machine):
    """graphviz's own parse (``-Tjson``) sees the table's edges, each naming its triggers (tooltip)."""
    laid_out = json.loads(render(machine_dot(machine), format="json"))
    names = {o["_gvid"]: o["name"] for o in laid_out["objects"]}
    seen = defaultdict(list)
    for edge in laid_out["edges"]:
        source, target = names[edge["tail"]], names[edge["head"]]
        if source != INITIAL_NODE:
            seen[(source, target)] += edge["tooltip"].replace("\\n", "\n").split("\n")
    assert {k: sorted(v) for k, v in seen.items()} == {k: sorted(v) for k, v in table_pairs(machine).items()}


# ---------------------------------------------------------------------------- groups
def _three_member_lab(until_ms: int) -> Lab:
    lab = Lab(seed=1)
    lab.create_topic("foo", 6)
    for name in "ABC":
        lab.add_consumer(name, subscribed_topic_names=["foo"])
    lab.run(until=until_ms)
    return lab


def _edges_by_kind(dot: str) -> dict[str, set[tuple[str, str]]]:
    _, edges = parse_dot(dot)
    out: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for _, _, attrs in edges:
        kind, member, partition = attrs["id"].split(":")
        out[kind].add((member, partition))
    return out


def test_group_dot_mid_rebalance_shows_assigned_pending_and_revoking():
    lab = _three_member_lab(60)  # A acknowledged its first assignment at its first poll (50 ms), was told to
    # give up foo-2..5; B and C wait for them
    group = lab.coordinator.groups["g"]
    dot = group_dot(group, lab.cluster)
    nodes, edges = parse_dot(dot)
    kinds = _edges_by_kind(dot)
    assert kinds["assigned"] == {("A", "foo-0"), ("A", "foo-1")}
    assert kinds["revoking"] == {("A", f"foo-{p}") for p in (2, 3, 4, 5)}
    assert kinds["pending"] == {("B", "foo-3"), ("B", "foo-4"), ("C", "foo-2"), ("C", "foo-5")}
    styles = {attrs["id"].split(":")[0]: (attrs["style"], attrs["color"]) for _, _, attrs in edges}
    assert styles["assigned"][0] == "solid"
    assert styles["pending"][0] == "dashed"
    assert styles["revoking"][0] == "bold" and styles["revoking"] != styles["assigned"]
    assert len({styles["assigned"], styles["pending"], styles["revoking"]}) == 3
    # members carry epoch and reconciliation state, from the group itself
    for member in group.members.values():
        label = nodes[f"member:{member.member_id}"]["label"]
        assert f"epoch {member.member_epoch}" in label
        assert member.state.value in label
    assert "UNREVOKED_PARTITIONS" in nodes["member:A"]["label"]
    # partitions by name, all six
    labels = sorted(a["label"] for n, a in nodes.items() if n.startswith("partition:"))
    assert labels == [f"foo-{p}" for p in range(6)]
    graph_label = _attrs(re.search(r"^\s*graph \[(.*)\];$", dot, re.M).group(1))["label"]
    assert f"group epoch {group.group_epoch}" in graph_label
    assert f"assignment epoch {group.assignment_epoch}" in graph_label
    assert group.state.value in graph_label
    assert group_dot(group, lab.cluster) == dot


def test_group_dot_when_stable_and_after_a_crash():
    lab = _three_member_lab(0)
    assert lab.run_until_stable()
    group = lab.coordinator.groups["g"]
    kinds = _edges_by_kind(group_dot(group, lab.cluster))
    assert set(kinds) == {"assigned"}
    owners = defaultdict(list)
    for member, partition in kinds["assigned"]:
        owners[partition].append(member)
    assert sorted(owners) == [f"foo-{p}" for p in range(6)]
    assert all(len(v) == 1 for v in owners.values())
    lab.crash("A")
    assert lab.run_until_stable()
    dot = group_dot(lab.coordinator.groups["g"], lab.cluster)
    nodes, _ = parse_dot(dot)
    assert "member:A" not in nodes
    assert {m for m, _ in _edges_by_kind(dot)["assigned"]} == {"B", "C"}
    assert len(_edges_by_kind(dot)["assigned"]) == 6


def test_group_dot_names_topics_without_a_cluster_and_marks_unowned_partitions():
    lab = _three_member_lab(1)  # targets written, nobody owns anything yet... except A
    group = lab.coordinator.groups["g"]
    nodes, _ = parse_dot(group_dot(group))  # names from the group's partition metadata
    partitions = {a["label"]: a for n, a in nodes.items() if n.startswith("partition:")}
    assert sorted(partitions) == [f"foo-{p}" for p in range(6)]
    held = {p for m in group.members.values() for t, ps in m.owned().items() for p in ps}
    for p in range(6):
        unowned = "filled" in partitions[f"foo-{p}"].get("style", "")
        assert unowned == (p not in held)


# ---------------------------------------------------------------------------- rendering
@pytest.mark.skipif(not HAS_DOT, reason="graphviz 'dot' executable not installed")
def test_render_gives_svg():
    svg = render(machine_dot(RECONCILIATION_MACHINE, current="STABLE"))
    assert isinstance(svg, str)
    assert "<svg" in svg and "UNREVOKED_PARTITIONS" in svg
    png = render(machine_dot(RECONCILIATION_MACHINE), format="png")
    assert isinstance(png, bytes) and png.startswith(b"\x89PNG")


def test_render_without_the_dot_executable_returns_message_and_source(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no 'dot' anywhere
    source = machine_dot(GROUP_STATE_MACHINE)
    out = render(source)
    assert out.startswith(DOT_MISSING_MESSAGE)
    assert out.endswith(source)


def test_render_when_graphviz_raises_executable_not_found(monkeypatch):
    graphviz = pytest.importorskip("graphviz")

    def missing(*args, **kwargs):
        raise graphviz.ExecutableNotFound(["dot"])

    monkeypatch.setattr(graphviz.Source, "pipe", missing)
    source = machine_dot(CONSUMER_MEMBER_MACHINE)
    assert render(source, format="png") == f"{DOT_MISSING_MESSAGE}\n\n{source}"


def test_render_without_the_graphviz_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz -> ImportError
    source = machine_dot(RECONCILIATION_MACHINE)
    assert render(source) == f"{DOT_MISSING_MESSAGE}\n\n{source}"


def test_viz_dot_needs_only_the_standard_library():
    import subprocess

    code = (
        "import sys, kip_lab, kip_lab.lab, kip_lab.viz.dot\n"
        "heavy = sorted(m for m in ('graphviz', 'pandas', 'altair', 'kip_lab.viz.charts') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    done = subprocess.run(
        [sys.executable, "-c", "import sys, kip_lab, kip_lab.lab; print('kip_lab.viz' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "False"


# ---------------------------------------------------------------------------- layout and pictures
def test_machines_with_many_edges_are_laid_out_top_to_bottom() -> None:
    """A row of states carrying many trigger labels is wider than a laptop screen; a column is not."""
    graph = re.compile(r'graph \[rankdir="(\w+)"')
    assert graph.search(machine_dot(CONSUMER_MEMBER_MACHINE)).group(1) == "TB"  # 34 edges
    assert graph.search(machine_dot(RECONCILIATION_MACHINE, rankdir="LR")).group(1) == "LR"  # asked for


def test_focus_draws_the_current_state_its_next_states_and_the_edge_taken() -> None:
    nodes, edges = parse_dot(machine_dot(CONSUMER_MEMBER_MACHINE, current="STABLE", focus=True))
    states = {a["label"] for name, a in nodes.items() if a.get("id", "").startswith("state:")}
    following = {t.target for t in CONSUMER_MEMBER_MACHINE.transitions if t.source == "STABLE"}
    assert states == {"STABLE"} | following
    assert all("STABLE" in (s, t) for s, t, _ in edges)
    # before the member exists (no current state) the machine's start is the centre
    nodes, _ = parse_dot(machine_dot(CONSUMER_MEMBER_MACHINE, focus=True))
    assert "UNSUBSCRIBED" in {a["label"] for a in nodes.values() if "label" in a}
    assert "STALE" not in {a["label"] for a in nodes.values() if "label" in a}


@pytest.mark.skipif(not HAS_DOT, reason="graphviz 'dot' executable not installed")
def test_picture_of_a_diagram_is_a_png_beside_the_svg() -> None:
    """Untrusted notebooks draw no SVG: the PNG is what a clone or Binder shows on opening."""
    import base64

    from kip_lab.viz import picture

    shown = picture(machine_dot(GROUP_STATE_MACHINE, current="Stable"))
    data, metadata = shown._repr_mimebundle_()
    png = base64.b64decode(data["image/png"])
    assert png.startswith(b"\x89PNG") and data["image/svg+xml"].lstrip().startswith("<")
    assert GROUP_STATE_MACHINE.name in data["text/plain"]
    width, height = shown.size
    assert metadata["image/png"] == {"width": width // 2, "height": height // 2}  # drawn at twice its size
    svg_width = float(re.search(r'<svg width="([\d.]+)pt"', data["image/svg+xml"]).group(1))
    assert abs(width / 2 - svg_width) <= 2  # the SVG's picture at 144 dpi: one CSS pixel per point


def test_picture_refuses_what_it_cannot_draw() -> None:
    from kip_lab.viz import picture

    with pytest.raises(ValueError, match="DOT text"):
        picture("not a graph")
    with pytest.raises(ArgumentError, match="DOT text or an Altair chart, not int"):
        picture(42)


def test_a_large_machine_leaves_out_shared_arrows_and_says_so():
    """``shared_arrows=False``: the arrows many states share into one state are not drawn; that
    state's label says from how many states and on what; every other transition is drawn."""
    nodes, edges = parse_dot(machine_dot(CONSUMER_MEMBER_MACHINE, current="STABLE", shared_arrows=False))
    drawn = {(s, t) for s, t, _ in edges if s != INITIAL_NODE}
    pairs = table_pairs(CONSUMER_MEMBER_MACHINE)
    for target, trigger in (("FATAL", "fatal error"), ("FENCED", "fenced")):
        left_out = [s for (s, t), triggers in pairs.items() if t == target and triggers == [trigger]]
        assert len(left_out) >= 4 and not {(s, target) for s in left_out} & drawn
        assert nodes[target]["label"] == f"{target}\n(from {len(left_out)} states, arrows not drawn:\n{trigger})"
    shared = (["fatal error"], ["fenced"], ["unsubscribe or close", "poll timer expired"])  # PREPARE_LEAVING's
    assert drawn | {(s, t) for (s, t), ts in pairs.items() if sorted(ts) in map(sorted, shared)} == set(pairs)
    # the edge just taken is drawn even when it is one of them
    _, edges = parse_dot(
        machine_dot(CONSUMER_MEMBER_MACHINE, last_transition=("STABLE", "fenced", "FENCED"), shared_arrows=False)
    )
    assert ("STABLE", "FENCED") in {(s, t) for s, t, _ in edges}
