"""The new consumer's member state machine (consumer refactor design, Kafka's ``MemberState``).

Declared once as a table; the client refuses any transition not listed, and the diagrams
are drawn from the same rows. The edges are Kafka's valid transitions
(``MemberState.previousValidStates``) with the trigger that takes each one.
"""

from __future__ import annotations

from enum import StrEnum

from kip_lab.machines import StateMachine


class MemberState(StrEnum):
    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    PREPARE_LEAVING = "PREPARE_LEAVING"
    LEAVING = "LEAVING"
    STALE = "STALE"
    FATAL = "FATAL"


CONSUMER_MEMBER_MACHINE = StateMachine.from_table(
    "new consumer member state",
    [s.value for s in MemberState],
    MemberState.UNSUBSCRIBED.value,
    [
        ("UNSUBSCRIBED", "subscribe", "JOINING"),
        ("JOINING", "joined, nothing to reconcile", "STABLE"),
        ("JOINING", "joined with an assignment", "RECONCILING"),
        ("STABLE", "new assignment", "RECONCILING"),
        ("RECONCILING", "newer assignment", "RECONCILING"),
        ("RECONCILING", "reconciled", "ACKNOWLEDGING"),
        ("RECONCILING", "nothing left to change", "STABLE"),
        ("ACKNOWLEDGING", "new assignment", "RECONCILING"),
        ("ACKNOWLEDGING", "acknowledgement sent", "STABLE"),
        ("JOINING", "fenced", "FENCED"),
        ("STABLE", "fenced", "FENCED"),
        ("RECONCILING", "fenced", "FENCED"),
        ("ACKNOWLEDGING", "fenced", "FENCED"),
        ("PREPARE_LEAVING", "fenced", "FENCED"),
        ("LEAVING", "fenced", "FENCED"),
        ("FENCED", "partitions lost, rejoin", "JOINING"),
        ("FENCED", "unsubscribed while fenced", "UNSUBSCRIBED"),
        ("PREPARE_LEAVING", "fenced while leaving", "LEAVING"),
        ("LEAVING", "fenced while leaving", "UNSUBSCRIBED"),
        ("JOINING", "unsubscribe or close", "PREPARE_LEAVING"),
        ("STABLE", "unsubscribe or close", "PREPARE_LEAVING"),
        ("RECONCILING", "unsubscribe or close", "PREPARE_LEAVING"),
        ("ACKNOWLEDGING", "unsubscribe or close", "PREPARE_LEAVING"),
        ("UNSUBSCRIBED", "unsubscribe or close", "PREPARE_LEAVING"),
        ("JOINING", "poll timer expired", "PREPARE_LEAVING"),
        ("STABLE", "poll timer expired", "PREPARE_LEAVING"),
        ("RECONCILING", "poll timer expired", "PREPARE_LEAVING"),
        ("ACKNOWLEDGING", "poll timer expired", "PREPARE_LEAVING"),
        ("PREPARE_LEAVING", "partitions released", "LEAVING"),
        ("PREPARE_LEAVING", "left without a heartbeat", "UNSUBSCRIBED"),
        ("LEAVING", "leave heartbeat sent", "UNSUBSCRIBED"),
        ("LEAVING", "leave heartbeat sent after poll timeout", "STALE"),
        ("STALE", "poll", "JOINING"),
        ("JOINING", "fatal error", "FATAL"),
        ("STABLE", "fatal error", "FATAL"),
        ("RECONCILING", "fatal error", "FATAL"),
        ("ACKNOWLEDGING", "fatal error", "FATAL"),
        ("PREPARE_LEAVING", "fatal error", "FATAL"),
        ("LEAVING", "fatal error", "FATAL"),
        ("UNSUBSCRIBED", "fatal error", "FATAL"),
    ],
    description="Kafka's MemberState for group.protocol=consumer: joining, reconciling, acknowledging, "
    "leaving, fencing and the poll-timeout (STALE) path.",
)
