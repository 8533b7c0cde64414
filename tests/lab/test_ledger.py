"""The delivery ledger end to end: what each protocol does to a group's records when a member crashes or leaves.

Each run counts records from the trace alone (``build_ledger``, ``compute_metrics``) and checks
them against what the protocol promises: a crash re-processes exactly the crashed member's
uncommitted progress (what it processed after its last successful commit) and skips nothing; a
clean leave re-processes nothing. Every run also keeps the ledger's invariants, checked at
every step (``raise_on_violation``).
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest

from kip_lab.events import CommitResult, PositionSet, RecordsProcessed, ShareStateWrite
from kip_lab.lab import Lab, LabConfig
from kip_lab.lab.ledger import Ledger, OffsetSet, build_ledger
from kip_lab.lab.metrics import compute_metrics
from kip_lab.lab.story import client_story
from kip_lab.lab.trace import Trace, TraceEvent
from kip_lab.viz.frames import lag_frame, ledger_frame, reprocessed_frame

PROTOCOLS: dict[str, dict[str, Any]] = {
    "consumer (KIP-848)": {},
    "classic eager": {"group_protocol": "classic", "partition_assignment_strategy": ["range"]},
    "classic cooperative": {"group_protocol": "classic", "partition_assignment_strategy": ["cooperative-sticky"]},
}
RATE_PER_S = 20  # records per second per partition
CRASH_MS = 13_000  # 3 s after the auto-commit at 10 s: 60 records per partition processed and not committed


def pair(settings: dict[str, Any], seed: int = 3) -> Lab:
    lab = Lab(seed=seed, config=LabConfig(raise_on_violation=True))
    lab.create_topic("foo", 4, produce_rate_per_s=RATE_PER_S)
    for name in "AB":
        lab.add_consumer(name, subscribed_topic_names=["foo"], **settings)
    lab.run(until=CRASH_MS)
    return lab


def uncommitted_progress(trace: Trace, member: str) -> int:
    """Records ``member`` processed past the last successful commit of each partition it processed last."""
    ledger = build_ledger(trace)
    total = 0
    for partition in ledger.partitions.values():
        reached = partition.processed_by.get(member)
        if reached is not None and reached == partition.furthest:
            total += reached - (partition.last_commit or partition.first_start or 0)
    return total


def owed(trace: Trace) -> int:
    """Offsets from each partition's first start to the group's position: each processed once at least."""
    ledger = build_ledger(trace)
    return sum(p.furthest - (p.first_start or 0) for p in ledger.partitions.values())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_crash_reprocesses_exactly_the_crashed_members_uncommitted_progress(protocol: str) -> None:
    lab = pair(PROTOCOLS[protocol])
    lab.crash("A")  # A's last ranges are traced as it stops
    lost = uncommitted_progress(lab.trace, "A")
    assert lost == 2 * 3 * RATE_PER_S  # two partitions, 3 s each since the 10 s auto-commit
    lab.run(until=90_000)
    metrics = compute_metrics(lab.trace)
    assert metrics["records_reprocessed"] == lost
    assert metrics["records_skipped"] == 0
    assert metrics["records_processed"] - metrics["records_reprocessed"] == owed(lab.trace)
    assert metrics["commits_failed"] == 0
    assert metrics["ledger_by_group"]["g"]["records_reprocessed"] == lost
    assert lab.invariants.violations == []
    # B re-reads each of A's partitions from the committed offset to where A had stopped.
    ranges = reprocessed_frame(lab.trace)
    assert set(ranges["member"]) == {"B"} and set(ranges["previous"]) == {"A"}
    assert (ranges["first"] == ranges["last_commit"]).all() and ranges["records"].sum() == lost


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_clean_leave_reprocesses_nothing(protocol: str) -> None:
    lab = pair(PROTOCOLS[protocol])
    lab.close("A")
    lab.run(until=90_000)
    metrics = compute_metrics(lab.trace)
    assert metrics["records_reprocessed"] == 0 and metrics["records_skipped"] == 0
    assert metrics["records_processed"] == owed(lab.trace) > 0
    assert metrics["processing_pause_ms"] > 0  # the handover stops A's partitions for a while
    assert lab.invariants.violations == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_delayed_commit_never_moves_the_committed_offset_back(protocol: str) -> None:
    """A's next messages (the 10 s auto-commit among them) held up 8 s: the commits sent behind them
    on the same connection land after them, in order (Kafka's ``NetworkClient``: one TCP connection
    per broker), so the group's committed offset only moves forward."""
    lab = Lab(seed=3, config=LabConfig(raise_on_violation=True))
    lab.create_topic("foo", 4, produce_rate_per_s=RATE_PER_S)
    for name in "AB":
        lab.add_consumer(name, subscribed_topic_names=["foo"], **PROTOCOLS[protocol])
    lab.run(until=9_900)
    lab.delay_messages("A", 4, 8_000)
    lab.run(until=40_000)
    committed: dict[tuple[str, int], list[int]] = {}
    for e in lab.trace.of_type(CommitResult):
        for topic_id, partition, offset, error in e.body.offsets:
            if e.actor == "A" and e.time_ms > 9_900 and error is None:
                committed.setdefault((topic_id, partition), []).append(offset)
    assert len(committed) == 2 and all(offsets == sorted(offsets) for offsets in committed.values())  # as sent
    if protocol == "consumer (KIP-848)":  # no auto-commit while one is in flight (``AutoCommitState``)
        assert all(offsets == [200, 600, 700] for offsets in committed.values())  # 10 s held to 26 s; 30 s; 35 s
    else:  # the classic consumer sends one every interval, each behind the held one
        assert all(offsets == [200, 300, 400, 500, 600, 700] for offsets in committed.values())
    ledger = build_ledger(lab.trace)  # the group's committed offset is A's last commit
    assert {key: offsets[-1] for key, offsets in committed.items()} == {
        tp: p.last_commit for (_, tp), p in ledger.partitions.items() if tp in committed
    }
    metrics = compute_metrics(lab.trace)
    assert metrics["records_reprocessed"] == 0 and metrics["records_skipped"] == 0
    assert lab.invariants.violations == []


