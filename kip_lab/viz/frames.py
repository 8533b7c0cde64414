"""A Lab trace as tidy pandas frames, ready for charts (one row per fact, one column per variable).

``trace_frames(trace)`` reads the trace once and returns a ``TraceFrames`` bundle:

``ownership``
    Who holds which partition when, as the *clients* experience it (one row per interval):
    ``group_id, member, member_id, topic_id, partition_index, partition, status, start_ms,
    end_ms, start_step, end_step, member_epoch``. ``status`` is one of:

    * ``assigned`` — the client owns the partition (its last ``assignment_changed.owned``)
      and has not been told to give it up;
    * ``revoking`` — the client still owns it but has been told to let it go: the last
      ConsumerGroupHeartbeat response *delivered* to it carried an assignment without the
      partition (the body of the matching ``message_sent``), or the client is FENCED
      (partitions lost) or leaving (PREPARE_LEAVING, LEAVING). It ends when the client's
      ``assignment_changed`` no longer lists it;
    * ``pending`` — the partition is in the member's target (the coordinator's
      ``ConsumerGroupTargetAssignmentMember`` record, mapped to the client by
      (group id, member id)) but the client does not own it yet: it is waiting for the
      previous owner to release it and for its own next heartbeat and reconciliation.
      Only while the client is JOINING, RECONCILING, ACKNOWLEDGING or STABLE.

    Where the trace says nothing explicit, these rules fill in: a ``crash`` (or the crash
    half of a ``restart``) fault ends everything the process held at the fault's time (the
    trace keeps the dead client's ``owned``, but nobody is consuming them; a restarted
    member's new incarnation counts from its first ``state_transition``); a transition to
    UNSUBSCRIBED, STALE or FATAL empties ``owned`` (the leave heartbeat clears it without an
    ``assignment_changed``); deliveries to a crashed client are ignored. An interval also
    splits when the client's member epoch changes (from ``state_transition``,
    ``assignment_changed`` and successful heartbeat responses). Zero-length intervals are
    dropped, and equal neighbours meeting at the same instant are merged.

    This is what each client *believes*, so it can overlap: a member cut off from the
    coordinator keeps its partitions ("assigned") until it learns it was fenced, while the
    coordinator has already given them to someone else — the zombie window. The
    coordinator view below never overlaps.

``ownership_coordinator``
    The same columns from the coordinator's records alone: ``assigned`` = the current
    assignment's ``topic_partitions``, ``revoking`` = its ``partitions_pending_revocation``,
    ``pending`` = target minus both. Works for scripted clients that emit no client events.

``gaps``
    ``group_id, topic_id, partition_index, partition, start_ms, end_ms, duration_ms``: while
    a partition exists in a group's subscription metadata and no member holds it as
    ``assigned`` (client view) — the unavailability a rebalance or a crash costs.

``epochs``
    ``time_ms, step, group_id, series, kind, epoch, segment, source``: one row per change of
    the group epoch (``ConsumerGroupMetadata`` records), the assignment epoch
    (``ConsumerGroupTargetAssignmentMetadata`` records) and each client's member epoch.
    ``segment`` counts a member's lives (a crash, leave or fatal error ends one with a row
    whose ``source`` is ``end``; a rejoin starts the next).

``messages``
    One row per message: ``id, api, from, to, correlation_id, direction (request/response),
    status (delivered/dropped/in_flight), sent_ms, sent_step, delivered_ms, delivered_step,
    dropped_ms, drop_reason, latency_ms, error (the response's first non-zero error_code by
    name, NONE for a clean response, None for a request), is_error, member_epoch, body (JSON),
    body_short``.

``markers``
    ``time_ms, step, kind (fault/action/timer/invariant/note), actor, label, detail``.

``steps``
    ``step, time_ms``: when each step happened (to place a time cursor on a step axis).

``member_states``
    ``group_id, member, state, trigger, start_ms, end_ms, start_step, member_epoch``: each
    client's new-consumer state over time (from ``state_transition``), including states it
    passed through within one millisecond (``start_ms == end_ms``).

The delivery ledger (``kip_lab.lab.ledger``) has its own frames, each from one pass:
``ledger_frame`` (one row per group and partition: the ``compute_metrics`` ledger numbers,
the group's position and last committed offset), ``lag_frame`` (records behind the log end
over time) and ``reprocessed_frame`` (each range a group processed again, who had processed
it before, and when).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from kip_lab.events import (
    ActionApplied,
    AssignmentChanged,
    Event,
    FaultInjected,
    HandlerResult,
    InvariantViolated,
    MessageDelivered,
    MessageDropped,
    MessageSent,
    Note,
    ShareAcquired,
    ShareStateWrite,
    StateTransition,
    TimerFired,
)
from kip_lab.lab.ledger import LEDGER_METRICS, build_ledger
from kip_lab.lab.trace import TraceEvent

TP = tuple[str, int]

OWNERSHIP_COLUMNS = [
    "group_id",
    "member",
    "member_id",
    "topic_id",
    "partition_index",
    "partition",
    "status",
    "start_ms",
    "end_ms",
    "start_step",
    "end_step",
    "member_epoch",
]
GAP_COLUMNS = ["group_id", "topic_id", "partition_index", "partition", "start_ms", "end_ms", "duration_ms"]
EPOCH_COLUMNS = ["time_ms", "step", "group_id", "series", "kind", "epoch", "segment", "source"]
MESSAGE_COLUMNS = [
    "id",
    "api",
    "from",
    "to",
    "correlation_id",
    "direction",
    "status",
    "sent_ms",
    "sent_step",
    "delivered_ms",
    "delivered_step",
    "dropped_ms",
    "drop_reason",
    "latency_ms",
    "error",
    "is_error",
    "member_epoch",
    "body",
    "body_short",
]
MARKER_COLUMNS = ["time_ms", "step", "kind", "actor", "label", "detail"]
STEP_COLUMNS = ["step", "time_ms"]
STATE_COLUMNS = ["group_id", "member", "state", "trigger", "start_ms", "end_ms", "start_step", "member_epoch"]

STATUSES = ("assigned", "pending", "revoking")
ACTIVE_STATES = {"JOINING", "RECONCILING", "ACKNOWLEDGING", "STABLE"}
RELEASING_STATES = {"FENCED", "PREPARE_LEAVING", "LEAVING"}
GONE_STATES = {"UNSUBSCRIBED", "STALE", "FATAL"}
IGNORES_ASSIGNMENT = {"PREPARE_LEAVING", "LEAVING", "UNSUBSCRIBED", "STALE"}
BODY_SHORT = 300


@dataclass
class TraceFrames:
    """Every frame the charts need, built from one pass over a trace."""

    ownership: pd.DataFrame
    ownership_coordinator: pd.DataFrame
    gaps: pd.DataFrame
    epochs: pd.DataFrame
    messages: pd.DataFrame
    markers: pd.DataFrame
    member_states: pd.DataFrame
    end_ms: int
    partitions: list[str] = field(default_factory=list)  # display order: topic name, then index
    actors: list[str] = field(default_factory=list)  # order of first appearance in messages
    steps: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=STEP_COLUMNS))  # step -> time_ms


# ---------------------------------------------------------------------------- helpers
def _events(source: Any) -> list[TraceEvent]:
    """The events of a Trace, a Lab, or an iterable of events or saved event dicts."""
    if hasattr(source, "trace") and not isinstance(source, Mapping):
        source = source.trace
    return [TraceEvent.from_dict(dict(e)) if isinstance(e, Mapping) else e for e in source]


def _tps(items: Iterable[Mapping[str, Any]] | None) -> set[TP]:
    """A wire list of {topic_id, partitions} as a set of (topic id, partition)."""
    return {(str(t["topic_id"]), int(p)) for t in items or () for p in t.get("partitions", ())}


def _first_error(body: Any) -> int:
    """The first non-zero ``error_code`` anywhere in a response body (0 if none)."""
    if isinstance(body, Mapping):
        code = body.get("error_code")
        if isinstance(code, int) and code != 0:
            return code
        for value in body.values():
            found = _first_error(value)
            if found:
                return found
    elif isinstance(body, list):
        for value in body:
            found = _first_error(value)
            if found:
                return found
    return 0


def _error_name(code: int) -> str:
    from kip_lab.protocol import Errors

    try:
        return Errors(code).name
    except ValueError:
        return f"ERROR_{code}"


def _action_label(payload: Mapping[str, Any]) -> str:
    """An action's marker label, from its fields (a scheduled action's ``inner`` too)."""
    action = str(payload.get("action", "?"))
    subject = payload.get("member") or payload.get("topic") or payload.get("to_broker")
    if action == "schedule_action" and isinstance(payload.get("inner"), Mapping):
        return f"schedule {_action_label(payload['inner'])} at {payload.get('at_ms')} ms"
    return f"{action} {subject}" if subject else action


class _Intervals:
    """Open/close status intervals per key; drops zero-length ones and merges equal neighbours."""

    def __init__(self, keep_empty: bool = False) -> None:
        self.open: dict[tuple, tuple[str, int, int, Any, dict[str, Any]]] = {}
        self.closed: dict[tuple, list[dict[str, Any]]] = {}
        self.keep_empty = keep_empty  # keep zero-length intervals (a state passed through in one instant)

    def set(self, key: tuple, status: str | None, epoch: Any, t: int, step: int, extra: dict[str, Any]) -> None:
        current = self.open.get(key)
        if current is not None and current[0] == status and current[3] == epoch:
            return
        if current is not None:
            self._close(key, current, t, step)
        if status is None:
            return
        rows = self.closed.get(key)
        if (
            not self.keep_empty
            and rows
            and rows[-1]["end_ms"] == t
            and rows[-1]["status"] == status
            and rows[-1]["member_epoch"] == epoch
        ):
            last = rows.pop()  # status flickered away and back within one instant: continue it
            self.open[key] = (status, last["start_ms"], last["start_step"], epoch, extra)
        else:
            self.open[key] = (status, t, step, epoch, extra)

    def _close(self, key: tuple, current: tuple, t: int, step: int) -> None:
        status, start, start_step, epoch, extra = current
        del self.open[key]
        if t > start or self.keep_empty:
            self.closed.setdefault(key, []).append(
                {
                    **extra,
                    "status": status,
                    "start_ms": start,
                    "end_ms": t,
                    "start_step": start_step,
                    "end_step": step,
                    "member_epoch": epoch,
                }
            )

    def keys_with(self, prefix: tuple) -> list[tuple]:
        n = len(prefix)
        return [k for k in self.open if k[:n] == prefix]

    def finish(self, end_ms: int, end_step: int) -> list[dict[str, Any]]:
        for key in list(self.open):
            self._close(key, self.open[key], max(end_ms, self.open[key][1]), end_step)
        return [row for rows in self.closed.values() for row in rows]


@dataclass
class _Client:
    name: str
    group_id: str = "g"
    member_id: str = ""
    member_epoch: int = 0
    state: str = "UNSUBSCRIBED"
    owned: set[TP] = field(default_factory=set)
    told: set[TP] | None = None  # assigned partitions of the last heartbeat response it received
    alive: bool = False
    incarnation: int = 0  # bumped by a restart: answers to the old process's requests are not for it
    segment: int = -1
    in_segment: bool = False
    last_epoch: int | None = None


@dataclass
class _CoordMember:
    epoch: int = 0
    assigned: set[TP] = field(default_factory=set)
    revoking: set[TP] = field(default_factory=set)


# ---------------------------------------------------------------------------- the pass
class _Builder:
    def __init__(self) -> None:
        self.topic_names: dict[str, str] = {}
        self.clients: dict[str, _Client] = {}
        self.member_actor: dict[tuple[str, str], str] = {}  # (group id, member id) -> client name
        self.targets: dict[tuple[str, str], set[TP]] = {}
        self.coord: dict[tuple[str, str], _CoordMember] = {}
        self.listed: dict[str, set[TP]] = {}  # group -> partitions in its partition metadata
        self.group_epoch: dict[str, int] = {}
        self.assignment_epoch: dict[str, int] = {}
        self.client_view = _Intervals()
        self.coord_view = _Intervals()
        self.existence = _Intervals()
        self.states = _Intervals(keep_empty=True)
        self.epochs: list[dict[str, Any]] = []
        self.messages: dict[int, dict[str, Any]] = {}
        self.open_requests: dict[tuple[str, str, int], int] = {}
        self.markers: list[dict[str, Any]] = []
        self.actors: list[str] = []
        self.dirty_clients: set[str] = set()
        self.dirty_members: set[tuple[str, str]] = set()
        self.t = 0
        self.step = 0

    # -- small utilities ----------------------------------------------------------------
    def client(self, name: str) -> _Client:
        client = self.clients.get(name)
        if client is None:
            client = self.clients[name] = _Client(name)
        return client

    def actor_of(self, group_id: str, member_id: str) -> str:
        return self.member_actor.get((group_id, member_id), member_id)

    def see_actor(self, name: str) -> None:
        if name not in self.actors:
            self.actors.append(name)

    def member_epoch_row(self, client: _Client, source: str) -> None:
        if not client.in_segment:
            client.segment += 1
            client.in_segment = True
            client.last_epoch = None
        if client.last_epoch == client.member_epoch and source != "end":
            return
        client.last_epoch = client.member_epoch
        self.epochs.append(
            {
                "time_ms": self.t,
                "step": self.step,
                "group_id": client.group_id,
                "series": client.name,
                "kind": "member",
                "epoch": client.member_epoch,
                "segment": client.segment,
                "source": source,
            }
        )

    def end_segment(self, client: _Client) -> None:
        if client.in_segment:
            self.member_epoch_row(client, "end")
            client.in_segment = False

    def group_row(self, group_id: str, kind: str, epoch: int, source: str) -> None:
        self.epochs.append(
            {
                "time_ms": self.t,
                "step": self.step,
                "group_id": group_id,
                "series": f"{kind} epoch",
                "kind": kind,
                "epoch": epoch,
                "segment": 0,
                "source": source,
            }
        )

    # -- events ---------------------------------------------------------------------------
    def feed(self, event: TraceEvent) -> None:
        self.step, self.t = event.step, event.time_ms
        handler = _BUILDER_READS.get(type(event.body))
        if handler is not None:
            handler(self, event.actor, event.body)
        self.sync()

    def on_action_applied(self, actor: str, event: ActionApplied) -> None:
        payload = event.fields
        action = event.name
        member = event.member
        if action != "advance_to":
            self.markers.append(
                {
                    "time_ms": self.t,
                    "step": self.step,
                    "kind": "fault" if isinstance(event, FaultInjected) else "action",
                    "actor": member or "lab",
                    "label": _action_label(payload),
                    "detail": json.dumps(payload, sort_keys=True),
                }
            )
        if action == "add_consumer" and member:
            client = self.client(member)
            client.group_id = str((payload.get("config") or {}).get("group_id", "g"))
            client.alive = True
        elif action == "wire_request" and member and member not in self.clients:
            group_id = ((payload.get("body") or {}).get("request") or {}).get("group_id")
            if isinstance(group_id, str):  # a real client's first group request names its group
                self.client(member).group_id = group_id
        elif action in ("crash", "restart") and member in self.clients:
            client = self.clients[member]
            client.owned = set()
            client.told = None
            # A restart is a crash and a new process at once: what the dying incarnation still
            # emits is ignored; the new one comes alive with its first state transition.
            client.alive = False
            client.incarnation += 1
            self.end_segment(client)
            self.close_state(client)
            self.dirty_clients.add(member)

    def on_timer_fired(self, actor: str, event: TimerFired) -> None:
        self.markers.append(
            {
                "time_ms": self.t,
                "step": self.step,
                "kind": "timer",
                "actor": actor,
                "label": " ".join(map(str, event.timer)),
                "detail": json.dumps(event.to_payload(), sort_keys=True),
            }
        )

    def on_invariant_violated(self, actor: str, event: InvariantViolated) -> None:
        self.markers.append(
            {
                "time_ms": self.t,
                "step": self.step,
                "kind": "invariant",
                "actor": actor,
                "label": event.invariant,
                "detail": event.explanation,
            }
        )

    def on_note(self, actor: str, event: Note) -> None:
        self.markers.append(
            {
                "time_ms": self.t,
                "step": self.step,
                "kind": "note",
                "actor": actor,
                "label": event.text,
                "detail": json.dumps(event.to_payload(), sort_keys=True),
            }
        )

    def on_state_transition(self, actor: str, event: StateTransition) -> None:
        client = self.client(actor)
        client.alive = True  # only a running process changes state (a new incarnation starts with one)
        if event.member_id:
            client.member_id = str(event.member_id)
            self.member_actor[(client.group_id, client.member_id)] = actor
        client.member_epoch = event.member_epoch
        target = event.to_state
        client.state = target
        if target in ("JOINING", "FENCED"):
            client.told = None
        if target in GONE_STATES:
            client.owned = set()
            client.told = None
            self.end_segment(client)
        else:
            self.member_epoch_row(client, "state_transition")
        self.states.set(
            (client.group_id, actor),
            target,
            None,
            self.t,
            self.step,
            {
                "group_id": client.group_id,
                "member": actor,
                "trigger": event.trigger,
                "epoch": client.member_epoch,
            },
        )
        self.dirty_clients.add(actor)

    def close_state(self, client: _Client) -> None:
        self.states.set((client.group_id, client.name), None, None, self.t, self.step, {})

    def on_assignment_changed(self, actor: str, event: AssignmentChanged) -> None:
        client = self.client(actor)
        if event.member_id:
            client.member_id = str(event.member_id)
            self.member_actor[(client.group_id, client.member_id)] = actor
        client.member_epoch = event.member_epoch
        for topic_id, name in (event.topic_names or {}).items():  # a classic consumer names its topics
            self.topic_names.setdefault(str(topic_id), str(name))
        if client.alive:
            client.owned = set(event.owned or ())
            if client.state not in GONE_STATES:
                self.member_epoch_row(client, "assignment_changed")
        self.dirty_clients.add(actor)

    # -- messages -------------------------------------------------------------------------
    def _new_message(self, event: MessageSent | MessageDropped | MessageDelivered, body: Any) -> dict[str, Any]:
        src, dst, cid = event.source, event.destination, event.correlation_id
        self.see_actor(src)
        self.see_actor(dst)
        request_id = self.open_requests.pop((dst, src, cid), None)
        direction = "response" if request_id is not None else "request"
        if direction == "request":
            self.open_requests[(src, dst, cid)] = event.id
        body = body if body is not None else {}
        error = _first_error(body) if direction == "response" else 0
        text = json.dumps(body, sort_keys=True)
        epoch = body.get("member_epoch") if isinstance(body, Mapping) else None
        if epoch is None and direction == "response" and event.api == "ConsumerGroupHeartbeat":
            epoch = 0  # a default the summary leaves out
        row = {
            "id": event.id,
            "api": event.api,
            "from": src,
            "to": dst,
            "correlation_id": cid,
            "direction": direction,
            "status": "in_flight",
            "sent_ms": self.t,
            "sent_step": self.step,
            "delivered_ms": None,
            "delivered_step": None,
            "dropped_ms": None,
            "drop_reason": None,
            "latency_ms": getattr(event, "latency_ms", None),
            "error": None if direction == "request" else _error_name(error),
            "is_error": bool(error),
            "member_epoch": epoch,
            "body": text,
            "body_short": text if len(text) <= BODY_SHORT else text[: BODY_SHORT - 1] + "\u2026",
            "_request": request_id,
            "_body": body,
            "_incarnation": self.clients[src].incarnation if src in self.clients else None,
        }
        self.messages[row["id"]] = row
        return row

    def on_message_sent(self, actor: str, event: MessageSent) -> None:
        self._new_message(event, event.body)

    def on_message_dropped(self, actor: str, event: MessageDropped) -> None:
        row = self.messages.get(event.id)
        if row is None:  # dropped as it was sent: this is its only event
            row = self._new_message(event, event.body)
        row["status"] = "dropped"
        row["dropped_ms"] = self.t
        row["drop_reason"] = event.reason

    def on_message_delivered(self, actor: str, event: MessageDelivered) -> None:
        row = self.messages.get(event.id)
        if row is None:
            row = self._new_message(event, None)
        row["status"] = "delivered"
        row["delivered_ms"] = self.t
        row["delivered_step"] = self.step
        if row["direction"] == "response" and row["api"] == "ConsumerGroupHeartbeat":
            self.heartbeat_response(row)

    def heartbeat_response(self, row: dict[str, Any]) -> None:
        client = self.clients.get(row["to"])
        if client is None or not client.alive or row["is_error"]:
            return
        request = self.messages.get(row["_request"]) if row["_request"] is not None else None
        if request is None or request["_incarnation"] != client.incarnation:
            return  # not an answer to this process's request (a restart happened in between)
        if int(request["_body"].get("member_epoch", 0)) < 0:
            return  # the answer to a leave heartbeat changes nothing on the client
        body = row["_body"]
        client.member_epoch = int(body.get("member_epoch", 0))
        if body.get("member_id"):
            client.member_id = str(body["member_id"])
            self.member_actor[(client.group_id, client.member_id)] = client.name
        assignment = body.get("assignment")
        if assignment is not None and client.state not in IGNORES_ASSIGNMENT:
            client.told = _tps(assignment.get("assigned_topic_partitions"))
        if client.state not in GONE_STATES:
            self.member_epoch_row(client, "heartbeat_response")
        self.dirty_clients.add(client.name)

    # -- coordinator records -------------------------------------------------------------
    def on_handler_result(self, actor: str, event: HandlerResult) -> None:
        for record in event.records:
            self.record(record.get("key") or {}, record.get("value"))

    def record(self, key: Mapping[str, Any], value: Any) -> None:
        """A coordinator record, by its key's type (records of other types change no view)."""
        reader = _RECORD_READS.get(str(key.get("type")))
        if reader is not None:
            group = str(key.get("group_id", key.get("group", "")))
            reader(self, group, key, value)

    def on_group_metadata(self, group: str, key: Mapping[str, Any], value: Any) -> None:
        if value is not None:
            epoch = int(value.get("epoch", 0))
            if self.group_epoch.get(group) != epoch:
                self.group_epoch[group] = epoch
                self.group_row(group, "group", epoch, "ConsumerGroupMetadata")

    def on_target_metadata(self, group: str, key: Mapping[str, Any], value: Any) -> None:
        if value is not None:
            epoch = int(value.get("assignment_epoch", 0))
            if self.assignment_epoch.get(group) != epoch:
                self.assignment_epoch[group] = epoch
                self.group_row(group, "assignment", epoch, "ConsumerGroupTargetAssignmentMetadata")

    def on_partition_metadata(self, group: str, key: Mapping[str, Any], value: Any) -> None:
        listed: set[TP] = set()
        for topic in (value or {}).get("topics", ()):
            self.topic_names[str(topic["topic_id"])] = str(topic.get("topic_name", topic["topic_id"]))
            listed.update((str(topic["topic_id"]), p) for p in range(int(topic.get("num_partitions", 0))))
        before = self.listed.get(group, set())
        self.listed[group] = listed
        for tp in before - listed:
            self.existence.set((group, tp), None, None, self.t, self.step, {})
        for tp in listed - before:
            self.existence.set((group, tp), "listed", None, self.t, self.step, {"group_id": group, "tp": tp})

    def on_target_member(self, group: str, key: Mapping[str, Any], value: Any) -> None:
        member_id = key.get("member_id")
        if member_id is None:
            return
        if value is None:
            self.targets.pop((group, member_id), None)
        else:
            self.targets[(group, member_id)] = _tps(value.get("topic_partitions"))
        self.dirty_members.add((group, member_id))
        actor = self.member_actor.get((group, member_id))
        if actor is not None:
            self.dirty_clients.add(actor)

    def on_current_assignment(self, group: str, key: Mapping[str, Any], value: Any) -> None:
        member_id = key.get("member_id")
        if member_id is None:
            return
        if value is None:
            self.coord.pop((group, member_id), None)
        else:
            self.coord[(group, member_id)] = _CoordMember(
                epoch=int(value.get("member_epoch", 0)),
                assigned=_tps(value.get("topic_partitions")),
                revoking=_tps(value.get("partitions_pending_revocation")),
            )
        self.dirty_members.add((group, member_id))

    def on_member_metadata(self, group: str, key: Mapping[str, Any], value: Any) -> None:
        member_id = key.get("member_id")
        if member_id is not None and value is None:  # a tombstone: the member left
            self.coord.pop((group, member_id), None)
            self.dirty_members.add((group, member_id))

    def on_offset_commit(self, group: str, key: Mapping[str, Any], value: Any) -> None:
        if isinstance(value, Mapping) and value.get("topic_id"):
            self.topic_names.setdefault(str(value["topic_id"]), str(key.get("topic")))

    # -- recomputing statuses ------------------------------------------------------------
    def sync(self) -> None:
        for name in sorted(self.dirty_clients):
            self.sync_client(self.clients[name])
        for group, member_id in sorted(self.dirty_members):
            self.sync_member(group, member_id)
        self.dirty_clients.clear()
        self.dirty_members.clear()

    def sync_client(self, client: _Client) -> None:
        want: dict[TP, str] = {}
        if client.alive and client.state not in GONE_STATES:
            for tp in client.owned:
                releasing = client.state in RELEASING_STATES or (client.told is not None and tp not in client.told)
                want[tp] = "revoking" if releasing else "assigned"
            if client.state in ACTIVE_STATES:
                for tp in self.targets.get((client.group_id, client.member_id), ()):
                    want.setdefault(tp, "pending")
        prefix = (client.group_id, client.name)
        for key in self.client_view.keys_with(prefix):
            if key[2] not in want:
                self.client_view.set(key, None, None, self.t, self.step, {})
        for tp, status in want.items():
            extra = {"group_id": client.group_id, "member": client.name, "member_id": client.member_id, "tp": tp}
            self.client_view.set((*prefix, tp), status, client.member_epoch, self.t, self.step, extra)

    def sync_member(self, group: str, member_id: str) -> None:
        member = self.coord.get((group, member_id))
        want: dict[TP, str] = {}
        if member is not None:
            for tp in member.assigned:
                want[tp] = "assigned"
            for tp in member.revoking:
                want[tp] = "revoking"
            for tp in self.targets.get((group, member_id), ()):
                want.setdefault(tp, "pending")
        prefix = (group, member_id)
        for key in self.coord_view.keys_with(prefix):
            if key[2] not in want:
                self.coord_view.set(key, None, None, self.t, self.step, {})
        epoch = member.epoch if member is not None else None
        for tp, status in want.items():
            extra = {"group_id": group, "member": self.actor_of(group, member_id), "member_id": member_id, "tp": tp}
            self.coord_view.set((*prefix, tp), status, epoch, self.t, self.step, extra)

    # -- output --------------------------------------------------------------------------
    def partition_label(self, tp: TP) -> str:
        topic_id, index = tp
        name = self.topic_names.get(topic_id)
        if name is None:
            return f"{topic_id[:6]}-{index}"
        if sum(1 for n in self.topic_names.values() if n == name) > 1:
            return f"{name}@{topic_id[:4]}-{index}"  # a deleted and recreated topic
        return f"{name}-{index}"

    def partition_sort(self, tp: TP) -> tuple[str, str, int]:
        return (self.topic_names.get(tp[0], tp[0]), tp[0], tp[1])

    def ownership(self, intervals: _Intervals, end_ms: int) -> pd.DataFrame:
        rows = intervals.finish(end_ms, self.step)
        for row in rows:
            tp = row.pop("tp")
            row["topic_id"], row["partition_index"], row["partition"] = tp[0], tp[1], self.partition_label(tp)
        rows.sort(
            key=lambda r: (
                r["group_id"],
                self.partition_sort((r["topic_id"], r["partition_index"])),
                r["start_ms"],
                r["member"],
            )
        )
        frame = pd.DataFrame(rows, columns=OWNERSHIP_COLUMNS)
        return frame.astype({"member_epoch": "Int64"}) if len(frame) else frame

    def gaps(self, ownership: pd.DataFrame, end_ms: int) -> pd.DataFrame:
        exists = self.existence.finish(end_ms, self.step)
        held: dict[tuple[str, TP], list[tuple[int, int]]] = {}
        assigned = ownership[ownership["status"] == "assigned"]
        for g, t, p, s, e in zip(
            assigned["group_id"],
            assigned["topic_id"],
            assigned["partition_index"],
            assigned["start_ms"],
            assigned["end_ms"],
            strict=True,
        ):
            held.setdefault((g, (t, int(p))), []).append((int(s), int(e)))
        rows = []
        for span in exists:
            group, tp = span["group_id"], span["tp"]
            cursor = span["start_ms"]
            for s, e in sorted(held.get((group, tp), ())):
                if e <= cursor:
                    continue
                if s > cursor:
                    rows.append((group, tp, cursor, min(s, span["end_ms"])))
                cursor = max(cursor, e)
                if cursor >= span["end_ms"]:
                    break
            if cursor < span["end_ms"]:
                rows.append((group, tp, cursor, span["end_ms"]))
        out = [
            {
                "group_id": g,
                "topic_id": tp[0],
                "partition_index": tp[1],
                "partition": self.partition_label(tp),
                "start_ms": s,
                "end_ms": e,
                "duration_ms": e - s,
            }
            for g, tp, s, e in rows
            if e > s
        ]
        out.sort(
            key=lambda r: (r["group_id"], self.partition_sort((r["topic_id"], r["partition_index"])), r["start_ms"])
        )
        return pd.DataFrame(out, columns=GAP_COLUMNS)

    def message_frame(self) -> pd.DataFrame:
        rows = [{k: v for k, v in row.items() if not k.startswith("_")} for _, row in sorted(self.messages.items())]
        frame = pd.DataFrame(rows, columns=MESSAGE_COLUMNS)
        ints = ["delivered_ms", "delivered_step", "dropped_ms", "latency_ms", "member_epoch"]
        return frame.astype({c: "Int64" for c in ints}) if len(frame) else frame

    def state_frame(self, end_ms: int) -> pd.DataFrame:
        rows = self.states.finish(end_ms, self.step)
        out = [
            {
                "group_id": r["group_id"],
                "member": r["member"],
                "state": r["status"],
                "trigger": r["trigger"],
                "start_ms": r["start_ms"],
                "end_ms": r["end_ms"],
                "start_step": r["start_step"],
                "member_epoch": r["epoch"],
            }
            for r in rows
        ]
        out.sort(key=lambda r: (r["group_id"], r["member"], r["start_ms"], r["start_step"]))
        return pd.DataFrame(out, columns=STATE_COLUMNS)


