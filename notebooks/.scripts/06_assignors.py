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
# # 06 · Assignors: uniform vs range, and the client-side mode
#
# In KIP-848 the **coordinator** computes the target assignment — normally with a *server-side
# assignor*, a pure function from the group's members and topics to a target (KIP-848 *Assignors →
# Server Side Mode*). Two are built in:
#
# * **uniform** (the default): "uniformly assign partitions amongst the members … somewhat similar
#   to the existing "sticky" assignor";
# * **range**: "co-partitions topics" — member *i* gets the same partition numbers in every topic.
#
# The KIP also designs a **client-side mode**: a member computes the
# assignment with its own assignor, through two new RPCs, *PrepareAssignment* and
# *InstallAssignment*. Kafka never shipped it; kip_lab implements it as the KIP describes, and the
# second half of this notebook drives it on the coordinator.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import pandas as pd

from kip_lab.assignors import AssignmentSpec, MemberSubscription, TopicMetadata, range_assign, uniform_assign
from kip_lab.coordinator.view import describe_response
from kip_lab.viz import picture

pd.set_option("display.width", 160)

# %% [markdown]
# ## 1 · Assignors are pure functions
#
# An `AssignmentSpec` holds each member's subscription (topic ids) and **current target**, and each
# topic's partition count; the result maps member → topic → partitions. Nothing else goes in: the
# KIP's newer interface passes the previous *target*, not what members own, so stickiness is relative
# to the target. Topic ids here are just the names, for readability.

# %%
TOPICS = {"foo": TopicMetadata("foo", "foo", 6), "bar": TopicMetadata("bar", "bar", 6)}


def spec(members, previous=None, subscriptions=None):
    """members: ids; previous: the last target; subscriptions: member -> topics (default: both)."""
    previous = previous or {}
    subscriptions = subscriptions or {}
    return AssignmentSpec(
        members={m: MemberSubscription(frozenset(subscriptions.get(m, ("foo", "bar"))), previous.get(m, {}))
                 for m in members},
        topics=TOPICS)


def show(assignment):
    return {m: " ".join(f"{t}{sorted(p)}" for t, p in sorted(parts.items()) if p) for m, parts in sorted(assignment.items())}


def moved(before, after):
    """Partitions whose owner changed (a partition of a member that left counts as moved)."""
    owner = {(t, p): m for m, parts in before.items() for t, ps in parts.items() for p in ps}
    return sum(1 for m, parts in after.items() for t, ps in parts.items() for p in ps if owner.get((t, p), m) != m)


def spread(assignment):
    counts = [sum(len(ps) for ps in parts.values()) for parts in assignment.values()]
    return max(counts) - min(counts)

# %% tags=["nbval-check-output"]
for name, assign in (("uniform", uniform_assign), ("range", range_assign)):
    print(f"{name:>7}:", show(assign(spec(["A", "B", "C"]))))

# %% [markdown]
# Both are balanced here (four partitions each). **Range** gives each member the *same* partition
# numbers of foo and bar — what you want when foo-3 and bar-3 hold the same keys and must be joined
# by one consumer. **Uniform** only promises balance.
#
# ### Stickiness and balance over a sequence of changes
#
# Now a group lives: it starts with A, C and E; B joins, D joins, C leaves, F joins. Each step feeds
# the previous target back in. We count the partitions that **move** (each one is a revocation on one
# member and an assignment on another — the cost of a rebalance) and the **spread** (most minus
# fewest partitions per member).

# %%
steps = [("start A, C, E", ["A", "C", "E"]), ("B joins", ["A", "B", "C", "E"]), ("D joins", ["A", "B", "C", "D", "E"]),
         ("C leaves", ["A", "B", "D", "E"]), ("F joins", ["A", "B", "D", "E", "F"])]
rows, cells = [], []
for name, assign in (("uniform", uniform_assign), ("range", range_assign)):
    target = {}
    for i, (label, members) in enumerate(steps):
        new = assign(spec(members, target))
        rows.append({"assignor": name, "step": label, "moved": moved(target, new) if target else 0,
                     "spread": spread(new), "target": show(new)})
        cells += [{"assignor": name, "step": f"{i} {label}", "partition": f"{t}-{p}", "member": m}
                  for m, parts in new.items() for t, ps in parts.items() for p in ps]
        target = new
table = pd.DataFrame(rows)

