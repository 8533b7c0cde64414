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
# # 05 · The new consumer's state machine
#
# Notebooks 01-04 watched the **coordinator**. This one watches the **consumer**: Kafka's new
# consumer (`group.protocol=consumer`, the `AsyncKafkaConsumer`) runs a *member state machine* that
# turns heartbeat responses into rebalance callbacks, commits and acknowledgements. The KIP
# describes the consumer side in prose (KIP-848 *Consumer*: its *Fenced*, *Revocation* and
# *Assignment* parts, and the heartbeat response handling in *Consumer Group Heartbeat API*):
#
# 1. on a new assignment the member computes what was **revoked** and what was **added** — never
#    both: "the protocol never does both together";
# 2. for revoked partitions: stop fetching, commit, call `onPartitionsRevoked`, then **heartbeat at
#    once** to acknowledge;
# 3. for added partitions: call `onPartitionsAssigned` and start fetching;
# 4. on UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH: `onPartitionsLost` and rejoin with epoch 0;
#    on UNRELEASED_INSTANCE_ID: fail;
# 5. to leave: commit, revoke, heartbeat with epoch -1;
# 6. "the process is dependent on Consumer#poll being called like with the current protocol"
# — a consumer that stops polling for `max.poll.interval.ms` leaves the group.
#
# kip_lab's consumer implements Kafka's `MemberState` enum and its valid transitions as one table;
# the client refuses any other move, and the picture below is drawn from that table.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import pandas as pd

from kip_lab.lab.story import client_story
from kip_lab.clients.consumer import CallbackConfig
from kip_lab.clients.member_state import CONSUMER_MEMBER_MACHINE
from kip_lab.events import StateTransition
from kip_lab.lab import Lab
from kip_lab.lab.metrics import compute_metrics
from kip_lab.viz import epoch_chart, machine_dot, ownership_swimlanes, picture, trace_frames

pd.set_option("display.width", 160)
pd.set_option("display.max_rows", 60)

# %% [markdown]
# ## The machine, from its table

# %%
table = pd.DataFrame([(t.source, t.trigger, t.target) for t in CONSUMER_MEMBER_MACHINE.transitions],
                     columns=["source", "trigger", "target"])
table.groupby("trigger", sort=False).agg(sources=("source", ", ".join), target=("target", "first"))

# %%
picture(machine_dot(CONSUMER_MEMBER_MACHINE, current="STABLE", shared_arrows=False))

# %% [markdown]
# The whole machine fits the page because the arrows many states share are not drawn: FENCED,
# FATAL and PREPARE_LEAVING say under their names from how many states they are reached, and on
# what (the table above has every row). The happy path runs down the picture: **UNSUBSCRIBED →
# JOINING → RECONCILING → ACKNOWLEDGING → STABLE**, and back to RECONCILING whenever a heartbeat
# response brings a new assignment. Around it:
# **FENCED** (lost the membership; `onPartitionsLost`; rejoin), **PREPARE_LEAVING → LEAVING**
# (closing, or the poll timer expired), **STALE** (left because the application stopped polling;
# waits for the next `poll`), **FATAL** (e.g. UNRELEASED_INSTANCE_ID).
#
# Two helpers for the rest of the notebook: `client_story` (kip_lab.lab.story) tells a consumer's transitions and
# callbacks from the trace; `state_timeline` draws each consumer's state over time.

# %%
STATE_COLORS = {"UNSUBSCRIBED": "#bdbdbd", "JOINING": "#9ecae1", "RECONCILING": "#fdae6b", "ACKNOWLEDGING": "#fdd0a2",
                "STABLE": "#74c476", "FENCED": "#d62728", "PREPARE_LEAVING": "#bcbddc", "LEAVING": "#9e9ac8",
                "STALE": "#636363", "FATAL": "#000000"}


def state_timeline(frames, width=560, time_range=None):
    """One row per consumer, a bar per state it was in (from the trace's state transitions)."""
    data = frames.member_states.assign(end_ms=lambda f: f.end_ms.where(f.end_ms > f.start_ms, f.start_ms + 1))
    x = alt.X("start_ms:Q", title="time (ms)", scale=alt.Scale(domain=list(time_range) if time_range else [0, frames.end_ms], nice=False))
    return alt.Chart(data).mark_bar(clip=True).encode(
        x=x, x2="end_ms:Q", y=alt.Y("member:N", title=None),
        color=alt.Color("state:N", scale=alt.Scale(domain=list(STATE_COLORS), range=list(STATE_COLORS.values()))),
        tooltip=["member", "state", "trigger", "start_ms", "end_ms", "member_epoch"],
    ).properties(width=width, height=30 * data.member.nunique() + 20, title="consumer states")

