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
# # 17 · Real Kafka consumers in the Lab
#
# Every notebook so far ran the Lab's own simulated consumers. The Lab can also put **Kafka's wire
# protocol** in front of itself, so that real clients join its groups: here, librdkafka's KIP-848
# consumer (`confluent-kafka`, `group.protocol=consumer`). Their heartbeats reach the same
# coordinator handlers the simulated consumers reach, and everything they exchange lands in the
# Lab's trace — so the pictures of the earlier notebooks draw a run of real clients too.
#
# What we do:
#
# 1. start a Lab with short sessions and open its front door (`kip_lab.wire.serve`);
# 2. start three real consumers, each in its own process, and watch them split six partitions;
# 3. crash one (kill its process: no leave) and watch its partitions move when its session times out;
# 4. bring it back;
# 5. stop the front door and read the trace with the usual charts and the stepper.
#
# The repository's `docs/real-clients.md` is the reference (every API and version served, faults on
# real clients, where librdkafka differs from the simulated consumer).
#
# **Real time, real processes.** Unlike the rest of the course, this run follows the wall clock
# and real clients heartbeat on their own timers: two runs are never the same run. The times and
# step numbers below change from run to run; the facts that are checked (who is in the group, that
# every partition has exactly one owner) do not. The whole notebook takes half a minute or less, most of
# it waiting: for the clients to start, and for a session to time out.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import importlib.metadata
import importlib.util
import time
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
from IPython.display import display

pd.set_option("display.width", 160)
pd.set_option("display.max_colwidth", 100)

MISSING = [name for name in ("confluent_kafka", "kio") if importlib.util.find_spec(name) is None]
REAL = not MISSING
if MISSING:
    print(f"Skipping the real clients: {', '.join(MISSING)} is not installed.",
          "Install them with: pip install 'kip-lab[wire]' confluent-kafka")
else:
    import confluent_kafka

    print("confluent-kafka", importlib.metadata.version("confluent-kafka"), "| librdkafka", confluent_kafka.libversion()[0])

# %% [markdown]
# ## 1 · A Lab with a front door
#
# The Lab's coordinator gets a 6-second session timeout and a 1-second heartbeat interval (Kafka's
# defaults are 45 s and 5 s: `group.consumer.session.timeout.ms`, `group.consumer.heartbeat.interval.ms`),
# so a crashed consumer loses its partitions in seconds. `serve(lab, port=0)` listens on free
# loopback ports; `server.bootstrap_servers` goes into the clients' configuration. From now on the
# Lab's clock follows the wall clock, and one thread owns the Lab: we read it with
# `server.call(fn)`, which runs `fn(lab)` on that thread.

# %% tags=["claims"] jupyter={"source_hidden": true}
from kip_lab.coordinator import CoordinatorConfig

assert (CoordinatorConfig().session_timeout_ms, CoordinatorConfig().heartbeat_interval_ms) == (45_000, 5_000)

# %%
from kip_lab.coordinator import CoordinatorConfig
from kip_lab.events import MessageSent, TimerFired
from kip_lab.lab import Lab, LabConfig

SESSION_TIMEOUT_MS = 6_000
PARTITIONS = 6
coordinator = CoordinatorConfig(session_timeout_ms=SESSION_TIMEOUT_MS, min_session_timeout_ms=SESSION_TIMEOUT_MS,
                                heartbeat_interval_ms=1_000, min_heartbeat_interval_ms=1_000)
lab = Lab(seed=17, config=LabConfig(coordinator=coordinator))
lab.create_topic("orders", PARTITIONS, produce_rate_per_s=0)

if REAL:
    from kip_lab.wire import ConsumerProcess, serve, settled_assignment

    server = serve(lab, port=0)
    print("bootstrap.servers =", server.bootstrap_servers)

# %% [markdown]
# ## 2 · Three real consumers join
#
# `ConsumerProcess(config, topics)` runs a librdkafka consumer in a child process — so that we can
# crash it later — and collects what it sees (`assigned`, `revoked`, `lost`, records). Each gets its
# own `client.id`: that names its actor in the trace.
#
# A group with real members is judged at the coordinator: `settled_assignment(lab, "g")` returns
# who owns what once every member is at the group epoch with nothing left to revoke (`None` while
# the group is still rebalancing). `wait_for` polls it until the members we expect share the six
# partitions.

