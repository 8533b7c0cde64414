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
# # 13 · Share coordinator failover and fencing (KIP-932)
#
# Share state lives in two places: in memory at each **share-partition leader** (the in-flight
# records) and durably on `__share_group_state`, owned by the **share coordinator**. Both can
# move to another broker, and the KIP protects the durable state with two epochs (KIP-932 *Share-group state persistence*):
#
# * a new share coordinator **replays** its partition of `__share_group_state` before it serves
#   anything; until then every RPC gets COORDINATOR_LOAD_IN_PROGRESS;
# * a **leader epoch**: when a topic-partition's leadership moves, the new leader reads the state
#   with its higher epoch, and from then on the old leader — a *zombie* that has not learnt it lost
#   leadership — is refused with FENCED_LEADER_EPOCH;
# * a **state epoch**: an admin reset of the start offset re-initializes the state with a new
#   state epoch, and a write carrying the old one is refused with FENCED_STATE_EPOCH.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub


from kip_lab.events import ShareStateWrite
from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.lab.metrics import compute_metrics
from kip_lab.lab.share_invariants import at_least_once
from kip_lab.protocol.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    InitializeShareGroupStateRequest,
    InitializeStateData,
    InitializeStatePartition,
    ReadShareGroupStateSummaryRequest,
    ReadStateData,
    ReadStatePartition,
)
from kip_lab.runtime.scheduler import Scheduler
from kip_lab.share.config import SharePartitionConfig
from kip_lab.share.coordinator import ShareCoordinator
from kip_lab.share.partition import SharePartition
from kip_lab.share.persister import CoordinatorPersister
from kip_lab.share.topic_log import TopicLog
from kip_lab.viz import picture, record_state_strip

SHARE = SharePartitionConfig(record_lock_duration_ms=2_000)


def share_lab(seed):
    lab = Lab(seed=seed, config=LabConfig(share=SHARE))
    lab.create_topic("orders", 1, produce_rate_per_s=0)
    return lab


def writes(lab, since_ms=0):
    """Every WriteShareGroupState the leaders sent after ``since_ms``: who, why, and the answer."""
    out = []
    for e in lab.trace.of_type(ShareStateWrite):
        if e.time_ms >= since_ms:
            p = e.body
            out.append(f"t={e.time_ms:>6} {e.actor}: {p.origin:<24} leader epoch {p.request['leader_epoch']}"
                       f" -> {p.error or 'OK'}")
    return out

# %% [markdown]
# ## 1 · The share coordinator fails over in the middle of a run
#
# Two share consumers read `orders-0` while a producer writes 10 records every 2 s. At 9 s the
# share coordinator moves to another broker: the new one replays `__share_group_state` (the log
# survives: it is replicated) and the leaders' next writes go to it.

# %% tags=["nbval-check-output"]
run = share_lab(13)
for name in ("A", "B"):
    run.add_share_consumer(name, group_id="queue", subscribed_topic_names=["orders"], max_poll_records=4)
run.run(until=6_000)
run.produce_share_records("orders", 10, batch_size=5, repeat=5, every_ms=2_000)
run.run(until=9_000)
before = run.world.share.coordinator
print("before: share coordinator on", run.world.share.coordinator_host, "with",
      run.world.share.log.end_offset, "records")
run.fail_over_share_coordinator()
after = run.world.share.coordinator
print("after:  share coordinator on", run.world.share.coordinator_host, "| rebuilt == live:",
      after.states == before.states)
run.run(until=40_000)
sp = run.world.share.share_partition("queue", (run.topic_id("orders"), 0))
print("end: SPSO", sp.spso, "of", run.world.share.topic_log((run.topic_id("orders"), 0)).high_watermark,
      "| durable start", after.state("queue", run.topic_id("orders"), 0).start_offset)
print("every record settled:", at_least_once(run.world) == [], "| violations:", len(run.invariants.violations))

# %%
picture(record_state_strip(run, title="orders-0 across a share coordinator failover at 9 s", time_range=(5_000, 16_000)))

# %% [markdown]
# ## 2 · Loading: nothing is served until the replay is done
#
# `ShareCoordinator.loading` is a coordinator that has just become leader of the partition and
# replays it batch by batch (`load_step`). While it loads, every request — here a
# ReadShareGroupStateSummary, as the group coordinator sends for `listShareGroupOffsets` — is
# answered with COORDINATOR_LOAD_IN_PROGRESS, and the caller retries.

