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
# # 00 · A tour of kip_lab
#
# **kip_lab** is a deterministic, steppable workbench for Apache Kafka's group protocols. This
# course starts with **KIP-848, "The Next Generation of the Consumer Rebalance Protocol"** — the
# protocol in which the *group coordinator* (a broker) computes assignments and every consumer
# converges to its share on its own, heartbeat by heartbeat, with no group-wide barrier — then
# compares it with the classic protocol and KIP-429's cooperative rebalancing, and ends with
# KIP-932's share groups (queues in Kafka).
#
# Everything runs in this Python process on a **manual clock**: no broker, no threads, no wall
# time. The same scenario and seed give the same trace, byte for byte, so every number printed in
# these notebooks is reproducible — and checked by `nbval` in the test suite.
#
# This tour shows the three ways in and the pictures you will meet in every other notebook:
#
# 1. **the coordinator alone** — you play the consumers and send each heartbeat yourself;
# 2. **the Lab** — autonomous new-protocol consumers, a simulated network, faults on demand;
# 3. **the pictures** — a state diagram drawn from a machine's table, the group picture,
#    ownership swimlanes, the epoch chart, the message sequence, and the stepper widget.
#
# **The course.** Read the notebooks in this order; each ends with a link to the next. Most run top
# to bottom in seconds (*Run → Run All Cells*) — the sweeps at scale, the large group and the real
# clients take longer, and say why — and every one shows its pictures before you run it.
#
# | notebook | teaches |
# |---|---|
# | [00_tour](00_tour.ipynb) | this tour: the coordinator, the Lab, the pictures, the stepper, scenarios |
# | [01_joins](01_joins.ipynb) | the KIP-848 *Basic* and *third member joins* case studies, heartbeat by heartbeat |
# | [02_failures](02_failures.ipynb) | session timeout, rebalance timeout, a lost response, coordinator failover |
# | [03_partitions_and_topics](03_partitions_and_topics.ipynb) | added partitions, topic recreation, regex subscriptions |
# | [04_static_membership](04_static_membership.ipynb) | epoch -2, replacement by instance id, UNRELEASED_INSTANCE_ID |
# | [05_consumer_state_machine](05_consumer_state_machine.ipynb) | the new consumer's member state machine, callbacks, fencing, STALE |
# | [06_assignors](06_assignors.ipynb) | uniform vs range, and the KIP's client-side assignor mode |
# | [07_eager_cooperative_848](07_eager_cooperative_848.ipynb) | one rolling bounce under eager, cooperative (KIP-429) and KIP-848 |
# | [08_online_migration](08_online_migration.ipynb) | a classic group converted to a consumer group while it runs |
# | [09_upgrade_path](09_upgrade_path.ipynb) | KIP-429's two-bounce upgrade from eager to cooperative, and how it fails |
# | [10_share_groups_basics](10_share_groups_basics.ipynb) | KIP-932 share groups: the SimpleAssignor, record states, acknowledgements |
# | [11_share_state_writes](11_share_state_writes.ipynb) | KIP-932's *writing share state* example, write by write |
# | [12_poison_messages](12_poison_messages.ipynb) | delivery counts against poison records, acquisition locks |
# | [13_share_coordinator_failover](13_share_coordinator_failover.ipynb) | the share coordinator failing over, zombie leaders fenced by epochs |
# | [14_protocol_comparison_at_scale](14_protocol_comparison_at_scale.ipynb) | sweeps on Spark: the protocols compared over many runs |
# | [15_kafka_vs_kip](15_kafka_vs_kip.ipynb) | where Kafka's code departed from the KIPs' text: the `fidelity` profiles |
# | [16_scale_and_batching](16_scale_and_batching.ipynb) | a large group joining, with and without assignment batching (Kafka 4.3) |
# | [17_real_clients](17_real_clients.ipynb) | real librdkafka consumers in the Lab through its wire-protocol front door |
# | [18_design_review](18_design_review.ipynb) | a design review: a rollout under every combination of its options, one report to attach |
#
# **References.** The KIPs are public:
# [KIP-848](https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol)
# (the new consumer group protocol),
# [KIP-429](https://cwiki.apache.org/confluence/display/KAFKA/KIP-429%3A+Kafka+Consumer+Incremental+Rebalance+Protocol)
# (cooperative rebalancing) and
# [KIP-932](https://cwiki.apache.org/confluence/display/KAFKA/KIP-932%3A+Queues+for+Kafka) (share
# groups). The notebooks cite them by section title, e.g. *KIP-848, Consumer Group Heartbeat API*,
# and Kafka's code by class and method, e.g. Kafka `GroupMetadataManager.consumerGroupHeartbeat`.
# Rule names such as RC1 (a reconciliation rule) are listed, each with the KIP sentence it stands
# for, in the repository's `docs/rules.md`.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import pandas as pd
from IPython.display import display

