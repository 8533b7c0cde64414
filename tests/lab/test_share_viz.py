"""Share groups on screen: the record-state frame and strip, the machines' diagrams, the stepper."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("altair")
W = pytest.importorskip("ipywidgets")

from kip_lab.clients.share_consumer import FailureRule  # noqa: E402
from kip_lab.lab.lab import Lab, LabConfig  # noqa: E402
from kip_lab.share.config import SharePartitionConfig  # noqa: E402
from kip_lab.share.group import SHARE_GROUP_STATE_MACHINE  # noqa: E402
from kip_lab.share.partition import RECORD_STATE_MACHINE  # noqa: E402
from kip_lab.viz import machine_dot, record_state_strip, share_frames, to_svg  # noqa: E402
from kip_lab.viz.charts import RECORD_STATE_ORDER  # noqa: E402


@pytest.fixture(scope="module")
def lab() -> Lab:
    lab = Lab(seed=5, config=LabConfig(share=SharePartitionConfig(record_lock_duration_ms=2_000)))
    lab.create_topic("orders", 1, produce_rate_per_s=0)
    for name in ("A", "B"):
        lab.add_share_consumer(
            name,
            group_id="queue",
            subscribed_topic_names=["orders"],
            acknowledgement="explicit",
            max_poll_records=5,
            failures=[FailureRule(offsets=[3], action="release")],
        )
    lab.run(until=6_000)
    lab.produce_share_records("orders", 10, batch_size=5)
    lab.run(until=30_000)
    return lab


def test_the_frame_follows_each_record_through_its_states(lab):
    records = share_frames(lab).records
    poison = records[records["offset"] == 3]
    acquired = poison[poison["state"] == "Acquired"]
    assert list(acquired["delivery_count"]) == [1, 2, 3, 4, 5]
    assert poison.iloc[-1]["state"] == "Archived" and poison.iloc[-1]["delivery_count"] == 5
    healthy = records[records["offset"] == 0]
    assert list(healthy["state"]) == ["Acquired", "Acknowledged"]
    # intervals of one offset follow each other without gaps or overlaps
    for _, rows in records.groupby("offset"):
        assert list(rows["end_ms"])[:-1] == list(rows["start_ms"])[1:]


def test_the_offsets_frame_has_the_start_offset_reaching_the_end(lab):
    offsets = share_frames(lab).offsets
    assert list(offsets["spso"]) == sorted(offsets["spso"])  # never back
    assert offsets.iloc[-1]["spso"] == offsets.iloc[-1]["speo"] == 10


def test_the_strip_colours_by_state_labels_counts_and_draws_spso_speo(lab):
    spec = record_state_strip(lab, cursor_ms=6_010).to_dict()
    rect, text, lines, cursor = spec["layer"]
    assert rect["mark"]["type"] == "rect" and rect["encoding"]["color"]["scale"]["domain"] == RECORD_STATE_ORDER
    assert text["encoding"]["text"]["field"] == "label"
    data = lines["data"]
    values = data["values"] if "values" in data else spec["datasets"][data["name"]]
    values = json.loads(values) if isinstance(values, str) else values
    assert {v["bound"] for v in values} == {"spso", "speo"}
    assert cursor["mark"]["type"] == "rule"
    svg = to_svg(record_state_strip(lab))
    assert svg.startswith("<svg") and "record states" in svg


def test_the_strip_refuses_a_trace_without_share_records():
    plain = Lab(seed=0)
    plain.create_topic("foo", 1)
    with pytest.raises(ValueError, match="no share records"):
        record_state_strip(plain)


def test_diagrams_are_drawn_from_the_tables():
    record_dot = machine_dot(RECORD_STATE_MACHINE, current="Acquired")
    for t in RECORD_STATE_MACHINE.transitions:
        assert t.trigger in record_dot
    assert '"Acquired" -> "Archived"' in record_dot
    group_dot_text = machine_dot(SHARE_GROUP_STATE_MACHINE, current="Stable")
    assert '"Empty" -> "Stable"' in group_dot_text and "first member joins" in group_dot_text


def test_the_stepper_steps_a_share_run(lab):
    from widgets import Stepper

    stepper = Stepper(lab, group_id="queue", member="A")  # it steps its own fork of the run
    stepper.go(40)
    assert stepper.lab.step_count == 40
    assert "queue" in stepper.counter.value and "Stable" in stepper.counter.value
    stepper.timeline_choice.value = "share records"
    spec = stepper.timeline_spec()
    assert spec["layer"][0]["mark"]["type"] == "rect"
    assert any(layer["mark"]["type"] == "rule" for layer in spec["layer"])  # the cursor
    stepper.diagram_choice.value = "group state"
    assert "Stable" in stepper.diagram.value
    stepper.diagram_choice.value = "record state"
    assert "Acknowledged" in stepper.diagram.value
    stepper.go(stepper.lab.horizon)
    assert "🔴" not in stepper.lights.value


def test_the_fault_panel_applies_share_faults_at_the_current_step(lab):
    from widgets import FaultPanel, Stepper

    stepper = Stepper(lab, group_id="queue")
    fork = stepper.lab  # the stepper's own run, which the panel changes
    stepper.go(30)
    panel = FaultPanel(stepper, settle_timeout_ms=20_000)
    before = fork.world.share.leader_of((fork.topic_id("orders"), 0))
    panel.buttons["move share leader"].click()
    assert fork.world.share.leader_of((fork.topic_id("orders"), 0)) != before
    host = fork.world.share.coordinator_host
    panel.buttons["fail over share coordinator"].click()
    assert fork.world.share.coordinator_host != host
    assert stepper.errors.layout.display != "block"
