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
# # 01 · Joins: the *Basic* and *third member joins* case studies
#
# KIP-848 ends with worked examples that show "the in-memory representation of the group
# coordinator" after each event. This notebook replays two of them **heartbeat by
# heartbeat on the coordinator itself** — you play the consumers — and then lets autonomous
# consumers do the same in the Lab.
#
# What to watch (KIP-848, *Rebalance Protocol → Member Epoch - Reconciliation*):
#
# * a join bumps the **group epoch**; the coordinator computes a new **target** for it;
# * a member that holds nothing outside its target jumps straight to the new epoch (rules RC1 and RC10 in `docs/rules.md`);
# * a member that holds something outside its target keeps its epoch and is told to **revoke**
#   it — never, in the same response, given anything new (rules RC3 and RC8);
# * a partition goes to its new owner only after the old owner has acknowledged the revocation;
#   until then it is **pending** for the new owner (rules RC2, RC4, RC5 and RC6).
#
# **Cells.** Member states are written compactly: `e2 [0,1] p[2]` is member epoch 2,
# usable foo-0 and foo-1, foo-2 pending (in its target, not released yet by its previous owner);
# `r[2]` marks a partition the member was told to revoke and still holds (the KIP writes
# "revoking 2"); `-` means not a member.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import pandas as pd

from kip_lab import ClusterMetadata, CoordinatorConfig, GroupCoordinator
from kip_lab.events import MessageDelivered
from kip_lab.coordinator.bootstrap import stable_group_log
from kip_lab.protocol import ConsumerGroupHeartbeatRequest, TopicPartitions
from kip_lab.viz import group_dot, picture

pd.set_option("display.width", 160)

# %% [markdown]
# ## A small harness: one coordinator, spoken to in partition numbers
#
# `SeedCase` holds a cluster with topic `foo` and a coordinator. `join` sends a heartbeat with
# epoch 0; `heartbeat` sends one at the member's current epoch, reporting what it owns (`None`:
# "unchanged", which the KIP allows for every optional field). Each call prints the response, the
# records the coordinator wrote, and the state after each **record batch** — obtained by replaying
# the log one batch at a time into a fresh coordinator. That replay is how the KIP's separate
# snapshots ("B joins", "the coordinator computes the target", "B moves to epoch 2") appear even
# though one heartbeat does all three, as Kafka does.

# %%
GROUP = "g"


from kip_lab.coordinator.view import describe_record, describe_response, member_cell as cell


class SeedCase:
    def __init__(self, partitions, members=("A", "B", "C"), start=None, epoch=0):
        self.cluster = ClusterMetadata()
        self.foo = self.cluster.create_topic("foo", partitions)
        self.config = CoordinatorConfig()
        self.members = members
        self.rows = []  # the running table of snapshots
        if start is None:
            self.gc = GroupCoordinator(self.config, self.cluster)
        else:  # a group in mid-life: write the records of a Stable group, and let replay build it
            log = stable_group_log(self.cluster, GROUP, epoch, {m: {"foo": p} for m, p in start.items()})
            self.gc = GroupCoordinator.from_log(log, self.config, self.cluster)

    # -- views ----------------------------------------------------------------------
    def row(self, gc, label):
        group = gc.groups.get(GROUP)
        target = {m: [p for parts in t.values() for p in parts] for m, t in sorted(group.target.items())}
        return {"step": label, "GE": group.group_epoch, "TE": group.assignment_epoch,
                "target": " ".join(f"{m}:{p}" for m, p in target.items()),
                **{m: cell(group, m) for m in self.members}, "state": group.state.value}

    def snapshot(self, label):
        self.rows.append(self.row(self.gc, label))
        return self.rows[-1]

    def table(self):
        return pd.DataFrame(self.rows).set_index("step")

    # -- requests -------------------------------------------------------------------
    def join(self, member_id, label=None, **fields):
        request = ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=member_id, member_epoch=0, rebalance_timeout_ms=60_000,
            subscribed_topic_names=["foo"], topic_partitions=[], **fields)
        return self._send(f"{member_id} joins (epoch 0)", request, label)

    def heartbeat(self, member_id, owned=None, label=None):
        epoch = self.gc.groups[GROUP].members[member_id].member_epoch
        request = ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=member_id, member_epoch=epoch,
            topic_partitions=None if owned is None else [TopicPartitions(topic_id=self.foo, partitions=owned)])
        return self._send(f"{member_id} heartbeats at epoch {epoch}, owning {owned}", request, label)

    def _send(self, what, request, label):
        result = self.gc.consumer_group_heartbeat(request)
        print(f"▶ {what}")
        print(f"  response: {describe_response(result.response)}")
        labels = label if isinstance(label, (list, tuple)) else [label] * len(result.batches)
        end = self.gc.log.batch_count
        for i, batch in enumerate(result.batches):
            for record in batch:
                print("  wrote", describe_record(record, self.cluster))
            # the state right after this batch: replay the log up to here into a fresh coordinator
            replayed = GroupCoordinator.from_log(
                self.gc.log.truncated(end - len(result.batches) + i + 1), self.config, self.cluster, load=False)
            after = self.row(replayed, labels[i])
            print("  → GE {GE} TE {TE} | target {target} |".format(**after),
                  " | ".join(f"{m} {after[m]}" for m in self.members), "|", after["state"])
            if labels[i] is not None:
                self.rows.append(after)
        if not result.batches:
            print("  wrote nothing")
            if label is not None:
                self.snapshot(label)
        return result