pd.set_option("display.width", 140)
pd.set_option("display.max_colwidth", 80)

# %% [markdown]
# ## 1 · The coordinator alone
#
# KIP-848 moves the whole rebalance into one RPC, **ConsumerGroupHeartbeat** (KIP-848, *Public
# Interfaces → ConsumerGroupHeartbeat API*). A member joins by sending member epoch
# **0**, heartbeats with its current epoch, and leaves with **-1**. In each request it tells the
# coordinator what it *owns*; each response tells it its *epoch* and what it may *use*.
#
# `GroupCoordinator` is the coordinator of one `__consumer_offsets` partition. Its handlers are
# the RPC names in snake_case. It keeps its own manual clock (`gc.scheduler`).

# %%
from kip_lab import ClusterMetadata, CoordinatorConfig, GroupCoordinator
from kip_lab.protocol import ConsumerGroupHeartbeatRequest

cluster = ClusterMetadata()
foo = cluster.create_topic("foo", partitions=3)  # returns the topic id: KIP-848 speaks topic ids
gc = GroupCoordinator(CoordinatorConfig(), cluster)

result = gc.consumer_group_heartbeat(
    ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="A",  # empty would make the coordinator generate one, as the KIP says; "A" reads better
        member_epoch=0,  # 0 = join
        rebalance_timeout_ms=60_000,
        subscribed_topic_names=["foo"],
        topic_partitions=[],  # what A owns: nothing yet
    )
)
result.response

# %% [markdown]
# One heartbeat did a lot: A joined, the **group epoch** went 0 → 1, the coordinator computed a
# **target assignment** for epoch 1 (everything to A, the only member), and A — owning nothing it
# must give up — moved straight to **member epoch 1** with all three partitions. These are KIP-848's
# three decoupled loops (KIP-848, *Rebalance Protocol*):
#
# * **group epoch** — bumped whenever the group needs a new assignment (a join, a leave, a
#   subscription change, a partition added…);
# * **assignment epoch** — the group epoch the current target was computed for;
# * **member epoch** — each member's own progress; it jumps to the assignment epoch once the member
#   holds nothing outside its target.
#
# ### Records are the truth
#
# A handler never changes state directly: it returns the records to write to `__consumer_offsets`,
# and **replaying** those records is the only thing that changes the group. That is how the real
# coordinator works (Kafka's `CoordinatorResult` and `replay`), and it is why failover is just
# "replay the log". `result.batches` holds the records in the atomic batches they were written in.

# %% tags=["nbval-check-output"]
def topic_name(topic_id):
    topic = cluster.topic_by_id(topic_id)
    return topic.name if topic else topic_id[:6] + "…"


from kip_lab.coordinator.view import describe_record


def show_batches(result):
    for i, batch in enumerate(result.batches):
        print(f"batch {i}")
        for record in batch:
            print("   ", describe_record(record, cluster))


show_batches(result)

# %% [markdown]
# Three batches, in the order KIP-848 prescribes (*Persistence*):
#
# 1. the member's metadata, the group's partition metadata, then the **group epoch** record last;
# 2. the **target assignment**: changed members first, then the assignment epoch — one atomic batch,
#    so a reader never sees half a target;
# 3. A's **current assignment** at its new member epoch.
#
# The group state is derived from these records. `gc.groups["g"]` is the replayed state:

# %% tags=["nbval-check-output"]
group = gc.groups["g"]
member = group.members["A"]
print("group state:", group.state.value, "| group epoch", group.group_epoch, "| assignment epoch", group.assignment_epoch)
print("A: member epoch", member.member_epoch, "| reconciliation state", member.state.value,
      "| assigned", {topic_name(t): sorted(p) for t, p in member.assigned.items()})
