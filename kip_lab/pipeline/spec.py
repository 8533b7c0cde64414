"""A sweep: one scenario family, a grid of parameters, and seeds; every combination is one deterministic run.

A spec names either a ``template`` (``kip_lab.pipeline.templates.TEMPLATES``: parameters are
the template's fields) or a ``scenario`` (a library name or a scenario file: grid keys are
dotted paths into it, such as ``lab.link.drop_probability``). ``params`` fixes values for every
run; ``grid`` lists the values to cross. The spec is validated completely — every grid point
is built — when it is read, so a bad value is refused, naming its field, before Spark starts::

    name: bounce-by-size
    template: rolling_bounce
    params: {partitions: 20}
    grid: {members: [5, 10, 20], loss: [0.0, 0.01]}
    seeds: {count: 5}          # or a list: [1, 2, 3]
    events: false              # true: keep every run's full trace in the events table

Run ids are derived from what a run is (its family, its full parameters, its seed), never
from its position, so a resumed or extended sweep recognises the runs it already has.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator
from pydantic_core import ErrorDetails

from kip_lab.contract import LONG_MAX, Model, checked
from kip_lab.pipeline.templates import TEMPLATES
from kip_lab.scenarios import Problem, Scenario, ScenarioError, load_library_scenario, load_scenario
from kip_lab.scenarios.loading import parse_yaml, read_limited
from kip_lab.scenarios.model import FieldError

LIBRARY_PROTOCOL = "consumer"  # the library's scenarios are KIP-848 groups
MAX_GRID_POINTS = 10_000  # each is built when the spec is read: about half a millisecond each
MAX_RUNS = 100_000  # grid points x seeds


Seed = Annotated[int, Field(ge=-LONG_MAX - 1, le=LONG_MAX)]  # a scenario's seed: a Java long


class SeedRange(Model):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start: Seed = 0
    count: int = Field(..., ge=1, le=MAX_RUNS)

    @model_validator(mode="after")
    def _within_longs(self) -> SeedRange:
        """The last seed, start + count - 1, is a long too."""
        if self.start + self.count - 1 > LONG_MAX:
            latest = LONG_MAX - self.count + 1
            raise ValueError(f"start + count - 1 is past {LONG_MAX:,}, the largest seed; start at most {latest}")
        return self


class PlannedRun(Model):
    """One run of a sweep: which grid point, which seed, and its id."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    point: int
    seed: int


