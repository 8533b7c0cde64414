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
# # 14 · Protocol comparison at scale: sweeps, Spark, distributions
#
# One run shows how a protocol behaves; a design review needs *distributions*: "across group
# sizes, under rolling bounces and member failures, how long is each partition unavailable under
# eager, cooperative and KIP-848 — and how often do share records get redelivered when the
# acquisition lock is too short?" That is many deterministic runs. `kip_lab.pipeline` turns a
# **sweep spec** (a scenario template, a grid of parameters, seeds) into runs, executes them —
# in Spark tasks, or in this process — and writes three Parquet tables (runs, metrics, events);
# the analytics are Spark SQL, and come back as pandas for Altair.
#
# This notebook takes about half a minute on a two-core laptop, longer than the others: most of it
# is starting Spark's Java VM and its first queries, which no grid size changes. The grids are kept
# small so that the runs themselves take seconds: the sweeps run **in-process**
# (`executor="local"`), the analytics on an embedded Spark (`local[1]`, set up for small tables:
# one shuffle partition, no adaptive planning, no code generation — each would cost more than it
# saves on a few dozen rows — and a JVM that starts fast rather than runs fast). A grid of thousands of
# runs is the same code with `executor="spark"` (or `kip-lab sweep spec.yaml --out DIR`, or a
# cluster: `--master spark://...`); both executors write the same tables, which the test suite
# checks.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import tempfile
from pathlib import Path

import pandas as pd
from IPython.display import Markdown

from kip_lab.pipeline import PROTOCOLS, TEMPLATES, load_sweep, run_sweep
from kip_lab.pipeline.analytics import metric_percentiles, run_metrics, sweep_tables
from kip_lab.pipeline.charts import metric_panels, percentile_chart
from kip_lab.pipeline.session import SparkSettings, spark_session
from kip_lab.scenarios import ScenarioError
from kip_lab.viz import picture

pd.set_option("display.width", 160)
OUT = Path(tempfile.mkdtemp(prefix="kip-lab-sweeps-"))

# %% [markdown]
# ## The templates and the protocols the Lab runs
#
# A **template** is a function from a few parameters to a whole scenario (the same data a
# scenario file holds, so any run can be replayed with `kip-lab run`). Its parameters are a
# pydantic model: a bad value is refused, naming the field, *before* anything runs.

# %%
pd.DataFrame(
    [{"protocol": p.name, "assignors": ", ".join(p.assignors), "what it is": p.description} for p in PROTOCOLS.values()]
)

# %%
print("templates:", ", ".join(TEMPLATES))
try:
    load_sweep({"name": "typo", "template": "rolling_bounce", "grid": {"protocol": ["consumer", "eagre"]}})
except ScenarioError as error:
    print(error)

# %% [markdown]
# ## Sweep 1 — rolling bounces and member failures, three protocols, three group sizes
#
# `rolling_bounce`: one member at a time closes gracefully and its replacement starts 3 s later,
# a member every 10 s; as in notebook 07 the callbacks take time — revoking commits and flushes
# (300 ms), assigning restores state (800 ms) — so a needless revocation costs something.
# `member_failures`: one member's process crashes and never returns; its session (10 s here) has
# to run out first. Each grid point runs with two seeds (the KIP drives the network's
# latencies; with fixed 1 ms links the runs differ only where timers tie).
#
# The metrics that compare the protocols are counted **from the first fault on**
# (`unavailability_after_first_event_ms`, `revocations_after_first_event`, ...): the totals
# also hold the group forming at the start, which the protocols do very differently.

# %%
GROUP_SIZES = [3, 6, 9]
COMPARE = ["consumer", "eager", "cooperative"]
bounces = load_sweep(
    {
        "name": "bounces",
        "template": "rolling_bounce",
        "params": {"partitions": 18, "session_timeout_ms": 10_000, "revoke_ms": 300, "assign_ms": 800},
        "grid": {"protocol": COMPARE, "members": GROUP_SIZES},
        "seeds": [1, 2],
    }
)
failures = load_sweep(
    {
        "name": "failures",
        "template": "member_failures",
        "params": {"partitions": 18, "session_timeout_ms": 10_000, "fault": "crash"},
        "grid": {"protocol": COMPARE, "members": GROUP_SIZES},
        "seeds": [1, 2],
    }
)
for spec in (bounces, failures):
    print(spec.name, "->", len(spec.plan()), "runs; first run:", spec.plan()[0].run_id, spec.points[0])
    print(run_sweep(spec, OUT / spec.name, executor="local", progress=False))