print("timers:", gc.timers())

# %% [markdown]
# The coordinator armed a **session timer** for A: 45 s (`group.consumer.session.timeout.ms`,
# KIP-848 *Broker Configurations*). If nothing else arrives, advancing the clock fires it: A is
# removed, its records are tombstoned and the group epoch is bumped (KIP-848, *Group Membership*).
# `gc.advance` returns what the timers wrote.
#
# Failover first, though: a brand-new coordinator that replays the same log holds the same state.

# %% tags=["nbval-check-output"]
rebuilt = GroupCoordinator.from_log(gc.log, CoordinatorConfig(), cluster)
print("log:", gc.log.batch_count, "batches,", len(gc.log), "records")
print("rebuilt == live:", rebuilt.state_snapshot() == gc.state_snapshot())

for fired in gc.advance(45_000):
    print(f"t={gc.now_ms} ms:", fired.origin)
    show_batches(fired)
print("group state:", gc.groups["g"].state.value, "| group epoch", gc.groups["g"].group_epoch)

# %% [markdown]
# ## 2 · Pictures drawn from tables
#
# Every state machine in kip_lab is declared **once, as a table** of `(source, trigger, target)`
# rows. The engine refuses any transition the table does not declare, and the diagrams are drawn
# from the same table — the picture cannot drift from the code. Here is the consumer group state
# (KIP-848, *Consumer Group States*):

# %%
from kip_lab.coordinator import GROUP_STATE_MACHINE, RECONCILIATION_MACHINE
from kip_lab.viz import group_dot, machine_dot, picture

pd.DataFrame(
    [(t.source, t.trigger, t.target) for t in GROUP_STATE_MACHINE.transitions],
    columns=["source", "trigger", "target"],
)

# %%
picture(machine_dot(GROUP_STATE_MACHINE, current="Empty", last_transition=("Stable", "last member removed", "Empty")))

# %% [markdown]
# Drawn here with the transition the group just took: A's session expired, the last member was
# removed, Stable → Empty. How to read it: boxes are states (double border: the initial state;
# yellow: the current state);
# an edge carries every trigger that moves between two states (when many
# states reach one state by the same trigger, the arrows go unlabelled and the state names the
# trigger under its own name); the edge just taken is bold red, its trigger marked ▶. `machine_dot` returns DOT text; `picture` lays it out with graphviz
# and keeps it in the notebook as a PNG beside the SVG, so it shows even before you run anything.
#
# The member side of the coordinator has its own table — Kafka's server-side reconciliation states
# (Kafka `MemberState` in the group coordinator). A member is `UNREVOKED_PARTITIONS` while it still holds something it was told to
# give up, and `UNRELEASED_PARTITIONS` while part of its target is still held by someone else:

# %%
picture(machine_dot(RECONCILIATION_MACHINE, current="UNRELEASED_PARTITIONS"))

# %% [markdown]
# The **group picture** (`group_dot`) draws the coordinator's view of a group: members with their
# epoch and reconciliation state, partitions, and an edge per relation — solid *assigned*, dashed
# blue *pending* (in the target, not usable yet), bold red *revoking*. We draw it in the middle of
# a rebalance: B has just joined a group where A owns everything.

# %%
demo_cluster = ClusterMetadata()
demo_cluster.create_topic("foo", partitions=3)
demo = GroupCoordinator(CoordinatorConfig(), demo_cluster)


def join(coordinator, member_id):
    return coordinator.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        group_id="g", member_id=member_id, member_epoch=0, rebalance_timeout_ms=60_000,
        subscribed_topic_names=["foo"], topic_partitions=[]))


join(demo, "A")
join(demo, "B")
picture(group_dot(demo.groups["g"], demo_cluster))

# %% [markdown]
# B is at epoch 2 but foo-2 is only *pending* for it: A still owns foo-2 and has not been told yet
# (it will be, in its next heartbeat). KIP-848 never gives a partition to a new owner before the
# previous owner has released it (KIP: B "cannot get foo-2 until A revokes it").
# Notebook 01 walks this case study heartbeat by heartbeat.
#
# ## 3 · The Lab: autonomous consumers on a simulated network
#
# The `Lab` wraps the same coordinator in a world: brokers, a network with latency and faults,
# and **new-protocol consumers** (Kafka's `AsyncKafkaConsumer`: its member state machine, the
# heartbeat manager, reconciliation with rebalance callbacks, auto-commit). A run is a sequence of
# **steps**: the next timer on the shared clock (a message delivered, a heartbeat due, a session
# expiring) or an action you apply (`lab.crash("A")`), which is a step of its own.
#
# We build the KIP's *Basic* case: topic foo with 3 partitions; A starts at 0 s, B at 10 s, C at 20 s.

