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
# # 04 · Static membership: epoch -2, replacement, UNRELEASED_INSTANCE_ID
#
# A rolling restart of a dynamic consumer costs two rebalances: its leave bumps the group epoch
# and hands its partitions to others; its return bumps it again and takes some back. **Static
# membership** (KIP-345, carried into KIP-848) lets a consumer with a `group.instance.id` step out
# and back in without either (KIP-848 *Static Membership*):
#
# * **SM1** a static member leaving *temporarily* sends member epoch **-2**; the coordinator keeps
#   its assignment — nobody else gets its partitions;
# * **SM2** a member joining with the **same instance id** replaces the old one and gets its current
#   assignment back;
# * **SM3** if nobody comes back within the **session timeout**, the member is removed;
# * **SM4** a member joining with an instance id that a *live* member still holds is refused with
#   **UNRELEASED_INSTANCE_ID** ("the member must leave first");
# * **SM5** a consumer that receives UNRELEASED_INSTANCE_ID fails.
#
# The KIP leaves three questions open: does the replacement keep the old member
# id, does its epoch carry over, is the group epoch bumped? kip_lab answers as Kafka does
# (`replaceMember`; docs/decisions.md D13): a **new member id**, the old member's **target and
# assignment** — so it reaches the assignment epoch in its first heartbeat — and **no** group
# epoch bump.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import pandas as pd

from kip_lab import ClusterMetadata, CoordinatorConfig, GroupCoordinator
from kip_lab.events import Note, StateTransition
from kip_lab.coordinator import GROUP_STATE_MACHINE
from kip_lab.lab.metrics import compute_metrics
from kip_lab.protocol import ConsumerGroupHeartbeatRequest, TopicPartitions
from kip_lab.scenarios import Scenario, build_lab, load_library_scenario
from kip_lab.viz import epoch_chart, group_dot, machine_dot, ownership_swimlanes, picture, trace_frames

pd.set_option("display.width", 160)

# %% [markdown]
# ## On the coordinator
#
# A compact harness: each call prints the response, the records written, and the group afterwards.
# Every request from a static member carries its `instance_id`.

# %%
GROUP = "g"
cluster = ClusterMetadata()
foo = cluster.create_topic("foo", partitions=4)
gc = GroupCoordinator(CoordinatorConfig(), cluster)


from kip_lab.coordinator.view import describe_record, describe_response


def group_line():
    group = gc.groups[GROUP]
    members = " | ".join(
        f"{m} ({x.instance_id}) e{x.member_epoch} {sorted(p for ps in x.assigned.values() for p in ps)}"
        for m, x in sorted(group.members.items()))
    return f"{group.state.value}, GE {group.group_epoch} TE {group.assignment_epoch} | {members}"


def send(member_id, epoch, instance_id, owned=None, quiet=False, **fields):
    if epoch == 0:
        fields.update(rebalance_timeout_ms=60_000, subscribed_topic_names=["foo"])
        owned = []
    request = ConsumerGroupHeartbeatRequest(
        group_id=GROUP, member_id=member_id, member_epoch=epoch, instance_id=instance_id,
        topic_partitions=None if owned is None else ([TopicPartitions(topic_id=foo, partitions=owned)] if owned else []),
        **fields)
    result = gc.consumer_group_heartbeat(request)
    if not quiet:
        print(f"t={gc.now_ms} ▶ {member_id} (instance {instance_id}) sends epoch {epoch}:",
              describe_response(result.response))
        for record in result.records:
            print("  wrote", describe_record(record))
        print("  →", group_line())
    return result

# %% [markdown]
# Two static members, A (`instance-a`) and B (`instance-b`), settle on foo-0,1 and foo-2,3 at
# group epoch 2.