# %% [markdown]
# ## The analytics: Spark SQL over the tables, percentiles by any grid dimension
#
# `spark_session()` starts an embedded Spark by itself (UI off, quiet logs). `metric_percentiles`
# joins the metrics with the runs table (where the grid dimensions are columns) and computes
# exact percentiles per group; what comes back is pandas.

# %%
SMALL_TABLES = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    # a JVM that lives for a few queries: compile quickly rather than well (halves the start here)
    "spark.driver.defaultJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
spark = spark_session(SparkSettings(master="local[1]", conf=SMALL_TABLES))
COST = ["unavailability_after_first_event_ms", "revocations_after_first_event", "max_time_to_stable_ms"]
LEDGER = ["records_reprocessed", "processing_pause_ms"]  # the delivery ledger: what the application felt
bounce_stats = metric_percentiles(
    spark, OUT / "bounces", by=["members", "protocol"], metrics=[*COST, "stops_without_move", *LEDGER]
)
failure_stats = metric_percentiles(
    spark, OUT / "failures", by=["members", "protocol"], metrics=[*COST, "moves_after_first_event", *LEDGER]
)
bounce_stats.pivot(index=["metric", "members"], columns="protocol", values="p50")

# %% [markdown]
# The tables are plain Spark DataFrames too — here, the same question in SQL: how many partitions
# were ever unavailable, and for how long at worst, per protocol across every bounce run.

# %%
tables = sweep_tables(spark, OUT / "bounces")
tables.metrics.createOrReplaceTempView("metrics")
tables.runs.createOrReplaceTempView("runs")
spark.sql(
    """
    SELECT r.protocol, count(*) AS runs, avg(m.unavailable_partitions) AS partitions_hit,
           max(m.max_partition_unavailability_ms) AS worst_partition_ms, sum(m.stops_without_move) AS needless_stops
    FROM metrics m JOIN runs r USING (run_id)
    GROUP BY r.protocol ORDER BY r.protocol
    """
).toPandas()

# %% [markdown]
# ## Rolling bounces: what each protocol costs as the group grows

# %%
metric_panels(bounce_stats, COST, x="members", width=200, height=180).configure_legend(orient="top")

# %% [markdown]
# A static copy of the unavailability panel (so the picture shows where JavaScript does not run):

# %%
picture(percentile_chart(bounce_stats, "unavailability_after_first_event_ms", x="members"))

# %% [markdown]
# ## Member failures: the session timeout dominates
#
# Every run's value, one dot per run and protocol. The dots of a protocol sit on one line: after a
# crash nothing moves until the session runs out, so every run of a protocol and group size
# measures the same time.

# %%
per_run = run_metrics(spark, OUT / "failures", by=["members", "protocol"], metrics=COST)
alt.Chart(per_run).mark_point(filled=True, size=70, opacity=0.7).encode(
    x=alt.X("members:O", title="members"),
    xOffset=alt.XOffset("protocol:N"),
    y=alt.Y("unavailability_after_first_event_ms:Q", title="unavailability after the crash (ms)"),
    color=alt.Color("protocol:N", title="protocol"),
    tooltip=["protocol:N", "members:O", "unavailability_after_first_event_ms:Q"],
).properties(title="Unavailability after a crash, every run", width=420, height=220)

# %%
metric_panels(
    failure_stats, ["max_time_to_stable_ms", "moves_after_first_event"], x="members", width=260, height=180
).configure_legend(orient="top")

# %% [markdown]
# ### Reading the charts
#
# The medians behind the panels, read from the tables above (rolling bounces: partition
# unavailability after the first bounce, revocations, time to stable; crashes: unavailability):

# %% jupyter={"source_hidden": true}
def median(stats: pd.DataFrame, metric: str, index: str = "members", columns: str = "protocol") -> pd.DataFrame:
    """The metric's p50, one row per ``index`` value (group size), one column per ``columns`` value (protocol)."""
    return stats[stats["metric"] == metric].pivot(index=index, columns=columns, values="p50").astype(int)