# %%
from kip_lab.lab import Lab
from kip_lab.lab import actions

lab = Lab(seed=0)
lab.create_topic("foo", partitions=3)
lab.add_consumer("A", subscribed_topic_names=["foo"])
lab.add_consumer("B", subscribed_topic_names=["foo"], start=False)
lab.add_consumer("C", subscribed_topic_names=["foo"], start=False)
lab.schedule(actions.Start(member="B"), at_ms=10_000)
lab.schedule(actions.Start(member="C"), at_ms=20_000)
lab.run(until=20_000)  # run past the last scheduled start...
print("stable:", lab.run_until_stable(), "at t =", lab.now, "ms after", lab.step_count, "steps")  # ...then settle

# %% [markdown]
# Everything that happened is in `lab.trace`: one typed event per thing, with the step, the
# simulated time, the actor and what happened (`kip_lab.events`: `MessageDelivered`,
# `StateTransition`, ...). Read them by type; `to_pandas()` shows them as a table. Here are the
# events of the step in which C's first heartbeat reached the coordinator:

# %%
from kip_lab.events import MessageDelivered

first_c = min(e.step for e in lab.trace.of_type(MessageDelivered) if e.body.source == "C")
trace = lab.trace.to_pandas()
trace[trace.step == first_c]

# %% [markdown]
# ### Ownership swimlanes and the epoch chart
#
# `trace_frames` turns a trace into tidy pandas frames; the chart builders turn frames into Altair
# specs. **Swimlanes**: one lane per partition, a bar per member that held it — solid *assigned*,
# faint *pending* (in its target, waiting for the previous owner), half-transparent *revoking* (told
# to give it up, not done yet); red shading is time when nobody could consume the partition.
# **Epochs**: the group epoch (solid), the assignment epoch (dashed) and each member's epoch (dotted)
# as step lines. Dashed vertical rules are faults and coordinator timers. Hover for details.

# %%
from kip_lab.viz import epoch_chart, message_sequence, ownership_swimlanes, trace_frames

frames = trace_frames(lab.trace)
ownership_swimlanes(frames, width=640) & epoch_chart(frames, width=640, height=180)

# %% [markdown]
# Read the top chart lane by lane: A holds everything from the start; at 10 s B joins and foo-2
# becomes *pending* for B (faint orange) — and the lane turns red for about five seconds. Why? A
# gives foo-2 up within milliseconds, but B only learns that foo-2 is free in its **next**
# heartbeat response, and B heartbeats every 5 s (`group.consumer.heartbeat.interval.ms`). That is
# KIP-848's design: a released partition goes to its new owner in the new owner's next heartbeat
# response (the *Basic* case). The same happens to foo-1 when C joins
# at 20 s.
#
# Zoom in with `time_range` to see the first milliseconds after B's join: the group and assignment
# epochs move to 2 at once, B jumps 0 → 2, A is told to revoke foo-2 (half-transparent), does so,
# and moves to epoch 2 when it acknowledges.

# %%
zoom = (9_995, 10_020)
ownership_swimlanes(frames, time_range=zoom, width=640) & epoch_chart(frames, time_range=zoom, width=640, height=160)

# %% [markdown]
# Charts are data until rendered: `picture` renders the same spec to a static image (vl-convert,
# no browser, no network), stored as PNG and SVG, so it shows on GitHub and in a notebook nobody ran:

# %%
picture(ownership_swimlanes(frames, time_range=(19_995, 20_020), width=560))

# %% [markdown]
# ### The message sequence
#
# One vertical lane per actor, time running down, one arrow per message: requests solid, responses
# dashed, errors red, dropped messages grey with a cross. `y_axis="step"` spaces messages by step
# instead of milliseconds — here the whole run fits although it spans 25 s. `apis` keeps only the
# heartbeats (the consumers also send OffsetCommit and OffsetFetch). Hover an arrow for its body.

