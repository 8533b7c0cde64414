"""A review as one self-contained HTML page: what was compared, the table, the charts, a step player per variant.

The page needs nothing but itself: the charts are Vega-Lite specs drawn by Vega, whose JavaScript
(with Vega-Lite and vega-embed) is inlined from the vl-convert package installed here, and the
player is plain JavaScript over frames computed now. No request leaves the page, so it opens from
disk, as a design doc's attachment or published as a page.

The player shows one run per variant (``Review.representative``): the partition-ownership
swimlanes of the whole run with a cursor, and per frame the step, the time, what the clients did
(``client_story``'s lines) and how many members are in each state. Step / Back / Play, the slider
and the arrow keys move it. A frame is a step with something to tell; a run with more than
``MAX_FRAMES`` of them shows consecutive ones merged, so the page stays small.
"""

from __future__ import annotations

import functools
import html
import json
import math
from collections import Counter
from collections.abc import Iterable
from importlib import resources
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any

import altair as alt

from kip_lab.events import PositionSet, StateTransition
from kip_lab.files import write_atomically
from kip_lab.lab.story import client_story
from kip_lab.lab.trace import TraceEvent

if TYPE_CHECKING:
    from kip_lab.review.compare import Outcome, Review

MAX_FRAMES = 400
MAX_LINES = 12  # story lines shown in one frame
KAFKA_PROFILES = {
    "kafka": "Apache Kafka's behaviour (fidelity profile kafka): the group coordinator and clients as Kafka's "
    "code does it — Kafka's trunk at commit 1eb7644349cb (late October 2024, about Kafka 4.0), with assignment "
    "batching (group.consumer.assignment.interval.ms) as Kafka 4.3 adds it (KIP-1263)",
    "kip": "the KIP text's reading (fidelity profile kip) where Kafka's code departs from it (the kip rows of "
    "docs/decisions.md), Apache Kafka's behaviour elsewhere",
}
CHART_WIDTH = 1040


# ---------------------------------------------------------------------------- player frames
def player_frames(trace: Iterable[TraceEvent], max_frames: int = MAX_FRAMES) -> list[dict[str, Any]]:
    """The player's frames: each step with a story line, its time, the lines, and the members' states.

    The lines are ``client_story``'s, with its re-read lines (a member starting a partition below
    what its group had processed): the whole story is told once and dealt out to the steps.
    """
    events = list(trace)
    lines_of = _story_by_event(events)
    states: dict[str, str] = {}
    frames = []
    for step, in_step in groupby(range(len(events)), key=lambda i: events[i].step):
        lines, time_ms = [], 0
        for i in in_step:
            time_ms = events[i].time_ms
            if isinstance(events[i].body, StateTransition):
                states[events[i].actor] = events[i].body.to_state
            lines += lines_of.get(i, [])
        if lines:
            frames.append({"step": step, "time_ms": time_ms, "lines": lines, "states": _state_counts(states)})
    if len(frames) <= max_frames:
        return frames
    size = math.ceil(len(frames) / max_frames)
    return [_merged(frames[i : i + size]) for i in range(0, len(frames), size)]


def _story_by_event(events: list[TraceEvent]) -> dict[int, list[str]]:
    """Event index -> its line of ``client_story(events, rereads=True)``: an event's own line is
    ``client_story`` of it alone; a re-read line (told at a ``PositionSet``, which has no line of
    its own) is the told line found where that event stands, before the next event's own line."""
    own = [client_story([event]).strip() for event in events]
    told = [line.strip() for line in client_story(events, rereads=True).splitlines()]
    following = [""] * (len(events) + 1)  # the first own line after each event
    for i in range(len(events) - 1, -1, -1):
        following[i] = own[i + 1] if i + 1 < len(events) and own[i + 1] else following[i + 1]
    by_event: dict[int, list[str]] = {}
    k = 0
    for i, event in enumerate(events):
        if own[i]:
            by_event[i] = [own[i]]
            k += 1
        elif isinstance(event.body, PositionSet) and k < len(told) and told[k] != following[i]:
            by_event[i] = [told[k]]
            k += 1
    return by_event


def _state_counts(states: dict[str, str]) -> str:
    counts = Counter(states.values())
    return " · ".join(f"{state} {count}" for state, count in sorted(counts.items()))


def _merged(frames: list[dict[str, Any]]) -> dict[str, Any]:
    lines = [line for frame in frames for line in frame["lines"]]
    if len(lines) > MAX_LINES:
        lines = [*lines[:MAX_LINES], f"... and {len(lines) - MAX_LINES} more lines"]
    last = frames[-1]
    return {"step": last["step"], "time_ms": last["time_ms"], "lines": lines, "states": last["states"]}


