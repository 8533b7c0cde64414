"""The share consumer (``KafkaShareConsumer``, KIP-932) as the Lab runs it.

After Kafka's ``ShareConsumerImpl``, ``ShareMembershipManager`` and
``ShareConsumeRequestManager``, reduced to what the protocol needs:

* **membership**: ShareGroupHeartbeat every interval the coordinator returns, one request in
  flight, changed fields only (all of them on a join or after an error). The member state
  machine is the new consumer's (``member_state.CONSUMER_MEMBER_MACHINE``): a share member
  takes a new assignment at once (no revocation, no callbacks), so it passes through
  RECONCILING and ACKNOWLEDGING in the same step;
* **share sessions**, one per share-partition leader (broker): epoch 0 opens, each answered
  request moves it on, -1 closes; on INVALID_SHARE_SESSION_EPOCH / SHARE_SESSION_NOT_FOUND the
  session restarts at 0 and the acknowledgements it carried are reported failed;
* **the application**: ``poll`` returns the acquired records (with their delivery counts);
  processing takes simulated time per record; a record matching a ``FailureRule`` is
  released, rejected or held too long (the acquisition lock runs out); acknowledgements go
  out piggy-backed on the next ShareFetch, or with ``commitSync`` (the app waits) or
  ``commitAsync``; the results reach the acknowledgement commit callback (here: the trace
  and ``commit_results``);
* **close**: acknowledgements still pending are sent with the final request (epoch -1) of
  every share session, whatever was delivered and not acknowledged is released (implicit
  mode) and the member leaves with epoch -1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kip_lab.clients.application import TP, by_topic
from kip_lab.clients.member_plumbing import MemberPlumbing
from kip_lab.clients.member_state import CONSUMER_MEMBER_MACHINE, MemberState
from kip_lab.clients.share_acknowledgements import Acknowledgements, DeliveredRecord
from kip_lab.events import AssignmentChanged, RecordsProcessed, ShareAckResult
from kip_lab.protocol.common import from_topic_partitions
from kip_lab.protocol.errors import Errors
from kip_lab.protocol.share import (
    FINAL_SHARE_SESSION_EPOCH,
    INT32_MAX,
    AcknowledgementBatch,
    AcknowledgeType,
    ForgottenTopic,
    ShareAcknowledgeRequest,
    ShareAcknowledgeRequestPartition,
    ShareAcknowledgeRequestTopic,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchRequestPartition,
    ShareFetchRequestTopic,
    ShareFetchResponse,
    ShareFetchResponsePartition,
)
from kip_lab.protocol.share_group import (
    SHARE_LEAVE_MEMBER_EPOCH,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kip_lab.regex import InvalidRegex, compile_subscription
from kip_lab.share.session import next_session_epoch

RETRIABLE = {Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS}


class FailureRule(BaseModel):
    """Records the application cannot process: a poison-message rule.

    A record matches when its value matches ``value_regex`` (a full match, with RE2 semantics:
    linear time, no backreferences or lookaround; see ``kip_lab.regex``) or its offset is in
    ``offsets`` (of any partition). ``action``: ``release`` (a transient error: try again
    later), ``reject`` (a permanent error: archive it), ``hang`` (processing takes ``hang_ms``,
    long enough for the acquisition lock to run out; then the record is released).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    value_regex: str | None = None
    offsets: list[int] = Field(default_factory=list)
    action: Literal["release", "reject", "hang"] = "release"
    hang_ms: int = Field(60_000, ge=0)

    @model_validator(mode="after")
    def _something_to_match(self) -> FailureRule:
        if self.value_regex is None and not self.offsets:
            raise ValueError("a failure rule needs value_regex or offsets")
        if self.value_regex is not None:
            try:
                compile_subscription(self.value_regex)
            except InvalidRegex as exc:
                raise ValueError(f"value_regex: {exc}") from None
        return self

    def matches(self, record: DeliveredRecord) -> bool:
        if record.offset in self.offsets:
            return True
        if self.value_regex is None:
            return False
        return compile_subscription(self.value_regex).fullmatch(record.value or "") is not None