# %% tags=["claims"] jupyter={"source_hidden": true}
assert round(lab.horizon and lab.trace[-1].time_ms / 1000) == 25, "the run spans 25 s"

# %%
message_sequence(frames, y_axis="step", apis=["ConsumerGroupHeartbeat"], height=520)

# %% [markdown]
# With the default time axis, `time_range` zooms: C's join heartbeat at 20 s and its answer
# (epoch 3, foo-1 pending), then B's regular heartbeat a few milliseconds later.

# %%
message_sequence(frames, time_range=(19_999, 20_010), apis=["ConsumerGroupHeartbeat"], height=300)

# %% [markdown]
# ## 4 · Stepping: the widget, time travel, forks
#
# `explore(lab)` is the stepper with a fault panel. **Play / Step / Back** and the slider move
# through the run (`Lab.seek`); the timeline cursor follows; the diagram shows the chosen member's
# client state, its reconciliation state on the coordinator, the group state or the group picture;
# the table lists the records the coordinator wrote at that step; the lights are the invariants
# that apply to this run (no partition owned twice, epochs never go back, …). **Next change ▶▶**
# jumps to the next step where a state, an owner or an epoch changes; the line *what just
# happened* says what the step did, and the step axis under it marks every step that did
# something. The stepper opens at step 0 (`explore(lab, start_step=k)` opens it at step k). A fault
# button applies the fault at the step on screen — the run forks in place — and runs on until the
# group settles.
#
# The stepper steps its own copy of the run: the cells below use `lab` again without moving it.
# *(The widget needs a live kernel; until the notebook runs, a picture of its first view stands in.)*

# %%
from widgets import explore

explore(lab, member="A")

# %% [markdown]
# The same time travel from code: `seek(k)` restores the world right after step `k` (a snapshot
# plus deterministic replay); `fork()` gives an independent copy to try something else.

# %% tags=["nbval-check-output"]
end = lab.horizon  # the last step run
lab.seek(first_c)
print(f"after step {lab.step_count} (t={lab.now} ms): group epoch {lab.coordinator.groups['g'].group_epoch}, "
      f"C is {lab.clients['C'].state.value}")
what_if = lab.fork()
what_if.crash("A")
what_if.run(until=lab.now + 60_000)
print("fork where A crashes:", sorted(what_if.coordinator.groups["g"].members), "at group epoch",
      what_if.coordinator.groups["g"].group_epoch)
lab.seek(end)
print(f"original run, back at step {lab.step_count}:", sorted(lab.coordinator.groups["g"].members))

# %% [markdown]
# ## 5 · Scenarios: a run written down as data
#
# A scenario (YAML or a Python dict) names the topics, members, timed events, how long to run and
# what must be true at the end. The library holds the KIP's case studies; `run_scenario` returns
# the final table, metrics and every expectation with its actual value.

# %%
from kip_lab.scenarios import list_library, load_library_scenario, run_scenario

print(list_library())
basic = run_scenario(load_library_scenario("basic"))
pd.DataFrame([(e.name, e.expected, e.actual, e.passed) for e in basic.expectations],
             columns=["expectation", "expected", "actual", "passed"])

# %% [markdown]
# ## Summary
#
# The cell below is checked by `nbval` on every test run: if the engine's behaviour changes, the
# notebook fails.

# %% tags=["nbval-check-output"]
g = lab.coordinator.groups["g"]
print("Lab run (Basic case):", g.state.value, "group epoch", g.group_epoch, "assignment epoch", g.assignment_epoch)
for member_id in sorted(g.members):
    m = g.members[member_id]
    print(f"  {member_id}: epoch {m.member_epoch}, assigned",
          {lab.cluster.topic_by_id(t).name: sorted(p) for t, p in m.assigned.items()},
          "| client", lab.clients[member_id].state.value)
print("steps:", lab.step_count, "| end:", lab.now, "ms | invariant violations:", len(lab.invariants.violations))
print("scenario 'basic' ok:", basic.ok, "| steps", basic.steps, "| records written", basic.metrics["records_written"])

# %% [markdown]
# **Next:** [01_joins](01_joins.ipynb) — the KIP-848 case studies, heartbeat by heartbeat.
