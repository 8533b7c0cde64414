"""The public API's contract: every mistake a caller can make gets a ``KipLabError``, never anything else.

The entry points are discovered, not listed: every callable in the ``__all__`` of ``kip_lab``,
``kip_lab.lab``, ``kip_lab.scenarios`` and ``widgets``, every function or class docs/api.md imports
in its examples, and every public method of the objects those examples drive (a ``Lab``, a
``GroupCoordinator``, a ``ClusterMetadata``, a ``Trace``). Hypothesis calls each with arguments
drawn from wrong types and out-of-range values mixed with good ones; the call may succeed or
raise a ``KipLabError``, and anything else fails the test. The regression tests below it pin the
cases reported against the API one by one.
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kip_lab
import kip_lab.lab
import kip_lab.scenarios
import widgets
from kip_lab import ClusterMetadata, CoordinatorConfig, GroupCoordinator, KipLabError
from kip_lab.contract import LONG_MAX, InvalidArgument
from kip_lab.errors import ArgumentError
from kip_lab.lab import Lab, LabConfig, LatencyModel, Trace
from kip_lab.scenarios import load_library_scenario, run_scenario
from tests.property_profile import examples

DOCS = Path(__file__).parents[2] / "docs" / "api.md"
SKIPPED_MODULES = ("kip_lab.events",)  # the trace's event classes: built by the Lab, not by callers
NEEDS_SPARK = {"spark_session", "run_sweep", "metric_percentiles"}  # start a JVM: tests/lab/test_pipeline*.py
# What kip_lab returns (results, rows, trace events): read by callers, built by kip_lab.
RESULTS = {"CoordinatorResult", "ExpectationResult", "MemberRow", "Problem", "ScenarioResult", "TraceEvent"}
# The scheduler's and the Lab's hooks into a coordinator and a trace: called by kip_lab with its own values.
PLUMBING = {
    "fire_timer", "timers", "has_unseen_metadata", "unload", "state_snapshot", "share_state_snapshot",
    "classic_state_snapshot", "sync_share_state", "record",
}  # fmt: skip
BUILT_BY = {"SharePartition": "load"}  # classes documented through a constructor of their own


def _fixture_lab() -> Lab:
    """A small Lab that does nothing on its own any more: topic foo, consumer A crashed and expired."""
    lab = Lab(seed=1)
    lab.create_topic("foo", 3)
    lab.add_consumer("A", subscribed_topic_names=["foo"])
    lab.run(until=1_000)
    lab.crash("A")
    lab.run(until=60_000)  # A's session has expired: no timer is left
    assert not lab.has_next()
    return lab


_LAB = _fixture_lab()
_SCENARIO = load_library_scenario("basic")
_TRACE = run_scenario(_SCENARIO).trace

# Values a mistaken caller passes: wrong types, out of range, unknown names, terminal escapes.
HOSTILE: list[Any] = [
    None, "", "nobody", "\x1b[31mred", "-1", "10", -1, -(2**70), 2**70, 10**9, 0, 1.5, -0.5,
    math.inf, math.nan, True, [], [1, "x"], {}, {"a": 1}, b"bytes", object(), (1, 2), {"foo", "bar"},
]  # fmt: skip

# Good values by parameter name, so that a call can get past one bad argument to the next.
GOOD: dict[str, list[Any]] = {
    "seed": [0, 7],
    "name": ["foo", "B"],
    "member": ["A"],
    "topic": ["foo"],
    "partitions": [3],
    "count": [1],
    "until": [100],
    "steps": [1],
    "step": [0, 1],
    "timeout_ms": [1_000],
    "at_ms": [10],
    "duration_ms": [100],
    "delay_ms": [10],
    "lab": [_LAB.fork()],  # a copy: a walked function may run the Lab it is given
    "trace": [_TRACE],
    "scenario": [_SCENARIO],
    "config": [None],
    "group_id": ["g"],
    "topics": [["foo"]],
    "regex": ["fo.*"],
    "start_step": [0],
}


def _documented_imports() -> dict[str, Any]:
    """Every name docs/api.md's Python examples import, with the object it names."""
    found: dict[str, Any] = {}
    for block in re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(("kip_lab", "widgets")):
                if node.module.startswith(SKIPPED_MODULES):
                    continue
                module = importlib.import_module(node.module)
                for alias in node.names:
                    found[alias.name] = getattr(module, alias.name)
    return found


