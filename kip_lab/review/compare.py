"""A design review: one scenario, its options side by side, every combination over several seeds.

    from kip_lab.review import compare
    review = compare("rolling_bounce", {"lab.coordinator.assignment_interval_ms": [0, 1000]}, seeds=5)
    review.table()          # outcome x variant: median, min, max over the seeds
    review.verdicts         # sentences generated from those numbers
    review.write("out/")    # out/report.html: one self-contained file

What is varied are paths into the scenario as written (``lab.coordinator.session_timeout_ms``);
``members.*.server_assignor`` sets a field of every member; in a template scenario (``template:
rolling_restart``) a bare name is one of its parameters (``static`` is ``params.static``). Every
variant is validated before anything runs, and a bad value is refused naming its ``--vary``.

The outcomes are ``compute_metrics``'s numbers for each run (``kip_lab.lab.metrics``), taken as
they are, except that what adds up over a run (partition unavailability, moves, revocations, and
every metric ``compute_metrics`` reports under ``totals_before``) is counted from the scenario's
first timed event: the cost of the change under review, without the group's own start.
"""

from __future__ import annotations

import itertools
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from kip_lab.errors import KipLabError
from kip_lab.lab.trace import Trace
from kip_lab.scenarios import Problem, Scenario, ScenarioError, list_library, run_scenario
from kip_lab.scenarios.loading import parse_yaml, read_limited
from kip_lab.scenarios.model import FieldError
from kip_lab.scenarios.templates import TEMPLATES

MAX_VARIANTS = 64
MAX_SEEDS = 100
Executor = Literal["local", "spark"]


class ReviewError(KipLabError, ValueError):
    """A comparison that cannot be set up: no option varied, too many variants or seeds, a value twice."""


@dataclass(frozen=True)
class Outcome:
    """One row of the review's table: a ``compute_metrics`` key, in words, and which way is better."""

    key: str
    label: str
    unit: str  # "ms", "records", "partitions", ... ("" for a plain count)
    lower_is_better: bool = True


# The rows a review shows, in this order, when compute_metrics reports them (a metric it does not
# report is left out; ``compare(..., outcomes=[...])`` picks others, any numeric key).
OUTCOMES: tuple[Outcome, ...] = (
    Outcome("records_reprocessed", "records re-processed", "records"),
    Outcome("records_skipped", "records skipped", "records"),
    Outcome("processing_pause_ms", "processing pause", "ms"),
    Outcome("commits_failed", "commits failed", "commits"),
    Outcome("max_lag_records", "largest lag", "records"),
    Outcome("max_time_to_stable_ms", "longest time to stable", "ms"),
    Outcome("mean_time_to_stable_ms", "mean time to stable", "ms"),
    Outcome("total_unavailability_ms", "partition unavailability", "ms"),
    Outcome("partition_moves", "partition moves", "moves"),
    Outcome("revocations", "partitions revoked", "partitions"),
    Outcome("stops_without_move", "stops that moved nothing", "stops"),
    Outcome("unsettled_triggers", "changes never settled", "changes"),
    Outcome("invariant_violations", "invariant violations", "violations"),
)


def outcome_value(metrics: Mapping[str, Any], key: str) -> float | None:
    """A run's value of one outcome: ``metrics[key]``, counted from the first timed event when
    ``compute_metrics`` reports the total before it (``totals_before``)."""
    value = metrics.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    before = (metrics.get("totals_before") or {}).get(key)
    return value - before if isinstance(before, int | float) else value


@dataclass(frozen=True)
class Variant:
    """One combination of the varied options: its values by key, its label, the scenario it runs."""

    index: int
    values: dict[str, Any]
    label: str
    scenario: Scenario


@dataclass(frozen=True)
class RunOutcome:
    """One run: which variant, which seed, and ``compute_metrics`` of its trace."""

    variant: int
    seed: int
    metrics: dict[str, Any]
    stable: bool


@dataclass(frozen=True)
class Cell:
    """One variant's numbers for one outcome, over its seeds."""

    median: float | None
    low: float | None
    high: float | None
    values: tuple[float | None, ...]  # per seed, in seed order
    best: bool = False


