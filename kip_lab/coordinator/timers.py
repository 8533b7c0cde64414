"""The coordinator's timers: a key names the kind of timer, its group and its member.

A key is a plain ``(kind, group id, member id)`` tuple, typed by ``TimerKey`` and built by
``timer_key`` so that the type checker knows every kind: the trace records a fired timer as
``list(key)``, and time-travel snapshots pickle the scheduler's keys, so a plain tuple of
strings keeps both exactly as they were. ``GroupCoordinator.fire_timer`` maps each kind to its
handler (``_TIMER_HANDLERS``).
"""

from __future__ import annotations

from typing import Literal

TimerKind = Literal[
    "session",  # a consumer-protocol member's session timeout
    "rebalance",  # a member revoking partitions must finish within its rebalance timeout
    "assignment",  # the member computing a client-side assignment must install it in time
    "join",  # a classic member inside a consumer group must rejoin in time
    "sync",  # ... and sync in time
    "classic session",  # a classic group member's session timeout
    "classic initial",  # a new classic group's initial rebalance delay
    "classic join",  # a classic group's join phase ends (group-wide: member id "")
    "classic sync",  # a classic group's sync phase ends (group-wide)
    "share-session",  # a share group member's session timeout
]
TimerKey = tuple[TimerKind, str, str]


def timer_key(kind: TimerKind, group_id: str, member_id: str = "") -> TimerKey:
    """The key of ``kind``'s timer for a member of ``group_id`` ("" for a group-wide timer)."""
    return (kind, group_id, member_id)