# ---------------------------------------------------------------------------- charts
def swimlane_spec(trace: Any) -> dict[str, Any]:
    """The ownership swimlanes of a run, with a cursor rule at the ``cursor_ms`` parameter the player sets."""
    from kip_lab.viz import ownership_swimlanes, trace_frames

    frames = trace_frames(trace)
    lanes = len(frames.partitions or set(frames.ownership["partition"]))
    chart = ownership_swimlanes(frames, width=CHART_WIDTH - 160, height=max(160, min(14 * lanes, 640)))
    cursor = alt.param(name="cursor_ms", value=0)
    rule = (
        alt.Chart(alt.InlineData(values=[{}]))
        .transform_calculate(cursor="cursor_ms")
        .mark_rule(color="black", strokeWidth=2)
        .encode(x=alt.X("cursor:Q"))
        .add_params(cursor)
        .properties(name="cursor")  # its SVG group's class: where a test finds it
    )
    return (chart + rule).to_dict(validate=False)  # built from checked parts; validating costs seconds


def outcome_chart(review: Review, outcomes: list[str] | None = None) -> alt.FacetChart:
    """Per outcome (``outcomes``: these keys only), each variant's runs as dots (one per seed), its median a bar."""
    shown = [o for o in review.outcomes if outcomes is None or o.key in outcomes]
    rows = []
    for outcome in shown:
        for variant in review.variants:
            cell = review.cells()[outcome.key][variant.index]
            for seed, value in zip(review.seeds, cell.values, strict=True):
                if value is not None:
                    rows.append({"outcome": _titled(outcome), "variant": variant.label, "seed": seed, "value": value})
            if cell.median is not None:
                rows.append({"outcome": _titled(outcome), "variant": variant.label, "median": cell.median})
    labels = [v.label for v in review.variants]
    y = alt.Y("variant:N", sort=labels, title=None, axis=alt.Axis(labelLimit=420))
    color = alt.Color("variant:N", sort=labels, legend=None, scale=alt.Scale(scheme="tableau10"))
    base = alt.Chart().encode(y=y, color=color)
    medians = (
        base.transform_filter("isValid(datum.median)")
        .mark_bar(opacity=0.35, height=14)
        .encode(x=alt.X("median:Q", title=None), tooltip=["variant:N", alt.Tooltip("median:Q", title="median")])
    )
    dots = (
        base.transform_filter("isValid(datum.value)")
        .mark_circle(size=46, opacity=0.9)
        .encode(x=alt.X("value:Q", title=None), tooltip=["variant:N", "seed:Q", "value:Q"])
    )
    return (
        alt.layer(medians, dots, data=alt.InlineData(values=rows))
        .properties(width=250, height=max(40, 22 * len(labels)))
        .facet(facet=alt.Facet("outcome:N", sort=[_titled(o) for o in shown], title=None), columns=3)
        .resolve_scale(x="independent")
    )


def vega_spec(vega_lite: dict[str, Any]) -> dict[str, Any]:
    """A Vega-Lite spec compiled to Vega here (vl-convert), so the page only runs Vega; without its
    ``$schema``, which names Vega 5 while the bundled Vega is newer and draws it the same."""
    import vl_convert as vlc

    from kip_lab.viz.charts import _vl_version

    spec = vlc.vegalite_to_vega(vega_lite, vl_version=_vl_version())
    spec.pop("$schema", None)
    return spec


def _titled(outcome: Outcome) -> str:
    return f"{outcome.label} ({outcome.unit})" if outcome.unit else outcome.label


@functools.lru_cache(maxsize=1)
def vega_javascript() -> str:
    """Vega, Vega-Lite and vega-embed as one script, from the vl-convert package (no network)."""
    import vl_convert as vlc

    from kip_lab.viz.charts import _vl_version

    return vlc.javascript_bundle(vl_version=_vl_version())  # type: ignore[call-arg]  # the stub wrongly requires snippet