@dataclass
class Review:
    """What ``compare`` ran and what came out: variants, runs, the table, the verdicts."""

    scenario: str
    description: str
    varied: dict[str, list[Any]]
    seeds: list[int]
    variants: list[Variant]
    runs: list[RunOutcome]
    outcomes: list[Outcome]
    executor: Executor
    traces: dict[int, Trace] = field(repr=False)  # variant index -> its representative run's trace
    representative: dict[int, int] = field(default_factory=dict)  # variant index -> seed
    seconds: float = 0.0
    written: Path | None = None  # the report, once written

    # ------------------------------------------------------------------ the numbers
    def values(self, outcome: str, variant: int) -> list[float | None]:
        """The outcome's value in each run of the variant, in seed order."""
        return [outcome_value(r.metrics, outcome) for r in self.runs if r.variant == variant]

    def cells(self) -> dict[str, list[Cell]]:
        """outcome key -> one cell per variant; the best median(s) of a row marked, unless all are equal."""
        rows: dict[str, list[Cell]] = {}
        for outcome in self.outcomes:
            cells = [_cell(self.values(outcome.key, v.index)) for v in self.variants]
            medians = [c.median for c in cells if c.median is not None]
            if len(set(medians)) > 1:
                best = min(medians) if outcome.lower_is_better else max(medians)
                cells = [Cell(c.median, c.low, c.high, c.values, c.median == best) for c in cells]
            rows[outcome.key] = cells
        return rows

    def table(self) -> Any:
        """A pandas frame: one row per outcome, per variant its median, min and max over the seeds."""
        import pandas as pd

        records = []
        for outcome in self.outcomes:
            for variant, cell in zip(self.variants, self.cells()[outcome.key], strict=True):
                records.append(
                    {
                        "outcome": outcome.label,
                        "variant": variant.label,
                        "median": cell.median,
                        "min": cell.low,
                        "max": cell.high,
                        "best": cell.best,
                    }
                )
        frame = pd.DataFrame(records)
        wide = frame.pivot(index="outcome", columns="variant", values="median")
        return wide.loc[[o.label for o in self.outcomes], [v.label for v in self.variants]]

    @property
    def verdicts(self) -> list[str]:
        """What the numbers say, in sentences built from them (see ``verdict_sentences``)."""
        return verdict_sentences(self.outcomes, self.variants, self.cells(), len(self.seeds))

    def write(self, out: str | Path) -> Path:
        """Write ``out/report.html`` (one self-contained file) and return its path."""
        from kip_lab.review.report import write_report

        self.written = write_report(self, Path(out))
        return self.written


def _cell(values: list[float | None]) -> Cell:
    present = [v for v in values if v is not None]
    if not present:
        return Cell(None, None, None, tuple(values))
    return Cell(statistics.median(present), min(present), max(present), tuple(values))


# ---------------------------------------------------------------------------- verdicts
def format_value(value: float | None, unit: str) -> str:
    """A number as the report prints it: ``1,234 ms``, ``4,300.9 ms``, ``n/a``."""
    if value is None:
        return "n/a"
    text = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
    if value == 1 and unit.endswith("s") and unit != "ms":
        unit = unit[:-1]  # 1 move, 1 record
    return f"{text} {unit}".rstrip()


def verdict_sentences(
    outcomes: Sequence[Outcome], variants: Sequence[Variant], cells: Mapping[str, Sequence[Cell]], seeds: int
) -> list[str]:
    """What the table says: which variant is best on most outcomes, then per outcome on which the
    variants differ the best and worst median (and whether their ranges over the seeds overlap),
    then ``_closing_sentences``."""
    if len(variants) < 2:
        return [f"One variant only ({variants[0].label}): nothing to compare it with."]
    name = _Namer(variants)
    sentences, ties, wins = [], [], [0] * len(variants)
    for outcome in outcomes:
        ranked = _ranked(outcome, cells[outcome.key])
        if ranked is None:
            ties.append(outcome.label)
            continue
        best, worst = ranked
        for i in best:
            wins[i] += 1
        sentences.append(_outcome_sentence(outcome, cells[outcome.key], name, best, worst, seeds))
    if sentences:
        top = max(wins)
        leaders = [i for i, count in enumerate(wins) if count == top]
        sentences.insert(
            0, f"Overall, {name.subject(leaders)} best on {top} of the {len(sentences)} outcomes that differ."
        )
    return sentences + _closing_sentences(name, cells, ties, seeds)


def _closing_sentences(name: _Namer, cells: Mapping[str, Sequence[Cell]], ties: list[str], seeds: int) -> list[str]:
    """The outcomes every variant ties on, whether the seeds mattered at all, and any broken invariant."""
    sentences = []
    if ties:
        sentences.append(f"Every variant has the same median {_listed(ties)}.")
    if seeds > 1 and all(c.low == c.high for row in cells.values() for c in row):
        sentences.append(f"The {seeds} seeds gave the same numbers in every variant: nothing here depends on the seed.")
    violations = cells.get("invariant_violations")
    if violations and any(c.high for c in violations):
        broken = [i for i, c in enumerate(violations) if c.high]
        sentences.append(f"Warning: invariants were violated in runs of {name(broken)}.")
    return sentences