def share_pair() -> Lab:
    lab = Lab(seed=5, config=LabConfig(raise_on_violation=True))
    lab.create_topic("orders", 1, produce_rate_per_s=0)
    for name in "AB":
        lab.add_share_consumer(
            name, group_id="queue", subscribed_topic_names=["orders"], max_poll_records=5, processing_ms_per_record=200
        )
    lab.run(until=6_000)
    lab.produce_share_records("orders", 40, batch_size=5)
    lab.run(until=9_000)
    return lab


def test_a_share_consumer_crash_reprocesses_at_most_its_unacknowledged_records() -> None:
    lab = share_pair()
    lab.crash("A")
    unacknowledged = share_processed(lab.trace, "A").minus(share_acknowledged(lab.trace))
    lab.run(until=120_000)
    metrics = compute_metrics(lab.trace)
    assert metrics["records_reprocessed"] <= unacknowledged
    assert metrics["records_skipped"] == 0
    assert metrics["records_processed"] - metrics["records_reprocessed"] == 40  # every record, once at least
    assert lab.invariants.violations == []


def test_a_share_consumer_leaving_cleanly_reprocesses_nothing() -> None:
    lab = share_pair()
    lab.close("A")
    lab.run(until=120_000)
    metrics = compute_metrics(lab.trace)
    assert metrics["records_reprocessed"] == 0 and metrics["records_skipped"] == 0
    assert metrics["records_processed"] == 40
    assert lab.invariants.violations == []


def share_processed(trace: Trace, member: str) -> OffsetSet:
    offsets = OffsetSet()
    for e in trace.of_type(RecordsProcessed):
        if e.actor == member:
            for *_, first, end, _ in e.body.ranges:
                offsets.add(first, end)
    return offsets


def share_acknowledged(trace: Trace) -> OffsetSet:
    offsets = OffsetSet()
    for e in trace.of_type(ShareStateWrite):
        if e.body.error is None:
            for first, last, _, target in e.body.transitions:
                if target == "Acknowledged":
                    offsets.add(first, last + 1)
    return offsets


# ---------------------------------------------------------------------------- the ledger's pieces
def test_an_offset_set_merges_ranges_and_returns_what_was_there() -> None:
    offsets = OffsetSet()
    assert offsets.add(10, 20) == []
    assert offsets.add(30, 40) == []
    assert offsets.add(20, 30) == []  # adjacent on both sides: one range
    assert (offsets.starts, offsets.ends) == ([10], [40])
    assert offsets.add(5, 15) == [(10, 15)]
    assert offsets.add(50, 60) == [] and offsets.add(35, 55) == [(35, 40), (50, 55)]
    assert (offsets.starts, offsets.ends) == ([5], [60])
    assert offsets.missing(0, 70) == 15 and offsets.covered_from(5) == 60 and offsets.covered_from(60) == 60