# %% tags=["nbval-check-output"]
print(table.drop(columns="target").pivot(index="step", columns="assignor").reindex([s for s, _ in steps]).to_string())
print()
print("total moved:", table.groupby("assignor").moved.sum().to_dict())

# %% [markdown]
# Uniform moves only what balance requires — a joining member takes a fair share, the rest stay put.
# Range ignores the previous target (Kafka's server-side range assignor is not sticky): when B joins,
# every member after B in id order shifts its ranges, and partitions change owner that did not need
# to. Each picture row below is one step; each cell a partition, coloured by owner.

# %%
partitions = [f"{t}-{p}" for t in ("foo", "bar") for p in range(6)]
heat = alt.Chart(pd.DataFrame(cells)).mark_rect(stroke="white").encode(
    x=alt.X("partition:N", sort=partitions, title=None),
    y=alt.Y("step:N", title=None),
    color=alt.Color("member:N", scale=alt.Scale(scheme="tableau10")),
    tooltip=["assignor", "step", "partition", "member"],
).properties(width=330, height=150).facet(column=alt.Column("assignor:N", title=None))
picture(heat)

# %% [markdown]
# ### Heterogeneous subscriptions
#
# A reads only foo, C only bar, B both. Uniform keeps every topic balanced among its own subscribers
# as well as it can — the balance is per topic, so across a chain of overlapping subscriptions the
# totals may still differ (kip_lab documents this as Kafka's behaviour too). Range just splits each
# topic among its subscribers.

# %% tags=["nbval-check-output"]
subscriptions = {"A": ["foo"], "B": ["foo", "bar"], "C": ["bar"]}
for name, assign in (("uniform", uniform_assign), ("range", range_assign)):
    result = assign(spec(["A", "B", "C"], subscriptions=subscriptions))
    print(f"{name:>7}:", show(result), "| spread", spread(result))

# %% [markdown]
# ## 2 · Which server-side assignor a group uses
#
# A member names one with `ServerAssignor` (the consumer config `group.remote.assignor`); the
# coordinator uses **the most common** among the members that named one, else the first in
# `group.consumer.assignors` (uniform). An unknown name is refused with **UNSUPPORTED_ASSIGNOR**
# (KIP-848 *Assignors*; ties go to the coordinator's list order, `docs/decisions.md` D19).

# %% tags=["nbval-check-output"]
from kip_lab import ClusterMetadata, CoordinatorConfig, GroupCoordinator
from kip_lab.protocol import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, TopicPartitions

cluster = ClusterMetadata()
foo = cluster.create_topic("foo", partitions=4)
gc = GroupCoordinator(CoordinatorConfig(), cluster)


def join_server_side(member_id, assignor):
    result = gc.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        group_id="server", member_id=member_id, member_epoch=0, rebalance_timeout_ms=60_000,
        subscribed_topic_names=["foo"], topic_partitions=[], server_assignor=assignor))
    group = gc.consumer_group_describe(ConsumerGroupDescribeRequest(group_ids=["server"])).response.groups[0]
    print(f"{member_id} joins naming {assignor!r}: {result.response.error_code.name}"
          + (f" ({result.response.error_message})" if result.response.error_message else "")
          + f" → group uses {group.assignor_name!r}")


join_server_side("A", None)
join_server_side("B", "range")
join_server_side("C", "uniform")
join_server_side("D", "range")
join_server_side("E", "sticky")

# %% [markdown]
# ## 3 · The client-side mode (KIP-848 *Assignors → Client Side Mode*)
#
# Members that send `ClientAssignors` put the group in client-side mode: a client-side assignor is
# used "if any member specified one", and it must be supported by every member. The
# flow:
#
# 1. the coordinator picks one member and sets **ShouldComputeAssignment** in its next heartbeat
#    response (the selection rule is elided in the KIP; kip_lab picks the highest maximum
#    version of the selected assignor, then the lowest member id — `docs/decisions.md` D20);
# 2. that member calls **ConsumerGroupPrepareAssignment** to get the group: epoch, members with
#    their subscriptions and current targets, topics;
# 3. it runs its assignor and calls **ConsumerGroupInstallAssignment**; the coordinator
#    **validates** it against the metadata it was computed from — every partition assigned, once,
#    to a real member — or answers **INVALID_ASSIGNMENT**;
# 4. the member must finish within its **rebalance timeout**, or the coordinator picks another
#    member — without fencing the first;
# 5. if the group moved on during the computation, the coordinator still installs it, for the
#    older epoch, and immediately starts a new round.
#
# A small harness over the three RPCs; the members' "client-side assignor" will be plain Python.

