"""What can happen in a run: one small immutable class per kind of trace event.

The simulation emits these (``world.emit(actor, MessageSent(...))``) and every reader — the
frames, the metrics, the story, the stepper, the notebooks — reads the same classes back,
by attribute: ``for e in trace.of_type(AssignmentChanged): e.body.owned``. A saved trace holds
each event's ``to_payload()`` (JSON, sorted keys); ``event_from_payload`` reads it back into
the same class, and a payload that does not fit raises ``TraceFieldError`` naming the field.

A message's body and a handler's records are summarised to JSON only when read (the stepper,
a saved file): a run sends far more messages than anyone looks at (summarising them as they are
emitted made ten simulated minutes of a stable 100-member group, benchmark (b) of
``benchmarks.bench_lab``, about 45% slower). The model they are made from is frozen, so the
summary is the same whenever it is made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from kip_lab.errors import KipLabError

TP = tuple[str, int]  # (topic id, partition)


class EventKind(StrEnum):
    MESSAGE_SENT = "message_sent"
    MESSAGE_DELIVERED = "message_delivered"
    MESSAGE_DROPPED = "message_dropped"
    HANDLER_RESULT = "handler_result"  # a coordinator handler or timer, with the records it wrote
    TIMER_FIRED = "timer_fired"
    STATE_TRANSITION = "state_transition"
    CALLBACK_INVOKED = "callback_invoked"
    CALLBACK_COMPLETED = "callback_completed"
    ASSIGNMENT_CHANGED = "assignment_changed"  # a client's owned/fetching partitions changed
    FAULT_INJECTED = "fault_injected"
    ACTION_APPLIED = "action_applied"  # setup and scripted actions (add a consumer, send a request)
    INVARIANT_VIOLATED = "invariant_violated"
    NOTE = "note"
    SHARE_ACQUIRED = "share_acquired"  # a share-partition leader acquired records for a member
    SHARE_STATE_WRITE = "share_state_write"  # a WriteShareGroupState, its transitions and the records written
    SHARE_STATE_RPC = "share_state_rpc"  # the group coordinator's Initialize/Delete/summary calls
    SHARE_ACK_RESULT = "share_ack_result"  # a share consumer's acknowledgement commit callback
    POSITION_SET = "position_set"  # a consumer starts a partition at an offset, and why there
    RECORDS_PROCESSED = "records_processed"  # offset ranges a consumer's application processed
    COMMIT_RESULT = "commit_result"  # an OffsetCommit a consumer sent: its offsets and their outcome


class TraceFieldError(KipLabError, ValueError):
    """A saved event whose payload does not fit its kind; ``field`` names the payload key at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def summarize(model: Any) -> dict[str, Any]:
    """A compact, JSON-safe view of a message or record (non-default fields only); a summary
    read back from a file is already one."""
    if model is None:
        return {}
    if isinstance(model, dict):
        return model
    serializer = getattr(model, "__pydantic_serializer__", None)
    if serializer is None:  # a plain value record (``OffsetCommitValue``): JSON-safe fields
        return model.model_dump(exclude_defaults=True)
    # model_dump(mode="json", exclude_defaults=True), minus its wrapper: a saved trace summarises every message.
    return serializer.to_python(model, mode="json", exclude_defaults=True)


def _record_summary(record: Any) -> dict[str, Any]:
    """A written record as the trace shows it: its key (with the key's type) and its value."""
    if isinstance(record, dict):  # read back from a file
        return record
    key = summarize(record.key)
    key["type"] = type(record.key).__name__
    return {"key": key, "value": None if record.value is None else summarize(record.value)}


# -- reading payloads back ------------------------------------------------------------------
_JSON_NAMES = {int: "an integer", str: "a string", bool: "true or false", list: "a list", dict: "an object"}


def _get(payload: Mapping[str, Any], key: str, kind: type | tuple[type, ...], optional: bool = False) -> Any:
    """``payload[key]``, checked to be of ``kind`` (None is allowed when ``optional``)."""
    if key not in payload:
        if optional:
            return None
        raise TraceFieldError(key, "is missing")
    value = payload[key]
    if value is None and optional:
        return None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        expected = " or ".join(_JSON_NAMES.get(k, k.__name__) for k in kinds)
        raise TraceFieldError(key, f"is {json.dumps(value)[:60]}, not {expected}")
    return value