def test_an_offset_set_survives_a_snapshot_and_a_copy_apart_from_the_original() -> None:
    """A snapshot pickles it (as its two lists) and a restore or deepcopy must not share them."""
    offsets = OffsetSet()
    offsets.add(0, 10)
    offsets.add(20, 30)
    for copied in (pickle.loads(pickle.dumps(offsets, pickle.HIGHEST_PROTOCOL)), copy.deepcopy(offsets)):
        assert (copied.starts, copied.ends) == ([0, 20], [10, 30])
        copied.add(10, 20)
        assert (copied.starts, copied.ends) == ([0], [30])
        assert (offsets.starts, offsets.ends) == ([0, 20], [10, 30])


def event(step: int, actor: str, body: Any, time_ms: int = 0) -> TraceEvent:
    return TraceEvent(step, time_ms or step, actor, body)


def test_the_invariants_explain_what_broke() -> None:
    ledger = Ledger()
    ledger.names["t"] = "foo"
    for e in [
        event(1, "A", PositionSet("g", "a", 0, "t", 0, 0, "earliest")),
        event(2, "A", RecordsProcessed("g", "a", 0, (("t", 0, 0, 100, "earliest"),))),
        event(3, "A", CommitResult("g", "a", 1, "auto", (("t", 0, 100, None),))),
        event(4, "B", PositionSet("g", "b", 0, "t", 0, 150, "latest")),
        event(5, "B", CommitResult("g", "b", 1, "auto", (("t", 0, 90, None),))),
        event(6, "C", PositionSet("g", "c", 0, "t", 0, 50, "committed")),
        event(7, "C", RecordsProcessed("g", "c", 0, (("t", 0, 50, 60, "committed"),))),
        event(8, "C", RecordsProcessed("g", "c", 0, (("t", 0, 70, 80, "continued"),))),
    ]:
        ledger.apply(e)
    assert ledger.take_found() == [
        (
            "no-skip",
            "B starts foo-0 at 150 (latest), but group g has processed foo-0 only up to 100: offsets 100..149 are "
            "never processed (auto.offset.reset=latest found no committed offset: were the group's commits refused?)",
        ),
        ("commits-monotonic", "B's commit moved group g's offset for foo-0 back from 100 (committed by A) to 90"),
        (
            "reprocessing-explained",
            "C processed foo-0 50..59 again, below 90, the offset the group's last successful commit was "
            "acknowledged at when C took foo-0 over: committed records came back",
        ),
        ("reprocessing-explained", "C's position for foo-0 moved from 60 to 70 unseen"),
        (
            "reprocessing-explained",
            "C processed foo-0 70..79 again, below 90, the offset the group's last successful commit was "
            "acknowledged at when C took foo-0 over: committed records came back",
        ),
    ]
    assert ledger.take_found() == []


def test_a_seek_is_an_explicit_reset_nothing_is_owed_below_it() -> None:
    ledger = build_ledger(
        [
            event(1, "A", PositionSet("g", "a", 0, "t", 0, 0, "earliest")),
            event(2, "A", RecordsProcessed("g", "a", 0, (("t", 0, 0, 10, "earliest"),))),
            event(3, "A", PositionSet("g", "a", 0, "t", 0, 50, "seek")),
            event(4, "A", RecordsProcessed("g", "a", 0, (("t", 0, 50, 60, "seek"),))),
        ]
    )
    assert ledger.take_found() == []
    assert ledger.totals() == {
        "records_processed": 20,
        "records_reprocessed": 0,
        "records_skipped": 0,
        "commits_failed": 0,
        "max_lag_records": 0,
        "processing_pause_ms": 0,
    }