def _is_entry(value: Any) -> bool:
    """A callable, except errors (raised) and enums (values)."""
    return callable(value) and not (isinstance(value, type) and issubclass(value, BaseException | enum.Enum))


def _methods(owner: type) -> list[str]:
    return [
        name
        for name, member in inspect.getmembers(owner)
        if not name.startswith("_") and (inspect.isfunction(member) or inspect.ismethod(member))
    ]


FIXTURES: dict[type, Callable[[], Any]] = {
    Lab: _LAB.fork,
    GroupCoordinator: lambda: GroupCoordinator(CoordinatorConfig(), _cluster()),
    ClusterMetadata: lambda: _cluster(),
    Trace: lambda: Trace(_TRACE),
}


def _cluster() -> ClusterMetadata:
    cluster = ClusterMetadata()
    cluster.create_topic("foo", 3)
    return cluster


def entry_points() -> dict[str, Callable[[], Callable[..., Any]]]:
    """Name -> a function returning the callable to call (a fresh object's bound method, for methods)."""
    public: dict[str, Any] = {}
    for module in (kip_lab, kip_lab.lab, kip_lab.scenarios, widgets):
        public.update({name: getattr(module, name) for name in module.__all__})
    public.update(_documented_imports())
    entries: dict[str, Callable[[], Callable[..., Any]]] = {}
    for name, value in sorted(public.items()):
        if name in BUILT_BY:
            entries[f"{name}.{BUILT_BY[name]}"] = lambda value=value, name=name: getattr(value, BUILT_BY[name])
        elif _is_entry(value) and name not in NEEDS_SPARK | RESULTS:
            entries[name] = lambda value=value: value
    for owner, make in FIXTURES.items():
        for method in _methods(owner):
            if method not in PLUMBING:
                entries[f"{owner.__name__}.{method}"] = lambda make=make, method=method: getattr(make(), method)
    return entries


ENTRY_POINTS = entry_points()


