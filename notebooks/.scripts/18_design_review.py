# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: jupyter,tags,-all
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 18 · A design review: your rollout, its options side by side
#
# A question engineers bring to a design review: *"our consumers run as pods; every deploy
# restarts them one by one, each with a new member id. Should we move to the KIP-848 protocol, give
# the pods static membership (`group.instance.id`), turn on assignment batching?"* Each option is
# one setting; the way to answer is to run the same rollout under every combination, several times,
# and count what each costs.
#
# This notebook does one such review end to end:
#
# 1. describes the deployment with a **template** (`rolling_restart`), the few numbers that matter;
# 2. runs `kip_lab.review.compare` over {classic cooperative-sticky, KIP-848} × {dynamic, static} ×
#    {batching off, 1 s}: eight variants, each over two seeds;
# 3. reads the table, the verdicts and the charts, and writes the conclusion from the numbers;
# 4. writes the same review as one self-contained `report.html` to attach to the design doc.
#
# The group here is **10 members on 20 partitions, over two seeds**, kept small so that the notebook
# stays quick to run on a laptop; the same review of 30 members over five seeds is two numbers away
# (`members: 30`, `seeds=5`), and the command line does it too:
#
# ```
# kip-lab compare review.yaml --vary protocol=classic,consumer --vary static=false,true \
#     --vary assignment_interval_ms=0,1000 --seeds 5 --out review/
# ```

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import tempfile

import pandas as pd
import yaml

from kip_lab.review import compare
from kip_lab.review.compare import format_value
from kip_lab.review.report import outcome_chart
from kip_lab.scenarios import ScenarioError, scenario_from_yaml
from kip_lab.viz import picture

pd.set_option("display.width", 200)

# %% [markdown]
# ## 1 · The deployment, as a template
#
# `rolling_restart` restarts the members one at a time, `restart_every_ms` apart: each closes
# (commit, `on_partitions_revoked`, leave) and its replacement starts `down_ms` later — with a new
# member id, or, with `static: true`, as the same static member. Its parameters are validated like
# any scenario field. The link's latency is drawn between 1 and 20 ms, so that two seeds give two
# different runs.

# %%
REVIEW = """
name: our-rollout
template: rolling_restart
params: {members: 10, partitions: 20, restart_every_ms: 20000, down_ms: 3000}
lab: {link: {latency: {kind: uniform, low: 1, high: 20}}}
"""
print(scenario_from_yaml(REVIEW).description)

# %% [markdown]
# A misspelt parameter is refused with its name and line, as any scenario field would be:

# %%
try:
    scenario_from_yaml(REVIEW.replace("down_ms", "downtime_ms"), "review.yaml")
except ScenarioError as problem:
    print(problem)

# %% [markdown]
# ## 2 · Every combination, over two seeds
#
# `compare` takes the scenario and the options to vary. A bare name is one of the template's
# parameters (`protocol` is `params.protocol`); any other option is a path into the scenario
# (`lab.coordinator.session_timeout_ms`). Every variant is validated before anything runs.

# %% tags=["nbval-ignore-output"]
out = tempfile.mkdtemp(prefix="design-review-")
review = compare(
    yaml.safe_load(REVIEW),  # the scenario as written: a template and its parameters
    {"protocol": ["classic", "consumer"], "static": [False, True], "assignment_interval_ms": [0, 1000]},
    seeds=2,
    out=out,
)
print(f"{len(review.runs)} runs in {review.seconds:.1f} s; the report: {review.written}")

# %% [markdown]
# ## 3 · The table
#
# `review.table()` has one row per outcome and one column per variant: the median over the two
# seeds. Every number is `compute_metrics` of a run's trace; what adds up over a run
# (unavailability, moves, revocations) is counted from the first restart, so the group's own start
# is left out. Printed here one protocol at a time, each column named by membership and batching:

# %% tags=["nbval-check-output"]
table = review.table()
for protocol, title in (("classic", "classic, cooperative-sticky"), ("consumer", "KIP-848")):
    columns = {
        v.label: f"{'static' if v.values['static'] else 'dynamic'}, batching {v.values['assignment_interval_ms']} ms"
        for v in review.variants
        if v.values["protocol"] == protocol
    }
    print(f"{title} (medians)")
    print(table[list(columns)].rename(columns=columns).round(1).to_string(), end="\n\n")