def _ranked(outcome: Outcome, row: Sequence[Cell]) -> tuple[list[int], list[int]] | None:
    """The variants with the best median and those with the worst; None when every median is the same."""
    medians = {i: c.median for i, c in enumerate(row) if c.median is not None}
    if len(set(medians.values())) < 2:
        return None
    best_value = (min if outcome.lower_is_better else max)(medians.values())
    worst_value = (max if outcome.lower_is_better else min)(medians.values())
    return [i for i, m in medians.items() if m == best_value], [i for i, m in medians.items() if m == worst_value]


def _outcome_sentence(
    outcome: Outcome, row: Sequence[Cell], name: _Namer, best: list[int], worst: list[int], seeds: int
) -> str:
    sentence = (
        f"{outcome.label.capitalize()}: {name.subject(best)} best "
        f"(median {format_value(row[best[0]].median, outcome.unit)}), "
        f"{name(worst)} worst (median {format_value(row[worst[0]].median, outcome.unit)})"
    )
    if seeds > 1 and _spreads_overlap(outcome, [row[i] for i in best], [row[i] for i in worst]):
        sentence += "; their ranges over the seeds overlap, so the seeds matter as much as the option"
    return sentence + "."


class _Namer:
    """Names a group of variants: one by its label, more by what they share
    and no other variant has ("the variants with static=true"), else by their labels (and count)."""

    def __init__(self, variants: Sequence[Variant]) -> None:
        self.variants = variants

    def __call__(self, group: Sequence[int]) -> str:
        labels = [self.variants[i].label for i in group]
        if len(group) == 1:
            return labels[0]
        shared = self._shared(group)
        if shared:
            return f"the variants with {shared}"
        others = self._shared([v.index for v in self.variants if v.index not in group])
        if others:
            return f"every variant but those with {others}"
        return _listed(labels) if len(group) == 2 else f"{len(group)} variants ({_listed(labels)})"

    def subject(self, group: Sequence[int]) -> str:
        """The group's name with its verb: 'static=true is', 'the variants with static=true are'."""
        text = self(group)
        return f"{text} {'is' if len(group) == 1 or text.startswith('every variant') else 'are'}"

    def _shared(self, group: Sequence[int]) -> str | None:
        """The values the group's variants, and no others, have in common ('static=true'), if any."""
        if not group:
            return None
        first = self.variants[group[0]].values
        shared = {k: v for k, v in first.items() if all(self.variants[i].values[k] == v for i in group)}
        alike = [v.index for v in self.variants if all(v.values[k] == x for k, x in shared.items())]
        if not shared or sorted(alike) != sorted(group):
            return None
        return " and ".join(f"{k.split('.')[-1]}={_text(v)}" for k, v in shared.items())


def _listed(names: Sequence[str]) -> str:
    """'A', 'A and B', 'A, B and C'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _spreads_overlap(outcome: Outcome, best: Sequence[Cell], worst: Sequence[Cell]) -> bool:
    """The best variant's worst seed is no better than the worst variant's best seed."""
    if outcome.lower_is_better:
        return max(c.high or 0 for c in best) >= min(c.low or 0 for c in worst)
    return min(c.low or 0 for c in best) <= max(c.high or 0 for c in worst)


# ---------------------------------------------------------------------------- the variants
def load_scenario_data(scenario: str | Path | Mapping[str, Any] | Scenario) -> tuple[dict[str, Any], str]:
    """The scenario as plain data (as written: a template stays a template), and a name for errors."""
    if isinstance(scenario, Scenario):
        return scenario.model_dump(mode="json", exclude_unset=True), scenario.name
    if isinstance(scenario, Mapping):
        return dict(scenario), str(scenario.get("name", "<scenario>"))
    path = Path(scenario)
    if not (path.exists() or path.suffix in (".yaml", ".yml", ".json")) and str(scenario) in list_library():
        from importlib import resources

        path_text = (resources.files("kip_lab.scenarios") / "library" / f"{scenario}.yaml").read_text(encoding="utf-8")
        source = f"library/{scenario}.yaml"
    elif path.exists() or path.suffix in (".yaml", ".yml", ".json"):
        path_text, source = read_limited(path), str(path)
    else:
        problem = Problem("", None, f"no such file, nor a library scenario: {list_library()}")
        raise ScenarioError(str(scenario), [problem])
    _, data = parse_yaml(path_text, source)
    if not isinstance(data, dict):
        raise ScenarioError(source, [Problem("", None, "expected a scenario: a mapping with name, topics, ...")])
    return data, source


def variant_grid(vary: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the varied values, the first key's values changing slowest."""
    if not vary:
        raise ReviewError("vary at least one option: KEY=V1,V2")
    for key, values in vary.items():
        if not values:
            raise ReviewError(f"--vary {key}: give at least one value")
        if len({json.dumps(v, sort_keys=True) for v in values}) < len(values):
            raise ReviewError(f"--vary {key}: a value is given twice ({', '.join(map(str, values))})")
    count = 1
    for values in vary.values():
        count *= len(values)
    if count > MAX_VARIANTS:
        raise ReviewError(f"the options cross to {count} variants; a review compares at most {MAX_VARIANTS}")
    keys = list(vary)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(vary[k] for k in keys))]