# %%
from kip_lab.protocol import (
    ClientAssignor,
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupPrepareAssignmentRequest,
    InstalledMemberAssignment,
)

GROUP = "client"
ASSIGNORS = [ClientAssignor(name="my-assignor", minimum_version=0, maximum_version=1)]
cs = GroupCoordinator(CoordinatorConfig(), cluster)


def group_line():
    group = cs.groups[GROUP]
    target = {m: sorted(p for ps in t.values() for p in ps) for m, t in sorted(group.target.items())}
    members = {m: (x.member_epoch, sorted(p for ps in x.assigned.values() for p in ps)) for m, x in sorted(group.members.items())}
    return f"{group.state.value}, GE {group.group_epoch} TE {group.assignment_epoch}, target {target}, members {members}"


OWNED = {}  # what each member owns: the usable partitions of the last response that carried an assignment


def heartbeat(member_id):
    """A member's heartbeat, reporting what it owns (it obeys every response at once).

    Before its first target a member is still at epoch 0, so it sends a full (join) request."""
    member = cs.groups[GROUP].members.get(member_id) if GROUP in cs.groups else None
    epoch = member.member_epoch if member else 0
    fields = dict(rebalance_timeout_ms=10_000, subscribed_topic_names=["foo"], client_assignors=ASSIGNORS,
                  topic_partitions=[]) if epoch == 0 else dict(
        topic_partitions=[TopicPartitions(topic_id=foo, partitions=OWNED.get(member_id, []))])
    r = cs.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        group_id=GROUP, member_id=member_id, member_epoch=epoch, **fields)).response
    a = r.assignment
    if a is not None:
        OWNED[member_id] = [p for tp in a.assigned_topic_partitions for p in tp.partitions]
    print(f"t={cs.now_ms} ▶ {member_id} heartbeat (epoch {epoch}): {describe_response(r)}")
    return r


def prepare(member_id):
    epoch = cs.groups[GROUP].members[member_id].member_epoch
    r = cs.consumer_group_prepare_assignment(ConsumerGroupPrepareAssignmentRequest(
        group_id=GROUP, member_id=member_id, member_epoch=epoch)).response
    if r.error_code.name != "NONE":
        print(f"t={cs.now_ms} ▶ {member_id} PrepareAssignment: {r.error_code.name} ({r.error_message})")
        return None
    print(f"t={cs.now_ms} ▶ {member_id} PrepareAssignment: group epoch {r.group_epoch}, assignor {r.assignor_name!r},",
          "members", [(m.member_id, [p for tp in m.topic_partitions for p in tp.partitions]) for m in r.members],
          "topics", [(t.topic_name, t.num_partitions) for t in r.topics])
    return r


def install(member_id, group_epoch, assignment):
    epoch = cs.groups[GROUP].members[member_id].member_epoch
    result = cs.consumer_group_install_assignment(ConsumerGroupInstallAssignmentRequest(
        group_id=GROUP, member_id=member_id, member_epoch=epoch, group_epoch=group_epoch,
        members=[InstalledMemberAssignment(member_id=m, partitions=[TopicPartitions(topic_id=foo, partitions=ps)])
                 for m, ps in assignment.items()]))
    r = result.response
    print(f"t={cs.now_ms} ▶ {member_id} InstallAssignment for epoch {group_epoch} {assignment}: {r.error_code.name}"
          + (f" ({r.error_message.replace(foo, 'foo')})" if r.error_message else ""))
    for record in result.records:
        name = type(record.key).__name__.removeprefix("ConsumerGroup").removesuffix("Key")
        value = record.value.model_dump(exclude_defaults=True) if record.value is not None else "tombstone"
        if isinstance(value, dict) and "topic_partitions" in value:
            value["topic_partitions"] = [p for tp in value["topic_partitions"] for p in tp["partitions"]]
        print("  wrote", name + (f"({record.key.member_id})" if getattr(record.key, "member_id", None) else ""), value)
    print("  →", group_line())


