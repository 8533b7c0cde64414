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
# # 16 · Joining a large group, with and without assignment batching
#
# In KIP-848 every join bumps the **group epoch**, and the next heartbeat the coordinator handles
# computes a new **target assignment** for the whole group (KIP-848, *Rebalance Protocol*). When
# a thousand consumers start together, that is a thousand joins, and so a thousand targets —
# each as large as the group, computed one after the other on the coordinator's thread.
#
# Kafka 4.3 added **assignment batching** (KIP-1263, broker config
# `group.consumer.assignment.interval.ms`, default 1,000 ms there): the coordinator computes a
# group's target at most once per interval. Joins still bump the group epoch at once; while the
# interval runs, members are told the **last** target, at *its* epoch, and a describe shows the
# group as **Assigning** — its group epoch ahead of its assignment epoch.
#
# kip_lab follows Kafka 4.0, where there is no interval: `CoordinatorConfig(assignment_interval_ms=0)`
# is the default. Set it to 1,000 for Kafka 4.3's behaviour.
#
# This notebook:
#
# 1. joins 1,000 members to a topic of 10,000 partitions, without and with batching, and counts;
# 2. watches the two epochs of a smaller group, step by step, in both runs;
# 3. stops the batched run in the middle and describes the group.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import pandas as pd

from kip_lab.coordinator import GroupState
from kip_lab.lab.scaling import join_with_and_without_batching, joined_lab
from kip_lab.protocol.consumer_group import ConsumerGroupDescribeRequest
from kip_lab.viz import picture, trace_frames

pd.set_option("display.width", 160)

# %% [markdown]
# ## 1 · 1,000 members join, twice
#
# `join_with_and_without_batching` starts `members` consumers of one topic together (10 ms of
# network latency each way, the Lab's default heartbeat interval of 5 s) and runs until every
# member holds its share, once with `assignment_interval_ms=0` and once with 1,000. Each row is
# one run: the simulated time until the group is stable, the Lab's steps, the target
# assignments the coordinator wrote, and what the run cost this machine (CPU and wall seconds,
# which vary from machine to machine and run to run).
#
# This cell takes a while: the run without batching costs several times the CPU of the batched
# one, on any machine at least three times (the benchmark `python -m benchmarks.bench_scaling`
# measures both joins for groups of a hundred to a thousand members).

# %% tags=["nbval-ignore-output"]
runs = join_with_and_without_batching(members=1_000, partitions=10_000, interval_ms=1_000)
runs.set_index("assignment_interval_ms")[["targets_computed", "time_to_stable_ms", "steps", "cpu_s", "wall_s"]]

# %% tags=["claims"] jupyter={"source_hidden": true}
cpu = runs.set_index("assignment_interval_ms")["cpu_s"]
assert cpu[0] >= 3 * cpu[1_000], "batching saves at least two thirds of the join's CPU"

# %% [markdown]
# The counts, without the machine's timings:

# %% tags=["nbval-check-output"]
COUNTS = ["members", "partitions", "stable", "time_to_stable_ms", "steps", "targets_computed", "violations"]
print(runs.set_index("assignment_interval_ms")[COUNTS].to_string())

# %% [markdown]
# **Without batching** the coordinator computed one target per join: 1,000 targets of 10,000
# partitions each. **With batching** it computed two: one for the first member's join, and —
# once the interval had passed — one for everybody else. The CPU column shows what that saves
# (the cost without batching grows with the square of the group: n targets of n members).
#
# Batching is not free: the group took longer to settle in simulated time. The target for
# everybody is computed at the first heartbeat after the interval has passed (here at 5 s, the
# Lab's heartbeat interval: all members heartbeat in step), and the partitions the first member
# must give up reach their new owners a heartbeat after that.
#
# ## 2 · The group epoch and the assignment epoch, step by step
#
# The same join with 60 members on 600 partitions (small enough to read), drawn from each run's
# trace: the **group epoch** (a join bumps it) and the **assignment epoch** (the group epoch the
# current target was computed for). `trace_frames(lab).epochs` holds both, one row per change.

# %%
SMALL = {"members": 60, "partitions": 600}
labs = {interval: joined_lab(**SMALL, interval_ms=interval)[0] for interval in (0, 1_000)}


def group_epochs(lab):
    epochs = trace_frames(lab).epochs
    return epochs[epochs["kind"].isin(["group", "assignment"])][["step", "time_ms", "series", "epoch"]]


