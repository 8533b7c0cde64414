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
from IPython.display import Markdown, display

from kip_lab.clients import CallbackConfig
from kip_lab.events import MessageSent
from kip_lab.lab import Lab
from kip_lab.lab import actions as a
from kip_lab.lab.metrics import compute_metrics
from kip_lab.viz import ownership_swimlanes, picture, trace_frames

pd.set_option("display.width", 160)

# %%
FIRST_CLOSE_MS, RESTART_AFTER_MS = 30_000, 3_000  # A closes at 30 s, its replacement starts 3 s later
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
        lab.schedule(a.Close(member=name), FIRST_CLOSE_MS + 20_000 * i)
        lab.schedule(a.Restart(member=name), FIRST_CLOSE_MS + RESTART_AFTER_MS + 20_000 * i)
    lab.run(until=150_000)
    return lab


labs = {protocol: rolling_bounce(protocol) for protocol in PROTOCOLS}
{protocol: lab.is_stable() for protocol, lab in labs.items()}

# %% [markdown]
# ## What each protocol does when A is bounced
#
# One lane per partition, coloured by the member fetching it; a stretch of lane left empty is time
# when nobody fetches the partition (for the KIP-848 group, whose coordinator records which
# partitions exist, it is also shaded red). The window is A's bounce (close at 30 s, restart 3 s later).

# %%
WINDOW = (29_500, 42_000)
for protocol, lab in labs.items():
    chart = ownership_swimlanes(trace_frames(lab.trace), time_range=WINDOW, width=520).properties(title=protocol)
    display(picture(chart))

# %% [markdown]
# What the lanes show, read from the runs (every break in a lane within the window: when it
# stopped, who fetched it before and after):

# %% jupyter={"source_hidden": true}
def lane_breaks(lab: Lab, window: tuple[int, int]) -> pd.DataFrame:
    """Each stretch within ``window`` when nobody fetched a partition: who had it before, who after."""
    held = trace_frames(lab.trace).ownership.query("status == 'assigned'").sort_values("start_ms")
    breaks = []
    for partition, lane in held.groupby("partition"):
        for before, after in zip(lane.itertuples(), lane.iloc[1:].itertuples()):
            if after.start_ms > before.end_ms and window[0] <= before.end_ms <= window[1]:
                breaks.append({"partition": partition, "before": before.member, "stopped (s)": before.end_ms / 1000,
                               "after": after.member, "resumed (s)": after.start_ms / 1000})
    return pd.DataFrame(breaks, columns=["partition", "before", "stopped (s)", "after", "resumed (s)"])


def partitions(rows: pd.DataFrame) -> str:
    return ", ".join(sorted(rows["partition"]))


def what_the_lanes_show(protocol: str, lab: Lab) -> str:
    gaps = lane_breaks(lab, WINDOW)
    lanes = lab.cluster.topic("foo").num_partitions
    stops = "; ".join(f"{partitions(rows)} at {t:.1f} s" for t, rows in gaps.groupby("stopped (s)"))
    moved = gaps[gaps["before"] != gaps["after"]]
    resumed = "each with the member that fetched it before" if moved.empty else "; ".join(
        f"{r['partition']} from {r['before']} to {r['after']} at {r['resumed (s)']:.1f} s" for _, r in moved.iterrows())
    others = f" The other {lanes - len(gaps)} never stop." if len(gaps) < lanes else ""
    return f"* **{protocol}**: {len(gaps)} of the {lanes} lanes break off, once each ({stops}), and resume {resumed}.{others}"


breaks = {protocol: lane_breaks(lab, WINDOW) for protocol, lab in labs.items()}
Markdown("\n".join(what_the_lanes_show(protocol, lab) for protocol, lab in labs.items()))

# %% [markdown]
# So in this run eager stops every lane once — A's when A closes, all the others when A's
# replacement joins — and hands every partition back to the member that had it; cooperative
# stops only A's partitions and gives them back to A's replacement; KIP-848 hands A's partitions
# to other members at once, without a join barrier, and when A returns it takes *other*
# partitions from them: each handover waits for the old owner's revocation and the new owner's
# next heartbeat. More partitions move under KIP-848, but none waits for the bounced member.