# %% [markdown]
# ## Case study *Basic* (KIP-848 *Case Studies → Basic*)
#
# Topic foo has three partitions; the server-side **uniform** assignor computes targets. The row
# numbers are those of the KIP's table of snapshots for this case.
#
# **Rows 0-2: A joins.** The coordinator bumps the group epoch to 1, computes
# the target `{A: [0,1,2]}` and — A owning nothing outside it — moves A straight to epoch 1.
# Three batches, three snapshots.

# %% tags=["nbval-check-output"]
basic = SeedCase(partitions=3)
_ = basic.join("A", label=["0 A joins", "1 target", "2 A at e1"])

# %% [markdown]
# **Rows 3-5: B joins.** Epoch 2; the uniform assignor keeps A's first two
# partitions and gives B foo-2 (stickiness relative to the previous *target*). B
# jumps 0 → 2 in this same heartbeat, but foo-2 is only **pending**: A still owns it. "B can
# transition to epoch 2 but cannot get foo-2 until A revokes it".

# %% tags=["nbval-check-output"]
_ = basic.join("B", label=["3 B joins", "4 target", "5 B at e2"])

# %% [markdown]
# **Row 6: A heartbeats** (still at epoch 1, owning all three). It holds foo-2, which
# is outside its new target, so it **keeps epoch 1** and is told to revoke foo-2: the response
# lists only foo-0 and foo-1. Nothing new is given in the same response (rules RC3, RC8). The coordinator
# records the member as `UNREVOKED_PARTITIONS` and arms a **rebalance timer** (A's rebalance
# timeout, 60 s here): if A never acknowledges, it is removed (notebook 02).

# %% tags=["nbval-check-output"]
_ = basic.heartbeat("A", owned=[0, 1, 2], label="6 A told to revoke 2")
print("timers:", sorted(basic.gc.timers()))

# %% [markdown]
# The group picture at this moment — A's bold red edge to foo-2 (revoking), B's dashed blue edge
# to foo-2 (pending, "not yet released by its previous owner"):

# %%
picture(group_dot(basic.gc.groups[GROUP], basic.cluster))

# %% [markdown]
# **Rows 7-8.** A acknowledges by reporting what it owns now, `[0, 1]`: it moves
# to epoch 2 and foo-2 is **released**. The response carries no assignment — A's usable partitions
# did not change, only its epoch (the KIP sends the assignment "until the member acknowledges that
# it has converged"). Then B heartbeats and, foo-2 being free, gets it — still at
# epoch 2: a handover within an epoch does not move the epoch (rule RC5).

# %% tags=["nbval-check-output"]
_ = basic.heartbeat("A", owned=[0, 1], label="7 A acks, e2")
_ = basic.heartbeat("B", owned=[], label="8 B gets 2")

