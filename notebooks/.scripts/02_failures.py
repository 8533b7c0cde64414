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
# # 02 · Failures: timeouts, a lost response, coordinator failover
#
# KIP-848 has two clocks per member and one rule about epochs, and they explain almost every
# failure:
#
# * the **session timeout** (`group.consumer.session.timeout.ms`, 45 s, a *broker* config): a
#   member that sends no heartbeat at all for that long is removed (KIP-848 *Group Membership*);
# * the **rebalance timeout** (the client's `max.poll.interval.ms`, sent as `RebalanceTimeoutMs`):
#   "the maximum time … the coordinator will wait on the member to revoke its partitions"
#   (KIP-848 *Consumer Group Heartbeat API*);
# * **fencing**: a heartbeat must carry the member epoch the coordinator expects, or the member is
#   fenced — with one grace for a lost response.
#
# And because **records are the truth**, a coordinator failover is a replay of the log (KIP-848
# *Fail Over*).
#
# Each section drives the coordinator directly first — you control every heartbeat and every
# millisecond — then shows the same failure among autonomous consumers in the Lab.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import json

import pandas as pd
from IPython.display import Markdown

from kip_lab.lab.story import client_story
from kip_lab import ClusterMetadata, CoordinatorConfig, GroupCoordinator
from kip_lab.events import TimerFired
from kip_lab.coordinator.bootstrap import stable_group_log
from kip_lab.lab.metrics import compute_metrics
from kip_lab.protocol import ConsumerGroupHeartbeatRequest, TopicPartitions
from kip_lab.scenarios import build_lab, load_library_scenario
from kip_lab.viz import epoch_chart, message_sequence, ownership_swimlanes, picture, trace_frames

pd.set_option("display.width", 160)

# %% [markdown]
# The same small harness as in notebook 01: a coordinator on topic `foo`, heartbeats in partition
# numbers, the records each one writes, and the group after each batch in a compact notation
# (`e22 [3,4] p[0]`: epoch 22, usable foo-3 and foo-4, foo-0 pending; `r[…]`: told to revoke).

# %%
GROUP = "g"


from kip_lab.coordinator.view import describe_record, describe_response, member_cell as cell


class SeedCase:
    def __init__(self, partitions, members=("A", "B", "C"), start=None, epoch=0, config=None):
        self.cluster = ClusterMetadata()
        self.foo = self.cluster.create_topic("foo", partitions)
        self.config = config or CoordinatorConfig()
        self.members = members
        if start is None:
            self.gc = GroupCoordinator(self.config, self.cluster)
        else:
            log = stable_group_log(self.cluster, GROUP, epoch, {m: {"foo": p} for m, p in start.items()})
            self.gc = GroupCoordinator.from_log(log, self.config, self.cluster)

    def state(self, gc=None):
        group = (gc or self.gc).groups.get(GROUP)
        target = {m: [p for parts in t.values() for p in parts] for m, t in sorted(group.target.items())}
        return (f"GE {group.group_epoch} TE {group.assignment_epoch} | target "
                + " ".join(f"{m}:{p}" for m, p in target.items()) + " | "
                + " | ".join(f"{m} {cell(group, m)}" for m in self.members) + f" | {group.state.value}")

    def join(self, member_id, quiet=False, **fields):
        fields.setdefault("rebalance_timeout_ms", 60_000)
        request = ConsumerGroupHeartbeatRequest(group_id=GROUP, member_id=member_id, member_epoch=0,
                                                subscribed_topic_names=["foo"], topic_partitions=[], **fields)
        return self.send(f"{member_id} joins (epoch 0)", request, quiet)

    def heartbeat(self, member_id, owned=None, epoch=None, quiet=False):
        if epoch is None:
            epoch = self.gc.groups[GROUP].members[member_id].member_epoch
        request = ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=member_id, member_epoch=epoch,
            topic_partitions=None if owned is None else [TopicPartitions(topic_id=self.foo, partitions=owned)])
        return self.send(f"{member_id} heartbeats at epoch {epoch}, owning {owned}", request, quiet)

    def send(self, what, request, quiet=False):
        result = self.gc.consumer_group_heartbeat(request)
        if not quiet:
            self.show(f"t={self.gc.now_ms} ▶ {what}", result)
        return result

    def show(self, title, result):
        print(title)
        if result.response is not None:
            print(f"  response: {describe_response(result.response)}")
        end = self.gc.log.batch_count
        for i, batch in enumerate(result.batches):
            for record in batch:
                print("  wrote", describe_record(record))
            replayed = GroupCoordinator.from_log(
                self.gc.log.truncated(end - len(result.batches) + i + 1), self.config, self.cluster, load=False)
            print("  →", self.state(replayed))
        if not result.batches:
            print("  wrote nothing →", self.state())

    def advance(self, ms):
        """Move the coordinator's clock by ``ms``, firing due timers one by one; print what each did."""
        scheduler, fired = self.gc.scheduler, []
        until = scheduler.now_ms + ms
        while (due := scheduler.peek()) is not None and due <= until:
            timer = scheduler.step()  # the clock jumps to the timer's due time
            fired.append(timer.result)
            self.show(f"t={timer.time_ms} ⏰ {timer.result.origin}", timer.result)
        scheduler.run(until)
        return fired