# %%
if REAL:
    CONFIG = {"bootstrap.servers": server.bootstrap_servers, "group.id": "g", "group.protocol": "consumer",
              "auto.offset.reset": "earliest"}
    ALL = {("orders", p) for p in range(PARTITIONS)}


def wait_for(members, timeout_s=30):
    """The settled split once exactly ``members`` own every partition, each once; seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        split = server.call(lambda lab: settled_assignment(lab, "g"))
        if split and sorted(split) == sorted(members):
            owned = [tp for parts in split.values() for tp in parts]
            if len(owned) == len(set(owned)) and set(owned) == ALL:
                return split, time.monotonic() - started
        time.sleep(0.1)
    raise TimeoutError(f"{members} did not settle in {timeout_s} s")


def show(split):
    """Each member's partitions: which ones depends on the order the clients joined in."""
    for client, parts in sorted(split.items()):
        print(f"  {client}: partitions {sorted(p for _, p in parts)}")


def facts(split):
    """What every run shows: who is in, how many partitions each, each partition owned once."""
    owned = [tp for parts in split.values() for tp in parts]
    print("members:", sorted(split), "| partitions per member:", sorted(len(parts) for parts in split.values()),
          "| every partition owned by exactly one member:", len(owned) == len(set(owned)) and set(owned) == ALL)


if REAL:
    consumers = {name: ConsumerProcess({**CONFIG, "client.id": name}, ["orders"]) for name in ("c1", "c2", "c3")}
    split, waited = wait_for(["c1", "c2", "c3"])
    print(f"settled after {waited:.1f} s")
    show(split)

# %% tags=["nbval-check-output"]
if REAL:
    facts(split)

# %% [markdown]
# The coordinator's uniform assignor gave each member two partitions (which two depends on the
# order in which the clients' first heartbeats arrived). The consumers agree — this
# is what each one's own rebalance callbacks say it owns:

# %%
if REAL:
    time.sleep(0.5)  # the last assignment reaches each client with its next heartbeat response
    for name, consumer in consumers.items():
        print(f"  {name} (its callbacks): {[p for _, p in consumer.assignment()]}")

# %% [markdown]
# ## 3 · A crash: kill c2
#
# `kill()` sends SIGKILL: the consumer dies without leaving the group (no heartbeat at member epoch
# -1). The coordinator does not know yet; c2's partitions stay with it until its session timer fires,
# 6 s after its last heartbeat (KIP-848, *Group Membership*: a member that stops heartbeating is
# removed when its session times out). Then the group epoch is bumped and c1 and c3 share all six.

# %%
if REAL:
    c2_member = server.call(lambda lab: {m.client_id: m.member_id for m in lab.coordinator.groups["g"].members.values()})["c2"]
    killed_at_ms = server.call(lambda lab: lab.now)
    consumers["c2"].kill()
    split, waited = wait_for(["c1", "c3"])
    print(f"c1 and c3 settled {waited:.1f} s after the kill")
    show(split)

# %% tags=["nbval-check-output"]
if REAL:
    facts(split)
    expired = server.call(lambda lab: [e.time_ms for e in lab.trace.of_type(TimerFired)
                                       if e.body.timer[0] == "session" and c2_member in e.body.timer])
    print("c2 was removed by its session timer:", len(expired) == 1)
    print("and not before its session could run out:", expired[0] - killed_at_ms >= SESSION_TIMEOUT_MS - 1_500)

# %% [markdown]
# ## 4 · c2 comes back
#
# A new process with the same `client.id`: to the coordinator it is a new member (librdkafka makes
# a fresh member id), which joins at epoch 0; c1 and c3 each give a partition up, and it is back to
# two each.

# %%
if REAL:
    consumers["c2"] = ConsumerProcess({**CONFIG, "client.id": "c2"}, ["orders"])
    split, waited = wait_for(["c1", "c2", "c3"])
    print(f"settled {waited:.1f} s after c2's restart")
    show(split)