def my_assignor(prepared):
    """The members' client-side assignor: range over the prepared group, computed on the client."""
    result = range_assign(AssignmentSpec(
        members={m.member_id: MemberSubscription(frozenset(m.subscribed_topic_ids)) for m in prepared.members},
        topics={t.topic_id: TopicMetadata(t.topic_id, t.topic_name, t.num_partitions) for t in prepared.topics}))
    return {m: parts.get(foo, []) for m, parts in result.items()}

# %% [markdown]
# ### Joining: A is chosen
#
# A joins with a client-side assignor. The coordinator bumps the epoch but computes **no target**:
# the group stays *Assigning*, A's response says **ShouldComputeAssignment**, and a deadline — A's
# rebalance timeout, 10 s — is armed. B joins too (epoch 2); B is not asked.

# %% tags=["nbval-check-output"]
heartbeat("A")
heartbeat("B")
print(group_line())
print("timers:", cs.timers())

# %% [markdown]
# ### Prepare, an invalid install, a valid install
#
# A prepares. Its first install gives foo-2 to both A and B: **INVALID_ASSIGNMENT**, nothing written.
# A second forgets foo-3: INVALID_ASSIGNMENT again. Then the real computation: the target is written
# exactly as a server-side one (changed members, then the assignment epoch, one batch), and the
# members reconcile to it through their heartbeats as usual.

# %% tags=["nbval-check-output"]
prepared = prepare("A")
install("A", prepared.group_epoch, {"A": [0, 1, 2], "B": [2, 3]})
install("A", prepared.group_epoch, {"A": [0, 1], "B": [2]})
install("A", prepared.group_epoch, my_assignor(prepared))
heartbeat("A")
heartbeat("B")
print("timers:", cs.timers())

# %% [markdown]
# ### A missed deadline: another member is chosen, nobody is fenced
#
# C joins at 1 s (epoch 3). A is chosen again (lowest id) and learns it in its next heartbeat — which
# starts its 10 s clock — but never installs. When the deadline passes, the coordinator writes
# **nothing** ("the fencing is only done based on the session") and picks B. A's late
# Prepare is refused with UNKNOWN_MEMBER_ID: it is no longer the chosen member.

# %% tags=["nbval-check-output"]
cs.advance(1_000)
heartbeat("C")
heartbeat("A")
heartbeat("B")
for result in cs.advance(10_000):
    print(f"t={cs.now_ms} ⏰ {result.origin}: wrote {len(result.records)} records")
print(group_line())
heartbeat("A")
heartbeat("B")
prepare("A")

# %% [markdown]
# ### An install for an older epoch
#
# B prepares for epoch 3 — and while it computes, D joins (epoch 4). B's install for epoch 3 is
# still **installed**: the assignment epoch becomes 3 while the group epoch is 4, so the group stays
# *Assigning*, members start reconciling toward epoch 3, and a **new round** starts at once — A, the
# lowest id, is asked again, now for epoch 4 (KIP: "we have chosen to install the assignment
# computed for epoch X and to trigger a new assignment computation right away").

# %% tags=["nbval-check-output"]
prepared = prepare("B")
heartbeat("D")
install("B", prepared.group_epoch, my_assignor(prepared))
heartbeat("A")
prepared = prepare("A")
install("A", prepared.group_epoch, my_assignor(prepared))

# %% [markdown]
# Everyone heartbeats until the group converges: revocations first, then handovers, exactly as with
# a server-side target.

# %% tags=["nbval-check-output"]
for _ in range(3):
    for member_id in ("A", "B", "C", "D"):
        heartbeat(member_id)
print(group_line())

# %% [markdown]
# ## Summary

# %% tags=["nbval-check-output"]
print("moved over the sequence:", table.groupby("assignor").moved.sum().to_dict(),
      "| final spread:", table.groupby("assignor").spread.last().to_dict())
server = gc.consumer_group_describe(ConsumerGroupDescribeRequest(group_ids=["server"])).response.groups[0]
print("server-side group:", server.group_state, "epoch", server.group_epoch, "assignor", server.assignor_name,
      "members", sorted(m.member_id for m in server.members))
print("client-side group:", group_line())
print("log batches:", cs.log.batch_count)

# %% [markdown]
# **Next:** [07_eager_cooperative_848](07_eager_cooperative_848.ipynb) — one rolling bounce under eager, cooperative and KIP-848 rebalancing.