# %% [markdown]
# ## 1 · Member Failure: the session timeout
#
# ### On the coordinator (KIP-848 *Case Studies → Member Failure*)
#
# The KIP's start: group epoch 22, six partitions, A foo-0,1, B foo-3,4, C foo-2,5 — rebuilt from
# its records. Loading the group armed a 45 s session timer per member (a failover duty).
# B and C heartbeat every 5 s; **A is silent**.

# %% tags=["nbval-check-output"]
failure = SeedCase(partitions=6, start={"A": [0, 1], "B": [3, 4], "C": [2, 5]}, epoch=22)
print("start:", failure.state())
print("timers:", failure.gc.timers())
for _ in range(8):
    failure.advance(5_000)
    failure.heartbeat("B", quiet=True)
    failure.heartbeat("C", quiet=True)
print(f"t={failure.gc.now_ms}: B and C heartbeated 8 times each; timers:", failure.gc.timers())
failure.advance(4_999)
print(f"t={failure.gc.now_ms}: nothing yet —", failure.state())

# %% [markdown]
# **Row 1.** At exactly 45 s A's session timer fires. The coordinator writes A's
# **tombstones** — its current assignment, its target entry and its member record, in the order
# Kafka's `GroupMetadataManager.removeMember` writes them — and the bumped **group epoch**, 23.
# The KIP's snapshot still lists A in the target until the next target is computed; that reading is
# the `kip` fidelity profile, and notebook 15 shows the two side by side.

# %% tags=["nbval-check-output"]
_ = failure.advance(1)

# %% [markdown]
# **Rows 2-3.** The next heartbeat (B's) computes the target for epoch 23 — one
# atomic batch that also tombstones A's target entry — and moves B to 23. A's partitions are
# **free at once**: nobody holds them, so B and C get foo-0 and foo-1 with no revocation step
# .

# %% tags=["nbval-check-output"]
_ = failure.heartbeat("B", owned=[3, 4])
_ = failure.heartbeat("C", owned=[2, 5])

# %% [markdown]
# ### In the Lab
#
# The library's `member_failure` scenario builds the same group from scratch (epochs 3 → 4 where
# the KIP says 22 → 23). A's **process crashes** at 30 s: no leave heartbeat, no commit. Nothing
# happens until A's session expires, 45 s after the last heartbeat the coordinator received from
# it (at about 25 s) — so at about 70 s. All that time foo-0 and foo-1 are consumed by nobody (red
# shading). The dashed rules mark the crash (red) and the coordinator's session timer (purple).

