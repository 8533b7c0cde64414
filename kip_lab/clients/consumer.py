"""The new consumer (``group.protocol=consumer``) as the Lab runs it.

It models what matters to the protocol, after Kafka's ``AsyncKafkaConsumer``:

* the **member state machine** (``member_state.CONSUMER_MEMBER_MACHINE``), enforced;
* the **heartbeat manager**: one request in flight, the interval the coordinator returns, an
  immediate heartbeat when joining, acknowledging or leaving, only changed fields sent
  (a full request after a join or an error), exponential backoff on retriable errors, a
  request timeout for a lost response;
* **reconciliation**: commit (auto-commit), stop fetching and ``on_partitions_revoked`` for
  what is taken away, then ``on_partitions_assigned`` for what is added, then acknowledge;
  on fencing ``on_partitions_lost`` and rejoin at epoch 0 with the same member id;
* an **application thread** that runs the callbacks (which take simulated time, and may
  raise) and whose ``poll`` keeps the ``max.poll.interval.ms`` timer alive. As in Kafka's
  ``AsyncKafkaConsumer``, the heartbeat and the reconciliation run on the background thread,
  which asks the application thread for ``on_partitions_revoked`` / ``on_partitions_assigned`` /
  ``on_partitions_lost`` with a background event; the application thread runs it at its next
  ``poll()`` (every ``time_between_polls_ms``), and the reconciliation goes on when it returns. So a
  member that received a new assignment keeps fetching what it owns until its application polls,
  and acknowledges only after the callbacks ran;
* **consumption**: a partition that is fetching advances its position at the consumer's
  rate up to the log end; positions are committed every ``auto_commit_interval_ms`` and
  before a revocation, so the Lab can measure what a rebalance costs (time not fetching,
  records processed twice).

Positions are computed from time rather than stepped record by record, so a stable group
costs a few events per heartbeat interval, not one per record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kip_lab.clients.application import TP, ApplicationLoop, by_topic
from kip_lab.clients.member_state import CONSUMER_MEMBER_MACHINE, MemberState
from kip_lab.protocol import Errors
from kip_lab.protocol.common import TopicPartitions
from kip_lab.protocol.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kip_lab.runtime.memo import Memo

RETRIABLE = {Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS}
FENCING = {Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID}


class CallbackConfig(BaseModel):
    """How long each rebalance callback takes (simulated ms) and how many times it raises."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    on_partitions_revoked_ms: int = Field(0, ge=0)
    on_partitions_assigned_ms: int = Field(0, ge=0)
    on_partitions_lost_ms: int = Field(0, ge=0)
    revoked_failures: int = Field(0, ge=0, description="the first N calls of on_partitions_revoked raise")
    assigned_failures: int = Field(0, ge=0, description="the first N calls of on_partitions_assigned raise")


