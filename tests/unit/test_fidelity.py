"""The fidelity profile: one switch, reachable from the coordinator, the Lab, scenario files and sweeps."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kip_lab.coordinator import CoordinatorConfig
from kip_lab.lab import Lab, LabConfig
from kip_lab.pipeline import load_sweep
from kip_lab.scenarios import load_library_scenario, run_scenario, scenario_from_yaml
from kip_lab.scenarios.profiles import compare_profiles, with_fidelity

SCENARIO = """
name: fidelity
lab: {LAB}
topics: [{name: foo, partitions: 2}]
members:
  A: {subscribed_topic_names: [foo]}
"""


def test_the_default_is_kafka_and_only_two_profiles_exist():
    assert CoordinatorConfig().fidelity == "kafka"
    assert CoordinatorConfig(fidelity="kip").fidelity == "kip"
    with pytest.raises(ValidationError, match="fidelity"):
        CoordinatorConfig(fidelity="strict")


def test_lab_config_takes_the_profile_directly_or_through_the_coordinator():
    assert LabConfig().fidelity == "kafka"
    assert LabConfig(fidelity="kip").coordinator.fidelity == "kip"
    assert LabConfig(coordinator=CoordinatorConfig(fidelity="kip")).fidelity == "kip"
    shorthand = LabConfig(fidelity="kip", coordinator=CoordinatorConfig(session_timeout_ms=50_000))
    assert (shorthand.fidelity, shorthand.coordinator.session_timeout_ms) == ("kip", 50_000)
    with pytest.raises(ValidationError, match=r"contradicts coordinator\.fidelity"):
        LabConfig(fidelity="kip", coordinator=CoordinatorConfig(fidelity="kafka"))
    assert Lab(config=LabConfig(fidelity="kip")).coordinator.config.fidelity == "kip"


@pytest.mark.parametrize("lab", ["{fidelity: kip}", "{coordinator: {fidelity: kip}}"])
def test_a_scenario_file_names_the_profile_in_lab(lab):
    scenario = scenario_from_yaml(SCENARIO.replace("{LAB}", lab))
    assert scenario.lab.config().coordinator.fidelity == "kip"


def test_a_scenario_file_with_an_unknown_profile_is_refused_naming_the_field():
    with pytest.raises(Exception, match="fidelity"):
        scenario_from_yaml(SCENARIO.replace("{LAB}", "{fidelity: strict}"))


def test_a_template_sweep_crosses_the_profiles():
    spec = load_sweep(
        {"name": "f", "template": "member_failures", "grid": {"fidelity": ["kafka", "kip"]}, "seeds": [1]}
    )
    assert [spec.scenario_for(p, 1).lab.coordinator.fidelity for p in range(2)] == ["kafka", "kip"]
    assert len({run.run_id for run in spec.plan()}) == 2


def test_a_scenario_sweep_crosses_the_profiles():
    spec = load_sweep(
        {
            "name": "f",
            "scenario": "member_failure",
            "grid": {"lab.coordinator.fidelity": ["kafka", "kip"]},
            "seeds": [1],
        }
    )
    assert [spec.scenario_for(p, 1).lab.coordinator.fidelity for p in range(2)] == ["kafka", "kip"]


def test_with_fidelity_changes_the_profile_and_nothing_else():
    scenario = load_library_scenario("member_failure")
    kip = with_fidelity(scenario, "kip")
    assert kip.lab.coordinator.fidelity == "kip"
    assert kip.lab.coordinator.session_timeout_ms == scenario.lab.coordinator.session_timeout_ms
    assert kip.model_dump(exclude={"lab"}) == scenario.model_dump(exclude={"lab"})


def test_compare_profiles_shows_where_the_member_failure_case_departs():
    """Kafka ``GroupMetadataManager.removeMember`` tombstones the target entry with the member; the KIP's
    "Member Failure" table keeps it until the next target, whose batch then drops it."""
    comparison = compare_profiles("member_failure")
    assert all(result.ok for result in comparison.results.values())
    removal, next_target = comparison.differences
    assert removal.kafka.origin == removal.kip.origin == "session timeout A"
    assert "~TargetAssignmentMember(A)" in removal.kafka.records
    assert "~TargetAssignmentMember(A)" not in removal.kip.records
    assert "~TargetAssignmentMember(A)" in next_target.kip.records
    assert "~TargetAssignmentMember(A)" not in next_target.kafka.records
    assert comparison.rows()[0]["kafka_records"].startswith("~CurrentMemberAssignment(A), ~TargetAssignmentMember(A)")


def test_the_same_scenario_and_profile_give_the_same_trace():
    scenario = with_fidelity(load_library_scenario("member_failure"), "kip")
    first, second = run_scenario(scenario).trace, run_scenario(scenario).trace
    assert first.to_jsonl() == second.to_jsonl()


def test_one_switch_sets_the_share_partition_leaders_profile_too():
    """``LabConfig(fidelity=...)`` reaches the share-partition leaders; contradicting it is refused."""
    from kip_lab.lab import LabConfig
    from kip_lab.share.config import SharePartitionConfig

    assert LabConfig(fidelity="kip").share.fidelity == "kip"
    assert LabConfig().share.fidelity == "kafka"
    with pytest.raises(ValueError, match=r"share\.fidelity='kafka' contradicts coordinator\.fidelity='kip'"):
        LabConfig(fidelity="kip", share=SharePartitionConfig(fidelity="kafka"))
