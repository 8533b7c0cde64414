"""A run told as text: what each client did and had done to it, from the trace alone."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kip_lab.events import (
    CallbackInvoked,
    Event,
    FaultInjected,
    MessageDropped,
    Note,
    PositionSet,
    StateTransition,
)
from kip_lab.lab.ledger import Ledger


def client_story(
    trace: Iterable[Any],
    *,
    since_ms: int = 0,
    until_ms: int | None = None,
    members: Iterable[str] | None = None,
    rereads: bool = False,
) -> str:
    """One line per client state transition, callback, client note, fault and dropped message;
    with ``rereads``, also one per partition a member starts below what its group had processed
    ("B:   re-reads foo-2 from 120 (committed) to 145 (A had processed)")."""
    wanted = None if members is None else set(members)
    lines = []
    ledger = Ledger() if rereads else None  # who had processed what, for the lines of a start
    for e in trace:
        shown = since_ms <= e.time_ms and (until_ms is None or e.time_ms <= until_ms)
        if shown and (wanted is None or e.actor in wanted):
            line = _story_line(e.actor, e.body, ledger)
            if line is not None:
                lines.append(f"{e.time_ms:>6} {line}")
        if ledger is not None:
            ledger.apply(e)
    return "\n".join(lines)


def _story_line(actor: str, event: Event, ledger: Ledger | None) -> str | None:
    """What the story says of one event (after its time, before ``ledger`` has it), or None for what it leaves out."""
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
        case PositionSet() if ledger is not None:
            return _reread_line(actor, event, ledger)
    return None


def _reread_line(actor: str, event: PositionSet, ledger: Ledger) -> str | None:
    """ "B:   re-reads foo-2 from 120 (committed) to 145 (A had processed)", or None when nothing is read again."""
    phrase = _reread(actor, event, ledger)
    return None if phrase is None else f"{actor}:   {phrase}"


def _reread(actor: str, event: PositionSet, ledger: Ledger) -> str | None:
    """ "re-reads foo-2 from 120 (committed) to 145 (A had processed)" for a start below what the
    group had processed (``ledger``: the run before the start), or None when nothing is read again."""
    previous, processed = ledger.handover(actor, event)
    if processed <= event.offset:
        return None
    name = ledger.partition_name((event.topic_id, event.partition))
    return f"re-reads {name} from {event.offset} ({event.reason}) to {processed} ({previous or actor} had processed)"


def rereads_by_step(trace: Iterable[Any]) -> dict[int, list[str]]:
    """Step -> "B re-reads foo-2 from 120 (committed) to 145 (A had processed)" for each start at
    that step below what its group had processed: what the stepper adds to a step's line."""
    ledger = Ledger()
    found: dict[int, list[str]] = {}
    for e in trace:
        if isinstance(e.body, PositionSet):
            phrase = _reread(e.actor, e.body, ledger)
            if phrase is not None:
                found.setdefault(e.step, []).append(f"{e.actor} {phrase}")
        ledger.apply(e)
    return found
