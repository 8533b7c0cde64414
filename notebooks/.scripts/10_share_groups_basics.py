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
# # 10 · Share groups: queues for Kafka (KIP-932)
#
# A **share group** reads topics the way a queue's workers do: many members may read the **same
# partition** at once, each record is handed to one member at a time, and each record is
# **acknowledged on its own** (KIP-932 *Share groups*). Nothing is
# "owned": the group coordinator only says *where* each member should fetch, and
# the share-partition leader — the broker that leads the topic-partition — decides which member
# gets which records.
#
# This notebook shows the three layers one after the other:
#
# 1. **membership** at the group coordinator: ShareGroupHeartbeat, two group states, and the
#    KIP's **SimpleAssignor**, which gives every partition at least one member;
# 2. **records** at the share-partition leader: *Available → Acquired → Acknowledged/Archived*,
#    with delivery counts and acquisition locks;
# 3. a **Lab run** with more consumers than partitions and per-record acknowledgements.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import pandas as pd

from kip_lab.clients.share_consumer import FailureRule
from kip_lab.coordinator import GroupCoordinator
from kip_lab.coordinator.share_group import share_coordinator_rpc
from kip_lab.events import ShareAcquired, ShareStateWrite
from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.lab.metrics import compute_metrics
from kip_lab.lab.share_invariants import at_least_once
from kip_lab.protocol.share_group import ShareGroupHeartbeatRequest
from kip_lab.share.config import SharePartitionConfig
from kip_lab.share.coordinator import ShareCoordinator
from kip_lab.share.group import SHARE_GROUP_STATE_MACHINE
from kip_lab.share.group_assignor import SimpleAssignor
from kip_lab.share.partition import RECORD_STATE_MACHINE
from kip_lab.viz import machine_dot, picture, record_state_strip, share_frames

pd.set_option("display.width", 160)

# %% [markdown]
# ## 1 · Membership: two states, no revocation barrier
#
# A share group is **Stable** while it has members and **Empty** when it has none; there is no
# Assigning or Reconciling. A member takes a new assignment in one step: nobody
# has to give a partition up first, because nobody owns one. The picture is
# drawn from the table the coordinator enforces (`SHARE_GROUP_STATE_MACHINE`).

# %%
picture(machine_dot(SHARE_GROUP_STATE_MACHINE, current="Stable"))

# %% [markdown]
# ### The SimpleAssignor, row by row
#
# The KIP's three steps, per subscribed topic: (1) hash each member id onto one partition;
# (2) a partition left without a member, and without one in the current assignment, gets members
# round-robin; (3) a partition that got a member from hashing drops the members it had only from
# step 2. The KIP's example gives its members hashes 1, 2, …; `hash(Mi) = i` reproduces its
# table. That is the KIP's design, so the assignor runs under the `kip` fidelity profile here;
# the SimpleAssignor Kafka ships gives every member every partition of its topics (notebook 15). Here the whole table is driven through the **coordinator**: heartbeats, a partition
# change, a subscription change and leaves — and the partitions are assignable only once the
# share coordinator holds their state (the *initialize* dance).

# %% tags=["nbval-check-output"]
gc = GroupCoordinator()
gc.share_state_rpc = share_coordinator_rpc(ShareCoordinator())
gc.share_assignor = SimpleAssignor(member_hash=lambda member_id: int(member_id[1:]), fidelity="kip")
gc.cluster.create_topic("T1", 1)
gc.cluster.create_topic("T2", 2)
names = {gc.cluster.topic(t).topic_id: t for t in ("T1", "T2")}
epochs = {}


def beat(member, topics=None, leave=False):
    request = ShareGroupHeartbeatRequest(
        group_id="S", member_id=member, member_epoch=-1 if leave else epochs.get(member, 0),
        subscribed_topic_names=topics)
    epochs[member] = gc.share_group_heartbeat(request).response.member_epoch


def settle():
    for _ in range(2):  # the dance's epoch bump, then every member takes its target
        for member in sorted(gc.share_groups["S"].members):
            beat(member)


def table_row(event):
    group = gc.share_groups["S"]
    cells = [f"{m}→" + ",".join(sorted(f"{names[t]}:{p}" for t, ps in v.assigned.items() for p in ps))
             for m, v in sorted(group.members.items())]
    print(f"{event:<34} epoch {group.group_epoch:>2} | " + "  ".join(cells))


script = [
    ("M1 subscribes to T1 (1 partition)", lambda: beat("M1", ["T1"])),
    ("M2 joins", lambda: beat("M2", ["T1"])),
    ("T1 grows to 4 partitions", lambda: gc.cluster.add_partitions("T1", 3)),
    ("M3 joins", lambda: beat("M3", ["T1"])),
    ("M4 joins", lambda: beat("M4", ["T1"])),
    ("M5..M8 join", lambda: [beat(f"M{i}", ["T1"]) for i in range(5, 9)]),
    ("M1 also subscribes to T2", lambda: beat("M1", ["T1", "T2"])),
    ("all leave but M2", lambda: [beat(f"M{i}", leave=True) for i in (1, 3, 4, 5, 6, 7, 8)]),
]
for event, step in script:
    step()
    settle()
    table_row(event)