# %% tags=["claims"] jupyter={"source_hidden": true}
eager, cooperative, consumer = breaks["eager"], breaks["cooperative"], breaks["consumer"]
assert len(eager) == 10 and eager.groupby("partition").size().max() == 1, "eager: every lane breaks once"
assert (eager["before"] == eager["after"]).all(), "eager: every partition back to the member that had it"
assert set(cooperative["before"]) == {"A"} and (cooperative["after"] == "A").all(), "cooperative: A's own back"
assert len(cooperative) == 2, "cooperative: the other 8 never stop"
lost = set(consumer.query("before == 'A'")["partition"])
taken = set(consumer.query("after == 'A'")["partition"])
assert lost and taken and not lost & taken, "KIP-848: A takes other partitions than those it gave up"
assert not (consumer.query("before == 'A'")["after"] == "A").any()

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
        "processing pause (s)": round(m["processing_pause_ms"] / 1000, 1),
        "re-processed": m["records_reprocessed"],
        "max time to stable (s)": round(m["max_time_to_stable_ms"] / 1000, 1),
        "invariant violations": m["invariant_violations"],
    }


table = pd.DataFrame([row(p, lab) for p, lab in labs.items()]).set_index("protocol")
table

# %% [markdown]
# What the KIPs promise, and what the table shows over the five bounces:
#
# * cooperative revokes a fraction of what eager revokes (KIP-429, *Motivation*);
# * eager stops partitions that do not move; cooperative and KIP-848 never do, so members that
#   lose nothing keep fetching throughout;
# * only the classic protocols make every member rejoin for each rebalance (the JoinGroup column);
#   KIP-848 has no group-wide barrier at all.

# %% jupyter={"source_hidden": true}
Markdown(
    f"Partition moves are another matter: cooperative moves {table.loc['cooperative', 'partition moves']} "
    f"partitions and KIP-848 {table.loc['consumer', 'partition moves']}, because KIP-848's assignor spreads a "
    f"leaving member's partitions at once and takes others back for its replacement, where the cooperative "
    f"group waits for the member to return. Total unavailability: eager "
    f"{table.loc['eager', 'unavailability (s)']} s, cooperative {table.loc['cooperative', 'unavailability (s)']} s, "
    f"KIP-848 {table.loc['consumer', 'unavailability (s)']} s in all; records processed a second time "
    f"(the delivery ledger): eager {table.loc['eager', 're-processed']:,}, cooperative "
    f"{table.loc['cooperative', 're-processed']:,}, KIP-848 {table.loc['consumer', 're-processed']:,}; processing "
    f"pause (records waiting, nobody processing them): eager {table.loc['eager', 'processing pause (s)']} s, "
    f"cooperative {table.loc['cooperative', 'processing pause (s)']} s, KIP-848 "
    f"{table.loc['consumer', 'processing pause (s)']} s. Time to stable and unavailability "
    f"depend on the timings — eager pays its barrier in callback time on every member at once, cooperative "
    f"a rejoin, KIP-848 a heartbeat round trip per handover. Try other `CALLBACKS`."
)

# %% tags=["claims"] jupyter={"source_hidden": true}
assert table.loc["cooperative", "revocations"] < table.loc["eager", "revocations"] / 2
assert table.loc["eager", "stops without move"] > 0
assert (table.loc[["cooperative", "consumer"], "stops without move"] == 0).all()
assert table.loc["consumer", "JoinGroups"] == 0 < table.loc["cooperative", "JoinGroups"]
assert table.loc["cooperative", "partition moves"] < table.loc["consumer", "partition moves"]
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

# %% tags=["nbval-check-output"]
for protocol in table.index:
    counts = {column: int(table.loc[protocol, column])
              for column in ("revocations", "stops without move", "JoinGroups", "invariant violations")}
    print(f"{protocol:12}", " ".join(f"{column.replace(' ', '_')}={n}" for column, n in counts.items()))
print("cooperative revokes fewer than eager:", table.loc["cooperative", "revocations"] < table.loc["eager", "revocations"])
print("only eager stops what does not move:",
      table["stops without move"].gt(0).to_dict() == {"eager": True, "cooperative": False, "consumer": False})

# %% [markdown]
# **Next:** [08_online_migration](08_online_migration.ipynb) — moving a running classic group to the new protocol.