def _rows(payload: Mapping[str, Any], key: str, width: int, optional: bool = False) -> tuple[tuple, ...] | None:
    """A list of fixed-width lists (partitions, ranges, transitions) as a tuple of tuples."""
    rows = _get(payload, key, list, optional)
    if rows is None:
        return None
    if not all(isinstance(row, list) and len(row) == width for row in rows):
        raise TraceFieldError(key, f"is not a list of {width}-item lists")
    return tuple(map(tuple, rows))


def _partitions(payload: Mapping[str, Any], key: str, optional: bool = False) -> tuple[TP, ...] | None:
    return _rows(payload, key, 2, optional)


def _pairs(value: tuple[tuple, ...] | None) -> list[list] | None:
    return None if value is None else [list(row) for row in value]


# -- the events -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False)
class Event:
    """What one trace event says happened. Subclasses name their ``kind`` and map their fields
    to and from the JSON payload a saved trace holds; two events are equal when they would be
    saved the same."""

    kind: ClassVar[EventKind]

    def to_payload(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Event:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return type(self) is type(other) and _canonical(self.to_payload()) == _canonical(other.to_payload())

    __hash__ = None  # type: ignore[assignment]  # payloads hold lists and dicts


def _canonical(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True)


@dataclass(frozen=True, slots=True, eq=False)
class _MessageEvent(Event):
    """A message on the wire: its id, its ends, its API and correlation id."""

    id: int
    source: str
    destination: str
    api: str
    correlation_id: int

    def _ends(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "from": self.source,
            "to": self.destination,
            "api": self.api,
            "correlation_id": self.correlation_id,
        }

    @staticmethod
    def _read_ends(payload: Mapping[str, Any]) -> tuple[int, str, str, str, int]:
        return (
            _get(payload, "id", int),
            _get(payload, "from", str),
            _get(payload, "to", str),
            _get(payload, "api", str),
            _get(payload, "correlation_id", int),
        )


@dataclass(frozen=True, slots=True, eq=False)
class MessageSent(_MessageEvent):
    """A message left ``source``; it arrives ``latency_ms`` later unless the link drops it."""

    kind = EventKind.MESSAGE_SENT
    latency_ms: int
    message: Any = field(repr=False)  # the request or response model (or its summary, read from a file)

    @property
    def body(self) -> dict[str, Any]:
        """The message's non-default fields, as JSON."""
        return summarize(self.message)

    def to_payload(self) -> dict[str, Any]:
        return {**self._ends(), "latency_ms": self.latency_ms, "body": self.body}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> MessageSent:
        return cls(*cls._read_ends(payload), _get(payload, "latency_ms", int), _get(payload, "body", dict))


@dataclass(frozen=True, slots=True, eq=False)
class MessageDropped(_MessageEvent):
    """A message the network lost: at sending (with its body) or in flight (without)."""

    kind = EventKind.MESSAGE_DROPPED
    reason: str
    message: Any = field(default=None, repr=False)  # as ``MessageSent.message``; None when lost in flight

    @property
    def body(self) -> dict[str, Any] | None:
        return None if self.message is None else summarize(self.message)

    def to_payload(self) -> dict[str, Any]:
        payload = {**self._ends(), "reason": self.reason}
        if self.message is not None:
            payload["body"] = self.body
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> MessageDropped:
        return cls(*cls._read_ends(payload), _get(payload, "reason", str), _get(payload, "body", dict, optional=True))


@dataclass(frozen=True, slots=True, eq=False)
class MessageDelivered(_MessageEvent):
    """A message reached ``destination`` (the event's actor), which handles it in the same step."""

    kind = EventKind.MESSAGE_DELIVERED

    def to_payload(self) -> dict[str, Any]:
        return self._ends()

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> MessageDelivered:
        return cls(*cls._read_ends(payload))


@dataclass(frozen=True, slots=True, eq=False)
class HandlerResult(Event):
    """A coordinator handler or timer ran: what ran it, the error it answered, the records it wrote."""

    kind = EventKind.HANDLER_RESULT
    origin: str
    error: str | None = None  # the response's error code name, when it has one
    written: Sequence[Any] | None = field(default=None, repr=False)  # the records (summaries, read from a file)

    @property
    def records(self) -> list[dict[str, Any]]:
        """The records written, as JSON: ``{"key": {..., "type": key class}, "value": {...} or None}``."""
        return [_record_summary(r) for r in self.written or ()]

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"origin": self.origin}
        if self.written is not None:
            payload["records"] = self.records
        if self.error is not None:
            payload["error"] = self.error
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> HandlerResult:
        records = _get(payload, "records", list, optional=True)
        if records is not None and not all(isinstance(r, dict) and isinstance(r.get("key"), dict) for r in records):
            raise TraceFieldError("records", "is not a list of {key, value} objects")
        return cls(_get(payload, "origin", str), _get(payload, "error", str, optional=True), records)