# %% [markdown]
# The same numbers drawn: each dot is one run, the bar is the variant's median.

# %%
picture(outcome_chart(review, ["max_time_to_stable_ms", "total_unavailability_ms", "partition_moves"]))

# %% [markdown]
# ## 4 · What the numbers say
#
# `review.verdicts` are sentences generated from the table: per outcome the best and the worst
# variant, and whether the spread over seeds overlaps. When a run broke one of the Lab's invariants,
# a last line says which variants did (the summary below names the invariants).

# %% tags=["nbval-check-output"]
print("\n".join(f"- {sentence}" for sentence in review.verdicts))

# %% [markdown]
# The conclusion of this review, computed from the same table: each option's effect with the other
# two held fixed.

# %% tags=["nbval-check-output"]
cells = review.cells()


def median(outcome: str, **values) -> float:
    """The median of an outcome for the variant with these values."""
    variant = next(v for v in review.variants if all(v.values[k] == x for k, x in values.items()))
    return cells[outcome][variant.index].median


def unit(outcome: str) -> str:
    return next(o.unit for o in review.outcomes if o.key == outcome)


def effect(outcome: str, key: str, before, after, **fixed) -> str:
    a, b = median(outcome, **fixed, **{key: before}), median(outcome, **fixed, **{key: after})
    change = "no change" if a == b else f"{'down' if b < a else 'up'} {abs(b - a) / a:.0%}" if a else "from zero"
    return f"{format_value(a, unit(outcome))} -> {format_value(b, unit(outcome))} ({change})"


for protocol in ("classic", "consumer"):
    base = {"protocol": protocol, "assignment_interval_ms": 0}
    print(f"static membership, {protocol} protocol:")
    for outcome in ("partition_moves", "total_unavailability_ms", "max_time_to_stable_ms"):
        print(f"  {outcome}: {effect(outcome, 'static', False, True, **base)}")
for static in (False, True):
    print(f"KIP-848 instead of classic, {'static' if static else 'dynamic'} members:")
    for outcome in ("partition_moves", "total_unavailability_ms", "max_time_to_stable_ms"):
        fixed = {"static": static, "assignment_interval_ms": 0}
        print(f"  {outcome}: {effect(outcome, 'protocol', 'classic', 'consumer', **fixed)}")
print("batching 1 s, KIP-848, dynamic members:")
for outcome in ("partition_moves", "max_time_to_stable_ms", "mean_time_to_stable_ms"):
    print(f"  {outcome}: {effect(outcome, 'assignment_interval_ms', 0, 1000, protocol='consumer', static=False)}")
least = min(review.variants, key=lambda v: cells["total_unavailability_ms"][v.index].median)
print(f"least partition unavailability: {least.label}")

# %% [markdown]
# ## 5 · The report
#
# `review.write(folder)` (done above by `out=`) writes `report.html`: what was compared and the Kafka
# release it reflects, the verdicts, the table with the best value of each row marked, the charts,
# and, for each variant, the run closest to its medians as a step player that needs no kernel: the
# ownership swimlanes with a cursor and what the clients did at each step (Step / Back / Play, or
# the arrow keys). It is one file that makes no network request: open it from disk, attach it to
# the design doc, or publish it as a page.
#
# ## Summary

# %% tags=["nbval-check-output"]
print("variants:", len(review.variants), "x seeds:", len(review.seeds), "=", len(review.runs), "runs")
best = {o.label: [v.label for v, c in zip(review.variants, cells[o.key]) if c.best] for o in review.outcomes}
print("best partition moves:", best["partition moves"])
broken = sorted(
    {(review.variants[r.variant].label, name) for r in review.runs for name in r.metrics["invariant_violations_by_name"]}
)
print("invariants broken:", broken or "none")
print("report players:", open(review.written, encoding="utf-8").read().count('class="player"'))

# %% [markdown]
# **Next:** [00_tour](00_tour.ipynb) — that was the last notebook: back to the tour and its list of notebooks.
