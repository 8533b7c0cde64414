"""A run told as text: what each client did and had done to it, from the trace alone."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def client_story(
    trace: Iterable[Any], *, since_ms: int = 0, until_ms: int | None = None, members: Iterable[str] | None = None
) -> str:
    """One line per client state transition, callback, client note, fault and dropped message."""
    wanted = None if members is None else set(members)
    lines = []
    for e in trace:
        if e.time_ms < since_ms or (until_ms is not None and e.time_ms > until_ms):
            continue
        if wanted is not None and e.actor not in wanted:
            continue
        p, kind = e.payload, e.kind.value
        if kind == "state_transition":
            move = f"{p['from']} -> {p['to']}  ({p['trigger']}; epoch {p['member_epoch']})"
            lines.append(f"{e.time_ms:>6} {e.actor}: {move}")
        elif kind == "callback_invoked":
            raises = f", raises {p['error']}" if p["error"] else ""
            lines.append(
                f"{e.time_ms:>6} {e.actor}:   {p['callback']}({', '.join(p['partitions'])}) takes {p['duration_ms']} ms"
                + raises
            )
        elif kind == "note" and e.actor != "lab":
            lines.append(f"{e.time_ms:>6} {e.actor}:   {p['text']}")
        elif kind == "fault_injected":
            lines.append(f"{e.time_ms:>6} ** {p['action']} {p.get('member', '')}".rstrip())
        elif kind == "message_dropped":
            lines.append(f"{e.time_ms:>6} network: dropped {p['api']} {p['from']} -> {p['to']}")
    return "\n".join(lines)