@dataclass(frozen=True, slots=True, eq=False)
class TimerFired(Event):
    """A coordinator timer fired; ``timer`` is its key (what it times, the group, the member)."""

    kind = EventKind.TIMER_FIRED
    timer: tuple[str, ...]

    def to_payload(self) -> dict[str, Any]:
        return {"timer": list(self.timer)}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> TimerFired:
        return cls(tuple(_get(payload, "timer", list)))


@dataclass(frozen=True, slots=True, eq=False)
class StateTransition(Event):
    """A client's member state machine took an edge; a classic consumer adds its generation and protocol."""

    kind = EventKind.STATE_TRANSITION
    machine: str
    from_state: str
    to_state: str
    trigger: str
    member_id: str | None
    member_epoch: int
    generation_id: int | None = None
    protocol: str | None = None

    def to_payload(self) -> dict[str, Any]:
        payload = {
            "machine": self.machine,
            "from": self.from_state,
            "to": self.to_state,
            "trigger": self.trigger,
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
        }
        if self.generation_id is not None:
            payload["generation_id"] = self.generation_id
        if self.protocol is not None:
            payload["protocol"] = self.protocol
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> StateTransition:
        return cls(
            _get(payload, "machine", str),
            _get(payload, "from", str),
            _get(payload, "to", str),
            _get(payload, "trigger", str),
            _get(payload, "member_id", str, optional=True),
            _get(payload, "member_epoch", int),
            _get(payload, "generation_id", int, optional=True),
            _get(payload, "protocol", str, optional=True),
        )


@dataclass(frozen=True, slots=True, eq=False)
class AssignmentChanged(Event):
    """A client's partitions changed. A consumer reports what it owns and fetches; a classic
    consumer also what the leader assigned (None before its first assignment) and the names
    of the topics; a share consumer only its assigned share partitions."""

    kind = EventKind.ASSIGNMENT_CHANGED
    member_id: str | None
    member_epoch: int
    owned: tuple[TP, ...] | None = None
    fetching: tuple[TP, ...] | None = None
    assigned: tuple[TP, ...] | None = None  # classic only
    topic_names: dict[str, str] | None = None  # classic only: topic id -> name
    share_assigned: tuple[TP, ...] | None = None  # share consumers only

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"member_id": self.member_id, "member_epoch": self.member_epoch}
        if self.share_assigned is not None:
            payload["share_assigned"] = _pairs(self.share_assigned)
            return payload
        payload["owned"] = _pairs(self.owned)
        payload["fetching"] = _pairs(self.fetching)
        if self.topic_names is not None:
            payload["assigned"] = _pairs(self.assigned)
            payload["topic_names"] = self.topic_names
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> AssignmentChanged:
        share = "share_assigned" in payload
        return cls(
            _get(payload, "member_id", str, optional=True),
            _get(payload, "member_epoch", int),
            owned=None if share else _partitions(payload, "owned"),
            fetching=None if share else _partitions(payload, "fetching"),
            assigned=_partitions(payload, "assigned", optional=True),
            topic_names=_get(payload, "topic_names", dict, optional=True),
            share_assigned=_partitions(payload, "share_assigned") if share else None,
        )


