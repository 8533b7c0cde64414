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
# # 15 · Kafka vs the KIPs: where the implementation departed from the design
#
# A KIP is a design; Apache Kafka's code is what runs. Where the two part ways, a Kafka engineer
# reading a KIP in a design review, or a learner who later reads Kafka's code, meets a surprise.
# kip_lab behaves as Kafka does by default, and keeps the KIP text's reading as an opt-in
# **fidelity profile**:
#
# * `fidelity="kafka"` (the default): Apache Kafka's behaviour, class and method named (Kafka's trunk
#   at the reference commit 1eb7644349cb, late October 2024, about Kafka 4.0);
# * `fidelity="kip"`: what the KIP's text and examples say.
#
# The switch is `CoordinatorConfig(fidelity=...)`, `LabConfig(fidelity=...)`, `lab: {fidelity: kip}` in a
# scenario file, or a sweep grid dimension. `compare_profiles` runs one scenario under both profiles
# (everything else equal, so every difference comes from the profile) and lists the coordinator
# writes that differ.
# Each difference shown here is a pair of rows in the repository's `docs/decisions.md` (D4/D4k, D6/D6k,
# M2, SG2, SP5, D17/D17k), where it is written down with its reason.
#
# Six departures, each with the KIP section, Kafka's method, the difference computed live, and why it
# matters:
#
# 1. a failed member's target entry (KIP-848);
# 2. FENCED_MEMBER_EPOCH: reject, or remove (KIP-848);
# 3. the epoch bump when online migration converts a group (KIP-848);
# 4. the share groups' SimpleAssignor (KIP-932);
# 5. a share fetch's `max_records` (KIP-932);
# 6. the member id in heartbeat responses (KIP-848), a small one.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import pandas as pd

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.coordinator.bootstrap import stable_classic_group_log
from kip_lab.coordinator.view import describe_record, states_after_batches
from kip_lab.protocol.classic_group import HeartbeatRequest
from kip_lab.protocol.common import TopicPartitions
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kip_lab.protocol.share import InitializeShareGroupStateRequest, InitializeStateData, InitializeStatePartition
from kip_lab.runtime.scheduler import Scheduler
from kip_lab.scenarios import scenario_from_yaml
from kip_lab.scenarios.profiles import PROFILES, compare_profiles
from kip_lab.share.config import SharePartitionConfig
from kip_lab.share.coordinator import ShareCoordinator
from kip_lab.share.group_assignor import SimpleAssignor
from kip_lab.share.partition import SharePartition
from kip_lab.share.persister import CoordinatorPersister
from kip_lab.share.topic_log import TopicLog
from kip_lab.viz import picture

pd.set_option("display.width", 160)
COLOURS = alt.Scale(domain=list(PROFILES), range=["#4c78a8", "#f58518"])


def show_differences(comparison):
    """Each write that differs: what Kafka wrote, then what the KIP's reading writes."""
    for d in comparison.differences:
        first = d.kafka or d.kip
        print(f"write #{d.index} at {first.time_ms} ms, by {first.origin}:")
        for profile in PROFILES:
            write = getattr(d, profile)
            answer = f"answers {write.error}; " if write and write.error else ""
            records = ", ".join(write.records) if write and write.records else "no records"
            print(f"  {profile:>5}: {answer}{records}" if write else f"  {profile:>5}: (no such write)")


def listing(comparison, first_write, record_type="TargetAssignmentMember"):
    """For each profile and write from ``first_write`` on: the members with a ``record_type`` record after it
    (``TargetAssignmentMember``: the target lists them; ``MemberMetadata``: they are in the group)."""
    rows = []
    for profile in PROFILES:
        listed = set()
        for index, write in enumerate(comparison.writes[profile]):
            for record in write.records:
                if record.startswith(f"{record_type}("):
                    listed.add(record[len(record_type) + 1:-1])
                elif record.startswith(f"~{record_type}("):
                    listed.discard(record[len(record_type) + 2:-1])
            if index >= first_write:
                rows += [{"profile": profile, "write": index, "member": m} for m in sorted(listed)]
    return pd.DataFrame(rows)


