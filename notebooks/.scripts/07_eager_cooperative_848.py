# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -all
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
# # 07 · Eager, cooperative, KIP-848: one rolling bounce, three protocols
#
# Three generations of Kafka consumer rebalancing, on the same workload:
#
# * **eager** (the classic protocol before KIP-429): at every rebalance *every* member revokes
#   *everything* before it sends JoinGroup — "each topic partition must have exactly one consumer
#   at any time, so a partition may not be reassigned before it has been revoked" (KIP-429,
#   *Motivation*). One group-wide barrier per rebalance.
# * **cooperative** (KIP-429, incremental): members keep what they own and send it in their
#   JoinGroup subscription; the leader withholds a partition that changes owner; the owner revokes
#   only that one and **rejoins at once** — the move completes in a *second* rebalance (KIP-429,
#   *Consumer Coordinator Algorithm*). Still a JoinGroup/SyncGroup barrier, but nothing stops that does not move.
# * **consumer** (KIP-848): no JoinGroup at all — the coordinator computes the target and each
#   member reconciles on its own heartbeat; only the members whose partitions move do anything.
#
# The workload is the library's rolling bounce: five members on `foo` (10 partitions); at 30 s A
# closes, its replacement starts 3 s later; then B, C, D and E the same way. Every callback takes
# time here — revoking commits and flushes (300 ms), assigning restores state (800 ms) — so the
# cost of a needless revocation shows.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import pandas as pd
from IPython.display import display

from kip_lab.clients import CallbackConfig
from kip_lab.events import MessageSent
from kip_lab.lab import Lab
from kip_lab.lab import actions as a
from kip_lab.lab.metrics import compute_metrics
from kip_lab.viz import ownership_swimlanes, picture, trace_frames

pd.set_option("display.width", 160)

# %%
CALLBACKS = CallbackConfig(on_partitions_revoked_ms=300, on_partitions_assigned_ms=800)
PROTOCOLS = {
    "eager": dict(group_protocol="classic", partition_assignment_strategy=["range"]),
    "cooperative": dict(group_protocol="classic", partition_assignment_strategy=["cooperative-sticky"]),
    "consumer": dict(),  # group.protocol=consumer: KIP-848
}


def rolling_bounce(protocol: str) -> Lab:
    lab = Lab(seed=0)
    lab.create_topic("foo", 10)
    for name in "ABCDE":
        lab.add_consumer(name, subscribed_topic_names=["foo"], callbacks=CALLBACKS, **PROTOCOLS[protocol])
    for i, name in enumerate("ABCDE"):
        lab.schedule(a.Close(member=name), 30_000 + 20_000 * i)
        lab.schedule(a.Restart(member=name), 33_000 + 20_000 * i)
    lab.run(until=150_000)
    return lab


labs = {protocol: rolling_bounce(protocol) for protocol in PROTOCOLS}
{protocol: lab.is_stable() for protocol, lab in labs.items()}

# %% [markdown]
# ## What each protocol does when A is bounced
#
# One lane per partition, coloured by the member fetching it; a stretch of lane left empty is time
# when nobody fetches the partition (for the KIP-848 group, whose coordinator records which
# partitions exist, it is also shaded red). The window is A's bounce (close at 30 s, restart at 33 s).

# %%
WINDOW = (29_500, 42_000)
for protocol, lab in labs.items():
    chart = ownership_swimlanes(trace_frames(lab.trace), time_range=WINDOW, width=520).properties(title=protocol)
    display(picture(chart))

# %% [markdown]
# * **eager**: at each of the two rebalances (A leaves, A returns) *every* lane breaks off — all ten
#   partitions stop, most come back to the same member after the assign callback.
# * **cooperative**: only A's partitions break off when A leaves; when A returns, the two partitions
#   it will take are revoked in the first rebalance and handed over in the second; the other eight
#   never stop.
# * **consumer** (KIP-848): the same partitions move, with no join barrier; each handover waits
#   for the old owner's revocation and the new owner's next heartbeat.

# %% [markdown]
# ## The numbers
#
# `compute_metrics` replays each trace. **revocations** counts partitions passed to
# `on_partitions_revoked`; **stops without move** counts a partition stopping and coming back to
# the same process with nobody in between — the eager barrier's pure waste; **JoinGroups** counts
# the classic join barrier (KIP-848 members never send one); **unavailability** sums the time
# partitions were fetched by nobody.

# %%
def row(protocol: str, lab: Lab) -> dict:
    m = compute_metrics(lab.trace)
    joins = sum(1 for e in lab.trace.of_type(MessageSent) if e.body.api == "JoinGroup")
    return {
        "protocol": protocol,
        "revocations": m["revocations"],
        "partition moves": m["partition_moves"],
        "stops without move": m["stops_without_move"],
        "JoinGroups": joins,
        "unavailability (s)": round(m["total_unavailability_ms"] / 1000, 1),
        "max time to stable (s)": round(m["max_time_to_stable_ms"] / 1000, 1),
        "invariant violations": m["invariant_violations"],
    }


table = pd.DataFrame([row(p, lab) for p, lab in labs.items()]).set_index("protocol")
table

# %% [markdown]
# What the KIPs promise, and what the table shows:
#
# * cooperative revokes a fraction of what eager revokes (KIP-429, *Motivation*);
# * eager stops partitions that do not move — every one, at every rebalance; cooperative and
#   KIP-848 never do, so members that lose nothing keep fetching throughout;
# * only the classic protocols make every member rejoin for each rebalance (the JoinGroup column);
#   KIP-848 has no group-wide barrier at all.
#
# Time to stable and total unavailability depend on the timings: eager pays its barrier in
# callback time on every member at once, cooperative pays a second rebalance found through the
# next heartbeat, KIP-848 pays a heartbeat round trip per handover. Try other `CALLBACKS`.
#
# The same comparison runs as a test (`tests/lab/test_protocol_comparison.py`) on the library's
# scenarios `classic_eager_rolling_bounce`, `classic_cooperative_rolling_bounce` and `rolling_bounce`.

# %% [markdown]
# ## The classic members' rebalance metrics (KIP-429, *Consumer Metrics*)
#
# Each classic consumer keeps the KIP's metrics: rebalances completed (a cooperative move counts
# two), rebalance latency including the callbacks, callback latencies.

# %%
pd.DataFrame(
    {
        protocol: labs[protocol].clients["C"].rebalance_metrics.summary(labs[protocol].now)
        for protocol in ("eager", "cooperative")
    }
).loc[["rebalance-total", "rebalance-latency-avg", "rebalance-latency-max", "partitions-revoked-latency-avg",
       "partitions-assigned-latency-avg"]]

# %% [markdown]
# ## Summary

# %%
# NBVAL_CHECK_OUTPUT
for protocol in table.index:
    counts = {column: int(table.loc[protocol, column])
              for column in ("revocations", "stops without move", "JoinGroups", "invariant violations")}
    print(f"{protocol:12}", " ".join(f"{column.replace(' ', '_')}={n}" for column, n in counts.items()))
print("cooperative revokes fewer than eager:", table.loc["cooperative", "revocations"] < table.loc["eager", "revocations"])
print("only eager stops what does not move:",
      table["stops without move"].gt(0).to_dict() == {"eager": True, "cooperative": False, "consumer": False})

# %% [markdown]
# **Next:** [08_online_migration](08_online_migration.ipynb) — moving a running classic group to the new protocol.