# %%
lab = build_lab(load_library_scenario("member_failure"))
lab.run(until=30_000)
print("stable:", lab.run_until_stable(timeout_ms=180_000), "at", lab.now, "ms")
frames = trace_frames(lab.trace)
picture(ownership_swimlanes(frames, width=600) & epoch_chart(frames, width=600, height=160))

# %% tags=["nbval-check-output"]
metrics = compute_metrics(lab.trace)
crash = next(t for t in metrics["triggers"] if t["cause"].startswith("crash"))
print(f"crash at {crash['time_ms']} ms -> stable after {crash['time_to_stable_ms']} ms")
print("unavailability (ms):", metrics["partition_unavailability_ms"]["g"])
print("records re-processed:", metrics["records_reprocessed"], "| processing pause (ms):", metrics["processing_pause_ms"])
fired = lab.trace.of_type(TimerFired)
print("coordinator timers fired:", [(e.time_ms, list(e.body.timer)) for e in fired])

# %% tags=["claims"] jupyter={"source_hidden": true}
expired = next(e.time_ms for e in fired if e.time_ms > crash["time_ms"])
assert crash["time_ms"] == 30_000 and abs(expired - 70_000) <= 1_000, "crash at 30 s, session out at about 70 s"
assert abs(expired - 45_000 - 25_000) <= 1_000, "45 s after a last heartbeat at about 25 s"

# %% jupyter={"source_hidden": true}
Markdown(
    f"Beside the unavailability, the delivery ledger counts what the application felt: "
    f"{metrics['records_reprocessed']:,} records processed a second time, and "
    f"{metrics['processing_pause_ms']:,} ms (summed over partitions) during which records waited and "
    f"nobody processed them."
)

# %% [markdown]
# A crash costs a session timeout of unavailability for the crashed member's partitions. A
# *graceful* close (notebook 05) costs milliseconds, because the leave heartbeat (epoch -1) removes
# the member at once.
#
# ## 2 · Session timeout vs rebalance timeout
#
# The session timeout is about **liveness**: is the process there? The rebalance timeout is about
# **progress**: a member told to revoke must do it within its rebalance timeout, or the coordinator
# removes it even though its heartbeats keep its session alive. (What happens on expiry is elided
# in the KIP; kip_lab follows Kafka and fences the member: Kafka `GroupMetadataManager`'s rebalance timeout.)
#
# ### On the coordinator
#
# A alone owns foo-0..3 with a 10 s rebalance timeout. B joins; A is told to revoke foo-2 and
# foo-3 and the coordinator arms A's **rebalance timer**. A keeps heartbeating every 3 s — still
# claiming all four partitions — so its session never expires.

# %% tags=["nbval-check-output"]
slow = SeedCase(partitions=4, members=("A", "B"))
_ = slow.join("A", quiet=True, rebalance_timeout_ms=10_000)
slow.advance(1_000)
_ = slow.join("B", rebalance_timeout_ms=10_000)
_ = slow.heartbeat("A", owned=[0, 1, 2, 3], epoch=1)  # A still believes it is at epoch 1
print("timers:", slow.gc.timers())

# %% tags=["nbval-check-output"]
for _ in range(4):
    if slow.advance(3_000):
        break
    slow.heartbeat("A", owned=[0, 1, 2, 3], quiet=True)
    slow.heartbeat("B", quiet=True)
    print(f"t={slow.gc.now_ms}: A and B heartbeat; A still claims [0, 1, 2, 3]")

# %% [markdown]
# At 11 s — 10 s after A was told to revoke — the rebalance timer removed A: tombstones and a group
# epoch bump, exactly as if it had left. A's next heartbeat is answered **UNKNOWN_MEMBER_ID**;
# the client must drop everything (`on_partitions_lost`) and rejoin with epoch 0. B's next
# heartbeat gets all four partitions at once.

