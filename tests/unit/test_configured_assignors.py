"""``CoordinatorConfig.assignors`` (Kafka's ``group.consumer.assignors``): which server assignors the
coordinator offers, the first being the default for a member that names none.

Kafka ``GroupCoordinatorConfig.consumerGroupAssignors`` builds the list (built-in names since 4.0),
``GroupMetadataManager`` takes its first as the default and refuses a heartbeat naming any other
with UNSUPPORTED_ASSIGNOR. Two members on two topics of three partitions tell the assignors apart:
range co-partitions (4 and 2 partitions), uniform balances (3 and 3).
"""

from __future__ import annotations

import pytest
from conftest import Harness
from pydantic import ValidationError

from kip_lab.assignors import UniformAssignor
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.errors import ArgumentError
from kip_lab.lab import Lab, LabConfig
from kip_lab.protocol import Errors
from kip_lab.scenarios import run_scenario
from kip_lab.scenarios.loading import scenario_from_yaml
from kip_lab.scenarios.shrink import scenario_yaml

RANGE_SPLIT = {"A": [("bar", 0), ("bar", 1), ("foo", 0), ("foo", 1)], "B": [("bar", 2), ("foo", 2)]}
UNIFORM_SPLIT = {"A": [("bar", 0), ("bar", 1), ("bar", 2)], "B": [("foo", 0), ("foo", 1), ("foo", 2)]}


def two_topic_lab(config: LabConfig) -> Lab:
    """Members A and B, naming no server assignor, on foo and bar (3 partitions each), run until stable."""
    lab = Lab(seed=0, config=config)
    for topic in ("foo", "bar"):
        lab.create_topic(topic, 3)
    for name in "AB":
        lab.add_consumer(name, subscribed_topic_names=["foo", "bar"])
    assert lab.run_until_stable()
    return lab


def owned(lab: Lab) -> dict[str, list[tuple[str, int]]]:
    names = {lab.topic_id(topic): topic for topic in ("foo", "bar")}
    return {name: sorted((names[t], p) for t, p in lab.clients[name].owned) for name in "AB"}


def test_the_default_is_kafkas_uniform_then_range():
    assert CoordinatorConfig().assignors == ("uniform", "range")
    assert list(GroupCoordinator().assignors) == ["uniform", "range"]


@pytest.mark.parametrize(
    ("assignors", "message"),
    [
        ([], "at least one server-side assignor is required"),
        (["range", "uniform", "range"], "assignor names must be distinct: 'range' is listed twice"),
        (["range", "sticky"], "'sticky' is not a built-in server assignor; the built-in ones are uniform, range"),
        ("range,cooperative-sticky", "'cooperative-sticky' is not a built-in server assignor"),
    ],
)
def test_a_bad_assignor_list_is_refused_naming_the_problem(assignors, message):
    with pytest.raises(ValidationError) as refused:
        CoordinatorConfig(assignors=assignors)
    assert message in str(refused.value)
    assert "assignors" in str(refused.value)


def test_a_text_lists_names_as_kafkas_list_configs_do():
    """Kafka reads a LIST config from ``range,uniform`` (spaces around the commas ignored)."""
    assert CoordinatorConfig(assignors=" range , uniform").assignors == ("range", "uniform")


@pytest.mark.parametrize(
    ("assignors", "split"),
    [(["range", "uniform"], RANGE_SPLIT), (["uniform", "range"], UNIFORM_SPLIT), (["range"], RANGE_SPLIT)],
)
def test_a_member_naming_no_assignor_gets_the_first_configured(assignors, split):
    lab = two_topic_lab(LabConfig(coordinator={"assignors": assignors}))
    assert owned(lab) == split
    lab.fail_over()  # the successor is built from the same config: the same assignors, in the same order
    assert list(lab.coordinator.assignors) == assignors


def test_a_member_naming_an_assignor_not_configured_gets_unsupported_assignor():
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid``: a built-in assignor the
    broker does not list is refused like an unknown one, naming those it lists."""
    harness = Harness(CoordinatorConfig(assignors=["range"]))
    refused = harness.join("A", server_assignor="uniform").response
    assert refused.error_code == Errors.UNSUPPORTED_ASSIGNOR
    assert refused.error_message == "ServerAssignor uniform is not supported. Supported assignors: range."
    assert harness.join("A", server_assignor="range").response.error_code == Errors.NONE


def test_the_supported_assignors_are_listed_in_kafkas_hash_map_order():
    """Kafka lists its name-to-assignor ``HashMap``'s keys, whatever order the config gave them in."""
    harness = Harness(CoordinatorConfig(assignors=["range", "uniform"]))
    refused = harness.join("A", server_assignor="sticky").response
    assert refused.error_message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."


def test_assignor_objects_given_to_the_coordinator_replace_the_configured_names():
    """A custom assignor is an object, not a name: passed to the coordinator, it wins over the config."""
    coordinator = GroupCoordinator(CoordinatorConfig(assignors=["range"]), assignors=[UniformAssignor()])
    assert list(coordinator.assignors) == ["uniform"]
    with pytest.raises(ArgumentError, match="GroupCoordinator: assignors: at least one server-side assignor"):
        GroupCoordinator(CoordinatorConfig(assignors=["range"]), assignors=[])


SCENARIO = """
name: range_first
lab: {coordinator: {assignors: [range, uniform]}}
topics: [{name: foo, partitions: 3}, {name: bar, partitions: 3}]
members:
  A: {subscribed_topic_names: [foo, bar]}
  B: {subscribed_topic_names: [foo, bar]}
run: {until_stable: true, timeout_ms: 60000}
expect:
  assignment: {A: {foo: [0, 1], bar: [0, 1]}, B: {foo: [2], bar: [2]}}
"""


def test_a_scenario_file_sets_the_assignors_and_keeps_them_when_written_back():
    scenario = scenario_from_yaml(SCENARIO)
    assert scenario.lab.config().coordinator.assignors == ("range", "uniform")
    result = run_scenario(scenario)
    assert result.ok, [e for e in result.expectations if not e.passed]
    assert scenario_from_yaml(scenario_yaml(scenario)) == scenario
