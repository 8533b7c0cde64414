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
# # 08 · Online migration: from a classic group to a consumer group, one member at a time
#
# KIP-848 lets a running group move from the classic protocol (JoinGroup/SyncGroup) to the new one
# without stopping (KIP-848, *Online Migration*): the first member that
# comes back speaking the consumer protocol **converts** the group — the coordinator turns the
# classic group into a consumer group, keeping its generation as the group epoch and every
# member's assignment — and keeps serving the members still on the classic protocol through
# JoinGroup, SyncGroup and Heartbeat. Each classic member is **reconciled on its own**: when its
# target changes, its next Heartbeat answers REBALANCE_IN_PROGRESS and it rejoins; nobody else does.
#
# Here the whole story runs autonomously: three classic consumers, each bounced in turn onto the
# consumer protocol.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import pandas as pd

from kip_lab.clients import CLASSIC_MEMBER_MACHINE, ConsumerConfig
from kip_lab.coordinator import CLASSIC_GROUP_STATE_MACHINE
from kip_lab.events import CallbackInvoked, MessageSent, StateTransition
from kip_lab.lab import Lab, LabConfig
from kip_lab.lab.metrics import compute_metrics
from kip_lab.viz import machine_dot, ownership_swimlanes, picture, trace_frames

pd.set_option("display.width", 160)

# %% [markdown]
# ## Two machines
#
# The classic **consumer** (client side, Kafka's `AbstractCoordinator.MemberState`): join, sync,
# stable; out of the group when fenced or when it stops polling; closed or failed.

# %%
picture(machine_dot(CLASSIC_MEMBER_MACHINE, current="STABLE"))

# %% [markdown]
# The classic **group** (coordinator side, Kafka's `ClassicGroupState`): a group-wide barrier per
# generation — every member's JoinGroup is parked until all have rejoined, then the leader's
# SyncGroup brings the assignment.

# %%
picture(machine_dot(CLASSIC_GROUP_STATE_MACHINE, current="Stable"))

# %% [markdown]
# ## The run
#
# `foo` has 6 partitions; A, B and C are classic eager consumers (`[range]`). Each is closed and
# restarted as a new consumer (`group.protocol=consumer`), one after the other, each as soon as the
# group is stable again (3-4 s apart: see the time column). After each step we look at
# the coordinator: which kind of group it holds, its epoch, and each member.

# %%
lab = Lab(seed=0, config=LabConfig(raise_on_violation=True))
lab.create_topic("foo", 6)
for name in "ABC":
    lab.add_consumer(name, group_protocol="classic", subscribed_topic_names=["foo"],
                     partition_assignment_strategy=["range"])
lab.run_until_stable()


def snapshot(label):
    coordinator = lab.coordinator
    classic = coordinator.classic_groups.get("g")
    group = coordinator.groups.get("g")
    row = {"step": label, "time (s)": lab.now / 1000}
    if classic is not None:
        row.update({"group": "classic", "epoch / generation": classic.generation_id, "state": classic.state.value})
    else:
        row.update({"group": "consumer", "epoch / generation": group.group_epoch, "state": group.state.value})
    for name, client in lab.clients.items():
        kind = "classic" if hasattr(client, "generation_id") else "consumer"
        row[name] = f"{kind} {sorted(p for _, p in client.owned)} {client.state.value}"
    return row


rows = [snapshot("0 · classic group")]


def bounce_onto_consumer_protocol(member, label):
    lab.close(member)
    lab.run(until=lab.now + 100)
    lab.restart(member, config=ConsumerConfig(subscribed_topic_names=["foo"]))
    lab.run_until_stable()
    rows.append(snapshot(label))


converted_at = lab.step_count
bounce_onto_consumer_protocol("A", "1 · A on consumer: converted")
b_at = lab.step_count
bounce_onto_consumer_protocol("B", "2 · B on consumer")
c_at = lab.step_count
bounce_onto_consumer_protocol("C", "3 · C on consumer")
pd.DataFrame(rows).set_index("step")

# %% [markdown]
# The assignment survives every step: the conversion builds the consumer group's target and
# current assignments from the classic members' assignments, and the uniform
# assignor keeps them sticky afterwards.

# %% [markdown]
# ## How C, still classic, lives inside a consumer group
#
# While B is bounced, C is a classic member of a *consumer* group. The coordinator runs the
# consumer engine for it: a new target for C shows up as REBALANCE_IN_PROGRESS on C's Heartbeat; C
# (eager) revokes, rejoins with JoinGroup, and collects its partitions with SyncGroup. A — already on
# the new protocol — only heartbeats.

# %%
def story(member, after, before):
    out = []
    for e in lab.trace:
        if not (after < e.step <= before) or e.actor != member:
            continue
        p = e.body
        if isinstance(p, StateTransition):
            out.append((e.time_ms, f"{p.from_state} → {p.to_state}", p.trigger))
        elif isinstance(p, CallbackInvoked) and p.callback != "on_assignment":
            out.append((e.time_ms, p.callback, ", ".join(p.partitions)))
        elif isinstance(p, MessageSent) and p.api in ("JoinGroup", "SyncGroup", "LeaveGroup"):
            out.append((e.time_ms, f"sends {p.api}", ""))
    return pd.DataFrame(out, columns=["time (ms)", "what", "detail"])


story("C", b_at, c_at)

# %%
api_by_member = {}
for e in lab.trace.of_type(MessageSent):
    if b_at < e.step <= c_at and e.actor in "AC":
        api_by_member.setdefault(e.actor, set()).add(e.body.api)
{member: sorted(apis) for member, apis in api_by_member.items()}

# %% [markdown]
# ## Who held what, when

# %%
chart = ownership_swimlanes(trace_frames(lab.trace), width=640).properties(title="online migration")
picture(chart)

# %% [markdown]
# ## Summary

# %% tags=["nbval-check-output"]
m = compute_metrics(lab.trace)
group = lab.coordinator.groups["g"]
print("final group: consumer, epoch", group.group_epoch, "state", group.state.value)
print("final assignment:", {n: sorted(p for _, p in c.owned) for n, c in lab.clients.items()})
print("unchanged since the classic group:", rows[0]["A"].split(" [")[1] == rows[-1]["A"].split(" [")[1])
print("invariant violations:", m["invariant_violations"], "| C's APIs while B moved:", sorted(api_by_member["C"]))

# %% [markdown]
# **Next:** [09_upgrade_path](09_upgrade_path.ipynb) — KIP-429's own upgrade, from eager to cooperative.
