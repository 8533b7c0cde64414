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
# # 03 · Partitions and topics: adds, recreation, regex subscriptions
#
# A KIP-848 group rebalances not only when members come and go but when **the topics it reads
# change**. The coordinator keeps the group's *partition metadata* — topic id → partition count for
# every subscribed topic — in a record of its own, compares it with the cluster, and bumps the group
# epoch on any difference (KIP-848 *Group Epoch - Trigger a rebalance*):
#
# | change | what the coordinator sees | KIP-848 section |
# |---|---|---|
# | a partition added to a subscribed topic | a new partition count | *Group Epoch - Trigger a rebalance*; *Case Studies → Partition Added* |
# | a subscribed topic deleted | a topic gone from the metadata | *Group Epoch - Trigger a rebalance* |
# | a topic deleted and recreated | a **new topic id** for the same name | *Topic Deletion and Topic Recreation* |
# | a new topic matching a regex subscription | a new topic in the metadata | *Regex Based Subscription* |
#
# Each writes a new partition-metadata record and a group epoch record, then a new target follows.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import json

import pandas as pd

from kip_lab import ClusterMetadata, CoordinatorConfig, GroupCoordinator
from kip_lab.events import CallbackInvoked, HandlerResult, MessageSent
from kip_lab.coordinator.bootstrap import stable_group_log
from kip_lab.lab import Lab
from kip_lab.lab.metrics import compute_metrics
from kip_lab.protocol import ConsumerGroupHeartbeatRequest, TopicPartitions
from kip_lab.scenarios import build_lab, load_library_scenario
from kip_lab.viz import epoch_chart, group_dot, ownership_swimlanes, picture, trace_frames

pd.set_option("display.width", 160)


from kip_lab.coordinator.view import describe_record, describe_response


def group_line(group, cluster):
    def name(topic_id):
        topic = cluster.topic_by_id(topic_id)
        return topic.name if topic else f"<old {topic_id[:6]}…>"

    members = {m: (x.member_epoch, {name(t): sorted(p) for t, p in sorted(x.assigned.items())})
               for m, x in sorted(group.members.items())}
    return f"{group.state.value}, group epoch {group.group_epoch}, assignment epoch {group.assignment_epoch}, {members}"

# %% [markdown]
# ## 1 · Partition Added (KIP-848 *Case Studies → Partition Added*)
#
# ### On the coordinator
#
# The KIP's start: group epoch 22, topic foo with **one** partition, A owns foo-0, B owns nothing —
# rebuilt from its records. Then foo-1 is created.

# %% tags=["nbval-check-output"]
cluster = ClusterMetadata()
foo = cluster.create_topic("foo", partitions=1)
config = CoordinatorConfig()
gc = GroupCoordinator.from_log(stable_group_log(cluster, "g", 22, {"A": {"foo": [0]}, "B": {"foo": []}}), config, cluster)
print("start:", group_line(gc.groups["g"], cluster))

cluster.add_partitions("foo", 1)
print("foo now has", cluster.topic("foo").num_partitions, "partitions; the coordinator has not looked yet:",
      group_line(gc.groups["g"], cluster))

# %% [markdown]
# The coordinator notices on the next heartbeat it handles — here A's. One heartbeat writes the
# KIP's three snapshots as three batches (rows 1-3): the new partition metadata and group epoch 23;
# the target `{A:[0], B:[1]}` (only B's entry changed, so only B's is written); A's move to epoch 23.
# A's usable partitions did not change, so its response carries no assignment.

# %% tags=["nbval-check-output"]
def heartbeat(member_id, owned=None):
    epoch = gc.groups["g"].members[member_id].member_epoch
    result = gc.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        group_id="g", member_id=member_id, member_epoch=epoch,
        topic_partitions=None if owned is None else [TopicPartitions(topic_id=foo, partitions=owned)]))
    print(f"▶ {member_id} heartbeats at epoch {epoch}: {describe_response(result.response)}")
    for i, batch in enumerate(result.batches):
        for record in batch:
            print(f"  batch {i}:", describe_record(record, cluster))
    print("  →", group_line(gc.groups["g"], cluster))


heartbeat("A", owned=[0])
heartbeat("B", owned=[])

# %% [markdown]
# New partitions go out with **no revocation** when the target does not move existing ones —
# the uniform assignor keeps each member's previous target and only places what is new.
#
# ### In the Lab (`partition_added`)
#
# Foo starts with one partition; A joins at 0 s, B at 5 s (and gets nothing); a partition is added
# at 20 s. The consumers' next heartbeat after the change carries the news.

# %% tags=["claims"] jupyter={"source_hidden": true}
story = load_library_scenario("partition_added")
assert {name: m.start_at_ms for name, m in story.members.items()} == {"A": 0, "B": 5_000}
assert [(e.action, e.at_ms) for e in story.events] == [("add_partitions", 20_000)]