# What the pass reads: an event class's handler, and a coordinator record key type's.
_BUILDER_READS: dict[type[Event], Callable[[_Builder, str, Any], None]] = {
    ActionApplied: _Builder.on_action_applied,
    FaultInjected: _Builder.on_action_applied,
    TimerFired: _Builder.on_timer_fired,
    InvariantViolated: _Builder.on_invariant_violated,
    Note: _Builder.on_note,
    StateTransition: _Builder.on_state_transition,
    AssignmentChanged: _Builder.on_assignment_changed,
    MessageSent: _Builder.on_message_sent,
    MessageDropped: _Builder.on_message_dropped,
    MessageDelivered: _Builder.on_message_delivered,
    HandlerResult: _Builder.on_handler_result,
}
_RECORD_READS: dict[str, Callable[[_Builder, str, Mapping[str, Any], Any], None]] = {
    "ConsumerGroupMetadataKey": _Builder.on_group_metadata,
    "ConsumerGroupTargetAssignmentMetadataKey": _Builder.on_target_metadata,
    "ConsumerGroupPartitionMetadataKey": _Builder.on_partition_metadata,
    "ConsumerGroupTargetAssignmentMemberKey": _Builder.on_target_member,
    "ConsumerGroupCurrentMemberAssignmentKey": _Builder.on_current_assignment,
    "ConsumerGroupMemberMetadataKey": _Builder.on_member_metadata,
    "OffsetCommitKey": _Builder.on_offset_commit,
}