class ShareConsumerConfig(BaseModel):
    """A share consumer's configuration and its application's behaviour."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group_id: str = Field("share", min_length=1)
    subscribed_topic_names: list[str] = Field(min_length=1)
    rack_id: str | None = None
    acknowledgement: Literal["implicit", "explicit"] = Field(
        "implicit", description="implicit: every delivered record is accepted; explicit: acknowledge() each"
    )
    commit: Literal["poll", "sync", "async"] = Field(
        "poll", description="when acknowledgements go out: with the next poll, commitSync or commitAsync"
    )
    max_poll_records: int = Field(500, gt=0, description="records one ShareFetch may acquire per partition")
    processing_ms_per_record: float = Field(1.0, ge=0)
    idle_poll_ms: int = Field(500, gt=0, description="wait before fetching again after an empty poll (a long poll)")
    failures: list[FailureRule] = Field(default_factory=list)
    request_timeout_ms: int = Field(30_000, gt=0)
    retry_backoff_ms: int = Field(100, gt=0)

    @model_validator(mode="after")
    def _failures_need_explicit(self) -> ShareConsumerConfig:
        if self.failures and self.acknowledgement == "implicit" and any(f.action != "hang" for f in self.failures):
            raise ValueError(
                "failure rules that release or reject need acknowledgement='explicit' "
                "(implicit acknowledgement accepts every record)"
            )
        return self


@dataclass
class ShareSession:
    """The consumer's side of one share session (with one share-partition leader)."""

    epoch: int = 0
    in_flight: int | None = None  # correlation id of the request out
    partitions: set[TP] = field(default_factory=set)  # partitions the leader has in the session


