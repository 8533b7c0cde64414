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
# # 11 · Share-state writes, step by step (KIP-932)
#
# The share-partition leader keeps the in-flight records in memory; what must survive a failover
# goes to the **share coordinator**, which keeps it on the internal topic `__share_group_state`
# (KIP-932 *Share-group state persistence*). Three rules decide what is written:
#
# * **acquiring is never written** — an Acquired record falls back to its last durable state
#   after a failover, which is why delivery counts are approximate;
# * every other change (accept, release, reject, a lock that runs out, the start offset moving)
#   is one **WriteShareGroupState** holding only what changed; the leader waits for the answer;
# * the share coordinator appends a **ShareUpdate** record, or a **ShareSnapshot** of the whole
#   state when that is small or after enough updates; replaying the latest snapshot and the
#   updates after it gives the state back.
#
# This is the KIP's worked example *Writing share state*: group
# G1, `topic_uuid` partition 0, latest offset 100, three consumers. Each step shows the leader's
# window, the write it sent (as the KIP prints it: `{StartOffset, [first-last state dc]}`), the
# records the share coordinator appended, and what it holds afterwards.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub


from kip_lab.protocol.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    InitializeShareGroupStateRequest,
    InitializeStateData,
    InitializeStatePartition,
)
from kip_lab.runtime.scheduler import Scheduler
from kip_lab.share.config import ShareCoordinatorConfig, SharePartitionConfig
from kip_lab.share.coordinator import ShareCoordinator
from kip_lab.share.partition import RECORD_STATE_MACHINE, SharePartition
from kip_lab.share.persister import CoordinatorPersister
from kip_lab.share.topic_log import TopicLog
from kip_lab.viz import machine_dot, picture

GROUP, TOPIC = "G1", "topic_uuid"
STATES = {0: "Av", 2: "Ack", 4: "Arch"}  # DeliveryState codes
SHORT = {"Available": "Av", "Acquired": "Acq", "Acknowledged": "Ack", "Archived": "Arch"}

# %% [markdown]
# This notebook replays the KIP's worked example step by step, so the share coordinator and the
# share-partition run under the `kip` fidelity profile; Kafka's own code fetches whole batches and
# writes its state differently — notebook 15 shows those differences side by side.
#
# The group coordinator initializes the share-partition (InitializeShareGroupState with
# StartOffset -1: "not decided yet"); the leader's first read resolves -1 from
# `group.share.auto.offset.reset` — *latest*, so 100 — and writes it back: the KIP's step 0.
# On `__share_group_state` that is three snapshots: the initialization (snapshot epoch 0), the
# leader's first read, which records its leader epoch so that older leaders are fenced from then
# on (epoch 1), and the resolved start offset (epoch 2).

# %%
log = TopicLog(TOPIC, 0)
log.append(100)
scheduler = Scheduler()
coordinator = ShareCoordinator(ShareCoordinatorConfig(fidelity="kip"))  # the KIP's worked example
coordinator.initialize_share_group_state(InitializeShareGroupStateRequest(group_id=GROUP, topics=[
    InitializeStateData(topic_id=TOPIC, partitions=[InitializeStatePartition(partition=0, state_epoch=0,
                                                                             start_offset=-1)])]))
persister = CoordinatorPersister(coordinator)
sp = SharePartition.load(GROUP, TOPIC, 0, log, config=SharePartitionConfig(fidelity="kip"), scheduler=scheduler,
                         persister=persister)
seen = {"writes": 0, "records": 0}


def spans(batches):
    return "[" + ", ".join(f"{b[0]}-{b[1]} {STATES[b[2]]} dc{b[3]}" for b in batches) + "]"


def show(step, what):
    window = " ".join(f"{r.first_offset}-{r.last_offset} {SHORT[r.state]} dc{r.delivery_count}"
                      + (f" ({r.member_id})" if r.member_id else "") for r in sp.records())
    print(f"{step:>2} {what}")
    print(f"   leader   SPSO {sp.spso} SPEO {sp.speo} | {window or '(nothing in flight)'}")
    writes = persister.sent[seen["writes"]:]
    for sent in writes:
        data = sent.request.topics[0].partitions[0]
        batches = [(b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count)
                   for b in data.state_batches]
        print(f"   write    {{{data.start_offset}, {spans(batches)}}}")
    if not writes:
        print("   write    none (acquisition is not persisted)")
    for entry in coordinator.log.entries(seen["records"]):
        value = entry.record.value
        batches = [(b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count)
                   for b in value.state_batches]
        kind = type(entry.record.key).__name__.removesuffix("Key")
        print(f"   record   @{entry.offset} {kind}(snapshot epoch {value.snapshot_epoch}, "
              f"start {value.start_offset}, {spans(batches)})")
    stored = coordinator.state(GROUP, TOPIC, 0)
    print(f"   stored   start {stored.start_offset} {spans(stored.spans)}")
    seen.update(writes=len(persister.sent), records=coordinator.log.end_offset)