# %% [markdown]
# **Rows 9-15: C joins** and the same dance happens with foo-1. One difference
# from the KIP's drawing: the KIP still shows C at epoch 0 in row 11, while here C already moved
# to epoch 3 inside its join heartbeat, exactly as Kafka does — the KIP draws as separate snapshots
# what one heartbeat does. B, owning only foo-2 which it
# keeps, moves to epoch 3 without revoking anything.

# %% tags=["nbval-check-output"]
_ = basic.join("C", label=["9 C joins", "10 target", "12 C at e3"])
_ = basic.heartbeat("B", owned=[2], label="11 B at e3")
_ = basic.heartbeat("A", owned=[0, 1], label="13 A told to revoke 1")
_ = basic.heartbeat("A", owned=[0], label="14 A acks, e3")
_ = basic.heartbeat("C", owned=[], label="15 C gets 1")

# %% [markdown]
# The whole case as one table — compare it row by row with the KIP's snapshots
# (KIP-848, *Case Studies → Basic*). The last row is the KIP's final snapshot: everyone at the group epoch, 3.

# %% tags=["nbval-check-output"]
print(basic.table().to_string())

# %% [markdown]
# ## Case study *third member joins*
#
# The KIP starts this one mid-life: group epoch 21, A owns foo-0..2 and B foo-3..5 (six
# partitions). We do not poke at memory to get there: `stable_group_log` writes the **records** a
# coordinator would have written for that Stable group, and `GroupCoordinator.from_log` rebuilds
# it — the same path a failover takes.

# %% tags=["nbval-check-output"]
third = SeedCase(partitions=6, start={"A": [0, 1, 2], "B": [3, 4, 5]}, epoch=21)
print(third.snapshot("0 stable start"))

# %% [markdown]
# **Rows 1-2.** C joins: epoch 22, target `{A:[0,1], B:[3,4], C:[2,5]}`. Both
# of C's partitions are still held, so C moves to 22 with nothing usable.

# %% tags=["nbval-check-output"]
_ = third.join("C", label=["1a C joins", "1b target", "2 C at e22"])

# %% [markdown]
# **Rows 3-9.** A is told to revoke foo-2 and B foo-5, independently. A
# acknowledges first, so C gets foo-2 while foo-5 is still pending; when B acknowledges, C gets
# "foo-2 and foo-5" — the response always carries the **full** usable set, not a delta.
# Notice that nobody waits for anybody: A, B and C each converge through their own heartbeats.
# That is the point of the new protocol: no group-wide barrier, no stop-the-world.

# %% tags=["nbval-check-output"]
_ = third.heartbeat("A", owned=[0, 1, 2], label="3 A told to revoke 2")
_ = third.heartbeat("B", owned=[3, 4, 5], label="4 B told to revoke 5")
_ = third.heartbeat("C", owned=[], label="5 C: nothing new")
_ = third.heartbeat("A", owned=[0, 1], label="6 A acks, e22")
_ = third.heartbeat("C", owned=[], label="7 C gets 2")
_ = third.heartbeat("B", owned=[3, 4], label="8 B acks, e22")
_ = third.heartbeat("C", owned=[2], label="9 C gets 2,5")

# %% tags=["nbval-check-output"]
print(third.table().to_string())

# %% [markdown]
# Row 5 wrote one record although nothing visible changed for C: the current-assignment record also
# stores the member's *previous* epoch (Kafka's `previousMemberEpoch`, needed for the lost-response
# rule of notebook 02), and it catches up once. A second identical heartbeat writes nothing.
#
# ## The same with autonomous consumers
#
# Now the consumers drive themselves: Kafka's new consumer with its heartbeat manager, member state
# machine and rebalance callbacks, on a network with 1 ms latency. The library scenario
# `third_member_joins` builds the group from scratch — A and B join at 0 s, C at 20 s — so the
# epochs are 2 → 3 where the KIP, starting mid-life, says 21 → 22.

# %%
from kip_lab.lab.metrics import compute_metrics
from kip_lab.scenarios import build_lab, load_library_scenario
from kip_lab.viz import epoch_chart, message_sequence, ownership_swimlanes, trace_frames

scenario = load_library_scenario("third_member_joins")
print(scenario.description)
lab = build_lab(scenario)  # setup applied, C's start scheduled at 20 s
lab.run(until=20_000)
print("stable:", lab.run_until_stable(), "at", lab.now, "ms")