class SweepSpec(Model):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(..., pattern=r"^[A-Za-z0-9_.-]+$", description="names the sweep in its tables")
    template: str | None = Field(None, description="a template of kip_lab.pipeline.templates.TEMPLATES")
    scenario: str | None = Field(None, description="a library scenario name or a scenario file")
    params: dict[str, Any] = Field({}, description="values every run takes")
    grid: dict[str, list[Any]] = Field({}, description="parameter -> the values to cross")
    seeds: Annotated[
        Annotated[list[Seed], Field(max_length=MAX_RUNS), Tag("list")] | Annotated[SeedRange, Tag("range")],
        Discriminator(lambda v: "range" if isinstance(v, dict | SeedRange) else "list"),
    ] = Field([0], description="a list of seeds, or {start, count}")
    events: bool = Field(False, description="keep every run's full trace (the events table)")

    @model_validator(mode="after")
    def _valid_runs(self) -> SweepSpec:
        """The rules, in this order: the family, the grid's values, the number of runs, every grid point built."""
        self._check_family()
        if "seed" in self.params:
            raise FieldError(("params", "seed"), "runs take their seeds from seeds:, not from params")
        for key, values in self.grid.items():
            self._check_grid_values(key, values)
        self._check_run_count()
        if self.scenario is not None:
            self.base_scenario  # noqa: B018 (a missing file or library name is named now)
        built: dict[str, int] = {}
        for index in range(len(self.points)):
            identity = json.dumps(self._point_identity(index), sort_keys=True)  # builds (so validates) the point
            if identity in built:  # [2, 2.0], or "2" and 2: one run under two names
                first, again = self.points[built[identity]], self.points[index]
                differ = ", ".join(f"{k}: {first[k]!r} and {again[k]!r}" for k in self.grid if first[k] != again[k])
                raise FieldError(("grid",), f"two grid points are the same run: {differ}")
            built[identity] = index
        return self

    def _check_family(self) -> None:
        """Exactly one of a known template or a scenario."""
        if (self.template is None) == (self.scenario is None):
            raise FieldError(("template",), "give exactly one of template or scenario")
        if self.template is not None and self.template not in TEMPLATES:
            raise FieldError(("template",), f"unknown template {self.template!r}; have: {', '.join(TEMPLATES)}")

    def _check_grid_values(self, key: str, values: list[Any]) -> None:
        """A grid parameter lists at least one value, none twice, and is not also fixed in params."""
        if not values:
            raise FieldError(("grid", key), "needs at least one value")
        if len({json.dumps(_normal(v), sort_keys=True) for v in values}) < len(values):
            raise FieldError(("grid", key), f"lists a value twice: {values}")
        if key in self.params:
            raise FieldError(("grid", key), "is also in params; give it in one place")
        if key == "seed":
            raise FieldError(("grid", key), "runs take their seeds from seeds:, not from the grid")

    def _check_run_count(self) -> None:
        """At most ``MAX_GRID_POINTS`` grid points and ``MAX_RUNS`` runs, and no seed twice."""
        points = math.prod(len(values) for values in self.grid.values())
        if points > MAX_GRID_POINTS:
            raise FieldError(("grid",), f"crosses to {points:,} points; at most {MAX_GRID_POINTS:,}")
        seeds = self.seeds.count if isinstance(self.seeds, SeedRange) else len(self.seeds)
        if points * seeds > MAX_RUNS:
            runs = f"{points:,} grid points x {seeds:,} seeds is {points * seeds:,} runs"
            raise FieldError(("seeds",), f"{runs}; at most {MAX_RUNS:,}")
        if len(set(self.seed_list)) < len(self.seed_list):
            raise FieldError(("seeds",), "lists a seed twice")

    # ------------------------------------------------------------------ the grid
    @property
    def seed_list(self) -> list[int]:
        if isinstance(self.seeds, SeedRange):
            return list(range(self.seeds.start, self.seeds.start + self.seeds.count))
        return list(self.seeds)

    @cached_property
    def points(self) -> list[dict[str, Any]]:
        """Every combination of the grid (keys in sorted order, values in the order given), with params."""
        keys = sorted(self.grid)
        return [
            {**self.params, **dict(zip(keys, values, strict=True))}
            for values in itertools.product(*(self.grid[k] for k in keys))
        ]

    @property
    def dimensions(self) -> list[str]:
        """The parameters the spec names (grid and params), as they appear as columns of the runs table."""
        return sorted({*self.params, *self.grid})

    @property
    def family(self) -> str:
        """``rolling_bounce``, or ``scenario-<name>`` for a scenario sweep (the tables' ``template``)."""
        return self.template if self.template is not None else f"scenario-{self.base_scenario.name}"

    def plan(self) -> list[PlannedRun]:
        """Every run, grid point by grid point, seed by seed."""
        return [
            PlannedRun(run_id=run_id(self._point_identity(point), seed), point=point, seed=seed)
            for point in range(len(self.points))
            for seed in self.seed_list
        ]

    def protocol(self, point: int) -> str:
        if self.template is None:
            return LIBRARY_PROTOCOL
        return TEMPLATES[self.template].params.model_validate(self.points[point]).protocol

    # ------------------------------------------------------------------ building a run
    def scenario_for(self, point: int, seed: int) -> Scenario:
        """The scenario that run (grid point, seed) executes."""
        values = self.points[point]
        if self.template is not None:
            return TEMPLATES[self.template].scenario(values, seed)
        data = self.base_scenario.model_dump(mode="json", exclude_unset=True)
        for path, value in values.items():
            _set_path(data, path, value)
        data["seed"] = seed
        return Scenario.model_validate(data)

    def _point_identity(self, point: int) -> dict[str, Any]:
        """What a grid point is, in full (defaults included), raising a FieldError naming the bad value."""
        values = self.points[point]
        try:
            if self.template is not None:
                params = TEMPLATES[self.template].params.model_validate(values)
                TEMPLATES[self.template].build(params, 0)  # the scenario it makes is valid too
                return {"template": self.template, "params": params.model_dump(mode="json")}
            scenario = self.scenario_for(point, 0)
            return {"scenario": scenario.model_dump(mode="json", exclude={"seed"})}
        except ValidationError as exc:
            raise self._field_error(values, exc) from None

    def _field_error(self, values: dict[str, Any], exc: ValidationError) -> FieldError:
        error = exc.errors()[0]
        loc = tuple(error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        ctx = error.get("ctx") or {}
        if isinstance(ctx.get("error"), FieldError):
            loc, message = (*loc, *ctx["error"].loc), ctx["error"].message
        if self.template is not None:
            fields = sorted(TEMPLATES[self.template].params.model_fields)
            if error["type"] == "extra_forbid" or error["type"] == "extra_forbidden":
                message = f"{self.template} has no parameter {loc[0]!r}; its parameters: {', '.join(fields)}"
            key = str(loc[0]) if loc and str(loc[0]) in values else None
        else:
            dotted = ".".join(map(str, loc))
            key = next((k for k in sorted(values, key=len, reverse=True) if dotted.startswith(k)), None)
        if key is None:  # a rule across fields: blame the grid point
            described = ", ".join(f"{k}={values[k]!r}" for k in sorted(values))
            return FieldError(("grid",), f"the point ({described}): {message}")
        where = "grid" if key in self.grid else "params"
        return FieldError((where, key), f"{values[key]!r}: {message}")

    @cached_property
    def base_scenario(self) -> Scenario:
        """A scenario sweep's scenario, as read (read once)."""
        if self.scenario is None:
            raise ValueError("a template sweep has no base scenario")
        return _resolve_scenario(self.scenario)


def _normal(value: Any) -> Any:
    """A grid value as it compares: 2.0 is 2 (a whole float is the int); lists and maps element by element."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    return value


def _resolve_scenario(name: str) -> Scenario:
    path = Path(name)
    try:
        if path.exists() or path.suffix in (".yaml", ".yml", ".json"):
            return load_scenario(path)
        return load_library_scenario(name)
    except ScenarioError as exc:
        raise FieldError(("scenario",), str(exc)) from None


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    node = data
    *parents, last = path.split(".")
    for key in parents:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise FieldError(tuple(path.split(".")), f"{key!r} is not a mapping in the scenario")
        node = child
    node[last] = value


def column_name(parameter: str) -> str:
    """A parameter's column in the runs table: dots (scenario paths) become underscores."""
    return parameter.replace(".", "_")


def run_id(identity: dict[str, Any], seed: int) -> str:
    text = json.dumps({**identity, "seed": seed}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@checked
def load_sweep(source: str | Path | dict[str, Any]) -> SweepSpec:
    """A validated sweep spec from a YAML/JSON file or a dict; a bad one raises ``ScenarioError`` naming the field."""
    name = "<sweep>"
    if isinstance(source, dict):
        data = source
    else:
        name = str(source)
        _, data = parse_yaml(read_limited(source), name)
        if not isinstance(data, dict):
            raise ScenarioError(name, [Problem("", None, "expected a mapping with name, template, grid, seeds, ...")])
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(name, [_problem(e) for e in exc.errors()]) from None


def _problem(error: ErrorDetails) -> Problem:
    loc = tuple(element for element in error["loc"] if element not in ("list", "range"))  # the seeds' union tags
    message = error["msg"].removeprefix("Value error, ")
    ctx = error.get("ctx") or {}
    if isinstance(ctx.get("error"), FieldError):
        loc, message = (*loc, *ctx["error"].loc), ctx["error"].message
    elif error["type"] == "extra_forbidden":
        message = f"unknown field; expected one of: {', '.join(sorted(SweepSpec.model_fields))}"
    return Problem(".".join(map(str, loc)), None, message)
