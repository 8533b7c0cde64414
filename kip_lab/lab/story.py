"""A run told as text: what each client did and had done to it, from the trace alone."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kip_lab.events import CallbackInvoked, Event, FaultInjected, MessageDropped, Note, StateTransition


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
        line = _story_line(e.actor, e.body)
        if line is not None:
            lines.append(f"{e.time_ms:>6} {line}")
    return "\n".join(lines)


def _story_line(actor: str, event: Event) -> str | None:
    """What the story says of one event (after its time), or None for what it leaves out."""
    match event:
        case StateTransition():
            return f"{actor}: {event.from_state} -> {event.to_state}  ({event.trigger}; epoch {event.member_epoch})"
        case CallbackInvoked():
            raises = f", raises {event.error}" if event.error else ""
            return f"{actor}:   {event.callback}({', '.join(event.partitions)}) takes {event.duration_ms} ms{raises}"
        case Note() if actor != "lab":
            return f"{actor}:   {event.text}"
        case FaultInjected():
            return f"** {event.name} {event.member or ''}".rstrip()
        case MessageDropped():
            return f"network: dropped {event.api} {event.source} -> {event.destination}"
    return None