# %%
lab = build_lab(load_library_scenario("partition_added"))
lab.run(until=20_000)
print("stable:", lab.run_until_stable(), "at", lab.now, "ms")
frames = trace_frames(lab.trace)
ownership_swimlanes(frames, width=640) & epoch_chart(frames, width=640, height=160)

# %% [markdown]
# foo-1's lane starts at 20 s: red while nobody has it yet, then B's. (Notice the metrics count
# unavailability only while a partition exists in the group's metadata.)

# %% tags=["nbval-check-output"]
print(group_line(lab.coordinator.groups["g"], lab.cluster))
print("unavailability (ms):", compute_metrics(lab.trace)["partition_unavailability_ms"]["g"])

# %% [markdown]
# ## 2 · Topic recreation: a new topic id, offsets start fresh
#
# KIP-848 works with **topic ids** everywhere — assignments, records, and (new in OffsetCommit and
# OffsetFetch v9) committed offsets. When a topic is deleted and recreated, the name is the same but
# the id is new: "the rebalance protocol will resign the old topic id and assign the new one to
# members so members will consider the topic as a new/different topic", and topic ids in
# OffsetCommit and OffsetFetch ensure "that the Consumer won't use the old committed offsets with
# the new topic" — its processing starts fresh from the **offset reset policy** (KIP-848 *Topic ID
# and Topic Recreation*). With the old protocol, a consumer keyed by
# name could resume the new topic at the old topic's offsets — skipping or re-reading data.
#
# A and B read foo (4 partitions, 100 records/s each) and auto-commit every 5 s. At 20 s foo is
# deleted and recreated.

# %%
recreate = Lab(seed=0)
old_id = recreate.create_topic("foo", partitions=4)
recreate.add_consumer("A", subscribed_topic_names=["foo"])
recreate.add_consumer("B", subscribed_topic_names=["foo"])
recreate.run(until=20_000)
assert recreate.clients["A"].config.auto_commit_interval_ms == 5_000  # auto-commit every 5 s


def committed(lab):
    """The group's committed offsets as the coordinator stores them, with the topic id they belong to."""
    return {f"{name}-{p}": (v.offset, "old id" if v.topic_id == old_id else "new id")
            for (name, p), v in sorted(lab.coordinator.offsets["g"].items())}


print("before:", group_line(recreate.coordinator.groups["g"], recreate.cluster))
print("committed before:", committed(recreate))
recreate.recreate_topic("foo")
new_id = recreate.topic_id("foo")
print(f"foo recreated: topic id {old_id} -> {new_id}")
print("stable:", recreate.run_until_stable(), "at", recreate.now, "ms")
print("after: ", group_line(recreate.coordinator.groups["g"], recreate.cluster))

# %% [markdown]
# What happened, from the trace: the coordinator noticed the new id at the first heartbeat after
# the change and wrote new partition metadata (same name, new id) and group epoch 3. Each member
# was told to revoke the **old id's** partitions — the callbacks name them by id, because the topic
# they belonged to no longer exists — and then got partitions of the new foo. Commits still in
# flight for the old id are refused with **UNKNOWN_TOPIC_ID**; the OffsetFetch for the new id finds
# no committed offset.

# %% tags=["nbval-check-output"]
for e in recreate.trace:
    if e.time_ms < 20_000:
        continue
    p = e.body
    if isinstance(p, HandlerResult) and any(r["key"]["type"] == "ConsumerGroupPartitionMetadataKey" for r in p.records):
        for r in p.records:
            if r["key"]["type"] in ("ConsumerGroupPartitionMetadataKey", "ConsumerGroupMetadataKey"):
                print(f"{e.time_ms:>6} coordinator wrote {r['key']['type'].removesuffix('Key')}: {r['value']}")
    elif isinstance(p, CallbackInvoked):
        print(f"{e.time_ms:>6} {e.actor}: {p.callback}({', '.join(p.partitions)})")
    elif isinstance(p, MessageSent) and p.api in ("OffsetCommit", "OffsetFetch") and p.source == "broker-0":
        body = p.body
        if p.api == "OffsetCommit":
            errors = sorted({part.get("error_code", 0) for t in body["topics"] for part in t["partitions"]})
            print(f"{e.time_ms:>6} OffsetCommit response to {p.destination}: error codes {errors}")
        else:
            parts = {part["partition_index"]: part.get("committed_offset", -1) for g in body["groups"]
                     for t in g["topics"] for part in t["partitions"]}
            print(f"{e.time_ms:>6} OffsetFetch response to {p.destination}: committed offsets {parts} (-1: none)")

# %% [markdown]
# (Error code 100 is UNKNOWN_TOPIC_ID.) The new foo was read from offset 0
# (`auto.offset.reset=earliest`), not from the old topic's 1500. Ten seconds later every committed
# offset belongs to the new id. (The Lab's producers write 100 records/s per partition counted from
# t = 0, so the recreated topic is not empty when it appears — a simplification.)

# %% tags=["nbval-check-output"]
recreate.run(until=30_000)
print("committed at 30 s:", committed(recreate))