def trace_frames(trace: Any, end_ms: int | None = None) -> TraceFrames:
    """Read a trace (a ``Trace``, a ``Lab``, or an iterable of ``TraceEvent``/dicts) into frames.

    Open intervals are closed at ``end_ms`` (default: the time of the last event).
    """
    events = _events(trace)
    builder = _Builder()
    for event in events:
        builder.feed(event)
    last = events[-1].time_ms if events else 0
    end = last if end_ms is None else max(int(end_ms), last)
    builder.t = end
    ownership = builder.ownership(builder.client_view, end)
    coordinator = builder.ownership(builder.coord_view, end)
    gaps = builder.gaps(ownership, end)
    seen = set(zip(ownership["topic_id"], ownership["partition_index"], strict=True)) | set(
        zip(coordinator["topic_id"], coordinator["partition_index"], strict=True)
    )
    seen |= {tp for listed in builder.listed.values() for tp in listed}
    seen |= set(zip(gaps["topic_id"], gaps["partition_index"], strict=True))
    partitions = [
        builder.partition_label((t, int(p)))
        for t, p in sorted(seen, key=lambda tp: builder.partition_sort((tp[0], int(tp[1]))))
    ]
    return TraceFrames(
        ownership=ownership,
        ownership_coordinator=coordinator,
        gaps=gaps,
        epochs=pd.DataFrame(builder.epochs, columns=EPOCH_COLUMNS),
        messages=builder.message_frame(),
        markers=pd.DataFrame(builder.markers, columns=MARKER_COLUMNS),
        member_states=builder.state_frame(end),
        end_ms=end,
        partitions=list(dict.fromkeys(partitions)),
        actors=list(builder.actors),
        steps=pd.DataFrame(sorted({(e.step, e.time_ms) for e in events}), columns=STEP_COLUMNS),
    )