# %% [markdown]
# ## 1 · Joining and reconciling, with callbacks that take time
#
# A rebalance listener is any object with `on_partitions_revoked`, `on_partitions_assigned` and
# `on_partitions_lost`; each returns how long it takes (simulated ms) or raises. This one records its
# calls. A joins alone; B joins at 5 s; both listeners take 300 ms to revoke and 200 ms to assign.

# %%
class RecordingListener:
    def __init__(self):
        self.calls = []

    def on_partitions_revoked(self, partitions):
        self.calls.append(("revoked", partitions))
        return 300

    def on_partitions_assigned(self, partitions):
        self.calls.append(("assigned", partitions))
        return 200

    def on_partitions_lost(self, partitions):
        self.calls.append(("lost", partitions))
        return 0


listeners = {"A": RecordingListener(), "B": RecordingListener()}
lab = Lab(seed=0)
lab.create_topic("foo", partitions=4)
lab.add_consumer("A", subscribed_topic_names=["foo"], listener=listeners["A"])
lab.run(until=5_000)
lab.add_consumer("B", subscribed_topic_names=["foo"], listener=listeners["B"])
print("stable:", lab.run_until_stable(), "at", lab.now, "ms")

# %% [markdown]
# Read A's story: its join response carries all four partitions (JOINING → RECONCILING). The
# response is handled on the consumer's **background thread**, but the callbacks are the application's
# code: the background thread asks for them, and the **application thread runs each at its next
# `poll()`** (`time_between_polls_ms` after its previous poll; Kafka's `AsyncKafkaConsumer` runs such
# background events inside `poll`). The assign callback runs for 200 ms, then ACKNOWLEDGING: the next
# heartbeat goes out **at once** to report what A now owns, and A is STABLE. When B joins, A's next
# heartbeat response drops foo-2,3: RECONCILING, a commit, `on_partitions_revoked` at A's next poll
# for 300 ms, `on_partitions_assigned` (nothing new) at the poll after that, then the acknowledgement.
# Until then A still owns foo-2,3 (it has stopped fetching them). B's join response says "epoch 2, use
# nothing, foo-2,3 pending": the consumer acts only on partitions it may *use*, so B settles with
# nothing — and gets foo-2,3 at its next regular heartbeat, 5 s after joining (RECONCILING again, the
# assign callback, ACKNOWLEDGING).

# %% tags=["nbval-check-output"]
print(client_story(lab.trace))
print({name: listener.calls for name, listener in listeners.items()})

# %%
frames = trace_frames(lab.trace)
(state_timeline(frames) & (ownership_swimlanes(frames, width=560) & epoch_chart(frames, width=560, height=140))).resolve_scale(
    color="independent")

# %% [markdown]
# ## 2 · A callback that fails
#
# `CallbackConfig(assigned_failures=1)`: B's first `on_partitions_assigned` raises. Kafka logs it
# and leaves the member in RECONCILING **without acknowledging**; the reconciliation is retried on
# the next heartbeat response, 5 s later. (If it never succeeded the coordinator would not care —
# B has nothing to revoke — but B would never consume foo-2,3.)

# %% tags=["nbval-check-output"]
failing = Lab(seed=0)
failing.create_topic("foo", partitions=4)
failing.add_consumer("A", subscribed_topic_names=["foo"])
failing.run(until=5_000)
failing.add_consumer("B", subscribed_topic_names=["foo"],
                     callbacks=CallbackConfig(on_partitions_assigned_ms=200, assigned_failures=1))
failing.run_until_stable()
print(client_story(failing.trace, since_ms=5_000, members=["B"]))
print("unavailability (ms):", compute_metrics(failing.trace)["partition_unavailability_ms"]["g"])

# %% [markdown]
# ## 3 · Fenced: `on_partitions_lost` and the zombie window
#
# A's network link to the brokers goes down at 10 s for 50 s. A keeps running — it believes it still
# owns foo-0,1 and keeps processing them — but its heartbeats do not arrive. At about 50 s A's
# session expires on the coordinator; B gets everything. When the link comes back, A's next heartbeat
# is answered **UNKNOWN_MEMBER_ID**: A is FENCED, calls `on_partitions_lost` (not `…revoked`: there
# is nothing left to commit — the partitions are already someone else's), and rejoins with epoch 0.

# %%
fenced = Lab(seed=0)
fenced.create_topic("foo", partitions=4)
fenced.add_consumer("A", subscribed_topic_names=["foo"])
fenced.add_consumer("B", subscribed_topic_names=["foo"])
fenced.run(until=10_000)
fenced.partition_link("A", duration_ms=50_000)
fenced.run(until=60_000)
print("stable:", fenced.run_until_stable(), "at", fenced.now, "ms")

# %% tags=["nbval-check-output"]
print(client_story(fenced.trace, since_ms=10_000))