@dataclass(frozen=True, slots=True, eq=False)
class CallbackInvoked(Event):
    """The application's rebalance callback started; it runs for ``duration_ms`` (``error``: what it raises)."""

    kind = EventKind.CALLBACK_INVOKED
    callback: str
    partitions: tuple[str, ...]  # partition names, "topic-3"
    duration_ms: int
    error: str | None

    def to_payload(self) -> dict[str, Any]:
        return {
            "callback": self.callback,
            "partitions": list(self.partitions),
            "duration_ms": self.duration_ms,
            "error": self.error,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> CallbackInvoked:
        return cls(
            _get(payload, "callback", str),
            tuple(_get(payload, "partitions", list)),
            _get(payload, "duration_ms", int),
            _get(payload, "error", str, optional=True),
        )


@dataclass(frozen=True, slots=True, eq=False)
class CallbackCompleted(Event):
    """The application's rebalance callback returned (``ok``) or raised."""

    kind = EventKind.CALLBACK_COMPLETED
    callback: str
    ok: bool

    def to_payload(self) -> dict[str, Any]:
        return {"callback": self.callback, "ok": self.ok}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> CallbackCompleted:
        return cls(_get(payload, "callback", str), _get(payload, "ok", bool))


@dataclass(frozen=True, slots=True, eq=False)
class ActionApplied(Event):
    """A setup or scripted action (add a consumer, create a topic, send a request): its fields,
    as JSON, with its name under ``"action"``. Like a message's body, they are dumped from the
    action only when read: a served run applies an action for every request of a real client."""

    kind = EventKind.ACTION_APPLIED
    action: Any  # the action model (frozen), or its fields read from a file

    @property
    def fields(self) -> dict[str, Any]:
        """The action's fields, as JSON."""
        action = self.action
        return action if isinstance(action, dict) else action.model_dump(mode="json")

    @property
    def name(self) -> str:
        """The action's name (``add_consumer``, ``crash``, ...)."""
        action = self.action
        return str(action.get("action", "?") if isinstance(action, dict) else action.action)

    @property
    def member(self) -> str | None:
        """The member the action is about, if any."""
        action = self.action
        return action.get("member") if isinstance(action, dict) else getattr(action, "member", None)

    def to_payload(self) -> dict[str, Any]:
        return self.fields

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ActionApplied:
        _get(payload, "action", str)
        return cls(dict(payload))


@dataclass(frozen=True, slots=True, eq=False)
class FaultInjected(ActionApplied):
    """A fault action (a crash, dropped messages, a failover) once the run has clients."""

    kind = EventKind.FAULT_INJECTED


@dataclass(frozen=True, slots=True, eq=False)
class InvariantViolated(Event):
    """A safety invariant failed after a step: which one, and why."""

    kind = EventKind.INVARIANT_VIOLATED
    invariant: str
    explanation: str

    def to_payload(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "explanation": self.explanation}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> InvariantViolated:
        return cls(_get(payload, "invariant", str), _get(payload, "explanation", str))


@dataclass(frozen=True, slots=True, eq=False)
class Note(Event):
    """A line of text for the reader, with details a reader may act on (``rejoin``, ``produced``,
    ``share_leader_moved``, ...)."""

    kind = EventKind.NOTE
    text: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_payload(self) -> dict[str, Any]:
        return {"text": self.text, **self.details}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Note:
        return cls(_get(payload, "text", str), {k: v for k, v in payload.items() if k != "text"})


@dataclass(frozen=True, slots=True, eq=False)
class ShareAcquired(Event):
    """A share-partition leader acquired records for a member: ``(first, last, delivery count)`` ranges."""

    kind = EventKind.SHARE_ACQUIRED
    group_id: str
    member_id: str
    topic_id: str
    partition: int
    ranges: tuple[tuple[int, int, int], ...]
    spso: int | None
    speo: int | None

    def to_payload(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "topic_id": self.topic_id,
            "partition": self.partition,
            "ranges": _pairs(self.ranges),
            "spso": self.spso,
            "speo": self.speo,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ShareAcquired:
        return cls(
            _get(payload, "group_id", str),
            _get(payload, "member_id", str),
            _get(payload, "topic_id", str),
            _get(payload, "partition", int),
            _rows(payload, "ranges", 3),  # type: ignore[arg-type]
            _get(payload, "spso", int, optional=True),
            _get(payload, "speo", int, optional=True),
        )


@dataclass(frozen=True, slots=True, eq=False)
class ShareStateWrite(Event):
    """A WriteShareGroupState to the share coordinator: the ``(first, last, trigger, target)``
    transitions it carries, its error, and the ``__share_group_state`` records it wrote."""

    kind = EventKind.SHARE_STATE_WRITE
    group_id: str
    topic_id: str
    partition: int
    origin: str
    request: dict[str, Any]
    transitions: tuple[tuple[int, int, str, str], ...]
    error: str | None
    records: tuple[dict[str, Any], ...]
    spso: int | None
    speo: int | None

    def to_payload(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "topic_id": self.topic_id,
            "partition": self.partition,
            "origin": self.origin,
            "request": self.request,
            "transitions": _pairs(self.transitions),
            "error": self.error,
            "records": list(self.records),
            "spso": self.spso,
            "speo": self.speo,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ShareStateWrite:
        return cls(
            _get(payload, "group_id", str),
            _get(payload, "topic_id", str),
            _get(payload, "partition", int),
            _get(payload, "origin", str),
            _get(payload, "request", dict),
            _rows(payload, "transitions", 4),  # type: ignore[arg-type]
            _get(payload, "error", str, optional=True),
            tuple(_get(payload, "records", list)),
            _get(payload, "spso", int, optional=True),
            _get(payload, "speo", int, optional=True),
        )


@dataclass(frozen=True, slots=True, eq=False)
class ShareStateRpc(Event):
    """The group coordinator called the share coordinator (Initialize, Delete, ReadSummary ...)."""

    kind = EventKind.SHARE_STATE_RPC
    api: str
    request: dict[str, Any] | None
    response: dict[str, Any] | None
    records: tuple[dict[str, Any], ...]

    def to_payload(self) -> dict[str, Any]:
        return {"api": self.api, "request": self.request, "response": self.response, "records": list(self.records)}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ShareStateRpc:
        return cls(
            _get(payload, "api", str),
            _get(payload, "request", dict, optional=True),
            _get(payload, "response", dict, optional=True),
            tuple(_get(payload, "records", list)),
        )


@dataclass(frozen=True, slots=True, eq=False)
class ShareAckResult(Event):
    """A share consumer's acknowledgement commit callback for one partition: the offsets, and the error."""

    kind = EventKind.SHARE_ACK_RESULT
    partition: TP
    offsets: tuple[int, ...]
    error: str | None
    message: str | None = None  # the error message, when there is an error and one

    def to_payload(self) -> dict[str, Any]:
        payload = {"partition": list(self.partition), "offsets": list(self.offsets), "error": self.error}
        if self.message is not None:
            payload["message"] = self.message
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ShareAckResult:
        partition = _get(payload, "partition", list)
        if len(partition) != 2:
            raise TraceFieldError("partition", "is not a [topic id, partition] pair")
        return cls(
            (partition[0], partition[1]),
            tuple(_get(payload, "offsets", list)),
            _get(payload, "error", str, optional=True),
            _get(payload, "message", str, optional=True),
        )


# -- the delivery ledger: where each consumer started, what it processed, what it committed ----------
START_REASONS = ("committed", "earliest", "latest", "seek", "continued", "acquired")


def _start_reason(value: str, field_name: str) -> str:
    if value not in START_REASONS:
        raise TraceFieldError(field_name, f"is {value!r}, not one of {', '.join(START_REASONS)}")
    return value


@dataclass(frozen=True, slots=True, eq=False)
class PositionSet(Event):
    """A consumer (incarnation ``incarnation`` of the actor) set its position for a partition it
    was assigned: processing starts at ``offset`` because of ``reason`` — ``committed`` (the
    group's committed offset), ``earliest`` / ``latest`` (``auto.offset.reset``: nothing was
    committed), or ``seek`` (the application chose it). ``continued`` is never a start."""

    kind = EventKind.POSITION_SET
    group_id: str
    member_id: str | None
    incarnation: int
    topic_id: str
    partition: int
    offset: int
    reason: str

    def __post_init__(self) -> None:
        _start_reason(self.reason, "reason")

    def to_payload(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "incarnation": self.incarnation,
            "topic_id": self.topic_id,
            "partition": self.partition,
            "offset": self.offset,
            "reason": self.reason,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> PositionSet:
        return cls(
            _get(payload, "group_id", str),
            _get(payload, "member_id", str, optional=True),
            _get(payload, "incarnation", int),
            _get(payload, "topic_id", str),
            _get(payload, "partition", int),
            _get(payload, "offset", int),
            _start_reason(_get(payload, "reason", str), "reason"),
        )


@dataclass(frozen=True, slots=True, eq=False)
class RecordsProcessed(Event):
    """A consumer's application processed records: ``(topic id, partition, first, end, start)``
    ranges, ``end`` exclusive. ``start`` says why the range begins where it does: the reason of
    the ``PositionSet`` it begins at, ``continued`` (it follows on from the same consumer's
    previous range of that partition), or ``acquired`` (a share consumer: the share-partition
    leader acquired the records for it). A consumer reports what it processed when it commits and
    when it stops processing a partition (revoked, lost, paused, crashed, closed)."""

    kind = EventKind.RECORDS_PROCESSED
    group_id: str
    member_id: str | None
    incarnation: int
    ranges: tuple[tuple[str, int, int, int, str], ...]

    def to_payload(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "incarnation": self.incarnation,
            "ranges": _pairs(self.ranges),
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> RecordsProcessed:
        ranges = _rows(payload, "ranges", 5)
        for row in ranges or ():
            _start_reason(row[4], "ranges")
        return cls(
            _get(payload, "group_id", str),
            _get(payload, "member_id", str, optional=True),
            _get(payload, "incarnation", int),
            ranges,  # type: ignore[arg-type]
        )


@dataclass(frozen=True, slots=True, eq=False)
class CommitResult(Event):
    """An OffsetCommit a consumer sent, once it knows how it went: ``(topic id, partition, offset,
    error)`` per partition, ``error`` the error code's name or None when committed. ``cause`` says
    why it committed (``auto`` the auto-commit interval, ``revocation`` before giving partitions
    up, ``leave`` before leaving, ``manual`` the application); a commit with no answer in time
    carries ``REQUEST_TIMED_OUT`` (the coordinator may still have stored it)."""

    kind = EventKind.COMMIT_RESULT
    group_id: str
    member_id: str | None
    member_epoch: int  # the member epoch, or a classic member's generation
    cause: str
    offsets: tuple[tuple[str, int, int, str | None], ...]

    @property
    def failed(self) -> bool:
        """Whether any partition's offset was not committed."""
        return any(error is not None for *_, error in self.offsets)

    def to_payload(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
            "cause": self.cause,
            "offsets": _pairs(self.offsets),
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> CommitResult:
        return cls(
            _get(payload, "group_id", str),
            _get(payload, "member_id", str, optional=True),
            _get(payload, "member_epoch", int),
            _get(payload, "cause", str),
            _rows(payload, "offsets", 4),  # type: ignore[arg-type]
        )


EVENT_TYPES: dict[EventKind, type[Event]] = {
    cls.kind: cls
    for cls in (
        MessageSent,
        MessageDelivered,
        MessageDropped,
        HandlerResult,
        TimerFired,
        StateTransition,
        CallbackInvoked,
        CallbackCompleted,
        AssignmentChanged,
        FaultInjected,
        ActionApplied,
        InvariantViolated,
        Note,
        ShareAcquired,
        ShareStateWrite,
        ShareStateRpc,
        ShareAckResult,
        PositionSet,
        RecordsProcessed,
        CommitResult,
    )
}


def event_from_payload(kind: str, payload: Any) -> Event:
    """The event of ``kind`` a saved ``payload`` describes (``TraceFieldError`` when it does not fit)."""
    try:
        cls = EVENT_TYPES[EventKind(kind)]
    except ValueError:
        raise TraceFieldError("kind", f"{kind!r} is not a kind of event; kinds: {', '.join(EventKind)}") from None
    if not isinstance(payload, dict):
        raise TraceFieldError("payload", "is not an object")
    try:
        return cls.from_payload(payload)
    except TraceFieldError as exc:
        raise TraceFieldError(f"payload.{exc.field}", exc.message) from None