# ---------------------------------------------------------------------------- single frames
def ownership_frame(trace: Any, view: str = "client", end_ms: int | None = None) -> pd.DataFrame:
    """Ownership intervals: ``view="client"`` (default) or ``"coordinator"`` (records only)."""
    frames = trace_frames(trace, end_ms)
    if view == "client":
        return frames.ownership
    if view == "coordinator":
        return frames.ownership_coordinator
    raise ValueError(f"view must be 'client' or 'coordinator', got {view!r}")


def epoch_frame(trace: Any) -> pd.DataFrame:
    return trace_frames(trace).epochs


def message_frame(trace: Any) -> pd.DataFrame:
    return trace_frames(trace).messages


def marker_frame(trace: Any) -> pd.DataFrame:
    return trace_frames(trace).markers


def gap_frame(trace: Any, end_ms: int | None = None) -> pd.DataFrame:
    return trace_frames(trace, end_ms).gaps


def member_state_frame(trace: Any, end_ms: int | None = None) -> pd.DataFrame:
    return trace_frames(trace, end_ms).member_states


# ---------------------------------------------------------------------------- the delivery ledger
PARTITION_KEY = ["group_id", "topic_id", "partition_index", "partition"]
LEDGER_COLUMNS = [*PARTITION_KEY, *LEDGER_METRICS, "position", "committed_offset"]
LAG_COLUMNS = [*PARTITION_KEY, "time_ms", "lag_records"]
REPROCESSED_COLUMNS = [
    *PARTITION_KEY,
    "member",
    "first",
    "end",
    "records",
    "start_ms",
    "end_ms",
    "previous",
    "last_commit",
]