def per_size(row: pd.Series, unit: str = "") -> str:
    return ", ".join(f"{row[size]:,}{unit}" for size in GROUP_SIZES)


unavailable = median(bounce_stats, COST[0])
revoked = median(bounce_stats, COST[1])
stable = median(bounce_stats, COST[2])
crash = median(failure_stats, COST[0])
crash_moves = median(failure_stats, "moves_after_first_event")
reprocessed, paused = (median(bounce_stats, metric) for metric in LEDGER)
sizes = ", ".join(map(str, GROUP_SIZES))
least = [unavailable.loc[size].idxmin() for size in GROUP_SIZES]


def at(sizes_where: list[int]) -> str:
    return " and ".join(map(str, sizes_where)) + " members" if sizes_where else "no size"


def trend(series: pd.Series) -> str:
    return "grow with the group" if series.is_monotonic_increasing else "do not grow steadily with the group"


flat = unavailable["cooperative"].max() < 1.05 * unavailable["cooperative"].min()
consumer_least = [size for size, protocol in zip(GROUP_SIZES, least) if protocol == "consumer"]
consumer_above = [size for size in GROUP_SIZES if unavailable.loc[size, "consumer"] > unavailable.loc[size, "cooperative"]]
slowest = (stable["consumer"] > stable[["cooperative", "eager"]].max(axis=1)).all()
dead = pd.Series({size: 18 // size for size in GROUP_SIZES})
Markdown(f"""\
With {sizes} members:

* **Eager** revokes every partition at every rebalance: its revocations ({per_size(revoked['eager'])}) and
  its unavailability ({per_size(unavailable['eager'], ' ms')}) {trend(unavailable['eager'])} — each bounce stops
  *every* member for a revoke and an assign callback, and most of what it stops comes back to the same member
  ("stops without move"), the waste KIP-429 set out to remove.
* **Cooperative** revokes only what moves ({per_size(revoked['cooperative'])}); its unavailability
  ({per_size(unavailable['cooperative'], ' ms')}) {'stays almost flat' if flat else 'changes with the group size'},
  and each move takes a second JoinGroup/SyncGroup round.
* **KIP-848** has no join barrier. Its unavailability ({per_size(unavailable['consumer'], ' ms')}) is the least
  of the three at {at(consumer_least)} and above cooperative's at {at(consumer_above)}; its numbers
  {trend(unavailable['consumer'])}. It is {'the slowest' if slowest else 'not always the slowest'} to be
  *stable* again ({per_size(stable['consumer'], ' ms')} against cooperative's {per_size(stable['cooperative'], ' ms')}
  and eager's {per_size(stable['eager'], ' ms')}): reconciliation is paced by the heartbeat interval.
* Under a **crash**, nothing moves until the dead member's 10 s session runs out, counted from its last
  heartbeat: at {GROUP_SIZES[-1]} members the partitions are unavailable for {crash.loc[GROUP_SIZES[-1], 'consumer']:,} ms
  in all under KIP-848 and {crash.loc[GROUP_SIZES[-1], 'cooperative']:,} / {crash.loc[GROUP_SIZES[-1], 'eager']:,} ms
  under cooperative / eager. The dead member held {per_size(dead)} partitions; KIP-848 moves
  {per_size(crash_moves['consumer'])}, cooperative {per_size(crash_moves['cooperative'])}, eager
  {per_size(crash_moves['eager'])}.
* What the applications felt, from the delivery ledger (rolling bounces): records processed a second time —
  eager {per_size(reprocessed['eager'])}, cooperative {per_size(reprocessed['cooperative'])}, KIP-848
  {per_size(reprocessed['consumer'])}; processing pause, records waiting with nobody processing them — eager
  {per_size(paused['eager'], ' ms')}, cooperative {per_size(paused['cooperative'], ' ms')}, KIP-848
  {per_size(paused['consumer'], ' ms')}.
""")

# %% tags=["claims"] jupyter={"source_hidden": true}
assert (revoked["cooperative"] < revoked["eager"]).all(), "cooperative revokes only what moves: fewer than eager"
assert (revoked["eager"] >= 18).all(), "eager revokes every partition at every rebalance"


# %% [markdown]
# ## Sweep 2 — share groups: redelivery under acquisition-lock timeouts
#
# Three share consumers read 50 records, every tenth of them poison. What the application does
# with a poison record decides its fate: **hang** (processing takes 8 s) — the acquisition lock
# (`group.share.record.lock.duration.ms`) runs out and the record goes to another consumer;
# **release** — it is handed back at once, redelivered until `group.share.delivery.count.limit`
# (5), then archived. The grid varies the lock duration.

# %%
share = load_sweep(
    {
        "name": "share-locks",
        "template": "share_lock_timeouts",
        "params": {"records": 50, "hang_ms": 8_000, "run_ms": 60_000},
        "grid": {"record_lock_duration_ms": [2_000, 5_000, 15_000], "failure": ["hang", "release"]},
        "seeds": [1, 2],
    }
)
print(run_sweep(share, OUT / "share", executor="local", progress=False))
share_stats = metric_percentiles(
    spark, OUT / "share", by=["record_lock_duration_ms", "failure"],
    metrics=["share_redeliveries", "share_records_archived", "share_records_acknowledged"],
)
share_stats.pivot(index=["metric", "record_lock_duration_ms"], columns="failure", values="p50")

# %%
metric_panels(
    share_stats,
    ["share_redeliveries", "share_records_archived"],
    x="record_lock_duration_ms",
    color="failure",
    width=260,
    height=180,
).configure_legend(orient="top")

# %% [markdown]
# A lock **shorter than the hang** (2 s and 5 s against 8 s) takes the hanging consumer's whole
# batch away: the batch goes to another consumer, which hangs on the same poison record, and so
# on — several times the redeliveries, and the good records of those batches end archived (out
# of delivery attempts) instead of acknowledged. A lock **longer than the hang** (15 s) lets the
# consumer finish its batch: only the poison record comes back after each hang, until the
# delivery limit archives it. **Released** poison is redelivered to the limit and archived
# whatever the lock: the lock matters to consumers that go silent, not to those that answer.

# %% tags=["claims"] jupyter={"source_hidden": true}
by_lock = {"index": "record_lock_duration_ms", "columns": "failure"}
redelivered = median(share_stats, "share_redeliveries", **by_lock)
archived = median(share_stats, "share_records_archived", **by_lock)
assert redelivered.loc[2_000, "hang"] > 2 * redelivered.loc[15_000, "hang"]
assert redelivered.loc[5_000, "hang"] > 2 * redelivered.loc[15_000, "hang"]
assert archived.loc[2_000, "hang"] > archived.loc[15_000, "hang"] and archived.loc[5_000, "hang"] > archived.loc[15_000, "hang"]
assert redelivered["release"].nunique() == 1 and archived["release"].nunique() == 1, "release: whatever the lock"

# %% [markdown]
# ## Summary

# %% tags=["nbval-check-output"]
def p50(stats, metric, **where):
    rows = stats[stats["metric"] == metric]
    for column, value in where.items():
        rows = rows[rows[column] == value]
    return int(rows["p50"].iloc[0])


for protocol in COMPARE:
    bounce = {m: p50(bounce_stats, m, protocol=protocol, members=9) for m in COST}
    crash = p50(failure_stats, "unavailability_after_first_event_ms", protocol=protocol, members=9)
    print(
        f"{protocol:12} bounce, 9 members: unavailable_ms={bounce[COST[0]]} revoked={bounce[COST[1]]}"
        f" stable_after_ms={bounce[COST[2]]} | crash: unavailable_ms={crash}"
    )
for lock in (2_000, 15_000):
    hang = p50(share_stats, "share_redeliveries", record_lock_duration_ms=lock, failure="hang")
    release = p50(share_stats, "share_redeliveries", record_lock_duration_ms=lock, failure="release")
    print(f"share lock {lock:>6} ms: redeliveries hang={hang} release={release}")
spark.stop()

# %% [markdown]
# **Next:** [15_kafka_vs_kip](15_kafka_vs_kip.ipynb) — where Kafka's code departed from the KIPs' text.