def ack(member, first, last, kind=AcknowledgeType.ACCEPT):
    sp.acknowledge(member, [AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=[kind])])


# %% [markdown]
# ## The eleven steps
#
# Step 3's split of 110-119 between three consumers is the KIP's; a per-fetch record cap does
# it (the KIP does not say how). Steps 3 are a second apart, so consumer 1's lock (30 s) is the
# first to run out at step 7 — but 110 was re-acquired at step 6 under a new lock, so only 111
# and 112 time out, as the KIP has it.

# %% tags=["nbval-check-output"]
show(0, "start: the partition's latest offset is 100")
log.append(10)
sp.acquire("C1", 10)
show(1, "fetch 100-109 (C1)")
ack("C1", 100, 109)
show(2, "acknowledge 100-109")
log.append(10)
sp.acquire("C1", 3)
scheduler.advance(1_000)
sp.acquire("C2", 6)
scheduler.advance(1_000)
sp.acquire("C3", 1)
show(3, "fetch 110-119: C1 gets 110-112, C2 113-118, C3 119")
ack("C1", 110, 110, AcknowledgeType.RELEASE)
show(4, "release 110 (C1)")
ack("C3", 119, 119)
show(5, "acknowledge 119 (C3)")
log.append(1)
sp.acquire("C1", 10)
show(6, "fetch 110 and 120 (C1)")
scheduler.run(30_000)
show(7, "lock timeout elapsed on 111, 112")
ack("C2", 113, 118)
show(8, "acknowledge 113-118 (C2)")
sp.acquire("C3", 10)
show(9, "fetch 111 and 112 (C3)")
ack("C1", 110, 110)
show(10, "acknowledge 110 (C1)")
ack("C3", 111, 112)
show(11, "acknowledge 111 and 112 (C3)")

# %% [markdown]
# What to notice:
#
# * steps 1, 3, 6 and 9 write nothing: acquisition is not durable;
# * step 4 writes only the released record `{-1, [110-110 Av dc1]}` (-1: the start offset did
#   not move) and the coordinator appends a **ShareUpdate**; step 2 and step 11 move the start
#   offset and leave nothing in flight to record, so the coordinator writes a **ShareSnapshot**
#   (a complete state, with a new snapshot epoch) — the KIP's "snapshot when the state is small";
# * step 10 moves the leader's SPSO to 111 but the write keeps StartOffset -1, exactly as the
#   KIP prints it: the coordinator's start lags at 110 until step 11;
# * step 10 writes delivery count **2**: the durable count follows the leader's.
#
# ## Replaying `__share_group_state`
#
# A new share coordinator — after a failover — rebuilds every share-partition from the log
# alone: the latest snapshot, then the updates after it (updates with an older snapshot epoch
# are ignored). The rebuilt state is the live one.

# %% tags=["nbval-check-output"]
rebuilt = ShareCoordinator.from_log(coordinator.log)
print("records on __share_group_state:", coordinator.log.end_offset)
print("rebuilt == live:", rebuilt.states == coordinator.states)
print("rebuilt state:", rebuilt.state(GROUP, TOPIC, 0))
print("records before the latest snapshot may be pruned below offset", coordinator.prunable_offset())

# %% [markdown]
# The record-state machine these steps walked (acquire, accept, release, lock timeout), drawn
# from the table the leader enforces:

# %%
picture(machine_dot(RECORD_STATE_MACHINE, last_transition=("Acquired", "accept", "Acknowledged")))

# %% [markdown]
# ## Summary

# %% tags=["nbval-check-output"]
kinds = [type(e.record.key).__name__.removesuffix("Key") for e in coordinator.log]
print("writes sent:", len(persister.sent), "| records:", {k: kinds.count(k) for k in sorted(set(kinds))})
final = coordinator.state(GROUP, TOPIC, 0)
print("final: leader SPSO", sp.spso, "SPEO", sp.speo, "| stored start", final.start_offset, spans(final.spans))
print("failover-safe:", ShareCoordinator.from_log(coordinator.log).states == coordinator.states)

# %% [markdown]
# **Next:** [12_poison_messages](12_poison_messages.ipynb) — delivery counts against records that keep failing.
