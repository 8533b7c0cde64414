"""The classic consumer's member state machine (Kafka's ``AbstractCoordinator.MemberState``).

Kafka's four states — UNJOINED, PREPARING_REBALANCE (JoinGroup in flight), COMPLETING_REBALANCE
(SyncGroup in flight), STABLE — plus the two the Lab needs to tell a consumer that is out of
the group for good: UNSUBSCRIBED (not started, or closed) and FATAL (an error no retry fixes,
such as INCONSISTENT_GROUP_PROTOCOL). Declared once as a table; the client refuses any
transition not listed, and the diagrams are drawn from the same rows.
"""

from __future__ import annotations

from enum import StrEnum

from kip_lab.machines import StateMachine


class ClassicMemberState(StrEnum):
    UNSUBSCRIBED = "UNSUBSCRIBED"
    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"
    FATAL = "FATAL"


CLASSIC_MEMBER_MACHINE = StateMachine.from_table(
    "classic consumer member state",
    [s.value for s in ClassicMemberState],
    ClassicMemberState.UNSUBSCRIBED.value,
    [
        ("UNSUBSCRIBED", "subscribe", "UNJOINED"),
        ("UNJOINED", "JoinGroup sent", "PREPARING_REBALANCE"),
        ("STABLE", "JoinGroup sent", "PREPARING_REBALANCE"),
        ("PREPARING_REBALANCE", "MEMBER_ID_REQUIRED, JoinGroup again", "PREPARING_REBALANCE"),
        ("PREPARING_REBALANCE", "JoinGroup retried", "PREPARING_REBALANCE"),
        ("PREPARING_REBALANCE", "joined, SyncGroup sent", "COMPLETING_REBALANCE"),
        ("COMPLETING_REBALANCE", "SyncGroup answered", "STABLE"),
        ("COMPLETING_REBALANCE", "REBALANCE_IN_PROGRESS, JoinGroup sent", "PREPARING_REBALANCE"),
        ("PREPARING_REBALANCE", "fell out of the group", "UNJOINED"),
        ("COMPLETING_REBALANCE", "fell out of the group", "UNJOINED"),
        ("STABLE", "fell out of the group", "UNJOINED"),
        ("STABLE", "poll timer expired, left the group", "UNJOINED"),
        ("PREPARING_REBALANCE", "poll timer expired, left the group", "UNJOINED"),
        ("COMPLETING_REBALANCE", "poll timer expired, left the group", "UNJOINED"),
        ("UNJOINED", "close", "UNSUBSCRIBED"),
        ("PREPARING_REBALANCE", "close", "UNSUBSCRIBED"),
        ("COMPLETING_REBALANCE", "close", "UNSUBSCRIBED"),
        ("STABLE", "close", "UNSUBSCRIBED"),
        ("PREPARING_REBALANCE", "fatal error", "FATAL"),
        ("COMPLETING_REBALANCE", "fatal error", "FATAL"),
        ("STABLE", "fatal error", "FATAL"),
    ],
    description="Kafka's AbstractCoordinator MemberState for group.protocol=classic: join (JoinGroup), "
    "sync (SyncGroup), stable; out of the group on fencing or a poll timeout; closed or fatal.",
)