def epoch_lines(lab, run):
    """Both epochs' changes, each series held to the run's last step."""
    epochs = group_epochs(lab)
    last = epochs.groupby("series", as_index=False).last().assign(step=lab.step_count, time_ms=lab.now)
    return pd.concat([epochs, last]).assign(run=run)


lines = pd.concat([epoch_lines(lab, f"assignment_interval_ms={interval}") for interval, lab in labs.items()])
SERIES = alt.Scale(domain=["group epoch", "assignment epoch"], range=["#9d9d9d", "#e45756"])
chart = (
    alt.Chart(lines, width=300, height=180)
    .mark_line(interpolate="step-after")
    .encode(
        x=alt.X("step:Q", title="Lab step"),
        y=alt.Y("epoch:Q"),
        color=alt.Color("series:N", title=None, scale=SERIES, legend=alt.Legend(orient="top")),
        strokeWidth=alt.StrokeWidth("series:N", title=None, scale=alt.Scale(domain=SERIES.domain, range=[6, 2])),
        tooltip=["run", "series", "epoch", "step", "time_ms"],
    )
    .facet(column=alt.Column("run:N", title=None))
    .properties(title="60 members join: the group epoch (a join bumps it) and the assignment epoch (a target)")
)
picture(chart)

# %% [markdown]
# Left, without batching: the assignment epoch (red) follows the group epoch (grey) step for
# step — every join's heartbeat computed a target. Right, with batching: the group epoch climbs
# to 60 while the assignment epoch stays at 1, then jumps to 60 in one computation once the
# interval has passed (at the first heartbeat after it). Hover a line for its time.

# %% tags=["nbval-check-output"]
for interval, lab in labs.items():
    epochs = group_epochs(lab)
    assignment = epochs[epochs["series"] == "assignment epoch"]
    print(f"assignment_interval_ms={interval:>5}: {len(assignment)} targets, at epochs {assignment['epoch'].tolist()[:8]}"
          f"{' ...' if len(assignment) > 8 else ''}; last at t={assignment['time_ms'].iloc[-1]} ms")

# %% [markdown]
# ## 3 · Describing the group while it waits
#
# `lab.seek(step)` puts the Lab back in the state it had after any step. We stop the batched run
# at the first step where the group epoch is ahead of the assignment epoch, and ask the
# coordinator what a `ConsumerGroupDescribe` (an admin client's `describe_consumer_groups`) would
# answer.

# %% tags=["nbval-check-output"]
batched = labs[1_000]
epochs = group_epochs(batched).pivot_table(index="step", columns="series", values="epoch").ffill()
waiting = int(epochs[epochs["group epoch"] > epochs["assignment epoch"]].index[-1])
batched.seek(waiting)
group = batched.coordinator.consumer_group_describe(ConsumerGroupDescribeRequest(group_ids=["g"])).response.groups[0]
at_epoch = pd.Series([m.member_epoch for m in group.members]).value_counts().sort_index()
print(f"after step {waiting} (t={batched.now} ms): state {group.group_state}, group epoch {group.group_epoch},"
      f" assignment epoch {group.assignment_epoch}")
print("members by member epoch:", {int(epoch): int(count) for epoch, count in at_epoch.items()})
print("members with partitions:", sum(1 for m in group.members if m.assignment.topic_partitions))
print("state is Assigning:", group.group_state == GroupState.ASSIGNING.value)
batched.seek(batched.horizon)

# %% [markdown]
# All 60 members are in and the group epoch is 60, but the target is still the one computed for
# epoch 1, and every member has been told that target at its epoch: all are at member epoch 1,
# the first member holding every partition, the others nothing. Nothing is wrong — the group is
# *Assigning* until the interval ends.
#
# **What to take away.** Without batching, a group of n members starting together costs the
# coordinator n targets of n members; with `group.consumer.assignment.interval.ms` it costs a
# handful, at the price of up to an interval (plus a heartbeat) of extra waiting for the late
# joiners. Kafka 4.3 turns it on by default; a broker of Kafka 4.0 to 4.2 computes every target.
#
# ## Summary

# %% tags=["nbval-check-output"]
for row in runs.itertuples():
    print(f"{row.members} members, interval {row.assignment_interval_ms:>5} ms: {row.targets_computed} targets,"
          f" stable at {row.time_to_stable_ms} ms after {row.steps} steps")
print("60 members, targets:", {interval: int((group_epochs(lab)["series"] == "assignment epoch").sum())
                               for interval, lab in labs.items()})

# %% [markdown]
# **Next:** [17_real_clients](17_real_clients.ipynb) — real Kafka consumers in the Lab.