def build_variants(data: Mapping[str, Any], source: str, vary: Mapping[str, Sequence[Any]]) -> list[Variant]:
    """Each combination applied to the scenario's data and validated (a bad one named by its --vary)."""
    paths = {key: _path(data, key) for key in vary}
    short = _short_names(list(vary))
    variants = []
    for index, values in enumerate(variant_grid(vary)):
        changed = json.loads(json.dumps(data))  # a deep copy of plain data
        for key, value in values.items():
            _set_path(changed, paths[key], value, key)
        try:
            scenario = Scenario.model_validate(changed)
        except ValidationError as exc:
            raise _variant_error(source, values, exc) from None
        label = " · ".join(f"{short[key]}={_text(value)}" for key, value in values.items())
        variants.append(Variant(index, values, label, scenario))
    return variants


def _path(data: Mapping[str, Any], key: str) -> list[str]:
    """A --vary key as a path: dotted; a bare template parameter is under ``params``."""
    if "." not in key and data.get("template") in TEMPLATES and key in TEMPLATES[data["template"]].params.model_fields:
        return ["params", key]
    return key.split(".")


def _set_path(node: Any, path: list[str], value: Any, key: str) -> None:
    """Set ``value`` at ``path`` in plain data, creating mappings; ``*`` sets it in every entry of a mapping."""
    head, rest = path[0], path[1:]
    if not isinstance(node, dict):
        raise ReviewError(f"--vary {key}: the scenario has no mapping where {'.'.join(path)} would go")
    targets = list(node) if head == "*" else [head]
    if head == "*" and not targets:
        raise ReviewError(f"--vary {key}: '*' stands for nothing here (an empty mapping)")
    for name in targets:
        if rest:
            _set_path(node.setdefault(name, {}), rest, value, key)
        else:
            node[name] = value


def _short_names(keys: list[str]) -> dict[str, str]:
    """The last part of each key (``assignment_interval_ms``), or the whole key where two would clash."""
    last = {key: key.split(".")[-1] for key in keys}
    clashes = {name for name in last.values() if list(last.values()).count(name) > 1}
    return {key: key if name in clashes else name for key, name in last.items()}