# %% tags=["nbval-check-output"]
loading = ShareCoordinator.loading(run.world.share.log)
summary = ReadShareGroupStateSummaryRequest(group_id="queue", topics=[
    ReadStateData(topic_id=run.topic_id("orders"), partitions=[ReadStatePartition(partition=0)])])
answers = []
while True:
    answer = loading.read_share_group_state_summary(summary).response.results[0].partitions[0]
    answers.append(answer.error_code.name)
    if answer.error_code.name == "NONE":
        break
    loading.load_step(10)
print(f"{answers.count('COORDINATOR_LOAD_IN_PROGRESS')} refusals while loading, then", answers[-1],
      "| start offset", answer.start_offset)

# %% [markdown]
# ## 3 · A zombie share-partition leader is fenced by the leader epoch
#
# Consumer A is slow (1 s per record, so its 2 s locks run out). At 6.5 s A holds five records at
# the leader of `orders-0`; then the partition's leadership moves (`MoveShareLeader`: leader
# epoch 0 → 1). Consumer B joins and fetches from the new leader, which reads the state with
# epoch 1. The old leader still has A's records and their locks: when they run out, its write
# carries leader epoch 0 and the share coordinator refuses it. The Lab's leader then gives the
# share-partition up, as Kafka's does; the new leader redelivers the records.

# %% tags=["nbval-check-output"]
zombie = share_lab(7)
zombie.add_share_consumer("A", group_id="queue", subscribed_topic_names=["orders"], processing_ms_per_record=1_000,
                          max_poll_records=5)
zombie.run(until=6_000)
zombie.produce_share_records("orders", 10, batch_size=5)
zombie.run(until=6_500)
old = zombie.world.share.leader_of((zombie.topic_id("orders"), 0))
zombie.move_share_leader("orders", 0)
new = zombie.world.share.leader_of((zombie.topic_id("orders"), 0))
print(f"leadership of orders-0: {old} -> {new}")
zombie.add_share_consumer("B", group_id="queue", subscribed_topic_names=["orders"])
zombie.run(until=60_000)
for line in writes(zombie, since_ms=6_500)[:6]:
    print(line)
sp = zombie.world.share.share_partition("queue", (zombie.topic_id("orders"), 0))
print("new leader: SPSO", sp.spso, "| every record settled:", at_least_once(zombie.world) == [])

# %% [markdown]
# ## 4 · An admin reset fences the old state epoch
#
# Resetting the start offset of an (empty) group re-initializes the share-partition with a new
# **state epoch** (the group epoch after the bump). A leader that loaded the state
# before the reset still writes with the old one — refused with FENCED_STATE_EPOCH; its next first
# share session reloads (ReadShareGroupStateSummary shows the new epoch).

# %% tags=["nbval-check-output"]
log = TopicLog("orders-id", 0)
log.append(20)
share = ShareCoordinator()


def initialize(state_epoch, start_offset):
    share.initialize_share_group_state(InitializeShareGroupStateRequest(group_id="queue", topics=[
        InitializeStateData(topic_id="orders-id", partitions=[
            InitializeStatePartition(partition=0, state_epoch=state_epoch, start_offset=start_offset)])]))


initialize(state_epoch=1, start_offset=0)
stale = SharePartition.load("queue", "orders-id", 0, log, config=SHARE, scheduler=Scheduler(),
                            persister=CoordinatorPersister(share))
stale.acquire("old-member", 5)
initialize(state_epoch=2, start_offset=15)  # alterShareGroupOffsets: epoch bump, new state epoch
write = stale.acknowledge("old-member", [AcknowledgementBatch(first_offset=0, last_offset=4,
                                                              acknowledge_types=[AcknowledgeType.ACCEPT])])
print("old leader's write (state epoch 1):", write.error.name)
print("stored:", share.state("queue", "orders-id", 0))

# %% [markdown]
# ## Summary

# %% tags=["nbval-check-output"]
fenced = [line for line in writes(zombie) if "FENCED_LEADER_EPOCH" in line]
metrics = compute_metrics(run.trace)
print("failover run: acknowledged", metrics["share_records_acknowledged"], "archived",
      metrics["share_records_archived"], "| settled:", at_least_once(run.world) == [])
print("zombie run: fenced writes", len(fenced), "| settled:", at_least_once(zombie.world) == [])
print("state-epoch fencing:", write.error.name)
print("invariant violations:", len(run.invariants.violations) + len(zombie.invariants.violations))

# %% [markdown]
# **Next:** [14_protocol_comparison_at_scale](14_protocol_comparison_at_scale.ipynb) — the protocols compared over many runs, on Spark.
