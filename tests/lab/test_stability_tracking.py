"""``Lab.is_stable`` tracks stability from what each step touched and answers as a full scan would.

The tracker (``kip_lab.lab.stability.StabilityTracker``) re-evaluates only the clients a step
touched and looks at the groups again only after a record, a client coming or going, or an
action that names no member. Random runs — consumers of both protocols in two groups, a share
consumer, faults of every kind, seeks back and forth — ask it after every step and compare
with ``stable_by_scanning``, the same question answered from scratch.
"""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_profile import examples
from test_invariants_incremental import FAULTS, NAMES, build, faults

from kip_lab.lab import Lab
from kip_lab.lab.stability import stable_by_scanning


def assert_agrees(lab: Lab) -> bool:
    answer = lab.is_stable()
    assert answer == stable_by_scanning(lab.world), f"step {lab.step_count}"
    return answer


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**16),
    classic=st.sets(st.sampled_from(NAMES[:5]), max_size=2),
    second_group=st.sets(st.sampled_from(NAMES[:5]), max_size=2),
    share=st.booleans(),
    steps=st.lists(
        st.tuples(st.integers(1, 300), st.sampled_from(FAULTS), st.sampled_from(NAMES[:5])),
        min_size=2,
        max_size=10,
    ),
)
def test_the_tracker_answers_as_a_full_scan_after_every_step(seed, classic, second_group, share, steps) -> None:
    lab = build("incremental", seed, classic, second_group)
    if share:
        lab.add_share_consumer("S", group_id="queue", subscribed_topic_names=["foo"])
    stable_seen = False
    for count, fault, name in steps:
        for _ in range(count):
            if not lab.has_next():
                break
            lab.step()
            stable_seen |= assert_agrees(lab)
        with contextlib.suppress(KeyError, ValueError):
            faults(lab, name)[fault]()
        assert_agrees(lab)
    settled = lab.run_until_stable(timeout_ms=300_000)
    assert settled == stable_by_scanning(lab.world)


def test_a_crashed_members_lingering_session_keeps_the_run_unstable_until_it_expires() -> None:
    """The group-level condition: every client settles at once, the crashed member's session
    (45 s, Kafka's ``group.consumer.session.timeout.ms`` default) still holds the group."""
    lab = build("incremental", 2, set(), set())
    assert lab.run_until_stable()
    lab.crash("A")
    crashed_at = lab.now
    answers = []
    while lab.now < crashed_at + 120_000:
        lab.step()
        answers.append((lab.now - crashed_at, assert_agrees(lab)))
    assert all(not stable for at, stable in answers if at < 45_000)
    assert answers[-1][1]