# %%
frames = trace_frames(recreate.trace)
picture(ownership_swimlanes(frames, time_range=(19_990, 20_030), width=600))

# %% [markdown]
# The swimlanes (a static SVG, zoomed on the recreation) show two sets of lanes: the old topic's
# partitions, labelled by id, ending in a revocation, and the new foo's starting a few milliseconds
# later — assigned afresh, since the assignor sees a topic it has never seen.
#
# ## 3 · Regex subscriptions (KIP-848 *Regex Based Subscription*)
#
# With KIP-848 the **coordinator** evaluates a member's regex, not the client: it knows when topics
# appear. The engine is **RE2** (RE2/J in Kafka): linear-time matching, so no subscriber's pattern
# can stall the coordinator, at the price of refusing constructs that need backtracking
# (lookaround, backreferences). A pattern must match the whole topic name. An invalid pattern is
# refused with INVALID_REQUEST.

# %% tags=["nbval-check-output"]
from kip_lab.regex import matching_topics

rx_cluster = ClusterMetadata()
for name in ("orders-eu", "orders-us-archive", "payments"):
    rx_cluster.create_topic(name, partitions=2)
rx = GroupCoordinator(CoordinatorConfig(), rx_cluster)
for i, pattern in enumerate(["orders-(?=eu)", r"orders-\w+", "orders-[a-z]{2}"]):
    result = rx.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        group_id=f"g{i}", member_id="A", member_epoch=0, rebalance_timeout_ms=60_000,
        subscribed_topic_regex=pattern, topic_partitions=[]))
    r = result.response
    topics = sorted(rx.groups[f"g{i}"].subscription_metadata) if f"g{i}" in rx.groups else None
    print(f"{pattern!r:>18}: {r.error_code.name}" + (f" — {r.error_message}" if r.error_message else f", subscribed to {topics}"))

# A pattern that makes backtracking engines explode is harmless to RE2 (linear time):
print("RE2 on '(a+)+$' against 'aaa…a!' (10,000 characters):", matching_topics("(a+)+$", ["a" * 10_000 + "!", "aaa"]))

# %% [markdown]
# `orders-\w+` does not match `orders-us-archive`: `\w` excludes `-`, and the pattern must match the
# whole name (Java's `Matcher.matches()`), not a prefix. `payments` matches neither.
#
# ### A new topic that matches (KIP: "trigger a rebalance for the group if new topic do")
#
# In the Lab: A and B subscribe to `orders-.*`. At 10 s the topic `orders-us` is created; at 20 s
# `orders-eu` is deleted. `payments` never matches.

# %%
regex_lab = Lab(seed=0)
regex_lab.create_topic("orders-eu", partitions=2)
regex_lab.create_topic("payments", partitions=2)
regex_lab.add_consumer("A", subscribed_topic_regex="orders-.*")
regex_lab.add_consumer("B", subscribed_topic_regex="orders-.*")
regex_lab.run(until=10_000)
snapshots = {"start": group_line(regex_lab.coordinator.groups["g"], regex_lab.cluster)}
regex_lab.create_topic("orders-us", partitions=2)
regex_lab.run_until_stable()
snapshots["orders-us created"] = group_line(regex_lab.coordinator.groups["g"], regex_lab.cluster)
regex_lab.run(until=20_000)
regex_lab.delete_topic("orders-eu")
regex_lab.run_until_stable()
snapshots["orders-eu deleted"] = group_line(regex_lab.coordinator.groups["g"], regex_lab.cluster)
regex_lab.run(until=25_000)
frames = trace_frames(regex_lab.trace)
ownership_swimlanes(frames, width=640) & epoch_chart(frames, width=640, height=160)

# %% tags=["nbval-check-output"]
for label, line in snapshots.items():
    print(f"{label:>18}: {line}")
subscribed = regex_lab.coordinator.groups["g"].subscription_metadata
print("group partition metadata:", {name: count for name, (_tid, count) in sorted(subscribed.items())})

# %% [markdown]
# The group picture at the end: only `orders-us` is left in the group's metadata.

# %%
picture(group_dot(regex_lab.coordinator.groups["g"], regex_lab.cluster))

# %% [markdown]
# ## Summary

# %% tags=["nbval-check-output"]
print("partition added (coordinator):", group_line(gc.groups["g"], cluster))
print("partition added (Lab):        ", group_line(lab.coordinator.groups["g"], lab.cluster))
print("recreated foo:                ", group_line(recreate.coordinator.groups["g"], recreate.cluster),
      "| all offsets on the new id:", all(where == "new id" for _off, where in committed(recreate).values()))
print("regex orders-.*:              ", group_line(regex_lab.coordinator.groups["g"], regex_lab.cluster))
print("invariant violations:", [len(x.invariants.violations) for x in (lab, recreate, regex_lab)])

# %% [markdown]
# **Next:** [04_static_membership](04_static_membership.ipynb) — static members: leaving and coming back without a rebalance.