# %% tags=["nbval-check-output"]
send("A", 0, "instance-a", quiet=True)
send("B", 0, "instance-b", quiet=True)
send("A", 1, "instance-a", owned=[0, 1, 2, 3], quiet=True)  # told to revoke foo-2,3
send("A", 1, "instance-a", owned=[0, 1], quiet=True)  # acknowledges: epoch 2
send("B", 2, "instance-b", owned=[], quiet=True)  # gets foo-2,3
send("B", 2, "instance-b", owned=[2, 3], quiet=True)
print(group_line())
print("timers:", gc.timers())

# %% [markdown]
# ### SM1 — A leaves temporarily (epoch -2)
#
# At 5 s A's process is being bounced: it sends a heartbeat with member epoch **-2**. One record:
# A's current assignment, now at epoch -2, **still holding foo-0,1**. No tombstone, no group epoch
# bump, no new target. B's next heartbeat changes nothing for B.

# %% tags=["nbval-check-output"]
gc.advance(5_000)
send("A", -2, "instance-a")
send("B", 2, "instance-b")
print("timers:", gc.timers())

# %% [markdown]
# The group is now *Reconciling* rather than *Stable* — A is not at the assignment epoch — along an
# edge of the group state table made for exactly this (`member leaves temporarily (static, epoch
# -2)`). A's session timer still runs: it started with A's last heartbeat.

# %%
picture(machine_dot(GROUP_STATE_MACHINE, current="Reconciling",
                       last_transition=("Stable", "member leaves temporarily (static, epoch -2)", "Reconciling")))

# %% [markdown]
# ### SM2 — a new process with the same instance id replaces A
#
# At 10 s the new process joins: epoch 0, a **new member id** `A-2`, instance id `instance-a`. The
# coordinator replaces the old member in one batch — tombstones for A's records (member, current
# assignment and target entry), then A-2's records carrying **A's target and A's partitions** (first
# at epoch 0, then, A-2 holding nothing outside its target, at the assignment epoch 2) — and A-2's
# very first response is "epoch 2, use foo-0,1". The group epoch stays 2; B never notices.

# %% tags=["nbval-check-output"]
gc.advance(5_000)
send("A-2", 0, "instance-a")
print("timers:", gc.timers())

# %% [markdown]
# ### SM4 — UNRELEASED_INSTANCE_ID
#
# A third process starts with `instance-a` while A-2 is alive — two deployments with the same
# config, say. It is refused, and nothing is written. The Kafka client treats this error as fatal
# (SM5).

# %% tags=["nbval-check-output"]
_ = send("A-3", 0, "instance-a")

# %% [markdown]
# ### SM3 — no return within the session timeout
#
# Now B leaves temporarily and never comes back. A-2 keeps heartbeating; B's partitions stay
# reserved for B until B's session timer — armed by B's last heartbeat, the -2 — fires 45 s later.
# Then B is removed like a crashed member: tombstones, group epoch 3, and A-2 gets everything.

# %% tags=["nbval-check-output"]
send("B", -2, "instance-b")
deadline = gc.timers()[("session", GROUP, "B")]
while True:
    fired = gc.advance(5_000)
    for result in fired:
        print(f"t={gc.now_ms} ⏰ {result.origin}")
        for record in result.records:
            print("  wrote", describe_record(record))
    send("A-2", gc.groups[GROUP].members["A-2"].member_epoch, "instance-a", quiet=not fired)
    if fired:
        break
print(f"B's session deadline was t={deadline}")

# %% tags=["nbval-check-output"]
_ = send("A-2", 3, "instance-a", owned=[0, 1, 2, 3])
picture(group_dot(gc.groups[GROUP], cluster))

# %% [markdown]
# ## In the Lab: a static bounce against a dynamic one
#
# The library scenario `static_member_bounce`: A and B are static; A **closes** at 20 s (for a static
# consumer, `close()` sends epoch -2) and a new process with the same instance id starts at 30 s.
# We run the same story without instance ids to compare.

# %%
static = build_lab(load_library_scenario("static_member_bounce"))
static.run(until=30_000)
static.run_until_stable()
static.run(until=40_000)