def _text(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def _variant_error(source: str, values: Mapping[str, Any], exc: ValidationError) -> ScenarioError:
    described = " ".join(f"--vary {k}={_text(v)}" for k, v in values.items())
    problems = []
    for error in exc.errors():
        loc, message = tuple(error["loc"]), error["msg"].removeprefix("Value error, ")
        ctx = error.get("ctx") or {}
        if isinstance(ctx.get("error"), FieldError):
            loc, message = (*loc, *ctx["error"].loc), ctx["error"].message
        elif error["type"] not in ("missing", "value_error"):
            message += f", got {error.get('input')!r}"
        where = ".".join(str(part) for part in loc if not str(part).startswith("function-"))
        problems.append(Problem(where, None, f"{message} (with {described})"))
    return ScenarioError(source, problems)


# ---------------------------------------------------------------------------- running
def compare(
    scenario: str | Path | Mapping[str, Any] | Scenario,
    vary: Mapping[str, Sequence[Any]],
    *,
    seeds: int | Sequence[int] = 5,
    out: str | Path | None = None,
    executor: Executor = "local",
    spark: Any = None,
    outcomes: Sequence[Outcome | str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Review:
    """Run every combination of ``vary`` over ``seeds`` and return the ``Review``; with ``out``, also
    write ``out/report.html``.

    ``scenario``: a library name, a scenario file, a dict or a ``Scenario``. ``vary``: option ->
    values (see the module docstring). ``seeds``: how many (0, 1, ...) or which. ``executor``:
    ``local`` runs in this process; ``spark`` runs each variant as a sweep
    (``kip_lab.pipeline.run_sweep``, its events kept) on ``spark`` (default: the pipeline's
    ``spark_session()``), its tables in ``out/sweeps`` (or a temporary folder), and computes the
    metrics from the traces they hold. ``outcomes``: the
    rows, ``OUTCOMES`` keys or ``Outcome`` objects (default: every one of ``OUTCOMES`` reported).
    """
    started = time.monotonic()
    seed_list = _seeds(seeds)
    if executor not in ("local", "spark"):
        raise ReviewError(f"executor must be 'local' or 'spark', got {executor!r}")
    data, source = load_scenario_data(scenario)
    variants = build_variants(data, source, vary)
    say = progress or (lambda _: None)
    if executor == "spark":
        from kip_lab.review.on_spark import spark_runs

        folder = Path(out) / "sweeps" if out is not None else Path(tempfile.mkdtemp(prefix="kip-lab-review-"))
        runs, traces_of = spark_runs(variants, seed_list, folder, spark, say)
    else:
        runs, traces_of = _local_runs(variants, seed_list, say)
    review = Review(
        scenario=variants[0].scenario.name,
        description=" ".join(variants[0].scenario.description.split()),
        varied={key: list(values) for key, values in vary.items()},
        seeds=seed_list,
        variants=variants,
        runs=runs,
        outcomes=_chosen_outcomes(outcomes, runs),
        executor=executor,
        traces={},
    )
    for variant in variants:
        seed = representative_seed(review, variant.index)
        review.representative[variant.index] = seed
        review.traces[variant.index] = traces_of(variant.index, seed)
    review.seconds = time.monotonic() - started
    if out is not None:
        review.write(out)
    return review


def _seeds(seeds: int | Sequence[int]) -> list[int]:
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seed_list or len(seed_list) > MAX_SEEDS:
        raise ReviewError(f"seeds: give 1 to {MAX_SEEDS} seeds, got {len(seed_list)}")
    if len(set(seed_list)) < len(seed_list):
        raise ReviewError(f"seeds: a seed is given twice ({seed_list})")
    return seed_list


def _local_runs(
    variants: Sequence[Variant], seeds: Sequence[int], say: Callable[[str], None]
) -> tuple[list[RunOutcome], Callable[[int, int], Trace]]:
    """Every run in this process; the traces are kept until the representatives are chosen."""
    runs, traces = [], {}
    for variant in variants:
        for seed in seeds:
            result = run_scenario(variant.scenario.model_copy(update={"seed": seed}))
            if result.stopped is not None:
                raise ReviewError(f"{variant.label}, seed {seed}: the run stopped: {result.stopped}")
            runs.append(RunOutcome(variant.index, seed, result.metrics or {}, result.stable))
            traces[(variant.index, seed)] = result.trace
        say(f"{variant.label}: {len(seeds)} runs")
    return runs, lambda variant, seed: traces[(variant, seed)]


def _chosen_outcomes(chosen: Sequence[Outcome | str] | None, runs: Iterable[RunOutcome]) -> list[Outcome]:
    known = {o.key: o for o in OUTCOMES}
    reported = set.intersection(*(set(r.metrics) for r in runs))
    if chosen is None:
        return [o for o in OUTCOMES if o.key in reported]
    picked = [c if isinstance(c, Outcome) else known.get(c, Outcome(c, c.replace("_", " "), "")) for c in chosen]
    missing = [o.key for o in picked if o.key not in reported]
    if missing:
        raise ReviewError(f"outcomes: compute_metrics does not report {', '.join(missing)}")
    return picked


def representative_seed(review: Review, variant: int) -> int:
    """The seed whose run is closest to the variant's medians (each outcome scaled by its range over
    every run); the lowest such seed on a tie."""
    cells = review.cells()
    runs = [r for r in review.runs if r.variant == variant]
    scales = {}
    for outcome in review.outcomes:
        every = [v for v in (outcome_value(r.metrics, outcome.key) for r in review.runs) if v is not None]
        scales[outcome.key] = (max(every) - min(every)) if every else 0

    def distance(run: RunOutcome) -> float:
        total = 0.0
        for outcome in review.outcomes:
            value, median = outcome_value(run.metrics, outcome.key), cells[outcome.key][variant].median
            if value is not None and median is not None and scales[outcome.key]:
                total += abs(value - median) / scales[outcome.key]
        return total

    return min(runs, key=lambda r: (distance(r), r.seed)).seed