# %% tags=["nbval-check-output"]
if REAL:
    facts(split)
    back = server.call(lambda lab: {m.client_id: m.member_id for m in lab.coordinator.groups["g"].members.values()})
    print("c2 is a new member:", back["c2"] != c2_member)

# %% [markdown]
# ## 5 · Stop, and read the trace
#
# `close()` stops a consumer cleanly: it leaves the group (member epoch -1). `server.stop()` closes
# the front door; the Lab is ours again, with its whole trace. Every request a real client sent is a
# step of its own (the Lab action `wire_request`), followed by the coordinator's handling and the
# answer crossing the network back:

# %%
if REAL:
    time.sleep(1.0)  # a heartbeat round more, for the charts below, which end here: before the clean leaves
    closing_ms = server.call(lambda lab: lab.now)
    with ThreadPoolExecutor() as pool:  # close all three at once: each waits for its leave to be answered
        list(pool.map(lambda consumer: consumer.close(), consumers.values()))
    server.stop()
    trace = lab.trace.to_pandas()
    print(f"{lab.step_count} steps over {lab.now / 1000:.1f} s;", trace["kind"].value_counts().to_dict())
    first = min(e.step for e in lab.trace.of_type(MessageSent) if e.body.source == "c1")
    display(trace[trace["step"].between(first, first + 1)][["step", "time_ms", "actor", "kind", "payload"]])

# %% [markdown]
# ### The same pictures as for simulated members
#
# `trace_frames` reads this trace like any other. A real client's own state machine is not in the
# trace (only its messages are), so the ownership swimlanes are drawn from the **coordinator's**
# view (`view="coordinator"`): whom the coordinator had assigned each partition to, and when. The
# epoch chart shows the group epoch and the assignment epoch; the dashed rule is c2's session
# timing out.
#
# The coordinator knows members by member id (librdkafka makes a random one); `client_names` reads
# from each client's heartbeats which member id is whose, so that the charts say c1, c2, c3 — and
# "c2, back" for the restarted c2, a member of its own.

# %%
def client_names(lab, clients):
    """member id -> the client id that heartbeated with it; a client's second member id is 'back'."""
    names = {}
    for event in lab.trace.of_type(MessageSent):
        if event.actor in clients:
            member_id = event.body.body.get("member_id")
            if member_id and member_id not in names:
                names[member_id] = f"{event.actor}, back" if event.actor in names.values() else event.actor
    return names


if REAL:
    from kip_lab.viz import epoch_chart, ownership_swimlanes, picture, trace_frames

    frames = trace_frames(lab)
    names = client_names(lab, consumers)
    frames.ownership_coordinator["member"] = frames.ownership_coordinator["member"].replace(names)
    for member_id, name in names.items():
        frames.markers["label"] = frames.markers["label"].str.replace(member_id, name, regex=False)
    window = (0, closing_ms)
    display(picture(ownership_swimlanes(frames, view="coordinator", time_range=window, width=640)
                    & epoch_chart(frames, time_range=window, width=640, height=160)))

# %% [markdown]
# Read it top to bottom: the three members join within a second of each other and split the
# partitions — the first to join holds everything for a moment and gives partitions up (the faint
# *pending* bars are the others waiting for them). After the kill, c2's partitions stay with c2
# until its session times out, then move to c1 and c3; "c2, back" gets two partitions, each
# pending until its current owner has given it up.
#
# **The stepper.** The trace replays: `lab.seek(step)` puts the Lab back after any step, and the
# stepper of the earlier notebooks walks this run like a simulated one — nothing is sent to a real
# client again. Run this notebook, then:
#
# ```python
# from widgets import explore
# explore(lab)           # Play / Step / Back through the real clients' run
# ```
#
# ## Summary

# %% tags=["nbval-check-output"]
if REAL:
    print("real clients in the trace:", sorted(a for a in frames.actors if a in consumers))
    print("group members over the run (c2 twice, as two member ids):", sorted(names.values()))
    print("partitions each member held at the end:", [len(parts) for _, parts in sorted(split.items())])
    print("invariant violations:", len(lab.invariants.violations))
else:
    print("skipped: confluent-kafka and kio are needed for real clients")

# %% [markdown]
# **Next:** [18_design_review](18_design_review.ipynb) — a design review: a rollout under every combination of its options, compared in one report.