# %% tags=["nbval-check-output"]
_ = slow.heartbeat("A", owned=[0, 1, 2, 3], epoch=1)  # A still believes it is at epoch 1
_ = slow.heartbeat("B", owned=[])
_ = slow.join("A", rebalance_timeout_ms=10_000)

# %% [markdown]
# ### In the Lab: a slow `on_partitions_revoked`
#
# Real consumers revoke inside the user's `ConsumerRebalanceListener.onPartitionsRevoked` (KIP-848
# *Consumer → Revocation*), which often commits or flushes state. `CallbackConfig` gives each callback a duration.
# A has `max.poll.interval.ms` = 10 s (its rebalance timeout). B joins at 10 s and A must give up
# two partitions. We run two callback durations: **8 s** (slow but in time) and **20 s** (too slow).

# %%
from kip_lab.clients.consumer import CallbackConfig
from kip_lab.lab import Lab
from kip_lab.lab import actions


def slow_revocation_lab(revoke_ms):
    lab = Lab(seed=0)
    lab.create_topic("foo", partitions=4)
    lab.add_consumer("A", subscribed_topic_names=["foo"], max_poll_interval_ms=10_000,
                     callbacks=CallbackConfig(on_partitions_revoked_ms=revoke_ms))
    lab.add_consumer("B", subscribed_topic_names=["foo"], start=False)
    lab.schedule(actions.Start(member="B"), at_ms=10_000)
    lab.run(until=10_000)
    lab.run_until_stable(timeout_ms=120_000)
    return lab


in_time, too_slow = slow_revocation_lab(8_000), slow_revocation_lab(20_000)

# %% [markdown]
# **8 s:** A revokes in time. B gets foo-2 and foo-3 at its first heartbeat after A's
# acknowledgement — about 10 s of unavailability for those two partitions, all of it the callback
# plus one heartbeat interval. A slow callback is paid by the *new* owner.

# %% tags=["nbval-check-output"]
print(client_story(in_time.trace, since_ms=10_000))
print("unavailability (ms):", compute_metrics(in_time.trace)["partition_unavailability_ms"]["g"])

# %% [markdown]
# **20 s:** the callback is still running when the coordinator's **rebalance timeout** for A
# expires. That timer started when A's heartbeat response handed out the revocation; A's callback
# started a little later, at its application's next `poll()`, and A's own poll timer runs from that
# poll. So the coordinator acts first: it removes A (epoch 3) and B gets all four. A's next heartbeat
# is answered UNKNOWN_MEMBER_ID: A is FENCED. When the callback finally returns, A runs
# `on_partitions_lost` at its next poll and rejoins as a new member of the group (epoch 4). This is
# the library's `slow_revocation` scenario.

# %% tags=["nbval-check-output"]
print(client_story(too_slow.trace, since_ms=10_000))
g = too_slow.coordinator.groups["g"]
print("final:", g.state.value, "group epoch", g.group_epoch,
      {m: sorted(p for ps in x.assigned.values() for p in ps) for m, x in sorted(g.members.items())})

# %%
frames = trace_frames(too_slow.trace)
ownership_swimlanes(frames, width=640) & epoch_chart(frames, width=640, height=160)

# %% [markdown]
# ## 3 · A lost heartbeat response: the previous-epoch grace
#
# A heartbeat can be processed while its response is lost. The coordinator has moved the member to
# a new epoch; the member, never told, retries with the old one. Strict fencing would kick out a
# healthy member. The KIP allows an exception: the coordinator "could accept" an older epoch if
# the owned partitions are a subset of the target. Kafka (and
# kip_lab, `accept_previous_epoch=True` by default) accepts exactly the member's **previous**
# epoch, when it owns nothing outside its assignment.
#
# ### On the coordinator
#
# A owns foo-0,1; B joins; A revokes foo-1 and acknowledges — and that response is "lost". A
# retries with epoch 1:

# %% tags=["nbval-check-output"]
for accept in (True, False):
    print(f"===== accept_previous_epoch={accept}")
    lost = SeedCase(partitions=2, members=("A", "B"), config=CoordinatorConfig(accept_previous_epoch=accept))
    lost.join("A", quiet=True)
    lost.join("B", quiet=True)
    lost.heartbeat("A", owned=[0, 1], quiet=True)  # told to revoke foo-1
    lost.heartbeat("A", owned=[0])  # the acknowledgement: A moves to epoch 2 — imagine this answer is lost
    lost.heartbeat("A", owned=[0], epoch=1)  # the retry, still at epoch 1

# %% [markdown]
# With the grace, the retry is answered with epoch 2 and nothing is written. Without it, A is
# **fenced** (FENCED_MEMBER_EPOCH): Kafka only rejects the request and writes nothing, but the
# client must give up all its partitions and rejoin, so the group pays a full rebalance. The grace is
# narrow: a retry at the previous epoch that still claims a partition outside the member's
# assignment (here foo-1) is fenced either way.

# %% tags=["nbval-check-output"]
lost = SeedCase(partitions=2, members=("A", "B"))
lost.join("A", quiet=True)
lost.join("B", quiet=True)
lost.heartbeat("A", owned=[0, 1], quiet=True)
lost.heartbeat("A", owned=[0], quiet=True)
_ = lost.heartbeat("A", owned=[0, 1], epoch=1)

# %% [markdown]
# ### In the Lab (`lost_heartbeat`)
#
# A network fault drops the coordinator's answer to A's acknowledgement (grey arrow with a cross).
# A's request times out after 10 s (`request_timeout_ms`), it resends a full heartbeat at its
# previous epoch, and the coordinator accepts it. Nobody is fenced.

# %%
lab = build_lab(load_library_scenario("lost_heartbeat"))
lab.run(until=40_000)
frames = trace_frames(lab.trace)
message_sequence(frames, y_axis="step", apis=["ConsumerGroupHeartbeat"], height=560)

# %% [markdown]
# A's heartbeats around the loss, from the message frame: the acknowledgement sent at epoch 1 and
# answered with epoch 2 (dropped), the retry after the 10 s request timeout — a *full* request, at
# epoch 1 — answered with epoch 2.

# %% tags=["nbval-check-output"]
print(client_story(lab.trace, since_ms=10_000))
m = frames.messages
beats = m[(m.api == "ConsumerGroupHeartbeat") & ((m["from"] == "A") | (m["to"] == "A")) & m.sent_ms.between(10_000, 21_000)]
for row in beats.to_dict("records"):
    body = json.loads(row["body"])
    if row["direction"] == "request":
        tps = body.get("topic_partitions")
        owned = "unchanged (null)" if tps is None else [p for tp in tps for p in tp["partitions"]]
        detail = f"owned {owned}" + (" (full request)" if "subscribed_topic_names" in body else "")
    else:
        usable = body.get("assignment", {}).get("assigned_topic_partitions")
        detail = "no assignment" if usable is None else f"use {[p for tp in usable for p in tp['partitions']]}"
    print(f"{row['sent_ms']:>6} {row['from']:>8} -> {row['to']:<8} {row['status']:<9} epoch {row['member_epoch']}: {detail}")
g = lab.coordinator.groups["g"]
print("final:", g.state.value, {m: (x.member_epoch, sorted(p for ps in x.assigned.values() for p in ps))
                                for m, x in sorted(g.members.items())})

# %% [markdown]
# ## 4 · Coordinator failover: rebuild from the log
#
# "Records are the truth": when `__consumer_offsets` moves to another broker, the new coordinator
# replays the partition and then performs the KIP's **load duties**:
#
# 1. re-arm the session timers of all members (and, as Kafka does, the rebalance timers of members
#    still revoking);
# 2. check whether the topic metadata changed, and bump the group epoch if it did;
# 3. check whether new topics match regex subscriptions;
# 4. if the group epoch is ahead of the assignment epoch, compute a new target.
#
# ### On the coordinator
#
# The *third member joins* case, stopped in the middle: C has joined, A has been told to revoke
# foo-2 and has not answered.