def listing_chart(frame, title):
    """Rows: member per profile; a square where the member is listed after the write."""
    return alt.Chart(frame, width=260, height=70).mark_square(size=260).encode(
        x=alt.X("write:O", title="coordinator write #", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("member:N", title=None),
        color=alt.Color("profile:N", scale=COLOURS, legend=None),
    ).facet(column=alt.Column("profile:N", title=None, sort=list(PROFILES))).properties(title=title)


# %% [markdown]
# ## 1 · A member fails: when does the target forget it?
#
# **KIP-848, "Member Failure"** (a case study): A stops heartbeating; after the session timeout
# the coordinator removes A and bumps the group epoch to 23 — and its table still shows the
# **target assignment at epoch 22 listing A** with foo-0 and foo-1. The next target, computed for
# epoch 23, no longer has A.
#
# **Kafka, `GroupMetadataManager.removeMember`** (called from `consumerGroupFenceMember` on a
# session timeout, a leave or fencing) writes three tombstones together: A's current assignment,
# **A's target entry**, and A's member metadata; then the group epoch. The target never lists a
# member the group no longer has.
#
# The library scenario `member_failure` is the KIP's case study; here it runs under both profiles.
# A record reads `Type(member)`; `~` marks a tombstone, and `Metadata` is the group-epoch record.

# %%
failure = compare_profiles("member_failure")

# %% tags=["nbval-check-output"]
show_differences(failure)

# %% [markdown]
# Write by write, the members the target lists. Under `kip` A stays in the target for one
# write after its removal (the session timeout's write), until B's heartbeat computes the next target.

# %%
removal = failure.differences[0]
picture(listing_chart(listing(failure, removal.index - 1),
                      f"members the target lists, write by write (#{removal.index}: {removal.kafka.origin})"))

# %% [markdown]
# **Why it matters:** Kafka writes a removal whole, in one batch, so the log never holds a target
# naming a member the group no longer has — a coordinator that fails over and replays the log right
# after a removal sees a consistent group. Someone reading `__consumer_offsets` with the KIP's table
# in mind would look for A's target tombstone in the next rebalance and find it earlier, in the
# removal itself.
#
# ## 2 · FENCED_MEMBER_EPOCH: rejected, or removed?
#
# **KIP-848, "Consumer Group Heartbeat API → Request Handling"**, step 3: when the member epoch in
# the request does not match, FENCED_MEMBER_EPOCH is returned and *"the member is also removed
# from the group"*.
#
# **Kafka, `GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid`** throws
# `FencedMemberEpochException` and nothing else happens: the member, its assignment and the
# group epoch stay. The client answers by rejoining with epoch 0; if it never does, its session
# timeout removes it.
#
# Two scripted members: A joins and owns foo's four partitions, B joins (A must give up two),
# then A heartbeats with an epoch the group never gave it (7), and B heartbeats again.

# %%
FENCING = """
name: fenced_member_epoch
description: A owns foo; B joins; A heartbeats with an epoch it was never given, then B heartbeats.
topics: [{name: foo, partitions: 4}]
members:
  A: {scripted: true}
  B: {scripted: true}
events:
  - {at_step: 2, action: send_request, member: A, body: {group_id: g, member_id: A, member_epoch: 0,
      rebalance_timeout_ms: 60000, subscribed_topic_names: [foo], topic_partitions: []}}
  - {at_step: 5, action: send_request, member: A, body: {group_id: g, member_id: A, member_epoch: 1,
      topic_partitions: [{topic: foo, partitions: [0, 1, 2, 3]}]}}
  - {at_step: 8, action: send_request, member: B, body: {group_id: g, member_id: B, member_epoch: 0,
      rebalance_timeout_ms: 60000, subscribed_topic_names: [foo], topic_partitions: []}}
  - {at_step: 11, action: send_request, member: A, body: {group_id: g, member_id: A, member_epoch: 7,
      topic_partitions: [{topic: foo, partitions: [0, 1, 2, 3]}]}}
  - {at_step: 14, action: send_request, member: B, body: {group_id: g, member_id: B, member_epoch: 2,
      topic_partitions: []}}
run: {until_ms: 1000}
"""
fencing = compare_profiles(scenario_from_yaml(FENCING))

# %% tags=["nbval-check-output"]
show_differences(fencing)


# %%
def outcome(comparison):
    """Per profile: the group's epochs and each member's epoch and partitions at the end of the run."""
    rows = {}
    for profile, result in comparison.results.items():
        (group,) = result.groups.values()
        row = {"group epoch": group["group_epoch"], "target epoch": group["assignment_epoch"]}
        for member in result.members:
            row[member.name] = "-" if member.member_epoch is None else (
                f"e{member.member_epoch} {member.assignment or {}}")
        rows[profile] = row
    return pd.DataFrame(rows).T


# %% tags=["nbval-check-output"]
print(outcome(fencing).to_string())

# %% [markdown]
# Under `kip` the fenced A is gone at once: the epoch is bumped, B's next heartbeat computes a
# target without A and B gets all four partitions. Under `kafka` nothing changed: A is still in
# the group at epoch 1 with foo-0..3, and B, whose target is foo-2 and foo-3, owns nothing until A
# revokes them, rejoins, leaves, or its session times out.

# %%
fenced = fencing.differences[0]
picture(listing_chart(listing(fencing, 0, "MemberMetadata"),
                      f"members of the group, write by write (#{fenced.index}: {fenced.kafka.error} to A)"))

# %% [markdown]
# **Why it matters:** in Kafka a fencing error is not a removal. A fenced member's partitions move
# to others only when it rejoins with epoch 0 (Kafka's consumer does so at once, after
# `onPartitionsLost`), leaves, or its session expires (`group.consumer.session.timeout.ms`, 45 s by
# default). A client that answers FENCED_MEMBER_EPOCH with anything but a prompt rejoin holds those
# partitions up for as long as a session timeout.
#
# ## 3 · Online migration: does converting the group bump the epoch?
#
# **KIP-848, "Online Migration"** (a case study): a classic group at generation 22; A leaves and
# rejoins with the new protocol; the group is converted, *"the current generation becomes the
# group epoch"*, and the table stays at **epoch 22**: B and C, still classic, are untouched.
#
# **Kafka, `ConsumerGroup.fromClassicGroup`** and **`ConsumerGroup.createConsumerGroupRecords`**
# build the consumer group at epoch 22 but write no subscription (partition) metadata. A's own
# heartbeat, in the same request, then finds the metadata missing, writes it and **bumps the
# group epoch to 23**: B and C are now behind, and are told to rebalance.
#
# Here the coordinator is driven directly: a Stable classic group at generation 22 of static
# members a, b, c (instance ids A, B, C), then A's consumer-protocol join taking over its
# instance id.

# %%
START = {"a": {"foo": [0, 1]}, "b": {"foo": [3, 4]}, "c": {"foo": [2, 5]}}


def convert(fidelity):
    """A classic group at generation 22; A rejoins on the consumer protocol. Returns (coordinator, result)."""
    cluster = ClusterMetadata()
    cluster.create_topic("foo", 6)
    log = stable_classic_group_log(cluster, "g", 22, START, instance_ids={m: m.upper() for m in START})
    gc = GroupCoordinator.from_log(log, CoordinatorConfig(fidelity=fidelity), cluster)
    result = gc.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="A", member_epoch=0, instance_id="A", rebalance_timeout_ms=60_000,
        subscribed_topic_names=["foo"], topic_partitions=[]))
    return gc, result


