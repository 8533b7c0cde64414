"""Scenarios: a run described as data (YAML or Python), validated, run, and checked.

    from kip_lab.scenarios import load_library_scenario, run_scenario
    result = run_scenario(load_library_scenario("basic"))
    result.ok, result.members, result.expectations

The command line (``kip-lab``, ``kip_lab.cli``) is a thin layer over these functions.
"""

from kip_lab.scenarios.library import list_library, load_library_scenario
from kip_lab.scenarios.loading import Problem, ScenarioError, load_scenario, scenario_from_yaml
from kip_lab.scenarios.model import Scenario, export_schema, scenario_schema
from kip_lab.scenarios.runner import ExpectationResult, MemberRow, ScenarioResult, build_lab, run_lab, run_scenario

__all__ = [
    "ExpectationResult",
    "MemberRow",
    "Problem",
    "Scenario",
    "ScenarioError",
    "ScenarioResult",
    "build_lab",
    "export_schema",
    "list_library",
    "load_library_scenario",
    "load_scenario",
    "run_lab",
    "run_scenario",
    "scenario_from_yaml",
    "scenario_schema",
]