def ledger_frame(trace: Any, end_ms: int | None = None) -> pd.DataFrame:
    """One row per group and partition: the ledger's numbers (``compute_metrics``' definitions; here
    ``commits_failed`` counts the partition's offsets a commit did not store), the group's
    ``position`` (the end of the furthest range processed) and ``committed_offset`` (the last
    successful commit's, None before one)."""
    ledger = build_ledger(_events(trace), end_ms)
    rows = []
    for (group, tp), p in sorted(ledger.partitions.items()):
        rows.append(
            {
                "group_id": group,
                "topic_id": tp[0],
                "partition_index": tp[1],
                "partition": ledger.partition_name(tp),
                "records_processed": p.records_processed,
                "records_reprocessed": p.records_reprocessed,
                "records_skipped": p.records_skipped,
                "commits_failed": p.commits_failed,
                "max_lag_records": p.max_lag,
                "processing_pause_ms": p.pause_ms,
                "position": p.furthest,
                "committed_offset": p.last_commit,
            }
        )
    return pd.DataFrame(rows, columns=LEDGER_COLUMNS)


def lag_frame(trace: Any, end_ms: int | None = None) -> pd.DataFrame:
    """Records each group's partition was behind its log end, wherever the ledger knows a processing
    member's position (``compute_metrics``' *max lag records*), in time order."""
    ledger = build_ledger(_events(trace), end_ms)
    rows = [
        (group, tp[0], tp[1], ledger.partition_name(tp), time_ms, lag)
        for (group, tp), p in sorted(ledger.partitions.items())
        for time_ms, lag in sorted(p.lag)
    ]
    return pd.DataFrame(rows, columns=LAG_COLUMNS)


