"""The scenarios shipped with kip_lab (``kip_lab/scenarios/library/*.yaml``), loadable by name."""

from __future__ import annotations

from importlib import resources

from kip_lab.contract import checked
from kip_lab.scenarios.loading import Problem, ScenarioError, scenario_from_yaml
from kip_lab.scenarios.model import Scenario

_LIBRARY = resources.files("kip_lab.scenarios") / "library"


@checked
def list_library() -> list[str]:
    """The names of the shipped scenarios, sorted."""
    return sorted(p.name.removesuffix(".yaml") for p in _LIBRARY.iterdir() if p.name.endswith(".yaml"))


@checked
def load_library_scenario(name: str) -> Scenario:
    """A shipped scenario by name (``"basic"``)."""
    if name not in list_library():
        raise ScenarioError(name, [Problem("", None, f"no library scenario named {name!r}; have: {list_library()}")])
    return scenario_from_yaml((_LIBRARY / f"{name}.yaml").read_text(encoding="utf-8"), f"library/{name}.yaml")