# %% [markdown]
# The whole run first. At 20 s foo-2 and foo-5 become *pending* for C (faint red) and their lanes
# turn red for about five seconds: A and B release them within milliseconds, but C collects them
# only in its next heartbeat response — one heartbeat interval (5 s) later. The coordinator never
# pushes; it only *answers* heartbeats. (The same shading at 0-5 s is B waiting for foo-3..5 after
# A, which joined first, took everything.)

# %%
frames = trace_frames(lab.trace)
ownership_swimlanes(frames, width=640) & epoch_chart(frames, width=640, height=160)

# %% [markdown]
# Zoomed on the first 25 ms after C's join, as a static SVG: C jumps 0 → 3 at once, with foo-2 and
# foo-5 pending (faint). B, then A, is told to revoke one partition in its next heartbeat — a few
# milliseconds later here — revokes it (half-transparent), and moves 2 → 3 when it acknowledges.

# %%
C_JOINS_MS = 20_000
zoom = (C_JOINS_MS - 2, C_JOINS_MS + 25)  # the first 25 ms after C's join
picture(ownership_swimlanes(frames, time_range=zoom, width=600) & epoch_chart(frames, time_range=zoom, width=600, height=150))

# %% [markdown]
# The heartbeats of the whole run, spaced by step. Near the bottom, follow C's lane: its join
# (response: epoch 3, foo-2 and foo-5 pending), A's and B's heartbeats telling them to revoke,
# their immediate acknowledgements, then — 5 s later — C's regular heartbeat collecting what was
# released, and C's own acknowledgement. Hover an arrow for the message body.

# %%
message_sequence(frames, y_axis="step", apis=["ConsumerGroupHeartbeat"], height=620)

# %% [markdown]
# What it cost, computed from the trace alone (`compute_metrics`): time from each trigger to a
# stable group, milliseconds each partition had no consumer, revocations and moves.

# %% tags=["nbval-check-output"]
metrics = compute_metrics(lab.trace)
for trigger in metrics["triggers"]:
    print(f"{trigger['cause']:>20} at {trigger['time_ms']:>6} ms -> stable after {trigger['time_to_stable_ms']} ms")
print("unavailability (ms):", metrics["partition_unavailability_ms"]["g"])
print("revocations:", metrics["revocations"], "| partition moves:", metrics["partition_moves"],
      "| heartbeats sent:", metrics["heartbeats_sent"], "| invariant violations:", metrics["invariant_violations"])

# %% [markdown]
# ## Step through it yourself
#
# `explore(lab, start_step=...)` opens the stepper on the step where C's join reaches the coordinator:
# press **Step ▶** to go one event at a time, or **Next change ▶▶** to jump to the next change of a
# state, an owner or an epoch; **Play** runs on by itself and **Pause** stops it. Choose *group* in the diagram choices to see the coordinator's picture at each
# step; *member state* for the chosen consumer's state machine. The records table lists what the
# coordinator wrote at each step. Try a fault: **crash** A in the middle of the reconciliation.
#
# *(Needs a live kernel; until the notebook runs, a picture of the stepper's first view stands in.)*

# %%
from widgets import explore

c_join = min(e.step for e in lab.trace.of_type(MessageDelivered) if e.body.source == "C")
explore(lab, member="C", start_step=c_join)

# %% [markdown]
# ## Summary

# %% tags=["nbval-check-output"]
for name, case in (("Basic", basic), ("third member joins", third)):
    group = case.gc.groups[GROUP]
    print(f"{name}: {group.state.value}, group epoch {group.group_epoch}, assignment epoch {group.assignment_epoch},",
          "members", {m: cell(group, m) for m in sorted(group.members)}, "| log batches", case.gc.log.batch_count)
g = lab.coordinator.groups["g"]
print(f"Lab third_member_joins: {g.state.value}, group epoch {g.group_epoch},",
      {m: (x.member_epoch, sorted(p for ps in x.assigned.values() for p in ps)) for m, x in sorted(g.members.items())},
      "| clients", {n: c.state.value for n, c in sorted(lab.clients.items())})

# %% [markdown]
# **Next:** [02_failures](02_failures.ipynb) — what happens when members fail, time out or lose a response.