def reprocessed_frame(trace: Any) -> pd.DataFrame:
    """Each range of offsets ``[first, end)`` a group processed again: by ``member``, when
    (``start_ms``..``end_ms``, the range's records spread evenly over the time since the member's
    previous report), who had processed the partition furthest before (``previous``), and the
    group's last committed offset then."""
    ledger = build_ledger(_events(trace))
    return pd.DataFrame(ledger.reprocessed, columns=REPROCESSED_COLUMNS)


# ---------------------------------------------------------------------------- share groups (KIP-932)
RECORD_STATE_COLUMNS = [
    "group_id",
    "topic_id",
    "partition",
    "offset",
    "state",
    "delivery_count",
    "member_id",
    "start_ms",
    "end_ms",
    "start_step",
]
SHARE_OFFSET_COLUMNS = ["group_id", "topic_id", "partition", "time_ms", "step", "spso", "speo"]


@dataclass
class ShareFrames:
    """``records``: one row per interval in which an in-flight offset kept its state, delivery count
    and owner (from ``share_acquired`` and successful ``share_state_write`` events). A record keeps
    its last state after the start offset (SPSO) passes it (the KIP archives it then; the SPSO
    line in ``offsets`` shows where that happened, and the last state says how it ended).
    ``offsets``: the SPSO and SPEO after each event that reported them."""

    records: pd.DataFrame
    offsets: pd.DataFrame


