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
# # 12 · Poison messages and delivery counts (KIP-932)
#
# A queue's oldest problem: one record that no consumer can process. In a consumer group it
# stops its partition — the committed offset cannot pass it. In a share group each record has a
# **delivery count**: every acquisition adds one, and when a failed delivery (a RELEASE, an
# acquisition lock that runs out, the end of a share session) happens at
# `group.share.delivery.count.limit` (5 by default) the record is **Archived** instead of made
# Available again (KIP-932 *Delivery count and delivery limit*; scenario `share_poison_messages`).
#
# Three ways a record fails, all in the Lab with the same producer — 30 records on one
# partition, every tenth a poison pill (offsets 9, 19, 29) — and three consumers:
#
# 1. the application **releases** it (a transient error: "try again later");
# 2. the application **hangs** on it past the acquisition lock (`group.share.record.lock.duration.ms`,
#    2 s here): the leader takes the record back;
# 3. the application **rejects** it (a permanent error): archived at once.
#
# In every case the other records keep flowing — there is no head-of-line blocking.

# %%
import altair as alt

from kip_lab.viz import notebook_charts

notebook_charts()  # charts drawn by JupyterLab itself (offline, interactive), each with a PNG for GitHub

import pandas as pd

from kip_lab.clients.share_consumer import FailureRule
from kip_lab.events import ShareAcquired, ShareStateWrite
from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.lab.metrics import compute_metrics
from kip_lab.lab.share_invariants import at_least_once
from kip_lab.share.config import SharePartitionConfig
from kip_lab.share.partition import RECORD_STATE_MACHINE
from kip_lab.viz import machine_dot, picture, record_state_strip

pd.set_option("display.width", 160)
POISON = [9, 19, 29]


def poison_run(action, seed=12):
    """Three share consumers on orders-0; records whose value matches poison-.* fail with ``action``."""
    lab = Lab(seed=seed, config=LabConfig(share=SharePartitionConfig(record_lock_duration_ms=2_000)))
    lab.create_topic("orders", 1, produce_rate_per_s=0)
    for name in ("C1", "C2", "C3"):
        lab.add_share_consumer(
            name, group_id="queue", subscribed_topic_names=["orders"],
            acknowledgement="implicit" if action == "hang" else "explicit",
            max_poll_records=1 if action == "hang" else 5,  # a hung batch would hold its neighbours too
            failures=[FailureRule(value_regex="poison-.*", action=action, hang_ms=5_000)])
    lab.run(until=6_000)
    lab.produce_share_records("orders", 30, poison_every=10, batch_size=5)
    lab.run(until=90_000)
    return lab


def history(lab, offset):
    """The record's life: each acquisition (who, delivery count) and each persisted change."""
    names = {c.member_id: n for n, c in lab.clients.items()}
    out = []
    for e in lab.trace.of_type(ShareAcquired, ShareStateWrite):
        p = e.body
        if isinstance(p, ShareAcquired):
            out += [f"{names[p.member_id]} acquires (dc {dc})" for f, last, dc in p.ranges if f <= offset <= last]
        elif p.error is None:
            out += [f"{trigger} → {target}" for f, last, trigger, target in p.transitions if f <= offset <= last]
    return out

# %% [markdown]
# The edges these runs walk, in the table the leader enforces: *release* / *lock timeout* back to
# Available while the count is below the limit, *… at limit* to Archived once it is reached,
# *reject* straight to Archived.

# %%
picture(machine_dot(RECORD_STATE_MACHINE, last_transition=("Acquired", "release at limit", "Archived")))

# %% [markdown]
# ## 1 · Released until the limit
#
# The consumers acknowledge explicitly: ACCEPT, or RELEASE for a poison record. Offset 9's life:

# %% tags=["nbval-check-output"]
released = poison_run("release")
for step in history(released, 9):
    print(step)

# %% [markdown]
# Five acquisitions with counts 1..5, four *release → Available*, then *release at limit →
# Archived*: exactly what the scenario `share_poison_messages` expects. Meanwhile the healthy
# records were each delivered once. The strip shows it — the poison rows change colour five times, the SPSO (solid line) waits at each poison record
# until it is archived, then jumps past the acknowledged records behind it:

# %%
picture(record_state_strip(released, title="release: orders-0 in share group queue"))

# %% [markdown]
# ## 2 · A consumer that hangs: the acquisition lock runs out
#
# Now the application simply takes too long on a poison record (5 s, against a 2 s lock) and acknowledges
# implicitly. The leader does not wait: when the lock expires it makes the record Available
# again (delivery count unchanged) and another consumer — or the same — acquires it with the next
# count. The late acknowledgement of the hung consumer is refused with INVALID_RECORD_STATE
# (the record is no longer acquired by it) and reported to its acknowledgement callback.

# %% tags=["nbval-check-output"]
hung = poison_run("hang")
for step in history(hung, 19):
    print(step)
late = [r for c in hung.clients.values() for r in c.commit_results if r["error"] == "INVALID_RECORD_STATE"]
print("late acknowledgements refused:", len(late), "e.g.", late[0] if late else None)

# %% [markdown]
# ## 3 · Rejected: archived on the first delivery

# %% tags=["nbval-check-output"]
rejected = poison_run("reject")
for offset in POISON:
    print(offset, history(rejected, offset))

# %% [markdown]
# ## What it cost
#
# `compute_metrics` counts, from the trace alone, the records acquired, the redeliveries (an
# acquisition with a delivery count above 1), and how records ended. Releasing and hanging cost
# 4 redeliveries per poison record; rejecting costs none. In all three runs every record ended
# Acknowledged or Archived (at-least-once) and no invariant was broken — a record
# acquired by one member at a time, delivery counts never down, the SPSO never back.

# %% tags=["nbval-check-output"]
rows = []
for name, lab in (("release", released), ("hang", hung), ("reject", rejected)):
    m = compute_metrics(lab.trace)
    rows.append({"failure": name, "acquired": m["share_records_acquired"], "redeliveries": m["share_redeliveries"],
                 "acknowledged": m["share_records_acknowledged"], "archived": m["share_records_archived"],
                 "all settled": at_least_once(lab.world) == [], "violations": len(lab.invariants.violations)})
print(pd.DataFrame(rows).to_string(index=False))

# %% [markdown]
# **Next:** [13_share_coordinator_failover](13_share_coordinator_failover.ipynb) — the share coordinator failing over without losing state.