rows = []
migrations = {}
for profile in PROFILES:
    gc, result = convert(profile)
    migrations[profile] = gc
    for number, (batch, state) in enumerate(zip(result.batches, states_after_batches(gc, result), strict=True)):
        group = state.groups["g"]
        kinds = [describe_record(r).split(":")[0] for r in batch]
        rows.append({"profile": profile, "batch": number, "records": len(kinds),
                     "PartitionMetadata": kinds.count("PartitionMetadata"),
                     "group epoch": group.group_epoch, "target epoch": group.assignment_epoch,
                     "state": group.state.value})
conversion = pd.DataFrame(rows).set_index(["profile", "batch"])

# %% tags=["nbval-check-output"]
print(conversion.to_string())

# %% [markdown]
# The first batch is the conversion (the classic group's tombstone and the consumer group built
# from generation 22); the others are A's takeover. Under `kafka`, the partition metadata
# arrives only with A's own records, with an epoch bump. What the classic members hear on their
# next heartbeat:

# %% tags=["nbval-check-output"]
for profile, gc in migrations.items():
    answers = {member: gc.heartbeat(HeartbeatRequest(group_id="g", generation_id=22, member_id=member,
                                                     group_instance_id=member.upper())).response.error_code.name
               for member in ("b", "c")}
    print(f"{profile:>5}: epoch {gc.groups['g'].group_epoch}; classic heartbeats at generation 22 ->", answers)

# %% [markdown]
# **Why it matters:** in Kafka the first consumer that switches to `group.protocol=consumer`
# makes every remaining classic member rejoin (JoinGroup and SyncGroup). Classic members on an
# eager assignor revoke everything they own on that rejoin, so an upgrade's first bounce costs a
# rebalance of the whole group, which the KIP's table does not show.
#
# ## 4 · Share groups: the SimpleAssignor
#
# **KIP-932, "The SimpleAssignor"**: hash each member id onto one partition (roughly even balance);
# a partition no member hashed to gets members round-robin, so each has at least one; a partition
# that got members from the hash drops those it had only from the round-robin. Members are spread
# over the partitions.
#
# **Kafka, `SimpleAssignor.assign`** (the `simple` share assignor at the reference commit) gives
# **every member every partition** of each topic it subscribes to: all members fetch from all
# partitions, and the share-partition leaders share out the records. (Later Kafka releases replaced
# it with balancing assignors: KAFKA-18757, KAFKA-19362, KAFKA-19363.)
#
# The KIP's example gives member M*i* the hash *i*; so do we. The steps: M1 joins T1 with one
# partition; M2 joins; T1 grows to four partitions; M3 and M4 join.