class ConsumerConfig(BaseModel):
    """A member's configuration (Kafka consumer configs, snake_case)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group_id: str = Field("g", min_length=1)
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    instance_id: str | None = Field(None, min_length=1, description="group.instance.id: a static member")
    rack_id: str | None = None
    server_assignor: str | None = Field(None, description="group.remote.assignor")
    max_poll_interval_ms: int = Field(300_000, gt=0, description="also sent as the rebalance timeout")
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = Field(5_000, gt=0)
    auto_offset_reset: str = Field("earliest", pattern="^(earliest|latest)$")
    retry_backoff_ms: int = Field(100, gt=0)
    retry_backoff_max_ms: int = Field(1_000, gt=0)
    request_timeout_ms: int = Field(30_000, gt=0)
    consume_rate_per_ms: float = Field(10.0, gt=0, description="records this member can process per ms")
    time_between_polls_ms: int = Field(
        50,
        ge=0,
        description="how long the application spends between two calls to poll() (processing what the last one "
        "returned); the new consumer's rebalance callbacks, asked for by its background thread, run at the next "
        "call (0: at once)",
    )
    callbacks: CallbackConfig = CallbackConfig()

    @model_validator(mode="after")
    def _subscription(self) -> ConsumerConfig:
        check_subscription(self.subscribed_topic_names, self.subscribed_topic_regex)
        return self


def check_subscription(topic_names: list[str] | None, topic_regex: str | None) -> None:
    """A consumer subscribes to topic names or to a regex: exactly one of them."""
    if not topic_names and not topic_regex:
        raise ValueError("a consumer needs subscribed_topic_names or subscribed_topic_regex")
    if topic_names and topic_regex:
        raise ValueError("use subscribed_topic_names or subscribed_topic_regex, not both")


class RebalanceListener(Protocol):
    """User callbacks: return how long the call takes (ms), or raise to fail it."""

    def on_partitions_revoked(self, partitions: list[str]) -> int: ...
    def on_partitions_assigned(self, partitions: list[str]) -> int: ...
    def on_partitions_lost(self, partitions: list[str]) -> int: ...


def _steady_heartbeat(group_id: str, member_id: str, member_epoch: int) -> ConsumerGroupHeartbeatRequest:
    """A heartbeat with nothing changed since the last one: a frozen value a member sends
    again every interval, so it is built (and validated) once per member epoch (``Consumer._steady``)."""
    return ConsumerGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=member_epoch)


@dataclass
class TimedListener:
    """The default listener: fixed durations from ``CallbackConfig``, optional failures."""

    config: CallbackConfig
    revoked_calls: int = 0
    assigned_calls: int = 0

    def on_partitions_revoked(self, partitions: list[str]) -> int:
        self.revoked_calls += 1
        if self.revoked_calls <= self.config.revoked_failures:
            raise RuntimeError(f"on_partitions_revoked failed (call {self.revoked_calls})")
        return self.config.on_partitions_revoked_ms

    def on_partitions_assigned(self, partitions: list[str]) -> int:
        """Kafka calls it on every reconciliation; with no new partitions there is nothing to set up (0 ms)."""
        self.assigned_calls += 1
        if self.assigned_calls <= self.config.assigned_failures:
            raise RuntimeError(f"on_partitions_assigned failed (call {self.assigned_calls})")
        return self.config.on_partitions_assigned_ms if partitions else 0

    def on_partitions_lost(self, partitions: list[str]) -> int:
        return self.config.on_partitions_lost_ms


@dataclass
class Consumer(ApplicationLoop):
    """One consumer process. ``world`` is the Lab's world (clock, RNG, network, trace)."""

    MEMBER_MACHINE = CONSUMER_MEMBER_MACHINE

    config: ConsumerConfig
    state: MemberState = MemberState.UNSUBSCRIBED
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    target: frozenset[TP] | None = None  # latest assignment not yet reconciled
    reconciling: bool = False
    _poll_expired: bool = False
    _sent: dict[str, Any] = field(default_factory=dict)  # last value sent per conditional field
    _backoff_ms: int = 0
    _reconciliation: int = 0  # bumped by every reconciliation, fence and leave: stale continuations stop
    _stale_released: bool = True  # a STALE member has finished on_partitions_lost and may rejoin
    # Kafka's currentAssignment is not NONE: an assignment was reconciled since the member (re)joined.
    _has_assignment: bool = False
    _reconciled: int = 0  # completed reconciliations: each one's acknowledgement reports the owned partitions
    _steady: Memo[ConsumerGroupHeartbeatRequest] = field(default_factory=lambda: Memo(_steady_heartbeat, limit=16))
    # Background events for the application thread (Kafka's ConsumerRebalanceListenerCallbackNeededEvent):
    # callbacks the background thread asked for, run at the application's next poll().
    _background_events: list[tuple[str, list[TP], Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.listener is None:
            self.listener = TimedListener(self.config.callbacks)

    # ------------------------------------------------------------------ lifecycle
    def subscribe(self) -> None:
        """Start: join the group (UNSUBSCRIBED -> JOINING) with an immediate heartbeat."""
        self.member_id = self.member_id or self._client_member_id()
        self.member_epoch = 0
        self._has_assignment = False
        self._sent.clear()
        self._transition(MemberState.JOINING, "subscribe")
        self.last_poll_ms = self.now
        self._arm_poll_timer()
        self._timer("heartbeat", 0)
        if self.config.enable_auto_commit:
            self._timer("auto_commit", self.config.auto_commit_interval_ms)

    def _client_member_id(self) -> str:
        return self.name if self.incarnation == 0 else f"{self.name}#{self.incarnation + 1}"

    def close(self) -> None:
        """Leave the group: commit, revoke (callbacks), heartbeat with epoch -1 (-2 if static).

        As Kafka's ``leaveGroup``: a no-op when already out of the group or already leaving; a
        FENCED member (still running on_partitions_lost) just drops its assignment.
        """
        if not self.alive or self.state in (
            MemberState.UNSUBSCRIBED,
            MemberState.FATAL,
            MemberState.STALE,
            MemberState.PREPARE_LEAVING,
            MemberState.LEAVING,
        ):
            return
        if self.state is MemberState.FENCED:
            self._transition(MemberState.UNSUBSCRIBED, "unsubscribed while fenced")
            self._abandon_membership()
            return
        self._transition(MemberState.PREPARE_LEAVING, "unsubscribe or close")
        self._release_then_leave(run_callbacks=True)

    def _abandon_membership(self) -> None:
        """Out of the group without a leave heartbeat: stop fetching, drop the assignment, stop timers."""
        self.target = None
        self.reconciling = False
        self._reconciliation += 1
        self._stop_fetching(set(self.fetching))
        if self.owned:
            self.owned.clear()
            self._emit_assignment()
        for key in ("heartbeat", "poll_timeout", "auto_commit"):
            self._cancel(key)

    def change_subscription(self, topics: list[str] | None, regex: str | None) -> None:
        """subscribe() again with other topics or another pattern: a member not in the group joins; one in
        it sends the change with its next heartbeat (Kafka ``AbstractMembershipManager.onSubscriptionUpdated``)."""
        self.config = self.config.model_copy(update={"subscribed_topic_names": topics, "subscribed_topic_regex": regex})
        if self.state is MemberState.UNSUBSCRIBED:
            self.subscribe()

    # ------------------------------------------------------------------ the application thread
    def _may_auto_commit(self) -> bool:
        return self.state in (MemberState.STABLE, MemberState.RECONCILING, MemberState.ACKNOWLEDGING)

    def _poll(self) -> None:
        """A call to poll(): keeps the poll timer alive; a STALE member rejoins."""
        if not self.alive or self.paused:
            return
        self.last_poll_ms = max(self.now, self.app_busy_until)
        if self.state is MemberState.STALE and self._stale_released:
            self._rejoin_stale()
        self._arm_poll_timer()
        self._process_background_events()
        self._run_queued_callbacks()

    def _call_back_from_background(self, kind: str, partitions: list[TP], then: Any) -> None:
        """The background thread asks the application thread for a callback (Kafka
        ``ConsumerMembershipManager.enqueueConsumerRebalanceListenerCallback``): it runs at the next poll()."""
        self._background_events.append((kind, partitions, then))
        self._schedule_next_poll()

    def _process_background_events(self) -> None:
        """Kafka ``AsyncKafkaConsumer.processBackgroundEvents``, at the start of every poll(): the callbacks asked
        for so far run, one after the other, on the application thread."""
        events, self._background_events = self._background_events, []
        for kind, partitions, then in events:
            self._call_back(kind, partitions, then)

    def _schedule_next_poll(self) -> None:
        """Wake the application thread at its next poll(), if a background event waits for it.

        Polls come every ``time_between_polls_ms`` after the last one; a poll in which a callback just
        ran has happened, so what is asked for meanwhile waits for the next. While a callback runs, or
        the application does not poll at all (paused), nothing is scheduled: the callback's return and
        ``resume`` poll again.
        """
        if not self._background_events or self.paused or self._callback_running:
            return
        gap = self.config.time_between_polls_ms
        last = max(self.last_poll_ms, self.app_busy_until)
        if gap == 0:
            self._timer("app_poll", 0)
            return
        polls_since = max(1, -(-(self.now - last) // gap))
        self._timer("app_poll", last + polls_since * gap - self.now)

    def _callback_returned(self, seq: int) -> None:
        super()._callback_returned(seq)
        self._schedule_next_poll()

    def _rejoin_stale(self) -> None:
        """Kafka's ``maybeRejoinStaleMember``: once polled again and the assignment released, rejoin."""
        self._poll_expired = False
        self.member_epoch = 0
        self._has_assignment = False
        self._sent.clear()
        self._transition(MemberState.JOINING, "poll")
        self._timer("heartbeat", 0)

    def _stale_release_done(self, _ok: bool) -> None:
        # The callback ran on the application thread, inside poll: the poll timer is reset.
        self._stale_released = True
        if self.state is MemberState.STALE and not self.paused:
            self._rejoin_stale()

    # ------------------------------------------------------------------ timers
    def fire_timer(self, key: Any) -> None:
        if not self.alive:
            return
        if key == "heartbeat":
            self._maybe_heartbeat()
        elif key == "app_poll":
            self._poll()
        elif key == "auto_commit":
            self._auto_commit()
        elif key == "poll_timeout":
            self._poll_timer_expired()
        elif isinstance(key, tuple) and key[0] == "callback":
            self._callback_returned(key[1])
        elif isinstance(key, tuple) and key[0] == "request_timeout":
            self._request_timed_out(key[1])
        elif isinstance(key, tuple) and key[0] == "fetch_offsets":
            if self.state not in (MemberState.FATAL, MemberState.UNSUBSCRIBED, MemberState.STALE):
                self._fetch_offsets_again(key[1])
        else:
            raise ValueError(f"{self.name}: unknown timer {key!r}")

    def _poll_timer_expired(self) -> None:
        if self.paused or self.app_busy_until > self.now:
            if self.state in (
                MemberState.JOINING,
                MemberState.STABLE,
                MemberState.RECONCILING,
                MemberState.ACKNOWLEDGING,
            ):
                self._poll_expired = True
                self._transition(MemberState.PREPARE_LEAVING, "poll timer expired")
                self._release_then_leave(run_callbacks=False)
            return
        self._poll()

    # ------------------------------------------------------------------ heartbeats
    def _maybe_heartbeat(self) -> None:
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL, MemberState.STALE, MemberState.FENCED):
            return
        if self._hb_in_flight is not None and self.state is not MemberState.LEAVING:
            return  # one heartbeat at a time, except the leave heartbeat, which goes out at once (Kafka)
        request = self._heartbeat_request()
        correlation = self._send("ConsumerGroupHeartbeat", request, request.member_epoch)
        self._hb_in_flight = correlation
        self._timer(("request_timeout", correlation), self.config.request_timeout_ms)
        if self.state is MemberState.ACKNOWLEDGING:
            if self.target is None:
                self._transition(MemberState.STABLE, "acknowledgement sent")
            else:
                self._transition(MemberState.RECONCILING, "new assignment")
                self._reconcile()
        elif self.state is MemberState.LEAVING:
            released = sorted(self.owned)
            if released:
                self.owned.clear()
                self._emit_assignment()
            if self._poll_expired:
                self._transition(MemberState.STALE, "leave heartbeat sent after poll timeout")
                # Kafka's transitionToStale: on_partitions_lost, then wait for a poll to rejoin.
                self._stale_released = not released
                if released:
                    self._call_back("on_partitions_lost", released, self._stale_release_done)
            else:
                self._transition(MemberState.UNSUBSCRIBED, "leave heartbeat sent")
                self._cancel("poll_timeout")
                self._cancel("auto_commit")

    def _heartbeat_request(self) -> ConsumerGroupHeartbeatRequest:
        """Only fields that changed since they were last sent (all of them on a join)."""
        config = self.config
        body: dict[str, Any] = {"group_id": config.group_id, "member_id": self.member_id}
        if self.state is MemberState.LEAVING:
            body["member_epoch"] = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.is_static else LEAVE_GROUP_MEMBER_EPOCH
            return ConsumerGroupHeartbeatRequest(**body, instance_id=config.instance_id)
        epoch = body["member_epoch"] = self.member_epoch
        full = epoch == 0
        sent = self._sent
        for name, value in (  # instance_id is not among them: it goes in every request (below)
            ("rack_id", config.rack_id),
            ("rebalance_timeout_ms", config.max_poll_interval_ms),
            ("subscribed_topic_names", config.subscribed_topic_names),
            ("subscribed_topic_regex", config.subscribed_topic_regex),
            ("server_assignor", config.server_assignor),
            # Sent again after every reconciliation, even when the set did not change (Kafka compares
            # its LocalAssignment, whose epoch each new assignment bumps).
            ("topic_partitions", (self._reconciled, frozenset(self.owned))),
        ):
            if value is not None and (full or sent.get(name) != value):
                body[name] = sent[name] = value
        if "topic_partitions" in body:
            body["topic_partitions"] = [
                TopicPartitions(topic_id=t, partitions=ps) for t, ps in by_topic(body["topic_partitions"][1]).items()
            ]
        if config.instance_id is not None:
            body["instance_id"] = config.instance_id  # the coordinator needs it to find static members
        if len(body) == 3:  # group, member and epoch only
            return self._steady(config.group_id, self.member_id, epoch)
        return ConsumerGroupHeartbeatRequest(**body)

    def _request_timed_out(self, correlation: int) -> None:
        pending = self._timed_out_request(correlation)
        if pending is None:
            return
        api, context = pending
        if api == "ConsumerGroupHeartbeat" and correlation == self._hb_in_flight:
            self._hb_in_flight = None
            self._retry_later()
        else:
            self._offset_request_timed_out(api, context)

    def _retry_later(self) -> None:
        self._sent.clear()  # the next request is a full one
        self._backoff_ms = min(
            self.config.retry_backoff_max_ms, max(self.config.retry_backoff_ms, self._backoff_ms * 2)
        )
        self._timer("heartbeat", self._backoff_ms)

    def receive(self, envelope: Any) -> None:
        pending = self._answered_request(envelope)
        if pending is None:
            return
        api, context = pending
        if api == "ConsumerGroupHeartbeat":
            self._hb_in_flight = None
            self._on_heartbeat_response(envelope.payload, context)
        elif api == "OffsetCommit":
            self._on_commit_response(envelope.payload, context)
        elif api == "OffsetFetch":
            self._on_fetch_response(envelope.payload, context)

    def _on_heartbeat_response(self, response: ConsumerGroupHeartbeatResponse, sent_epoch: int) -> None:
        """Ignored when the member has left or is leaving (except a fencing error); otherwise a success,
        a fencing, a retriable or a fatal error."""
        error = response.error_code
        if sent_epoch < 0:  # the answer to our leave heartbeat
            return
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.STALE, MemberState.FATAL, MemberState.FENCED):
            return  # not a member any more: Kafka ignores a late answer
        if self.state is MemberState.LEAVING:
            if error in FENCING:
                self._fenced(error)
            return
        if error is Errors.NONE:
            self._on_heartbeat_success(response)
        elif error in FENCING:
            self._fenced(error)
        elif error in RETRIABLE:
            self._retry_later()
        else:
            self._on_fatal_heartbeat_error(response)

    def _on_heartbeat_success(self, response: ConsumerGroupHeartbeatResponse) -> None:
        """Take the member id, epoch and interval; reconcile a new assignment (or settle without one); heartbeat on."""
        self._backoff_ms = 0
        if response.member_id:
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        self.heartbeat_interval_ms = response.heartbeat_interval_ms
        if response.assignment is not None and self.state not in (
            MemberState.PREPARE_LEAVING,
            MemberState.LEAVING,
            MemberState.UNSUBSCRIBED,
            MemberState.STALE,
        ):
            self.target = frozenset(
                (tp.topic_id, p) for tp in response.assignment.assigned_topic_partitions for p in tp.partitions
            )
            self._on_new_target()
        elif self.state is MemberState.JOINING:
            self._transition(MemberState.STABLE, "joined, nothing to reconcile")
        elif self.state is MemberState.RECONCILING and not self.reconciling:
            self._reconcile()  # a failed reconciliation is retried (Kafka retries on the next poll)
        self._timer("heartbeat", 0 if self.state is MemberState.ACKNOWLEDGING else self.heartbeat_interval_ms)

    def _on_fatal_heartbeat_error(self, response: ConsumerGroupHeartbeatResponse) -> None:
        """The member gives up: FATAL, nothing fetched, no timer left."""
        self._note(f"fatal heartbeat error {response.error_code.name}: {response.error_message}")
        self._transition(MemberState.FATAL, "fatal error")
        self._stop_fetching(set(self.fetching))
        self.world.scheduler.cancel_all(self)

    # ------------------------------------------------------------------ reconciliation
    def _on_new_target(self) -> None:
        """Kafka ``AbstractMembershipManager.processAssignmentReceived``: the first assignment after a (re)join is
        always reconciled, even an empty one; a later one only when it differs from what the member owns."""
        if self.target == frozenset(self.owned) and not self.reconciling and self._has_assignment:
            self.target = None
            if self.state is MemberState.JOINING:
                self._transition(MemberState.STABLE, "joined, nothing to reconcile")
            elif self.state is MemberState.RECONCILING:
                self._transition(MemberState.STABLE, "nothing left to change")
            return
        trigger = {
            MemberState.JOINING: "joined with an assignment",
            MemberState.STABLE: "new assignment",
            MemberState.ACKNOWLEDGING: "new assignment",
            MemberState.RECONCILING: "newer assignment",
        }[self.state]
        self._transition(MemberState.RECONCILING, trigger)
        self._reconcile()

    def _reconcile(self) -> None:
        """Commit, revoke (callback), assign (callback), then acknowledge — one at a time.

        The steps are continuations (``functools.partial`` of methods, not closures), so a
        snapshot deep-copies them along with the consumer they belong to. Each carries the
        reconciliation's number: a fence or a leave in between bumps it, and the stale step
        stops (Kafka's ``maybeAbortReconciliation``).
        """
        if self.reconciling or self.target is None:
            return
        target = self.target
        self.target = None
        self.reconciling = True
        self._reconciliation += 1
        seq = self._reconciliation
        revoked = sorted(self.owned - target)
        added = sorted(target - self.owned)
        # Kafka ``AbstractMembershipManager.markPendingRevocationToPauseFetching``: from here until
        # they leave ``owned``, the revoked partitions neither fetch nor take a late position.
        self.pending_revocation = set(revoked)
        stopped = self._stop_fetching(set(revoked))
        then = partial(self._reconcile_after_commit, seq, target, revoked, added)
        # Kafka commits every consumed position before reconciling (auto-commit), and carries on
        # whatever the commit's outcome. Revoked partitions stopped fetching above; their
        # positions were recorded at that moment.
        if self.config.enable_auto_commit and (self.fetching or stopped):
            self._commit(self.fetching, then, extra=stopped, cause="revocation")
        else:
            then(True)

    def _still_reconciling(self, seq: int) -> bool:
        if seq != self._reconciliation:
            return False  # superseded by a fence, a leave or a newer reconciliation
        if self.state is not MemberState.RECONCILING:
            self.reconciling = False
            return False
        return True

    def _reconcile_after_commit(self, seq: int, target: frozenset[TP], revoked: list[TP], added: list[TP], _ok: bool):
        if not self._still_reconciling(seq):
            return
        if revoked:
            then = partial(self._reconcile_after_revoke, seq, target, revoked, added)
            self._call_back_from_background("on_partitions_revoked", revoked, then)
        else:
            self._reconcile_after_revoke(seq, target, revoked, added, True)

    def _reconcile_after_revoke(self, seq: int, target: frozenset[TP], revoked: list[TP], added: list[TP], ok: bool):
        if not self._still_reconciling(seq):
            return
        if not ok:
            self._reconcile_after_assign(seq, target, added, False)
            return
        self.owned -= set(revoked)
        self.pending_revocation.clear()
        self._emit_assignment()
        # Kafka ``AbstractMembershipManager.revokeAndAssign``: on_partitions_assigned runs on every
        # reconciliation, with an empty list when nothing is added.
        self._call_back_from_background(
            "on_partitions_assigned", added, partial(self._reconcile_after_assign, seq, target, added)
        )

    def _reconcile_after_assign(self, seq: int, target: frozenset[TP], added: list[TP], ok: bool) -> None:
        if not self._still_reconciling(seq):
            return
        self.reconciling = False
        if not ok:
            # Kafka leaves the member RECONCILING without an ack; it retries on the next
            # poll, and the coordinator's rebalance timeout fences it if it never succeeds.
            self.target = target if self.target is None else self.target
            self._timer("heartbeat", self.heartbeat_interval_ms)
            return
        self.owned |= set(added)
        self._has_assignment = True
        self._reconciled += 1
        self._emit_assignment()
        if added:
            self._fetch_offsets(added)
        self._transition(MemberState.ACKNOWLEDGING, "reconciled")
        self._cancel("heartbeat")
        self._timer("heartbeat", 0)

    def _fenced(self, error: Errors) -> None:
        """UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH (Kafka's ``transitionToFenced``)."""
        if self.state in (MemberState.PREPARE_LEAVING, MemberState.LEAVING):
            # Already leaving: no on_partitions_lost, no leave heartbeat, no rejoin. From PREPARE_LEAVING
            # Kafka still passes through LEAVING, which sets the leave epoch (``transitionToSendingLeaveGroup``).
            if self.state is MemberState.PREPARE_LEAVING:
                self._enter_leaving("fenced while leaving")
            self._transition(MemberState.UNSUBSCRIBED, "fenced while leaving")
            self._note(f"fenced: {error.name}")
            self._abandon_membership()
            return
        self._transition(MemberState.FENCED, "fenced")
        self._note(f"fenced: {error.name}")
        lost = sorted(self.owned)
        self.reconciling = False
        self._reconciliation += 1
        self.target = None
        self.member_epoch = 0
        self._stop_fetching(set(self.fetching))
        if lost:
            self._call_back_from_background("on_partitions_lost", lost, self._rejoin_after_fence)
        else:
            self._rejoin_after_fence(True)

    def _rejoin_after_fence(self, _ok: bool) -> None:
        if self.state is not MemberState.FENCED:
            return  # closed (or failed) while on_partitions_lost ran
        self.owned.clear()
        self._emit_assignment()
        self.member_epoch = 0
        self._has_assignment = False
        self._sent.clear()
        self._transition(MemberState.JOINING, "partitions lost, rejoin")
        self._timer("heartbeat", 0)

    def _release_then_leave(self, run_callbacks: bool) -> None:
        """PREPARE_LEAVING: stop consuming, commit what was processed, revoke, then LEAVING.

        The application thread is closing (or not polling), so no record is processed after
        this point: positions are taken now and committed (auto-commit, graceful leave only).
        """
        owned = sorted(self.owned)
        self.target = None
        self.reconciling = False
        self._reconciliation += 1
        stopped = self._stop_fetching(set(self.fetching))
        then = partial(self._leave_after_commit, owned, run_callbacks)
        if run_callbacks and self.config.enable_auto_commit and stopped:
            self._commit([], then, extra=stopped, cause="leave")
        else:
            then(True)

    def _leave_after_commit(self, owned: list[TP], run_callbacks: bool, _ok: bool) -> None:
        if self.state is not MemberState.PREPARE_LEAVING:
            return
        if run_callbacks and owned:
            self._call_back("on_partitions_revoked", owned, self._leave_after_release)
        else:
            self._leave_after_release(True)

    def _leave_after_release(self, _ok: bool) -> None:
        if self.state is not MemberState.PREPARE_LEAVING:
            return  # fenced or failed while the callback ran (Kafka: the leave is dropped)
        self._stop_fetching(set(self.fetching))
        self._enter_leaving("partitions released")
        self._cancel("heartbeat")
        self._timer("heartbeat", 0)

    def _enter_leaving(self, trigger: str) -> None:
        """Kafka ``AbstractMembershipManager.transitionToSendingLeaveGroup``: the member takes the leave epoch
        (-1, or -2 for a static member) and drops its assignment as reconciled."""
        self.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.is_static else LEAVE_GROUP_MEMBER_EPOCH
        self._has_assignment = False
        self._transition(MemberState.LEAVING, trigger)