spec = load_library_scenario("static_member_bounce").model_dump()  # scenarios are data: edit a copy
for member in spec["members"].values():
    member["instance_id"] = None
dynamic = build_lab(Scenario.model_validate(spec))
dynamic.run(until=30_000)
dynamic.run_until_stable()
_ = dynamic.run(until=40_000)

# %% [markdown]
# **Static** (top): A's lanes are empty between 20 s and 30 s — nobody consumes foo-0,1 while A is
# away (that is the price: the partitions wait for their owner) — and A's new incarnation picks them
# up again. The group epoch never moves. **Dynamic** (bottom): A's leave hands foo-0,1 to B (epoch
# 3), A's return takes them back (epoch 4): two rebalances, two moves, two revocations.

# %% tags=["claims"] jupyter={"source_hidden": true}
story = load_library_scenario("static_member_bounce")
assert [(e.action, e.member, e.at_ms) for e in story.events] == [("close", "A", 20_000), ("restart", "A", 30_000)]

# %%
frames = trace_frames(static.trace)
picture(ownership_swimlanes(frames, width=600) & epoch_chart(frames, width=600, height=130))

# %%
frames = trace_frames(dynamic.trace)
ownership_swimlanes(frames, width=600) & epoch_chart(frames, width=600, height=130)

# %% tags=["nbval-check-output"]
for name, lab in (("static", static), ("dynamic", dynamic)):
    g = lab.coordinator.groups["g"]
    m = compute_metrics(lab.trace)
    epochs = [int(t["cause"].split()[-1]) for t in m["triggers"] if t["cause"].startswith("group g epoch")]
    print(f"{name:>8}: final group epoch {g.group_epoch} (bumps: {epochs}),",
          {mid: sorted(p for ps in x.assigned.values() for p in ps) for mid, x in sorted(g.members.items())},
          f"| revocations {m['revocations']}, partition moves {m['partition_moves']}")

# %% [markdown]
# ### UNRELEASED_INSTANCE_ID in the Lab
#
# A second consumer configured with A's instance id starts while A runs. Its join is refused and it
# goes to **FATAL** (SM5) — the new consumer's member state machine has an edge for exactly that.

# %% tags=["nbval-check-output"]
from kip_lab.lab import Lab

twins = Lab(seed=0)
twins.create_topic("foo", partitions=4)
twins.add_consumer("A", subscribed_topic_names=["foo"], instance_id="instance-a")
twins.run(until=5_000)
twins.add_consumer("A-twin", subscribed_topic_names=["foo"], instance_id="instance-a")
twins.run(until=10_000)
for e in twins.trace:
    if e.actor == "A-twin" and isinstance(e.body, StateTransition):
        print(e.time_ms, "A-twin:", f"{e.body.from_state} -> {e.body.to_state} ({e.body.trigger})")
    elif e.actor == "A-twin" and isinstance(e.body, Note):
        print(e.time_ms, "A-twin:", e.body.text)
print({name: c.state.value for name, c in sorted(twins.clients.items())}, "| members:", sorted(twins.coordinator.groups["g"].members))

# %% [markdown]
# ## Summary

# %% tags=["nbval-check-output"]
print("coordinator:", group_line())
for name, lab in (("static", static), ("dynamic", dynamic), ("twins", twins)):
    g = lab.coordinator.groups["g"]
    print(f"{name:>8}: {g.state.value} GE {g.group_epoch}",
          {mid: (x.member_epoch, sorted(p for ps in x.assigned.values() for p in ps)) for mid, x in sorted(g.members.items())},
          "| clients", {n: c.state.value for n, c in sorted(lab.clients.items())},
          "| violations", len(lab.invariants.violations))

# %% [markdown]
# **Next:** [05_consumer_state_machine](05_consumer_state_machine.ipynb) — the same protocol from the consumer's side: its state machine.