# %%
STEPS = [("M1 joins", ["M1"], 1), ("M2 joins", ["M1", "M2"], 1), ("T1 grows to 4", ["M1", "M2"], 4),
         ("M3 joins", ["M1", "M2", "M3"], 4), ("M4 joins", ["M1", "M2", "M3", "M4"], 4)]


def share_steps(fidelity):
    assignor = SimpleAssignor(member_hash=lambda member_id: int(member_id[1:]), fidelity=fidelity)
    current, out = {}, []
    for label, members, partitions in STEPS:
        target = assignor.assign({m: frozenset({"T1"}) for m in members}, {"T1": tuple(range(partitions))}, current)
        out.append((label, target))
        current = {m: {t: frozenset(ps) for t, ps in topics.items()} for m, topics in target.items()}
    return out


share = {profile: share_steps(profile) for profile in PROFILES}
share_table = pd.DataFrame(
    {profile: {label: "  ".join(f"{m}→{list(t.get('T1', ()))}" for m, t in target.items())
               for label, target in steps} for profile, steps in share.items()})

# %% tags=["nbval-check-output"]
print(share_table.to_string())

# %%
cells = [{"profile": profile, "member": m, "partition": f"T1:{p}"}
         for profile, steps in share.items() for m, topics in steps[-1][1].items() for p in topics.get("T1", ())]
share_chart = alt.Chart(pd.DataFrame(cells), width=140, height=110).mark_square(size=420).encode(
    x=alt.X("partition:N", title=None), y=alt.Y("member:N", title=None),
    color=alt.Color("profile:N", scale=COLOURS, legend=None),
).facet(column=alt.Column("profile:N", title=None, sort=list(PROFILES))).properties(
    title="who fetches from which partition, four members on T1's four partitions")
picture(share_chart)

# %% [markdown]
# **Why it matters:** with Kafka's assignor every share consumer opens a fetch to every
# partition's leader, and spreading the work is the share-partition leaders' job (acquisition
# locks, `max_records`), not the assignment's. Adding consumers never revokes anything — and it
# never reduces the number of connections each consumer makes either.
#
# ## 5 · A share fetch's `max_records`: a soft or a hard limit?
#
# **KIP-932, "Examples with share-group state"**: ten records are fetched by three consumers and
# *"consumer 1 gets 110-112, consumer 2 gets 113-118, consumer 3 gets 119"* — a fetch takes exactly
# as many records as it asks for, cutting a batch, and the rest waits in flight, Available.
#
# **Kafka, `SharePartition.acquire`** and **`acquireNewBatchRecords`** acquire whole log batches:
# the fetch's record limit (`max_records` here; at the reference commit the broker's internal
# `share.fetch.max.fetch.records`, unbounded by default) is soft, and a batch the fetch reaches is
# taken whole even past it, under one acquisition lock.
#
# A share-partition whose log holds three producer batches of four records (0–3, 4–7, 8–11);
# C1 fetches with `max_records=6`, then C2 does the same.

# %%
def fetches(fidelity):
    """Three batches of four records; C1 then C2 fetch with max_records=6. The acquired ranges, and the
    in-flight records after each fetch."""
    log = TopicLog("T1", 0)
    for _ in range(3):
        log.append(4)
    coordinator = ShareCoordinator()
    coordinator.initialize_share_group_state(InitializeShareGroupStateRequest(group_id="G1", topics=[
        InitializeStateData(topic_id="T1", partitions=[InitializeStatePartition(partition=0, state_epoch=0,
                                                                                start_offset=0)])]))
    sp = SharePartition.load("G1", "T1", 0, log, config=SharePartitionConfig(fidelity=fidelity),
                             scheduler=Scheduler(), persister=CoordinatorPersister(coordinator))
    got, windows = {}, {}
    for member in ("C1", "C2"):
        got[member] = [(r.first_offset, r.last_offset) for r in sp.acquire(member, 6)]
        windows[f"after {member}'s fetch"] = sp.records()
    return got, windows


fetched = {profile: fetches(profile) for profile in PROFILES}