# ---------------------------------------------------------------------------- the page
def write_report(review: Review, out: Path) -> Path:
    """Write ``out/report.html`` and return its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.html"
    write_atomically(path, report_html(review))
    return path


def report_html(review: Review) -> str:
    specs = {"outcomes-chart": outcome_chart(review).to_dict()}
    players = []
    for variant in review.variants:
        trace = review.traces[variant.index]
        specs[f"swimlanes-{variant.index}"] = swimlane_spec(trace)
        players.append(
            {"variant": variant.index, "chart": f"swimlanes-{variant.index}", "frames": player_frames(trace)}
        )
    charts = [{"id": chart_id, "spec": vega_spec(spec)} for chart_id, spec in specs.items()]
    data = {"charts": charts, "players": players}
    return _asset("report.html").format(
        title=_e(f"Design review: {review.scenario}"),
        style=_asset("report.css"),
        compared=_compared(review),
        verdicts="".join(f"<li>{_e(sentence)}</li>" for sentence in review.verdicts),
        table=_table(review),
        runs=_runs_table(review),
        players="".join(_player(review, p) for p in players),
        data=json.dumps(data, separators=(",", ":")).replace("</", "<\\/"),
        vega=vega_javascript().replace("</script", "<\\/script"),
        script=_asset("report.js"),
    )


def _asset(name: str) -> str:
    """The page's template, style and script, kept beside this module (``report.html``, ``.css``, ``.js``)."""
    return (resources.files("kip_lab.review") / name).read_text(encoding="utf-8")


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _compared(review: Review) -> str:
    from kip_lab.review.compare import _text

    options = " × ".join(
        f"<code>{_e(key)}</code> ∈ {{{', '.join(_e(_text(v)) for v in values)}}}"
        for key, values in review.varied.items()
    )
    seeds = review.seeds
    seed_words = f"seeds {seeds[0]}–{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else f"seeds {seeds}"
    where = "in one process" if review.executor == "local" else "on Spark"
    scenario = review.variants[0].scenario
    first = scenario.first_event_ms
    since = [o.label for o in review.outcomes if o.key in (review.runs[0].metrics.get("totals_before") or {})]
    counted = (
        f"Counted from the first change, at {first:,} ms, leaving the group's own start out: {', '.join(since)}; "
        "the other outcomes cover the whole run."
        if first is not None and since
        else "Every outcome covers the whole run."
    )
    profiles = sorted({v.scenario.lab.coordinator.fidelity for v in review.variants})
    profile_text = " / ".join(KAFKA_PROFILES[p] for p in profiles)
    return (
        f"<p><b>{_e(review.scenario)}</b>: {_e(review.description) or '(no description)'}</p>"
        f"<p>Compared: {options} — {len(review.variants)} variants, each run with {len(seeds)} "
        f"{'seed' if len(seeds) == 1 else 'seeds'} ({_e(seed_words)}): {len(review.runs)} runs {where}, "
        f"in {review.seconds:.1f} s. {_e(counted)}</p>"
        f"<p>Kafka behaviour: {_e(profile_text)}.</p>"
    )


def _table(review: Review) -> str:
    from kip_lab.review.compare import format_value

    head = "".join(f'<th scope="col" data-variant="{v.index}">{_e(v.label)}</th>' for v in review.variants)
    body = []
    cells = review.cells()
    for outcome in review.outcomes:
        tds = []
        for cell, variant in zip(cells[outcome.key], review.variants, strict=True):
            spread = (
                ""
                if cell.low is None or cell.low == cell.high
                else f"<small>{_e(format_value(cell.low, ''))}–{_e(format_value(cell.high, ''))}</small>"
            )
            mark = '<span class="star" title="best median of the row">★</span> ' if cell.best else ""
            median = "" if cell.median is None else repr(cell.median)
            tds.append(
                f'<td data-variant="{variant.index}" data-median="{median}" data-min="{_nz(cell.low)}" '
                f'data-max="{_nz(cell.high)}" class="{"best" if cell.best else ""}">'
                f'{mark}<span class="median">{_e(format_value(cell.median, outcome.unit))}</span>{spread}</td>'
            )
        body.append(
            f'<tr data-outcome="{_e(outcome.key)}"><th scope="row">{_e(outcome.label)}'
            f"<small>{_e(outcome.key)}</small></th>{''.join(tds)}</tr>"
        )
    return (
        f'<table class="outcomes"><thead><tr><th>outcome (median; min–max over seeds)</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _nz(value: float | None) -> str:
    return "" if value is None else repr(value)


def _runs_table(review: Review) -> str:
    rows = []
    for variant in review.variants:
        runs = [r for r in review.runs if r.variant == variant.index]
        stable = sum(r.stable for r in runs)
        rows.append(
            f"<tr><th>{_e(variant.label)}</th><td>{len(runs)}</td><td>{stable} of {len(runs)}</td>"
            f"<td>{review.representative[variant.index]}</td></tr>"
        )
    return (
        '<table class="runs"><thead><tr><th>variant</th><th>runs</th><th>stable at the end</th>'
        f"<th>seed shown below</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _player(review: Review, player: dict[str, Any]) -> str:
    variant = review.variants[player["variant"]]
    count = len(player["frames"])
    return f"""
<section class="player" id="player-{variant.index}" data-player="{variant.index}" tabindex="0">
  <h3>{_e(variant.label)} <small>seed {review.representative[variant.index]}, the run closest to the variant's
  medians</small></h3>
  <div class="controls">
    <button type="button" data-action="back" title="Back (left arrow)">◀ Back</button>
    <button type="button" data-action="play" title="Play / Pause">▶ Play</button>
    <button type="button" data-action="step" title="Step (right arrow)">Step ▶</button>
    <input type="range" min="0" max="{max(0, count - 1)}" value="0" aria-label="frame">
    <span class="counter"></span>
  </div>
  <div class="frame"><div class="states"></div><ol class="story"></ol></div>
  <div class="chart" id="{player["chart"]}"></div>
</section>"""