# %% [markdown]
# Every row is the KIP's. Note row 3: M2 *loses* T1:0 (hashing now maps M2 to T1:1) without
# anyone confirming anything, and row 6: with members ≥ partitions and every partition hashed, new
# members only *add* to partitions — nothing is revoked.
#
# ## 2 · Records: the state machine the share-partition leader enforces
#
# Every in-flight record is in one of four states. Acquiring adds one to its **delivery count**;
# releasing, a lock that runs out, or the end of the member's share session make it Available
# again — or Archived once the count reaches `group.share.delivery.count.limit` (5). A REJECT
# archives it at once. This table (`RECORD_STATE_MACHINE`) is the one `SharePartition` checks.

# %%
picture(machine_dot(RECORD_STATE_MACHINE, current="Acquired"))

# %% [markdown]
# ## 3 · In the Lab: four consumers, two partitions, per-record acknowledgements
#
# Topic `orders` has 2 partitions; four share consumers join group `queue` — more consumers than
# partitions, which a consumer group could not use. They acknowledge **explicitly**:
# every record is ACCEPTed, except values matching `bad-.*`, which are REJECTed (archived after
# one delivery). Each fetch acquires at most 4 records, so a partition's records are spread
# over the members. The producer writes 20 records per partition after the group has settled (the
# share-partitions start at the *latest* offset, `group.share.auto.offset.reset`).

# %%
lab = Lab(seed=10, config=LabConfig(share=SharePartitionConfig(record_lock_duration_ms=5_000)))
lab.create_topic("orders", 2, produce_rate_per_s=0)
for name in ("W1", "W2", "W3", "W4"):
    lab.add_share_consumer(name, group_id="queue", subscribed_topic_names=["orders"], acknowledgement="explicit",
                           max_poll_records=4, processing_ms_per_record=2.0,
                           failures=[FailureRule(offsets=[7], action="reject")])
lab.run(until=6_000)
print("assignments:", {n: sorted(p for _, p in c.assigned) for n, c in sorted(lab.clients.items())})
lab.produce_share_records("orders", 20, batch_size=4)
lab.run(until=20_000)
print("outcomes per consumer:", {n: c.outcomes for n, c in sorted(lab.clients.items())})

# %% [markdown]
# The Lab runs Kafka's SimpleAssignor (the default `kafka` profile): every member is assigned every
# partition of its topics, so all four share both partitions. *Which* member gets *which* records is the share-partition leader's
# doing, fetch by fetch. Below, every acquisition on partition 0 as the leader traced it: one
# acquisition is a range of offsets under one lock, with one delivery count — all four members
# acquire records of the same partition, each its own range.

# %% tags=["nbval-check-output"]
orders0 = (lab.topic_id("orders"), 0)
member_names = {c.member_id: n for n, c in lab.clients.items()}
for event in lab.trace.of_type(ShareAcquired):
    p = event.body
    if (p.topic_id, p.partition) == orders0:
        ranges = ", ".join(f"{f}-{last} (delivery {dc})" for f, last, dc in p.ranges)
        print(f"t={event.time_ms:>5} {member_names[p.member_id]} acquired {ranges}")

# %% tags=["claims"] jupyter={"source_hidden": true}
acquired = [e.body for e in lab.trace.of_type(ShareAcquired) if (e.body.topic_id, e.body.partition) == orders0]
assert {member_names[a.member_id] for a in acquired} == {"W1", "W2", "W3", "W4"}
offsets = [o for a in acquired for first, last, _ in a.ranges for o in range(first, last + 1)]
assert sorted(offsets) == list(range(20)), "each offset of the 20 acquired once: every member its own range"
assert max(last - first + 1 for a in acquired for first, last, _ in a.ranges) <= 4

# %% [markdown]
# And what each acknowledgement made durable: every state change but acquisition is a
# **WriteShareGroupState** to the share coordinator (KIP-932 *Share-group state persistence*: acquisition is never
# written). `start` is the share-partition start offset (SPSO) the write records.

# %% tags=["nbval-check-output"]
for event in lab.trace.of_type(ShareStateWrite):
    p = event.body
    if (p.topic_id, p.partition) == orders0:
        batches = [f"{b['first_offset']}-{b['last_offset']} state {b['delivery_state']} dc {b['delivery_count']}"
                   for b in p.request["state_batches"]]
        print(f"t={event.time_ms:>5} {p.origin:<24} start {p.request['start_offset']:>3} {batches}")

# %% [markdown]
# The **record-state strip**: offsets up, time across, one colour per state, the delivery count
# in each interval; the solid line is the SPSO, the dashed one the SPEO (the end of the in-flight
# window). Offset 7 goes from Acquired to Archived (rejected); everything else to Acknowledged,
# and the SPSO follows the acknowledged prefix.

# %%
strip = record_state_strip(lab, "queue", lab.topic_id("orders"), 0,
                           title="orders-0 in share group queue")
strip

# %%
picture(strip)

# %% [markdown]
# ## Summary

# %% tags=["nbval-check-output"]
metrics = compute_metrics(lab.trace)
records = share_frames(lab).records
print("members in group queue:", len(lab.coordinator.share_groups["queue"].members), "for 2 partitions")
print("records acquired:", metrics["share_records_acquired"], "| redeliveries:", metrics["share_redeliveries"])
print("acknowledged:", metrics["share_records_acknowledged"], "| archived:", metrics["share_records_archived"])
print("every record ended Acknowledged or Archived:", at_least_once(lab.world) == [])
print("invariant violations:", len(lab.invariants.violations))

# %% [markdown]
# **Next:** [11_share_state_writes](11_share_state_writes.ipynb) — what a share-partition leader writes, write by write.