# %% tags=["nbval-check-output"]
for profile, (got, _) in fetched.items():
    counts = {member: sum(last - first + 1 for first, last in ranges) for member, ranges in got.items()}
    print(f"{profile:>5}: acquired {got} -> records {counts}")

# %%
strip = []
for profile, (_, windows) in fetched.items():
    for when, records in windows.items():
        holder = {offset: record.member_id or record.state
                  for record in records for offset in range(record.first_offset, record.last_offset + 1)}
        strip += [{"profile": profile, "when": when, "offset": offset, "holder": holder.get(offset, "not read yet")}
                  for offset in range(12)]
strip_chart = alt.Chart(pd.DataFrame(strip), width=420, height=50).mark_rect(stroke="white").encode(
    x=alt.X("offset:O", axis=alt.Axis(labelAngle=0)),
    y=alt.Y("profile:N", title=None, sort=list(PROFILES)),
    color=alt.Color("holder:N", title="acquired by / state",
                    scale=alt.Scale(domain=["C1", "C2", "Available", "not read yet"],
                                    range=["#54a24b", "#b279a2", "#bab0ac", "#f2f2f2"])),
).facet(row=alt.Row("when:N", title=None)).properties(
    title="the in-flight records of a log of three 4-record batches, fetches of max_records=6")
picture(strip_chart)

# %% [markdown]
# **Why it matters:** in Kafka the producer's batches are the unit of sharing: a fetch gets whole
# batches, up to a batch more than it asked for, and every record of a batch is locked to the same
# consumer under one deadline. With large producer batches, one share consumer can take far more
# than its share while the others wait; the KIP's example, three consumers taking 3, 6 and 1 of ten
# records, needs batches that small in Kafka.
#
# ## 6 · The member id in heartbeat responses
#
# **KIP-848, "Consumer Group Heartbeat API → Response Schema"**: the response's MemberId is *"only
# provided when the member joins with MemberEpoch == 0"*.
#
# **Kafka, `GroupMetadataManager.consumerGroupHeartbeat`** (and `consumerGroupLeave`) set the member
# id on every response. A joins, acknowledges its partitions, and leaves:

# %%
def member_ids(fidelity):
    cluster = ClusterMetadata()
    foo = cluster.create_topic("foo", 2)
    gc = GroupCoordinator(CoordinatorConfig(fidelity=fidelity), cluster)
    requests = {
        "join (epoch 0)": dict(member_epoch=0, rebalance_timeout_ms=60_000, subscribed_topic_names=["foo"],
                               topic_partitions=[]),
        "heartbeat (epoch 1)": dict(member_epoch=1,
                                    topic_partitions=[TopicPartitions(topic_id=foo, partitions=[0, 1])]),
        "leave (epoch -1)": dict(member_epoch=-1),
    }
    return {label: gc.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(group_id="g", member_id="A", **body))
            .response.member_id for label, body in requests.items()}


echo = pd.DataFrame({profile: member_ids(profile) for profile in PROFILES})

# %% tags=["nbval-check-output"]
print(echo.fillna("(null)").to_string())

# %% [markdown]
# **Why it matters:** a tool that reads member ids off the wire (a protocol test, a proxy, a
# capture being decoded) finds the id in every response Kafka sends; one written from the KIP's
# schema would expect it only on joins and treat it as absent elsewhere.
#
# ## Summary

# %% tags=["nbval-check-output"]
print("member failure: writes that differ", len(failure.differences),
      "| A's target tombstone at write", {p: next(i for i, w in enumerate(failure.writes[p])
                                                  if "~TargetAssignmentMember(A)" in w.records) for p in PROFILES})
print("fencing: final group epoch", {p: r.groups["g"]["group_epoch"] for p, r in fencing.results.items()},
      "| B's partitions", {p: next(m.assignment for m in r.members if m.name == "B")
                           for p, r in fencing.results.items()})
print("migration: epoch after A's conversion", {p: gc.groups["g"].group_epoch for p, gc in migrations.items()})
print("share assignor: members per partition with 4 members",
      {p: [sum(1 for t in steps[-1][1].values() if i in t.get("T1", ())) for i in range(4)]
       for p, steps in share.items()})
print("share fetch of max_records=6: records C1 got",
      {p: sum(last - first + 1 for first, last in got["C1"]) for p, (got, _) in fetched.items()})
print("member id in heartbeat responses:", {p: int(echo[p].notna().sum()) for p in PROFILES}, "of", len(echo))

# %% [markdown]
# **Next:** [16_scale_and_batching](16_scale_and_batching.ipynb) — larger groups, and batching.