@dataclass
class ShareConsumer(MemberPlumbing):
    """One share-consumer process. ``world`` is the Lab's world (clock, network, trace)."""

    MEMBER_MACHINE = CONSUMER_MEMBER_MACHINE

    name: str
    config: ShareConsumerConfig
    world: Any
    incarnation: int = 0
    state: MemberState = MemberState.UNSUBSCRIBED
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assigned: set[TP] = field(default_factory=set)
    sessions: dict[str, ShareSession] = field(default_factory=dict)  # broker -> session
    acks: Acknowledgements = field(default_factory=Acknowledgements)
    alive: bool = True
    paused: bool = False
    processing: bool = False
    waiting_commit: set[int] = field(default_factory=set)  # commitSync: correlations still out
    closing: bool = False
    fetched: list[DeliveredRecord] = field(default_factory=list)  # arrived, not yet returned by poll
    commit_results: list[dict[str, Any]] = field(default_factory=list)  # what the callback saw
    outcomes: dict[str, int] = field(default_factory=dict)  # accept/release/reject/hang counts
    _batch: list[DeliveredRecord] = field(default_factory=list)  # being processed
    _sent: dict[str, Any] = field(default_factory=dict)
    _hb_in_flight: int | None = None
    _pending: dict[int, tuple[str, Any]] = field(default_factory=dict)

    # ------------------------------------------------------------------ helpers
    def _send(self, broker: str, api: str, request: Any, context: Any = None) -> int:
        """Send with a request timeout armed (every share RPC has one)."""
        correlation = self._send_to(broker, api, request, context)
        self._timer(("request_timeout", correlation), self.config.request_timeout_ms)
        return correlation

    # ------------------------------------------------------------------ lifecycle
    def subscribe(self) -> None:
        """Join the group (UNSUBSCRIBED -> JOINING) with an immediate heartbeat, and start polling."""
        self.closing = False
        self.member_epoch = 0
        self._sent.clear()
        self._transition(MemberState.JOINING, "subscribe")
        self._timer("heartbeat", 0)
        self._timer("poll", 0)

    def change_subscription(self, topics: list[str] | None, regex: str | None) -> None:
        """subscribe() again with other topic names: a member in the group sends them with its next heartbeat and
        takes the assignment that follows; one out of the group (not started, or closed) joins (Kafka
        ``ShareConsumerImpl.subscribe``, then ``AbstractMembershipManager.onSubscriptionUpdated``).

        A share consumer subscribes to topic names only: KIP-932's ``KafkaShareConsumer.subscribe`` takes no pattern.
        """
        if regex is not None:
            raise ValueError(f"{self.name!r} is a share consumer: it subscribes to topic names, not to a regex")
        if not topics:
            raise ValueError(f"{self.name!r} is a share consumer: it needs at least one topic name (close it to leave)")
        self.config = self.config.model_copy(update={"subscribed_topic_names": list(topics)})
        if self.alive and self.state is MemberState.UNSUBSCRIBED:
            self.subscribe()

    def close(self) -> None:
        """Send what is pending (releasing the rest) on the final request of every session, then leave."""
        if not self.alive or self.closing or self.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL):
            return
        self.closing = True
        self._cancel("poll")
        self._cancel("processed")
        self.processing = False
        acks = self.acks.take_for_close(self.fetched)  # fetched but not yet polled: acquired, so released
        self.fetched = []
        for broker in sorted(self.sessions):
            session = self.sessions[broker]
            if session.epoch == 0 and not session.partitions:
                continue
            mine = {tp: b for tp, b in acks.items() if self._leader(tp) == broker}
            self._send_acknowledge(broker, mine, FINAL_SHARE_SESSION_EPOCH)
        self.sessions = {}
        self._transition(MemberState.PREPARE_LEAVING, "unsubscribe or close")
        self._transition(MemberState.LEAVING, "partitions released")
        self._heartbeat()

    def crash(self) -> None:
        """The process dies: no acknowledgements, no leave. Its connections close, so each leader ends
        its share session and releases its records; the coordinator removes it after the session timeout."""
        self.alive = False
        self.world.scheduler.cancel_all(self)
        self._pending.clear()
        for leader in self.world.share.leaders.values():  # its connections close with it
            leader.close_connection(self.config.group_id, self.member_id)

    def pause(self) -> None:
        """The application stops (a long GC): no polls, no heartbeats; locks and the session timeout run."""
        self.paused = True
        for key in ("heartbeat", "poll", "processed"):
            self._cancel(key)

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self._timer("heartbeat", 0)
            if self.processing:
                self._processed()
            else:
                self._timer("poll", 0)

    def settled(self) -> bool:
        """In the group at the coordinator's epoch and subscription, fetching exactly what the coordinator assigned,
        and that is the group's latest target (a newer one reaches the member with its next heartbeat)."""
        if not self.alive or self.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL):
            return True
        group = self.world.coordinator.share_groups.get(self.config.group_id)
        member = group.members.get(self.member_id) if group else None
        if self.state is not MemberState.STABLE or member is None:
            return False
        target = group.target_of(self.member_id)
        return (
            member.member_epoch == self.member_epoch
            and set(member.subscribed_topic_names) == set(self.config.subscribed_topic_names)
            and self.assigned == {(t, p) for t, parts in member.assigned.items() for p in parts}
            and self.assigned == {(t, p) for t, parts in target.items() for p in parts}
        )

    # ------------------------------------------------------------------ timers
    def fire_timer(self, key: Any) -> None:
        if not self.alive:
            return
        if key == "heartbeat":
            self._heartbeat()
        elif key == "poll":
            self._poll()
        elif key == "processed":
            self._processed()
        elif isinstance(key, tuple) and key[0] == "request_timeout":
            self._request_timed_out(key[1])
        else:
            raise ValueError(f"{self.name}: unknown timer {key!r}")

    # ------------------------------------------------------------------ membership
    def _heartbeat(self) -> None:
        if self.paused or self.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL, MemberState.FENCED):
            return
        if self._hb_in_flight is not None and self.state is not MemberState.LEAVING:
            return
        broker = self.world.coordinator_broker(self.config.group_id)
        if self.state is MemberState.LEAVING:
            request = ShareGroupHeartbeatRequest(
                group_id=self.config.group_id, member_id=self.member_id, member_epoch=SHARE_LEAVE_MEMBER_EPOCH
            )
            self._send(broker, "ShareGroupHeartbeat", request, SHARE_LEAVE_MEMBER_EPOCH)
            self._forget(set(self.assigned))
            self.assigned = set()
            self._transition(MemberState.UNSUBSCRIBED, "leave heartbeat sent")
            return
        body: dict[str, Any] = {
            "group_id": self.config.group_id,
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
        }
        full = self.member_epoch == 0
        for name, value in (
            ("rack_id", self.config.rack_id),
            ("subscribed_topic_names", self.config.subscribed_topic_names),
        ):
            if value is not None and (full or self._sent.get(name) != value):
                body[name] = value
                self._sent[name] = value
        self._hb_in_flight = self._send(
            broker, "ShareGroupHeartbeat", ShareGroupHeartbeatRequest(**body), self.member_epoch
        )
        if self.state is MemberState.ACKNOWLEDGING:
            self._transition(MemberState.STABLE, "acknowledgement sent")

    def _on_heartbeat(self, response: ShareGroupHeartbeatResponse, sent_epoch: int) -> None:
        if sent_epoch == SHARE_LEAVE_MEMBER_EPOCH or self.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL):
            return
        error = response.error_code
        if error is Errors.NONE:
            if response.member_id:
                self.member_id = response.member_id
            self.member_epoch = response.member_epoch
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
            if response.assignment is not None:
                self._new_assignment(from_topic_partitions(response.assignment.topic_partitions))
            elif self.state is MemberState.JOINING:
                self._transition(MemberState.STABLE, "joined, nothing to reconcile")
            self._timer("heartbeat", self.heartbeat_interval_ms)
            return
        if error in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_MEMBER_EPOCH):
            # Stop fetching from the revoked partitions and rejoin with epoch 0 (same member id).
            if self.state is not MemberState.JOINING:
                self._transition(MemberState.FENCED, "fenced")
                self._forget(set(self.assigned))
                self.assigned = set()
                self._emit_assignment()
                self._transition(MemberState.JOINING, "partitions lost, rejoin")
            self.member_epoch = 0
            self._sent.clear()
            self._timer("heartbeat", 0)
            return
        if error in RETRIABLE:
            self._sent.clear()
            self._timer("heartbeat", self.config.retry_backoff_ms)
            return
        self._transition(MemberState.FATAL, "fatal error")
        self._note(f"fatal heartbeat error {error.name}: {response.error_message}")

    def _new_assignment(self, assignment: dict[str, frozenset[int]]) -> None:
        """No revocation barrier: the new assignment is taken at once and acknowledged by the next heartbeat."""
        new = {(t, p) for t, parts in assignment.items() for p in parts}
        trigger = "joined with an assignment" if self.state is MemberState.JOINING else "new assignment"
        if self.state is not MemberState.RECONCILING:
            self._transition(MemberState.RECONCILING, trigger)
        self._forget(self.assigned - new)
        self.assigned = new
        self._emit_assignment()
        self._transition(MemberState.ACKNOWLEDGING, "reconciled")
        self._cancel("heartbeat")
        self._timer("heartbeat", 0)

    def _forget(self, partitions: set[TP]) -> None:
        """Partitions no longer assigned: their unsent acknowledgements and buffered records are dropped.

        Kafka sends the pending acknowledgements first; the records come back through lock expiry
        or the session's end otherwise. Dropping them keeps the model small (docs/decisions.md SG9).
        """
        if not partitions:
            return
        self.acks.forget(partitions)
        self.fetched = [r for r in self.fetched if r.tp not in partitions]

    def _emit_assignment(self) -> None:
        self.world.emit(
            self.name,
            AssignmentChanged(self.member_id, self.member_epoch, share_assigned=tuple(sorted(self.assigned))),
        )

    # ------------------------------------------------------------------ the application: poll, process, commit
    def _leader(self, tp: TP) -> str:
        return self.world.share.leader_of(tp)

    def _poll(self) -> None:
        """``poll()``: hand over what arrived (or what explicit mode hands back), else fetch."""
        if self.paused or self.processing or self.closing or self.waiting_commit:
            return
        if self.fetched or self.acks.has_delivered():
            records = self.acks.on_poll(self.fetched)
            self.fetched = []
            self._process(records)
            return
        self._fetch(self.acks.take_for_commit())  # piggy-backed: whatever commit mode left pending

    def _fetch(self, acks: dict[TP, list[AcknowledgementBatch]]) -> None:
        """One ShareFetch per leader (that has no request out) with its piggy-backed acknowledgements."""
        by_broker: dict[str, set[TP]] = {}
        for tp in self.assigned:
            by_broker.setdefault(self._leader(tp), set()).add(tp)
        for tp in acks:
            by_broker.setdefault(self._leader(tp), set())
        sent = False
        for broker in sorted(set(by_broker) | set(self.sessions)):
            sent |= self._fetch_from(broker, by_broker.get(broker, set()), acks)
        if not sent and not self.closing:
            self._timer("poll", self.config.idle_poll_ms)

    def _fetch_from(self, broker: str, wanted: set[TP], acks: dict[TP, list[AcknowledgementBatch]]) -> bool:
        """Send this leader a ShareFetch, unless one is out or there is nothing to fetch, acknowledge or forget.

        Acknowledgements for a leader with no open share session fail at once: there is no session
        to carry them (``INVALID_SHARE_SESSION_EPOCH``). Returns whether a request went out.
        """
        session = self.sessions.setdefault(broker, ShareSession())
        if session.in_flight is not None:
            return False
        mine = {tp: b for tp, b in acks.items() if self._leader(tp) == broker}
        if session.epoch == 0 and mine:
            self._report(mine, Errors.INVALID_SHARE_SESSION_EPOCH, "no open share session to carry them")
            mine = {}
        if not wanted and not session.partitions and not mine:
            return False
        request = self._share_fetch_request(session, wanted, mine)
        session.in_flight = self._send(broker, "ShareFetch", request, (broker, mine, frozenset(wanted)))
        return True

    def _share_fetch_request(
        self, session: ShareSession, wanted: set[TP], mine: dict[TP, list[AcknowledgementBatch]]
    ) -> ShareFetchRequest:
        """The partitions wanted (at full size) and those only acknowledged (size 0); the session's others forgotten."""
        topics = []
        for topic_id, parts in by_topic(wanted | set(mine)).items():
            topics.append(
                ShareFetchRequestTopic(
                    topic_id=topic_id,
                    partitions=[
                        ShareFetchRequestPartition(
                            partition_index=p,
                            partition_max_bytes=0 if (topic_id, p) not in wanted else INT32_MAX,
                            acknowledgement_batches=mine.get((topic_id, p), []),
                        )
                        for p in parts
                    ],
                )
            )
        forgotten = [
            ForgottenTopic(topic_id=t, partitions=ps)
            for t, ps in by_topic(session.partitions - wanted).items()
            if session.epoch > 0
        ]
        return ShareFetchRequest(
            group_id=self.config.group_id,
            member_id=self.member_id,
            share_session_epoch=session.epoch,
            max_records=self.config.max_poll_records,
            topics=topics,
            forgotten_topics_data=forgotten,
        )

    def _on_share_fetch(self, response: ShareFetchResponse, context: Any) -> None:
        broker, acks, wanted = context
        session = self.sessions.get(broker)
        if session is None:
            return  # closed meanwhile
        session.in_flight = None
        if response.error_code is not Errors.NONE:  # e.g. INVALID_SHARE_SESSION_EPOCH: reopen with epoch 0
            session.epoch, session.partitions = 0, set()
            self._report(acks, response.error_code, response.error_message)
        else:
            session.epoch = next_session_epoch(session.epoch)
            session.partitions = set(wanted)
            ack_errors = self._take_records(response)
            for tp in sorted(acks):
                code, message = ack_errors.get(tp, (Errors.NONE, None))
                self._report({tp: acks[tp]}, code, message)
        if all(s.in_flight is None for s in self.sessions.values()):
            self._timer("poll", 0 if self.fetched else self.config.idle_poll_ms)

    def _take_records(self, response: ShareFetchResponse) -> dict[TP, tuple[Errors, str | None]]:
        """Keep the acquired records of the partitions still assigned; return each partition's acknowledgement error."""
        ack_errors: dict[TP, tuple[Errors, str | None]] = {}
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic_id, p.partition_index)
                ack_errors[tp] = (p.acknowledge_error_code, p.acknowledge_error_message)
                if p.error_code is Errors.NONE and tp in self.assigned:
                    self.fetched += _acquired_records(tp, p)
        return ack_errors

    def _process(self, records: list[DeliveredRecord]) -> None:
        """The application works through the batch: ``processing_ms_per_record`` each, failure rules apply."""
        self.processing = True
        self._batch = records
        duration = self.config.processing_ms_per_record * len(records)
        for record in records:
            rule = self._rule_for(record)
            if rule is not None and rule.action == "hang":
                duration += rule.hang_ms
        self._note(f"poll returned {len(records)} records", offsets=[[*r.tp, r.offset] for r in records[:50]])
        self._timer("processed", int(duration))  # the clock counts whole milliseconds

    def _rule_for(self, record: DeliveredRecord) -> FailureRule | None:
        for rule in self.config.failures:
            if rule.matches(record):
                return rule
        return None

    def _processed(self) -> None:
        if self.paused:
            return
        self.processing = False
        records, self._batch = self._batch, []
        self._report_processed(records)
        for record in records:
            rule = self._rule_for(record)
            outcome = "accept" if rule is None else rule.action
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            if self.config.acknowledgement == "explicit":
                kind = {"accept": AcknowledgeType.ACCEPT, "reject": AcknowledgeType.REJECT}.get(
                    outcome, AcknowledgeType.RELEASE
                )
                if self._still_delivered(record):
                    self.acks.acknowledge(record, kind)
        if self.config.commit == "poll":
            self._timer("poll", 0)
            return
        acks = self.acks.take_for_commit()
        if not acks:
            self._timer("poll", 0)
            return
        correlations = self._commit(acks)
        if self.config.commit == "sync":
            self.waiting_commit = set(correlations)
            if not self.waiting_commit:
                self._timer("poll", 0)
        else:
            self._timer("poll", 0)

    def _report_processed(self, records: list[DeliveredRecord]) -> None:
        """Trace the batch the application has worked through, as runs of consecutive offsets (for the ledger)."""
        ranges: list[tuple[str, int, int, int, str]] = []
        for record in sorted(records, key=lambda r: (r.tp, r.offset)):
            last = ranges[-1] if ranges else None
            if last is not None and (last[0], last[1]) == record.tp and last[3] == record.offset:
                ranges[-1] = (*record.tp, last[2], record.offset + 1, "acquired")
            else:
                ranges.append((*record.tp, record.offset, record.offset + 1, "acquired"))
        if ranges:
            event = RecordsProcessed(self.config.group_id, self.member_id, self.incarnation, tuple(ranges))
            self.world.emit(self.name, event)

    def _still_delivered(self, record: DeliveredRecord) -> bool:
        return record.offset in self.acks.delivered.get(record.tp, {})

    def _commit(self, acks: dict[TP, list[AcknowledgementBatch]]) -> list[int]:
        """CommitSync / commitAsync: a ShareAcknowledge to each leader with an open session."""
        by_broker: dict[str, dict[TP, list[AcknowledgementBatch]]] = {}
        for tp, batches in acks.items():
            by_broker.setdefault(self._leader(tp), {})[tp] = batches
        out = []
        for broker, mine in sorted(by_broker.items()):
            session = self.sessions.get(broker)
            if session is None or session.epoch == 0:
                self._report(mine, Errors.SHARE_SESSION_NOT_FOUND, "no open share session")
                continue
            out.append(self._send_acknowledge(broker, mine, session.epoch))
        return out

    def _send_acknowledge(self, broker: str, acks: dict[TP, list[AcknowledgementBatch]], epoch: int) -> int:
        request = ShareAcknowledgeRequest(
            group_id=self.config.group_id,
            member_id=self.member_id,
            share_session_epoch=epoch,
            topics=[
                ShareAcknowledgeRequestTopic(
                    topic_id=t,
                    partitions=[
                        ShareAcknowledgeRequestPartition(partition_index=p, acknowledgement_batches=acks[(t, p)])
                        for p in parts
                    ],
                )
                for t, parts in by_topic(acks).items()
            ],
        )
        return self._send(broker, "ShareAcknowledge", request, (broker, acks, epoch))

    def _on_share_acknowledge(self, response: ShareAcknowledgeResponse, context: Any, correlation: int) -> None:
        broker, acks, epoch = context
        session = self.sessions.get(broker)
        if response.error_code is not Errors.NONE:
            if session is not None and epoch != FINAL_SHARE_SESSION_EPOCH:
                session.epoch, session.partitions = 0, set()
            self._report(acks, response.error_code, response.error_message)
        else:
            if session is not None and epoch != FINAL_SHARE_SESSION_EPOCH:
                session.epoch = next_session_epoch(session.epoch)
            errors = {
                (t.topic_id, p.partition_index): (p.error_code, p.error_message)
                for t in response.responses
                for p in t.partitions
            }
            for tp in sorted(acks):
                code, message = errors.get(tp, (Errors.NONE, None))
                self._report({tp: acks[tp]}, code, message)
        if correlation in self.waiting_commit:
            self.waiting_commit.discard(correlation)
            if not self.waiting_commit:
                self._timer("poll", 0)

    def _report(self, acks: dict[TP, list[AcknowledgementBatch]], error: Errors, message: str | None) -> None:
        """The acknowledgement commit callback: ``onComplete(offsets, exception)`` per partition."""
        for tp, batches in sorted(acks.items()):
            offsets = [o for b in batches for o in range(b.first_offset, b.last_offset + 1)]
            failed = error is not Errors.NONE
            result = ShareAckResult(
                tp, tuple(offsets), error.name if failed else None, message if failed and message else None
            )
            self.commit_results.append(result.to_payload())
            self.world.emit(self.name, result)

    # ------------------------------------------------------------------ responses
    def _request_timed_out(self, correlation: int) -> None:
        pending = self._timed_out_request(correlation)
        if pending is None:
            return
        api, context = pending
        if api == "ShareGroupHeartbeat" and correlation == self._hb_in_flight:
            self._hb_in_flight = None
            self._sent.clear()
            self._timer("heartbeat", self.config.retry_backoff_ms)
        elif api == "ShareFetch":
            broker, acks, _ = context
            session = self.sessions.get(broker)
            if session is not None:
                session.in_flight, session.epoch, session.partitions = None, 0, set()
            self._report(acks, Errors.REQUEST_TIMED_OUT, "timed out")
            self._timer("poll", self.config.retry_backoff_ms)
        elif api == "ShareAcknowledge":
            self._on_share_acknowledge(
                ShareAcknowledgeResponse(error_code=Errors.REQUEST_TIMED_OUT, error_message="timed out"),
                context,
                correlation,
            )

    def receive(self, envelope: Any) -> None:
        pending = self._answered_request(envelope)
        if pending is None:
            return
        api, context = pending
        if api == "ShareGroupHeartbeat":
            if envelope.correlation_id == self._hb_in_flight:
                self._hb_in_flight = None
            self._on_heartbeat(envelope.payload, context)
        elif api == "ShareFetch":
            self._on_share_fetch(envelope.payload, context)
        elif api == "ShareAcknowledge":
            self._on_share_acknowledge(envelope.payload, context, envelope.correlation_id)


def _acquired_records(tp: TP, partition: ShareFetchResponsePartition) -> list[DeliveredRecord]:
    """Each acquired offset of a ShareFetch response partition, with its delivery count, key and value."""
    values = {r.offset: r for r in partition.records}
    delivered = []
    for acquired in partition.acquired_records:
        for offset in range(acquired.first_offset, acquired.last_offset + 1):
            record = values.get(offset)
            delivered.append(
                DeliveredRecord(
                    tp[0],
                    tp[1],
                    offset,
                    acquired.delivery_count,
                    None if record is None else record.key,
                    None if record is None else record.value,
                )
            )
    return delivered