# %% tags=["nbval-check-output"]
mid = SeedCase(partitions=6, start={"A": [0, 1, 2], "B": [3, 4, 5]}, epoch=21)
mid.advance(1_000)
mid.join("C", quiet=True)
mid.heartbeat("A", owned=[0, 1, 2], quiet=True)
print("live:   ", mid.state())
print("timers: ", mid.gc.timers())

replayed = GroupCoordinator.from_log(mid.gc.log, mid.config, mid.cluster, load=False)
same = {k: v for k, v in replayed.state_snapshot().items() if k != "timers"} == {
    k: v for k, v in mid.gc.state_snapshot().items() if k != "timers"}
print("replay: ", mid.state(replayed), "| same state as live:", same)

# %% [markdown]
# The replayed state is identical — reconciliation states, pending revocations, targets — because
# everything in it came from records. Timers are not records; the load duties re-arm them on the new
# coordinator's clock (which starts at 0 here). Now the interesting case: **while the coordinator was
# moving, foo gained two partitions.** The load duties notice, bump the epoch and compute a target —
# written to the same log, which is the partition both coordinators share.

# %% [markdown]
# (A's rebalance timer is re-armed too — 300 s, the rebalance timeout in A's member record — because
# A is still revoking.)

# %% tags=["nbval-check-output"]
mid.cluster.add_partitions("foo", 2)
new = GroupCoordinator.from_log(mid.gc.log, mid.config, mid.cluster)
print("timers re-armed:", new.timers())
for result in new.load_results:
    print(result.origin)
    for batch in result.batches:
        for record in batch:
            print("  wrote", describe_record(record))
print("after load:", mid.state(new))

# %% [markdown]
# ### In the Lab (`coordinator_failover`)
#
# At 20 011 ms, in the middle of C's join, `__consumer_offsets` moves from broker-0 to broker-1.
# A request already on its way to broker-0 is answered **NOT_COORDINATOR** (red dashed arrow);
# the client looks the coordinator up again and retries on broker-1, which has rebuilt the group
# from the log. The members finish the reconciliation there; nobody is fenced.

# %%
lab = build_lab(load_library_scenario("coordinator_failover"))
lab.run(until=20_011)
print("stable:", lab.run_until_stable(), "at", lab.now, "ms")
frames = trace_frames(lab.trace)
message_sequence(frames, time_range=(20_000, 20_125), apis=["ConsumerGroupHeartbeat"], height=420)

# %% tags=["nbval-check-output"]
errors = frames.messages[frames.messages.is_error.astype(bool)]
print(errors[["sent_ms", "api", "from", "to", "error"]].to_string(index=False))
print("coordinator now on", lab.world.coordinator_host)

# %% [markdown]
# ## Summary

# %% tags=["nbval-check-output"]
for name, case in (("member failure", failure), ("rebalance timeout", slow), ("failover: old", mid)):
    print(f"{name:>20}: {case.state()}")
print(f"{'failover: new':>20}: {mid.state(new)}")
for name, lab_ in (("slow callback 8 s", in_time), ("slow callback 20 s", too_slow), ("coordinator_failover", lab)):
    g = lab_.coordinator.groups["g"]
    print(f"{name:>20}: {g.state.value} GE {g.group_epoch}",
          {m: (x.member_epoch, sorted(p for ps in x.assigned.values() for p in ps)) for m, x in sorted(g.members.items())},
          "| violations", len(lab_.invariants.violations))

# %% [markdown]
# **Next:** [03_partitions_and_topics](03_partitions_and_topics.ipynb) — partitions added, topics recreated, regex subscriptions.
