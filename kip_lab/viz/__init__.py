"""Presentation builders: state machines and group state to graphviz DOT, traces to Altair charts.

Everything here is a pure function from data to a description of a picture (DOT text, a
pandas frame, an Altair chart spec); rendering (``render``, ``to_svg``, ``to_png``, and
``picture`` for a notebook: PNG and SVG together, shown even in an untrusted notebook) is a
separate step at the edge. The core never imports this package, and this package imports
its heavy dependencies lazily: ``kip_lab.viz.dot`` needs only the standard library until
``render`` is called, ``frames`` needs pandas, ``charts`` needs Altair (the ``viz`` extra).

    from kip_lab.viz import machine_dot, group_dot, render, trace_frames, ownership_swimlanes
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "machine_dot": "kip_lab.viz.dot",
    "group_dot": "kip_lab.viz.dot",
    "render": "kip_lab.viz.dot",
    "DOT_MISSING_MESSAGE": "kip_lab.viz.dot",
    "Picture": "kip_lab.viz.pictures",
    "picture": "kip_lab.viz.pictures",
    "notebook_charts": "kip_lab.viz.pictures",
    "TraceFrames": "kip_lab.viz.frames",
    "trace_frames": "kip_lab.viz.frames",
    "ownership_frame": "kip_lab.viz.frames",
    "epoch_frame": "kip_lab.viz.frames",
    "message_frame": "kip_lab.viz.frames",
    "marker_frame": "kip_lab.viz.frames",
    "gap_frame": "kip_lab.viz.frames",
    "member_state_frame": "kip_lab.viz.frames",
    "share_frames": "kip_lab.viz.frames",
    "ledger_frame": "kip_lab.viz.frames",
    "lag_frame": "kip_lab.viz.frames",
    "reprocessed_frame": "kip_lab.viz.frames",
    "lag_chart": "kip_lab.viz.charts",
    "reprocessing_swimlanes": "kip_lab.viz.charts",
    "record_state_strip": "kip_lab.viz.charts",
    "placeholder_chart": "kip_lab.viz.charts",
    "ownership_swimlanes": "kip_lab.viz.charts",
    "epoch_chart": "kip_lab.viz.charts",
    "message_sequence": "kip_lab.viz.charts",
    "to_svg": "kip_lab.viz.charts",
    "to_png": "kip_lab.viz.charts",
    "to_json": "kip_lab.viz.charts",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kip_lab.viz' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
