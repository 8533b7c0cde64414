"""Trace frames and chart specs: assertions on the frames and on ``chart.to_dict()``, not pixels."""

from __future__ import annotations

import itertools
import json

import pytest

alt = pytest.importorskip("altair")
pd = pytest.importorskip("pandas")

from kip_lab.lab import Lab  # noqa: E402
from kip_lab.viz.charts import (  # noqa: E402
    DROP_REACH,
    ERROR_COLOR,
    epoch_chart,
    message_sequence,
    ownership_swimlanes,
    to_json,
    to_png,
    to_svg,
)
from kip_lab.viz.frames import TraceFrames, trace_frames  # noqa: E402

PARTITIONS = [f"foo-{p}" for p in range(6)]


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def crash_lab() -> Lab:
    lab = Lab(seed=1)
    lab.create_topic("foo", 6)
    for name in "ABC":
        lab.add_consumer(name, subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    lab.crash("A")
    assert lab.run_until_stable()
    return lab


@pytest.fixture(scope="module")
def frames(crash_lab) -> TraceFrames:
    return trace_frames(crash_lab)


def _crash_ms(frames: TraceFrames) -> int:
    faults = frames.markers[(frames.markers["kind"] == "fault") & (frames.markers["label"] == "crash A")]
    assert len(faults) == 1
    return int(faults["time_ms"].iloc[0])


def _session_timeout_ms(frames: TraceFrames) -> int:
    timers = frames.markers[(frames.markers["kind"] == "timer") & (frames.markers["label"] == "session g A")]
    assert len(timers) == 1
    return int(timers["time_ms"].iloc[0])


def _rows(frame, **where):
    mask = pd.Series(True, index=frame.index)
    for column, value in where.items():
        mask &= frame[column] == value
    return frame[mask]


# ---------------------------------------------------------------------------- frames
def test_frames_have_their_columns_and_partitions(frames, crash_lab):
    assert frames.partitions == PARTITIONS
    assert frames.actors[0] == "A" and "broker-0" in frames.actors
    assert set(frames.ownership["status"]) == {"assigned", "pending", "revoking"}
    assert (frames.ownership["end_ms"] > frames.ownership["start_ms"]).all()
    assert frames.end_ms == crash_lab.trace[-1].time_ms
    states = frames.member_states
    assert list(states[states["member"] == "B"]["state"])[-1] == "STABLE"


def test_no_partition_is_assigned_to_two_members_at_once(frames):
    assigned = _rows(frames.ownership, status="assigned")
    for _partition, rows in assigned.groupby("partition"):
        spans = sorted(zip(rows["start_ms"], rows["end_ms"], strict=True))
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end


def test_crashed_members_partitions_move_to_survivors_after_the_session_timeout(frames, crash_lab):
    crash, expiry = _crash_ms(frames), _session_timeout_ms(frames)
    assert expiry - crash >= 40_000  # the consumer session timeout (45 s) less the last heartbeat's age
    final = lab_owners(crash_lab)
    moved = {p for p, owner in final.items() if owner != "A"} & {"foo-0", "foo-1"}
    assert moved == {"foo-0", "foo-1"}
    for partition in ("foo-0", "foo-1"):
        a = _rows(frames.ownership, partition=partition, member="A", status="assigned")
        assert a["end_ms"].max() == crash  # the client view ends A's ownership when the process dies
        survivor = _rows(frames.ownership, partition=partition, status="assigned")
        survivor = survivor[survivor["member"] != "A"]
        assert set(survivor["member"]) == {final[partition]}
        assert survivor["start_ms"].min() > expiry
        assert survivor["end_ms"].max() == frames.end_ms
        # the unavailability gap: from the crash to the survivor's first assigned moment
        gaps = _rows(frames.gaps, partition=partition)
        gap = gaps[gaps["start_ms"] == crash]
        assert len(gap) == 1
        assert int(gap["end_ms"].iloc[0]) == survivor["start_ms"].min()
        assert int(gap["duration_ms"].iloc[0]) > 40_000
        # before the new owner can use it, it was pending in its target
        pending = _rows(frames.ownership, partition=partition, member=final[partition], status="pending")
        assert pending["start_ms"].min() >= expiry
        assert pending["end_ms"].max() == survivor["start_ms"].min()


def lab_owners(lab: Lab) -> dict[str, str]:
    group = lab.coordinator.groups["g"]
    return {
        f"foo-{p}": member.member_id for member in group.members.values() for ps in member.assigned.values() for p in ps
    }


def test_the_first_rebalance_revokes_from_A_before_B_and_C_may_use_the_partitions(frames, crash_lab):
    final = lab_owners(crash_lab)
    for partition in ("foo-2", "foo-3", "foo-4", "foo-5"):
        revoking = _rows(frames.ownership, partition=partition, member="A", status="revoking")
        assert len(revoking) == 1
        released = int(revoking["end_ms"].iloc[0])
        owner = final[partition]
        assigned = _rows(frames.ownership, partition=partition, member=owner, status="assigned")
        assert assigned["start_ms"].min() >= released
        pending = _rows(frames.ownership, partition=partition, member=owner, status="pending")
        assert pending["start_ms"].min() <= int(revoking["start_ms"].iloc[0])
        assert pending["end_ms"].max() == assigned["start_ms"].min()
        # and a gap between A letting go and the new owner starting
        gaps = _rows(frames.gaps, partition=partition)
        assert ((gaps["start_ms"] == int(revoking["start_ms"].iloc[0])) & (gaps["end_ms"] > released)).any()


def test_the_coordinator_view_keeps_A_until_its_session_expires(frames):
    expiry = _session_timeout_ms(frames)
    view = frames.ownership_coordinator
    a = _rows(view, member="A", status="assigned")
    assert set(a["partition"]) == set(PARTITIONS)
    assert a[a["partition"] == "foo-0"]["end_ms"].max() == expiry
    assert set(_rows(view, member="A", status="revoking")["partition"]) == {"foo-2", "foo-3", "foo-4", "foo-5"}


def test_epochs(frames, crash_lab):
    epochs = frames.epochs
    group = epochs[epochs["kind"] == "group"]
    assert list(group["epoch"]) == [1, 2, 3, 4]
    assert list(epochs[epochs["kind"] == "assignment"]["epoch"]) == [1, 2, 3, 4]
    assert group["time_ms"].iloc[-1] == _session_timeout_ms(frames)  # A's removal bumps the epoch
    a = epochs[epochs["series"] == "A"]
    assert a["source"].iloc[-1] == "end" and a["time_ms"].iloc[-1] == _crash_ms(frames)
    for member in ("B", "C"):
        series = epochs[epochs["series"] == member]
        assert series["epoch"].is_monotonic_increasing
        assert series["epoch"].iloc[-1] == crash_lab.coordinator.groups["g"].members[member].member_epoch == 4


def test_messages_pair_requests_and_responses(frames):
    messages = frames.messages
    assert messages["id"].is_unique
    assert set(messages["status"]) <= {"delivered", "in_flight"}
    in_flight = messages[messages["status"] == "in_flight"]
    assert (in_flight["sent_ms"] + in_flight["latency_ms"] >= frames.end_ms).all()  # not yet due when the run stopped
    delivered = messages[messages["status"] == "delivered"]
    assert (delivered["delivered_ms"] == delivered["sent_ms"] + delivered["latency_ms"]).all()
    requests = messages[messages["direction"] == "request"]
    responses = messages[messages["direction"] == "response"]
    assert requests["error"].isna().all()
    assert set(responses["error"]) == {"NONE"} and not messages["is_error"].any()
    assert set(requests["to"]) == {"broker-0"} and set(responses["from"]) == {"broker-0"}
    answered = responses.merge(requests, left_on=["to", "correlation_id"], right_on=["from", "correlation_id"])
    assert len(answered) == len(responses)  # every response answers a request of its recipient
    assert (answered["sent_ms_x"] >= answered["delivered_ms_y"]).all()
    first = messages.iloc[0]
    assert first["api"] == "ConsumerGroupHeartbeat" and json.loads(first["body"])["member_epoch"] == 0


@pytest.fixture(scope="module")
def faulty_frames() -> TraceFrames:
    """A run with an error response and a dropped message."""
    lab = Lab(seed=3)
    lab.create_topic("foo", 2)
    lab.add_consumer("A", subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    lab.send_request("X", "ConsumerGroupHeartbeat", group_id="g", member_id="ghost", member_epoch=7)
    lab.drop_messages("A", 1)
    lab.run(until=lab.now + 12_000)
    return trace_frames(lab)


def test_error_responses_and_dropped_messages(faulty_frames):
    messages = faulty_frames.messages
    errors = messages[messages["is_error"]]
    assert list(errors["error"]) == ["UNKNOWN_MEMBER_ID"]
    assert list(errors["to"]) == ["X"]
    dropped = messages[messages["status"] == "dropped"]
    assert len(dropped) == 1 and dropped["from"].iloc[0] == "A"
    assert dropped["drop_reason"].iloc[0] == "dropped by fault"
    assert dropped["delivered_ms"].isna().all()
    assert "drop_messages A" in set(faulty_frames.markers["label"])


# ---------------------------------------------------------------------------- chart specs
def _data(spec: dict, layer: dict) -> list[dict]:
    data = layer.get("data", spec.get("data"))
    values = spec["datasets"][data["name"]] if "name" in data else data["values"]
    return json.loads(values) if isinstance(values, str) else values


def _layers(spec: dict) -> list[dict]:
    return spec["layer"]


def _mark(layer: dict) -> str:
    mark = layer["mark"]
    return mark if isinstance(mark, str) else mark["type"]


def _find(spec: dict, mark: str, **fields: str) -> list[dict]:
    found = []
    for layer in _layers(spec):
        if _mark(layer) != mark:
            continue
        enc = layer.get("encoding", {})
        if all(enc.get(ch, {}).get("field") == f for ch, f in fields.items()):
            found.append(layer)
    return found


def test_ownership_swimlanes_spec(frames):
    spec = ownership_swimlanes(frames, cursor_ms=20_000).to_dict()
    (bars,) = _find(spec, "bar", x="start_ms", x2="end_ms", y="partition", yOffset="member", color="member")
    enc = bars["encoding"]
    assert enc["opacity"]["field"] == "status"
    assert enc["opacity"]["scale"]["domain"] == ["assigned", "revoking", "pending"]
    assert enc["y"]["sort"] == PARTITIONS
    assert {"member", "status", "member_epoch", "start_ms", "end_ms"} <= {t["field"] for t in enc["tooltip"]}
    assert len(_data(spec, bars)) == len(frames.ownership)
    (gaps,) = _find(spec, "rect", x="start_ms", x2="end_ms", y="partition")
    assert len(_data(spec, gaps)) == len(frames.gaps)
    (cursor,) = _find(spec, "rule", x="cursor_ms")
    assert _data(spec, cursor) == [{"cursor_ms": 20_000}]
    (markers,) = _find(spec, "rule", x="time_ms")
    assert {r["label"] for r in _data(spec, markers)} == {"crash A", "session g A"}
    assert {r["kind"] for r in _data(spec, markers)} == {"fault", "timer"}
    assert not _find(ownership_swimlanes(frames).to_dict(), "rule", x="cursor_ms")


def test_ownership_swimlanes_coordinator_view_and_zoom(frames):
    spec = ownership_swimlanes(frames, cursor_ms=100_000, view="coordinator", time_range=(0, 10)).to_dict()
    (bars,) = _find(spec, "bar", x="start_ms")
    assert len(_data(spec, bars)) == len(frames.ownership_coordinator)
    assert bars["encoding"]["x"]["scale"]["domain"] == [0, 10]
    assert not _find(spec, "rule", x="cursor_ms")  # outside the range: not drawn
    assert not _find(spec, "rule", x="time_ms")  # the crash and the timer are later
    with pytest.raises(ValueError):
        ownership_swimlanes(frames, view="broker")


def test_epoch_chart_spec(frames):
    spec = epoch_chart(frames, cursor_ms=1234).to_dict()
    (line,) = _find(spec, "line", x="time_ms", y="epoch", color="series")  # the members' epochs
    assert line["mark"]["interpolate"] == "step-after"
    assert line["encoding"]["detail"]["field"] == "segment"
    assert line["mark"]["strokeDash"] == [2, 2]
    assert line["encoding"]["y"]["axis"] == {"format": "d", "tickMinStep": 1}, "epochs are whole numbers"
    rows = _data(spec, line)
    series = {r["series"] for r in rows}
    assert series == {"group epoch", "assignment epoch", "A", "B", "C"}
    group_lines = [layer for layer in _find(spec, "line", x="time_ms", y="epoch") if "color" not in layer["encoding"]]
    assert sorted(layer["mark"]["color"] for layer in group_lines) == ["#000000", "#757575"]
    labels = _find(spec, "text", x="time_ms", y="epoch", text="series")
    assert sorted(r["series"] for layer in labels for r in _data(spec, layer)) == ["assignment epoch", "group epoch"]
    # running series are carried to the end of the run; A's stops at its crash
    last = {s: max(r["time_ms"] for r in rows if r["series"] == s) for s in series}
    assert last["B"] == last["group epoch"] == frames.end_ms
    assert last["A"] == _crash_ms(frames)
    (cursor,) = _find(spec, "rule", x="cursor_ms")
    assert _data(spec, cursor) == [{"cursor_ms": 1234}]
    assert _find(spec, "rule", x="time_ms")


def test_message_sequence_spec(frames):
    spec = message_sequence(frames, cursor_ms=5006).to_dict()
    (arrows,) = _find(spec, "rule", x="from_x", x2="end_x", y="y0", y2="y1", color="category")
    enc = arrows["encoding"]
    assert enc["y"]["scale"]["reverse"] is True  # time runs down the page
    assert enc["strokeDash"]["field"] == "direction"
    assert "body_short" in {t["field"] for t in enc["tooltip"]}
    rows = _data(spec, arrows)
    assert len(rows) == len(frames.messages)
    lanes = json.loads(enc["x"]["axis"]["labelExpr"].split("[datum.value]")[0])
    assert lanes == ["A", "B", "C", "broker-0"]
    heartbeat = rows[0]
    assert (heartbeat["from_x"], heartbeat["end_x"]) == (0, 3) and heartbeat["y0"] == 0 and heartbeat["y1"] == 1
    (heads,) = _find(spec, "point", x="end_x", y="y1", shape="head")
    assert heads["encoding"]["color"]["field"] == "category"
    (lifelines,) = _find(spec, "rule", x="lane", y="y0", y2="y1")
    assert [r["actor"] for r in _data(spec, lifelines)] == lanes
    # the cursor is a horizontal rule: a y position and no x
    cursors = [layer for layer in _find(spec, "rule", y="y") if "cursor_ms" in _data(spec, layer)[0]]
    assert len(cursors) == 1
    assert "x" not in cursors[0]["encoding"]
    assert _data(spec, cursors[0]) == [{"cursor_ms": 5006, "y": 5006}]
    markers = [layer for layer in _find(spec, "rule", y="y") if "label" in _data(spec, layer)[0]]
    assert {r["label"] for r in _data(spec, markers[0])} == {"crash A", "session g A"}


def test_message_sequence_highlights_errors_in_red(faulty_frames):
    spec = message_sequence(faulty_frames).to_dict()
    (arrows,) = _find(spec, "rule", x="from_x", color="category")
    scale = arrows["encoding"]["color"]["scale"]
    assert dict(zip(scale["domain"], scale["range"], strict=True))["error"] == ERROR_COLOR
    rows = _data(spec, arrows)
    assert [r["error"] for r in rows if r["category"] == "error"] == ["UNKNOWN_MEMBER_ID"]
    dropped = [r for r in rows if r["category"] == "dropped"]
    assert len(dropped) == 1 and dropped[0]["head"] == "cross"
    lanes = json.loads(arrows["encoding"]["x"]["axis"]["labelExpr"].split("[datum.value]")[0])
    assert lanes == ["A", "X", "broker-0"]
    a, broker = lanes.index("A"), lanes.index("broker-0")
    assert dropped[0]["end_x"] == pytest.approx(a + DROP_REACH * (broker - a))  # stops part-way
    assert dropped[0]["end_x"] not in range(len(lanes))  # and not on another actor's lane


def test_message_sequence_by_step_and_filtered(frames, crash_lab):
    spec = message_sequence(frames, cursor_ms=5006, y_axis="step", apis=["OffsetFetch"]).to_dict()
    (arrows,) = _find(spec, "rule", x="from_x")
    rows = _data(spec, arrows)
    assert rows and {r["api"] for r in rows} == {"OffsetFetch"}
    fetch = frames.messages[frames.messages["api"] == "OffsetFetch"]
    assert [r["y0"] for r in rows] == list(fetch["sent_step"])
    cursor = next(layer for layer in _find(spec, "rule", y="y") if "cursor_ms" in _data(spec, layer)[0])
    last_step_at_5006 = max(e.step for e in crash_lab.trace if e.time_ms <= 5006)
    assert _data(spec, cursor)[0]["y"] == last_step_at_5006 + 0.5  # after everything at that instant
    with pytest.raises(ValueError):
        message_sequence(frames, y_axis="wall clock")


def test_builders_accept_a_lab_or_a_trace(crash_lab, frames):
    assert to_json(ownership_swimlanes(crash_lab)) == to_json(ownership_swimlanes(frames))
    assert to_json(epoch_chart(crash_lab.trace)) == to_json(epoch_chart(frames))


# ---------------------------------------------------------------------------- export
def test_exports_render_offline(frames):
    chart = ownership_swimlanes(frames, cursor_ms=5006)
    svg = to_svg(chart)
    assert svg.lstrip().startswith("<svg") and "partition ownership" in svg
    assert to_png(message_sequence(frames, time_range=(0, 10))).startswith(b"\x89PNG")
    spec = json.loads(to_json(epoch_chart(frames)))
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    assert to_json(epoch_chart(frames)) == to_json(epoch_chart(frames))


def test_exports_refuse_the_network():
    remote = alt.Chart("https://example.com/data.json").mark_point().encode(x="a:Q")
    with pytest.raises(ValueError, match="not allowed"):
        to_svg(remote)


# ---------------------------------------------------------------------------- long runs
@pytest.mark.slow
def test_a_ten_thousand_event_trace_builds_charts_without_max_rows_error():
    lab = Lab(seed=7)
    lab.create_topic("foo", 12)
    for m in range(8):
        lab.add_consumer(f"c{m}", subscribed_topic_names=["foo"], auto_commit_interval_ms=1000)
    assert lab.run_until_stable()
    lab.crash("c0")
    lab.run(until=300_000)
    assert len(lab.trace) >= 10_000
    frames = trace_frames(lab)
    assert len(frames.messages) > 5_000  # above Altair's default limit
    with pytest.raises(alt.MaxRowsError):  # the guard our builders must not trip
        alt.Chart(frames.messages).mark_point().encode(x="sent_ms:Q").to_dict()
    before = (alt.data_transformers.active, dict(alt.data_transformers.options))
    for chart in (
        ownership_swimlanes(frames, cursor_ms=100_000),
        epoch_chart(frames, cursor_ms=100_000),
        message_sequence(frames, cursor_ms=100_000),
        message_sequence(frames, y_axis="step"),
    ):
        spec = chart.to_dict()
        assert json.loads(to_json(chart))["layer"]
        assert spec["layer"]
    spec = message_sequence(frames).to_dict()
    (arrows,) = _find(spec, "rule", x="from_x")
    assert len(_data(spec, arrows)) == len(frames.messages)
    assert (alt.data_transformers.active, dict(alt.data_transformers.options)) == before


# ---------------------------------------------------------------------------- other lives
def _lab_abc(seed: int = 2) -> Lab:
    lab = Lab(seed=seed)
    lab.create_topic("foo", 6)
    for name in "ABC":
        lab.add_consumer(name, subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    return lab


def test_a_restart_ends_the_old_life_and_starts_a_new_one():
    lab = _lab_abc()
    held = set(_rows(trace_frames(lab).ownership, member="B", status="assigned")["partition"])
    assert held
    lab.restart("B")
    restart_ms = lab.now
    lab.run(until=restart_ms + 60_000)
    frames = trace_frames(lab)
    b = _rows(frames.ownership, member="B")
    old = b[b["start_ms"] < restart_ms]
    assert set(old["partition"]) >= held and old["end_ms"].max() == restart_ms
    assert set(b[b["start_ms"] >= restart_ms]["member_id"]) == {"B#2"}  # the new incarnation
    epochs = frames.epochs[frames.epochs["series"] == "B"]
    first_life, second_life = epochs[epochs["segment"] == 0], epochs[epochs["segment"] == 1]
    assert first_life["source"].iloc[-1] == "end" and first_life["time_ms"].iloc[-1] == restart_ms
    assert second_life["epoch"].iloc[0] == 0 and second_life["time_ms"].iloc[0] == restart_ms
    assert second_life["epoch"].is_monotonic_increasing and second_life["epoch"].iloc[-1] > 0


def test_a_cut_off_member_is_a_zombie_in_the_client_view_only():
    lab = _lab_abc()
    lab.partition_link("B", 60_000)  # longer than the session timeout
    lab.run(until=lab.now + 120_000)
    frames = trace_frames(lab)

    def overlaps(view):
        found = []
        for _partition, rows in _rows(view, status="assigned").groupby("partition"):
            spans = sorted(zip(rows["start_ms"], rows["end_ms"], rows["member"], strict=True))
            found += [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
        return found

    zombie = overlaps(frames.ownership)
    assert zombie and {a[2] for a, _ in zombie} == {"B"}  # B still believes it owns them
    assert overlaps(frames.ownership_coordinator) == []
    states = frames.member_states[frames.member_states["member"] == "B"]
    fenced = states[states["state"] == "FENCED"]
    assert len(fenced) == 1  # kept even though B passes through it within one millisecond
    zombie_until = max(b_span[1] for b_span, _ in zombie)
    assert fenced["start_ms"].iloc[0] == zombie_until  # B stops believing when it learns it was fenced


# ---------------------------------------------------------------------------- legends and labels
def _layers(spec: dict) -> list[dict]:
    found = []
    for key in ("layer", "vconcat", "hconcat"):
        for part in spec.get(key, []):
            found += _layers(part) if any(k in part for k in ("layer", "vconcat", "hconcat")) else [part]
    return found


def test_every_mark_of_the_swimlanes_has_a_legend_that_says_one_thing() -> None:
    """Status symbols are grey (in Vega's default black they explained nothing, in a member's colour
    they read as that member); ownership over epochs shows one member legend and one status legend."""
    lab = Lab(seed=0)
    lab.create_topic("foo", 3)
    for name in "AB":
        lab.add_consumer(name, subscribed_topic_names=["foo"])
    lab.run_until_stable(timeout_ms=60_000)
    spec = ownership_swimlanes(trace_frames(lab.trace)).to_dict()
    encodings = [layer.get("encoding", {}) for layer in _layers(spec)]
    status = [e[c]["legend"] for e in encodings for c in ("opacity", "strokeDash") if c in e]
    assert status and all(legend.get("symbolFillColor") not in (None, "black", "#000000") for legend in status)
    gap = [e["fill"] for e in encodings if "fill" in e]
    assert gap and gap[0]["scale"]["range"] == ["#d62728"] and gap[0]["scale"]["domain"] == ["nobody holds it"]
    frames = trace_frames(lab.trace)
    both = (ownership_swimlanes(frames) & epoch_chart(frames)).to_dict()
    legends = {}
    for encoding in (layer.get("encoding", {}) for layer in _layers(both)):
        for channel, definition in encoding.items():
            if isinstance(definition, dict) and definition.get("legend") is not None and "field" in definition:
                legends.setdefault(channel, []).append((definition["field"], definition["legend"].get("title")))
    assert set(legends) == {"color", "opacity", "strokeDash", "fill"}
    assert set(legends["color"]) == {("member", "member"), ("series", "member")}, "one member legend"
    assert set(legends["opacity"]) == set(legends["strokeDash"]) == {("status", "status")}, "one status legend"


def test_marker_labels_never_overlap() -> None:
    """Faults close together in time get their labels on separate rows (a 9 px font, about 5.5 px a character)."""
    from kip_lab.viz.charts import MARKER_CHAR_PX, _label_rows

    times = [0, 100, 200, 5_000, 5_050]
    labels = ["close A", "restart A", "close B", "fail over coordinator", "crash C"]
    ms_per_px = 10_000 / 600
    rows = _label_rows(times, labels, ms_per_px)
    spans = [
        (t, t + (len(text) * MARKER_CHAR_PX + 6) * ms_per_px, r) for t, text, r in zip(times, labels, rows, strict=True)
    ]
    for (a0, a1, ra), (b0, b1, rb) in itertools.combinations(spans, 2):
        assert ra != rb or a1 <= b0 or b1 <= a0, (labels, rows)
    assert rows[0] == 0 and max(rows) < len(times)