def _arguments(function: Callable[..., Any]) -> st.SearchStrategy[tuple[list[Any], dict[str, Any]]]:
    """Positional and keyword arguments for ``function``: each a good value, a default, or a hostile one."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    by_name: dict[str, st.SearchStrategy[Any]] = {}
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        good = list(GOOD.get(parameter.name, []))
        if parameter.default is not parameter.empty:
            good.append(parameter.default)
        by_name[parameter.name] = st.sampled_from(good + HOSTILE) if good else st.sampled_from(HOSTILE)
    extra = st.lists(st.sampled_from(HOSTILE), max_size=2)
    return st.tuples(st.fixed_dictionaries({}, optional=by_name), extra)  # type: ignore[return-value]


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
@settings(max_examples=examples(12), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_misused_entry_point_raises_only_kip_lab_errors(
    name: str, data: st.DataObject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a path argument such as "nobody" writes there
    function = ENTRY_POINTS[name]()
    keywords, positional = data.draw(_arguments(function))
    try:
        if positional and data.draw(st.booleans()):
            function(*positional)
        else:
            function(**keywords)
    except KipLabError:
        pass


def test_the_walk_covers_what_docs_api_md_shows() -> None:
    """The methods docs/api.md calls on a Lab and on the coordinator are among the entry points walked."""
    text = DOCS.read_text(encoding="utf-8")
    called = {f"Lab.{m}" for m in re.findall(r"\blab\.([a-z_]+)\(", text)}
    called |= {f"GroupCoordinator.{m}" for m in re.findall(r"\bgc\.([a-z_]+)\(", text)}
    assert called - set(ENTRY_POINTS) == set()
    assert len(ENTRY_POINTS) >= 60


# ---------------------------------------------------------------------------- the reported cases, one by one
def _lab() -> Lab:
    return _LAB.fork()


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: Lab(config={"brokerz": 3}), "config.brokerz"),
        (lambda: Lab(config="big"), "config"),
        (lambda: GroupCoordinator().consumer_group_heartbeat(None), "request"),
        (lambda: run_scenario("basic"), "scenario"),
        (lambda: _lab().run(until="10"), "until"),
        (lambda: widgets.Stepper("x"), "lab"),
        (lambda: widgets.explore(None), "lab"),
        (lambda: widgets.FaultPanel(None), "stepper"),
        (lambda: widgets.Explorer(None), "stepper"),
        (lambda: widgets.Explorer("x"), "stepper"),
        (lambda: LatencyModel(ms=math.inf), "ms"),
        (lambda: Lab(seed="x"), "seed"),
        (lambda: Lab(seed=2**70), "seed"),
        (lambda: _lab().run(until=-5), "until"),
        (lambda: _lab().run(steps=-1), "steps"),
        (lambda: _lab().run_until_stable(timeout_ms=-1), "timeout_ms"),
        (lambda: _lab().change_subscription("A", topics=["foo"], regex="f.*"), "not both"),
        (lambda: LabConfig(brokers=10**6), "brokers"),
        (lambda: _lab().seek(10**9), "step"),
    ],
)
def test_a_reported_misuse_is_refused_naming_the_argument(call: Callable[[], Any], words: str) -> None:
    with pytest.raises(ArgumentError, match=re.escape(words)):
        call()


def test_a_config_given_as_a_dict_is_validated_as_one() -> None:
    assert Lab(config={"brokers": 5}).config == LabConfig(brokers=5)


def test_a_refusal_names_what_is_allowed() -> None:
    with pytest.raises(InvalidArgument) as refused:
        LabConfig(brokers=10**6)
    assert str(refused.value) == "LabConfig: brokers: Input should be less than or equal to 100, got 1000000"
    with pytest.raises(InvalidArgument) as refused:
        Lab(seed=2**70)
    assert f"less than or equal to {LONG_MAX}" in str(refused.value)
    assert refused.value.errors()[0]["loc"] == ("seed",)  # still pydantic's ValidationError, field by field


def test_no_silent_coercion_at_the_lab() -> None:
    lab = _lab()
    for call in (lambda: lab.run(until=True), lambda: lab.run(steps=2.0), lambda: lab.create_topic("bar", "3")):
        with pytest.raises(InvalidArgument):
            call()
    assert lab.step_count == _LAB.step_count  # nothing was applied


def _live_lab() -> Lab:
    lab = Lab(seed=1)
    lab.create_topic("foo", 3)
    lab.add_consumer("A", subscribed_topic_names=["foo"])
    lab.run(until=1_000)
    return lab


def test_a_fork_keeps_the_share_coordinators_own_log() -> None:
    """Found by the walk: a restored snapshot gave __share_group_state the __consumer_offsets records,
    so a share-coordinator failover after a fork or a backward seek replayed consumer-group records."""
    lab = _live_lab()
    twin = lab.fork()
    assert twin.world.share.log.end_offset == lab.world.share.log.end_offset == 0 < twin.world.log.end_offset
    twin.fail_over_share_coordinator()
    lab.seek(3)
    lab.fail_over_share_coordinator()


def test_an_unknown_member_is_named_with_the_members_there_are() -> None:
    lab = _live_lab()
    with pytest.raises(KeyError) as refused:  # UnknownName: a KipLabError, and still a KeyError
        lab.crash("nobody")
    assert isinstance(refused.value, KipLabError)
    assert str(refused.value) == "no member named 'nobody'; members: ['A']"
    assert lab.step_count == _live_lab().step_count  # refused: no step taken


def test_stepper_refuses_an_unknown_member() -> None:
    with pytest.raises(ArgumentError, match=r"Stepper: member: no member named 'nobody'; have: A"):
        widgets.Stepper(_live_lab(), member="nobody")


def test_the_cluster_holds_at_most_100000_partitions_in_all() -> None:
    lab = Lab()
    lab.create_topic("a", 60_000)
    with pytest.raises(ArgumentError, match="120,000 partitions in all; at most 100,000"):
        lab.create_topic("b", 60_000)
    assert lab.cluster.topic_names() == ["a"]


def test_seek_and_run_are_bounded_by_the_scenario_step_budget() -> None:
    lab = _lab()
    with pytest.raises(InvalidArgument, match="less than or equal to 100000000"):
        lab.run(steps=10**9)
    with pytest.raises(ArgumentError, match="the run ends at step"):
        lab.seek(lab.step_count + 10)  # nothing armed: the run cannot go there


def test_run_until_a_time_already_past_is_refused() -> None:
    lab = _lab()
    now = lab.now
    lab.run(until=now + 500)
    with pytest.raises(ArgumentError, match=f"the clock is at {now + 500} ms already"):
        lab.run(until=now + 100)