# %% [markdown]
# The **client view** of ownership (what each consumer believes) overlaps from about 55 s (B's first
# heartbeat after A's session expired) to 70 s: B owns foo-0,1 and so does A, which has not heard yet. That is the *zombie window* — A may still
# process records B is also processing. Its offset commits cannot succeed, though: the coordinator
# refuses commits from a member it no longer knows, or at an old member epoch (here they do not even
# arrive). The **coordinator view** (bottom, from its records alone) never overlaps; the
# "single-owner" invariant counts only members the coordinator still has, so it holds.

# %%
frames = trace_frames(fenced.trace)
picture(ownership_swimlanes(frames, width=600) & ownership_swimlanes(frames, view="coordinator", width=600))

# %% tags=["claims"] jupyter={"source_hidden": true}
foo_0 = frames.ownership[(frames.ownership.partition == "foo-0") & (frames.ownership.status == "assigned")]
b_from = foo_0[foo_0.member == "B"].start_ms.min()
a_until = foo_0[foo_0.member == "A"].end_ms.max()
assert abs(b_from - 55_000) <= 1_000 and abs(a_until - 70_000) <= 1_000, "the client views overlap from about 55 s to 70 s"

# %% [markdown]
# ## 4 · Leaving: close()
#
# A graceful close walks PREPARE_LEAVING (commit, `on_partitions_revoked`) → LEAVING (a heartbeat
# with epoch **-1**) → UNSUBSCRIBED. The coordinator removes A at once and B gets its partitions at
# B's next heartbeat — compare with the 40 s a crash costs (notebook 02).

# %% tags=["nbval-check-output"]
leaving = Lab(seed=0)
leaving.create_topic("foo", partitions=4)
leaving.add_consumer("A", subscribed_topic_names=["foo"])
leaving.add_consumer("B", subscribed_topic_names=["foo"])
leaving.run(until=10_000)
leaving.close("A")
leaving.run_until_stable()
print(client_story(leaving.trace, since_ms=10_000))
g = leaving.coordinator.groups["g"]
print("group:", g.state.value, "epoch", g.group_epoch, "| members", sorted(g.members))

# %% [markdown]
# ## 5 · The poll timeout: STALE
#
# A's application thread stops calling `poll` at 10 s (a long GC pause, a stuck handler) —
# `lab.pause("A")`. Its heartbeats continue (they run on a background thread in Kafka), so its
# *session* stays alive; but after `max.poll.interval.ms` (20 s here) the consumer leaves the group
# on its own — PREPARE_LEAVING → LEAVING → **STALE**, without callbacks (the application thread is
# the one that is stuck). When the application polls again (`resume` at 40 s), A runs
# `on_partitions_lost` and rejoins.

# %%
stale = Lab(seed=0)
stale.create_topic("foo", partitions=4)
stale.add_consumer("A", subscribed_topic_names=["foo"], max_poll_interval_ms=20_000)
stale.add_consumer("B", subscribed_topic_names=["foo"])
stale.run(until=10_000)
stale.pause("A")
stale.run(until=40_000)
stale.resume("A")
print("stable:", stale.run_until_stable(), "at", stale.now, "ms")

# %% tags=["nbval-check-output"]
print(client_story(stale.trace, since_ms=10_000))

# %%
frames = trace_frames(stale.trace)
(state_timeline(frames) & ownership_swimlanes(frames, width=560)).resolve_scale(color="independent")

# %% [markdown]
# ## Explore
#
# The fenced run in the stepper, on member **A**'s state machine. Press **Next change ▶▶** to jump
# from one change of A's state (or of an owner or an epoch) to the next: the highlighted state and
# the red edge follow A through FENCED and back; tick *whole machine* to see all of it. *(Needs a live
# kernel; until the notebook runs, a picture of the stepper's first view stands in.)*

# %%
from widgets import explore

explore(fenced, member="A")

# %% [markdown]
# ## Summary

# %% tags=["nbval-check-output"]
for name, run in (("callbacks", lab), ("failing callback", failing), ("fenced", fenced), ("close", leaving), ("STALE", stale)):
    g = run.coordinator.groups["g"]
    transitions = len(run.trace.of_type(StateTransition))
    print(f"{name:>16}: {g.state.value} GE {g.group_epoch}",
          {m: (x.member_epoch, sorted(p for ps in x.assigned.values() for p in ps)) for m, x in sorted(g.members.items())},
          "| clients", {n: c.state.value for n, c in sorted(run.clients.items())},
          f"| {transitions} transitions | violations {len(run.invariants.violations)}")

# %% [markdown]
# **Next:** [06_assignors](06_assignors.ipynb) — who decides the assignment: the server-side assignors and the client-side mode.