def share_frames(trace: Any, end_ms: int | None = None) -> ShareFrames:
    """Record states of every share-partition in the trace, as intervals, plus its SPSO/SPEO over time."""
    events = _events(trace)
    current: dict[tuple[str, str, int], dict[int, tuple[str, int, str | None, int, int]]] = {}
    rows: list[dict[str, Any]] = []
    offsets: list[dict[str, Any]] = []

    def close(key: tuple[str, str, int], offset: int, t: int) -> None:
        state, count, member, since, step = current[key].pop(offset)
        if t > since:
            rows.append(
                dict(zip(RECORD_STATE_COLUMNS, (*key, offset, state, count, member, since, t, step), strict=True))
            )

    def put(key, offset: int, state: str, count: int | None, member: str | None, t: int, step: int) -> None:
        table = current.setdefault(key, {})
        before = table.get(offset)
        if before is not None:
            if count is None:
                count = before[1]
            if before[:3] == (state, count, member):
                return
            close(key, offset, t)
        table[offset] = (state, count or 0, member, t, step)

    for e in events:
        body, t, step = e.body, e.time_ms, e.step
        if not isinstance(body, ShareAcquired | ShareStateWrite):
            continue
        key = (body.group_id, body.topic_id, body.partition)
        if isinstance(body, ShareAcquired):
            for first, last, count in body.ranges:
                for offset in range(first, last + 1):
                    put(key, offset, "Acquired", count, body.member_id, t, step)
        elif body.error is None:
            for first, last, _, target in body.transitions:
                for offset in range(first, last + 1):
                    put(key, offset, target, None, None, t, step)
        if body.spso is not None:
            offsets.append(dict(zip(SHARE_OFFSET_COLUMNS, (*key, t, step, body.spso, body.speo), strict=True)))
    last = events[-1].time_ms if events else 0
    end = last if end_ms is None else max(int(end_ms), last)
    for key in sorted(current):
        for offset in sorted(current[key]):
            close(key, offset, end)
    records = pd.DataFrame(rows, columns=RECORD_STATE_COLUMNS)
    records = records.sort_values(["group_id", "topic_id", "partition", "offset", "start_ms"], kind="stable")
    return ShareFrames(records.reset_index(drop=True), pd.DataFrame(offsets, columns=SHARE_OFFSET_COLUMNS))