def test_a_saved_trace_gives_the_same_ledger(tmp_path) -> None:
    lab = pair(PROTOCOLS["consumer (KIP-848)"])
    lab.crash("A")
    lab.run(until=70_000)
    lab.trace.save_jsonl(tmp_path / "run.jsonl")
    loaded = Trace.load_jsonl(tmp_path / "run.jsonl")
    assert ledger_frame(loaded).equals(ledger_frame(lab.trace))
    assert lag_frame(loaded).equals(lag_frame(lab.trace))
    rows = ledger_frame(lab.trace)
    assert list(rows["partition"]) == ["foo-0", "foo-1", "foo-2", "foo-3"]
    assert rows["records_reprocessed"].sum() == compute_metrics(lab.trace)["records_reprocessed"]
    # The lag of A's partitions peaks just before B reports its first range: A's last position, then nobody.
    lag = lag_frame(lab.trace)
    assert lag["lag_records"].max() == rows["max_lag_records"].max() > 0


def test_the_story_says_who_re_reads_what() -> None:
    lab = pair(PROTOCOLS["consumer (KIP-848)"])
    lab.crash("A")
    lab.run(until=70_000)
    story = client_story(lab.trace, members=["B"], rereads=True)
    ranges = reprocessed_frame(lab.trace)
    assert "re-reads" not in client_story(lab.trace, members=["B"])  # only when asked for
    for row in ranges.itertuples():
        assert f"B:   re-reads {row.partition} from {row.first} (committed) to {row.end} (A had processed)" in story


def test_the_stepper_says_who_re_reads_what_at_the_step_it_starts() -> None:
    from widgets import Stepper

    lab = pair(PROTOCOLS["consumer (KIP-848)"])
    lab.crash("A")
    lab.run(until=70_000)
    ranges = reprocessed_frame(lab.trace)
    assert len(ranges) > 0
    stepper = Stepper(lab)
    starts = [e for e in lab.trace.of_type(PositionSet) if e.actor == "B" and e.body.reason == "committed"]
    for row in ranges.itertuples():
        (start,) = [e for e in starts if e.body.offset == row.first and f"foo-{e.body.partition}" == row.partition]
        stepper.go(start.step)
        line = f"B re-reads {row.partition} from {row.first} (committed) to {row.end} (A had processed)"
        assert line in stepper.happened.value


def test_the_charts_draw_the_ledger() -> None:
    from kip_lab.viz.charts import lag_chart, reprocessing_swimlanes, to_json

    lab = pair(PROTOCOLS["consumer (KIP-848)"])
    lab.crash("A")
    lab.run(until=70_000)
    swimlanes = json.loads(to_json(reprocessing_swimlanes(lab.trace)))
    (marked,) = [_data(swimlanes, layer) for layer in _layers(swimlanes) if "↺" in str(layer.get("transform"))]
    ranges = reprocessed_frame(lab.trace)
    assert {(r["partition"], r["first"], r["records"]) for r in marked} == set(
        zip(ranges["partition"], ranges["first"], ranges["records"], strict=True)
    )
    lag = json.loads(to_json(lag_chart(lab.trace)))
    (rows,) = [_data(lag, layer) for layer in _layers(lag) if layer.get("mark", {}).get("type") == "line"]
    assert max(r["lag_records"] for r in rows) == ledger_frame(lab.trace)["max_lag_records"].max()


def _layers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every layer of a Vega-Lite spec, nested ones too."""
    found = []
    for layer in spec.get("layer", []):
        found += [layer, *_layers(layer)]
    return found


def _data(spec: dict[str, Any], layer: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows a layer draws: inline, or a named dataset of the spec."""
    data = layer["data"]
    values = data["values"] if "values" in data else spec["datasets"][data["name"]]
    return json.loads(values) if isinstance(values, str) else values


def test_a_member_cut_off_from_every_broker_processes_nothing_until_the_link_heals() -> None:
    """It cannot fetch: its positions hold at the cut, so the new owner re-reads only what it had
    processed since its last commit — and, once the link heals, the zombie processes again until
    it learns it was fenced (what reprocessing-explained accepts as a fence's progress)."""
    lab = pair({})
    lab.partition_link("A", 60_000)  # 3 s after A's 10 s auto-commit
    lab.run(until=120_000)
    during = [e for e in lab.trace.of_type(RecordsProcessed) if e.actor == "A" and CRASH_MS < e.time_ms < 73_000]
    assert during == []
    first_rereads = reprocessed_frame(lab.trace).query("member == 'B'").groupby("partition").first()
    assert (first_rereads["first"] == first_rereads["last_commit"]).all()
    assert set(first_rereads["records"]) == {3 * RATE_PER_S}
    assert lab.invariants.violations == []
