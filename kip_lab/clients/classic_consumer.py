"""The classic consumer (``group.protocol=classic``) as the Lab runs it, eager or cooperative.

It models Kafka's ``ConsumerCoordinator`` / ``AbstractCoordinator`` as KIP-429 describes them:

* the **rebalance protocol** is chosen once, from ``partition.assignment.strategy``: the highest
  protocol that *every* configured assignor supports (COOPERATIVE over EAGER); none in common is
  a configuration error;
* **before JoinGroup** (``onJoinPrepare``): a member that fell out (no generation or no member
  id) calls ``on_partitions_lost`` for what it owned; otherwise EAGER commits and revokes
  everything, COOPERATIVE revokes only partitions of topics it no longer subscribes to;
* **JoinGroup** carries one protocol per configured assignor, each with the encoded
  subscription (owned partitions and generation for the sticky assignors); MEMBER_ID_REQUIRED
  is answered by joining again with the id the coordinator chose;
* the **leader** decodes every subscription and runs the chosen assignor; its output is the
  assignment (Kafka: cooperative-sticky withholds partitions still claimed by another member
  itself). Under the ``kip`` profile the leader also applies KIP-429's leader rule to every
  assignor's output: a partition another member still claims is withheld from its new owner,
  and a claimed partition the assignor handed to nobody goes back to its claimer;
* **after SyncGroup** (``onJoinComplete``): an assignment naming a topic the member does not
  subscribe to is refused (rejoin); EAGER assigns the whole set; COOPERATIVE revokes
  (owned − assigned), then assigns (assigned − owned) and, if anything was revoked, rejoins at
  once — the second rebalance;
* a **heartbeat** every ``heartbeat.interval.ms``: REBALANCE_IN_PROGRESS means rejoin;
  ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID mean the member fell out (partitions lost, rejoin);
* ``max.poll.interval.ms``: a member that stops polling leaves the group (LeaveGroup unless
  static) and loses its partitions when it polls again; ``close`` revokes, then leaves
  (a static member sends no LeaveGroup).

Listener exceptions follow KIP-429, "Rebalance Callback Error Handling": the rebalance goes on,
the other callbacks still run, and the first exception is what ``poll`` raises once the rebalance
is complete (recorded in ``poll_errors`` and traced). The KIP's rebalance metrics ("Consumer
Metrics") are kept in ``rebalance_metrics``.

The application side (callbacks on the application thread, consumption, offsets) is the one the
new consumer runs: ``application.ApplicationLoop``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kip_lab.assignors.client import (
    ClientAssignorError,
    RebalanceProtocol,
    client_assignor,
    partitions_transferring_ownership,
)
from kip_lab.clients.application import TP, ApplicationLoop
from kip_lab.clients.classic_member_state import CLASSIC_MEMBER_MACHINE, ClassicMemberState
from kip_lab.clients.consumer import RETRIABLE, ConsumerConfig, TimedListener
from kip_lab.events import AssignmentChanged, CallbackInvoked
from kip_lab.protocol import Errors
from kip_lab.protocol.classic_group import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from kip_lab.protocol.consumer_protocol import (
    HIGHEST_CONSUMER_PROTOCOL_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

State = ClassicMemberState
FELL_OUT = {Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION}
JOIN_TIMEOUT_MARGIN_MS = 5_000  # Kafka waits rebalance.timeout.ms plus this for a JoinGroup answer


def rebalance_protocol_of(assignors: list[str]) -> RebalanceProtocol:
    """KIP-429, "Compatibility and Upgrade Path": among the protocols every assignor supports, the most advanced one."""
    common = [RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE]
    for name in assignors:
        supported = client_assignor(name).supported_protocols()
        common = [p for p in common if p in supported]
    if not common:
        raise ValueError(f"the assignors {assignors} have no rebalance protocol in common")
    return common[-1]


class ClassicConsumerConfig(ConsumerConfig):
    """A classic consumer's configuration: the new consumer's, plus the classic protocol's own."""

    group_protocol: Literal["classic"] = Field(..., description="group.protocol=classic (JoinGroup/SyncGroup)")
    partition_assignment_strategy: list[str] = Field(
        ["range", "cooperative-sticky"], min_length=1, description="client-side assignors, preferred first"
    )
    session_timeout_ms: int = Field(45_000, gt=0)
    heartbeat_interval_ms: int = Field(3_000, gt=0)

    @field_validator("partition_assignment_strategy")
    @classmethod
    def _known_assignors(cls, names: list[str]) -> list[str]:
        if len(set(names)) != len(names):
            raise ValueError(f"partition_assignment_strategy names an assignor twice: {names}")
        try:
            rebalance_protocol_of(names)
        except ClientAssignorError as error:
            raise ValueError(str(error)) from None
        return names

    @model_validator(mode="after")
    def _classic_subscription(self) -> ClassicConsumerConfig:
        if self.subscribed_topic_regex is not None:
            raise ValueError("a classic consumer in the Lab subscribes by topic names (subscribed_topic_names)")
        if self.server_assignor is not None:
            raise ValueError("server_assignor is a group.protocol=consumer setting; a classic group has none")
        return self

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        return rebalance_protocol_of(self.partition_assignment_strategy)


@dataclass
class RebalanceMetrics:
    """KIP-429, "Consumer Metrics", in simulated ms: counts, latencies (callbacks included) and callback latencies."""

    rebalance_total: int = 0
    failed_rebalance_total: int = 0
    rebalance_latencies_ms: list[int] = field(default_factory=list)
    last_rebalance_ms: int | None = None
    callback_latencies_ms: dict[str, list[int]] = field(default_factory=dict)
    started_ms: int = 0  # when the consumer subscribed: the rates' window

    def summary(self, now_ms: int) -> dict[str, Any]:
        """The KIP's metric names, as a consumer's metrics() would show them at ``now_ms``.

        The rates are over the consumer's whole life (Kafka's are windowed).
        """
        hours = max(now_ms - self.started_ms, 1) / 3_600_000
        out: dict[str, Any] = {
            "rebalance-total": self.rebalance_total,
            "rebalance-rate-per-hour": self.rebalance_total / hours,
            "failed-rebalance-total": self.failed_rebalance_total,
            "failed-rebalance-rate-per-hour": self.failed_rebalance_total / hours,
            "rebalance-latency-avg": _avg(self.rebalance_latencies_ms),
            "rebalance-latency-max": max(self.rebalance_latencies_ms, default=None),
            "rebalance-latency-total": sum(self.rebalance_latencies_ms),
            "last-rebalance-seconds-ago": None
            if self.last_rebalance_ms is None
            else (now_ms - self.last_rebalance_ms) / 1000,
        }
        for kind in ("revoked", "assigned", "lost"):
            samples = self.callback_latencies_ms.get(f"on_partitions_{kind}", [])
            out[f"partitions-{kind}-latency-avg"] = _avg(samples)
            out[f"partitions-{kind}-latency-max"] = max(samples, default=None)
        return out


def _avg(samples: list[int]) -> float | None:
    return sum(samples) / len(samples) if samples else None


@dataclass
class ClassicConsumer(ApplicationLoop):
    """One classic consumer process. ``world`` is the Lab's world (clock, network, trace)."""

    MEMBER_MACHINE = CLASSIC_MEMBER_MACHINE

    config: ClassicConsumerConfig
    state: ClassicMemberState = ClassicMemberState.UNSUBSCRIBED
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_name: str | None = None
    leader_id: str = ""
    assigned: frozenset[TP] | None = None  # what the last SyncGroup gave (None: no generation yet)
    rejoin_reason: str | None = None  # why the next JoinGroup is needed; None: no rejoin pending
    poll_errors: list[str] = field(default_factory=list)  # what poll() raised, in order
    rebalance_metrics: RebalanceMetrics = field(default_factory=RebalanceMetrics)
    leader_partitions: dict[str, int] = field(default_factory=dict)  # the leader's metadata at its assignment
    _in_rebalance_callbacks: bool = False  # onJoinPrepare, onJoinComplete or a lost topic: callbacks under way
    _closing: bool = False
    _round: int = 0  # bumped when the member falls out or closes: stale continuations stop
    _rebalance_started_ms: int | None = None
    _rebalance_error: str | None = None  # the first listener exception of this rebalance
    _assignors: dict[str, Any] = field(default_factory=dict)
    _topic_name_of: dict[str, str] = field(default_factory=dict)  # topic id -> name, kept after a deletion

    def __post_init__(self) -> None:
        if self.listener is None:
            self.listener = TimedListener(self.config.callbacks)
        self._assignors = {name: client_assignor(name) for name in self.config.partition_assignment_strategy}

    # ------------------------------------------------------------------ helpers
    @property
    def member_epoch(self) -> int:
        """The generation: what the shared offset code commits with and the trace shows as the epoch."""
        return self.generation_id

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        return self.config.rebalance_protocol

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader_id == self.member_id

    def _transition_details(self) -> dict[str, Any]:
        return {"generation_id": self.generation_id, "protocol": self.rebalance_protocol.value}

    def _assignment_event(self) -> AssignmentChanged:
        topics = sorted({tp[0] for tp in (*self.owned, *self.fetching, *(self.assigned or ()))})
        return replace(
            super()._assignment_event(),
            assigned=None if self.assigned is None else tuple(sorted(self.assigned)),
            topic_names={t: self._topic_name_of[t] for t in topics if t in self._topic_name_of},
        )

    def settled(self) -> bool:
        """STABLE with nothing left to do: no rejoin pending, no callback to run, fetching what it owns."""
        return (
            self.state is State.STABLE
            and self.rejoin_reason is None
            and not self._in_rebalance_callbacks
            and not self._callback_running
            and not self._queued
            and self.assigned == frozenset(self.owned)
            and set(self.owned) == set(self.fetching)
            and not self._metadata_changed()
        )

    def _metadata_changed(self) -> bool:
        """A metadata refresh would make it rejoin: an owned topic is gone, or (leader) a topic of
        the group changed its partition count since the leader assigned."""
        cluster = self.world.cluster
        return any(cluster.topic_by_id(tp[0]) is None for tp in self.owned) or self._leader_metadata_changed()

    def _leader_metadata_changed(self) -> bool:
        """The leader's assignment snapshot no longer matches the cluster (Kafka ``assignmentSnapshot``)."""
        if not (self.is_leader and self.leader_partitions):
            return False
        cluster = self.world.cluster
        now = {t: cluster.topic(t).num_partitions for t in self.leader_partitions if t in cluster}
        return now != self.leader_partitions

    def _topic_names(self, partitions) -> list[tuple[str, int]]:
        """(topic id, p) -> (topic name, p): the consumer protocol names topics."""
        out = []
        for topic_id, p in sorted(partitions):
            topic = self.world.cluster.topic_by_id(topic_id)
            if topic is not None:
                out.append((topic.name, p))
        return out

    def partition_ids(self, partitions) -> set[TP]:
        """(topic name, p) -> (topic id, p), for topics that exist."""
        cluster = self.world.cluster
        ids = {(cluster.topic(name).topic_id, p) for name, p in partitions if name in cluster}
        for topic_id, _ in ids:
            self._topic_name_of[topic_id] = cluster.topic_by_id(topic_id).name
        return ids

    def _names(self, partitions) -> list[str]:
        """Partition names for callbacks, also for topics deleted since they were assigned."""
        return sorted(
            f"{self._topic_name_of[t]}-{p}" if t in self._topic_name_of else self.world.partition_name((t, p))
            for t, p in partitions
        )

    def _subscribed(self, tp: TP) -> bool:
        topic = self.world.cluster.topic_by_id(tp[0])
        return topic is not None and topic.name in (self.config.subscribed_topic_names or ())

    # ------------------------------------------------------------------ lifecycle
    def subscribe(self) -> None:
        """Start: UNSUBSCRIBED -> UNJOINED, then join at once."""
        self._transition(State.UNJOINED, "subscribe")
        self.rebalance_metrics.started_ms = self.now
        self.last_poll_ms = self.now
        self._arm_poll_timer()
        if self.config.enable_auto_commit:
            self._timer("auto_commit", self.config.auto_commit_interval_ms)
        self._request_rejoin("subscribe")

    def change_subscription(self, topics: list[str] | None, regex: str | None) -> None:
        """Subscribe() again with other topics: the member rejoins with its new subscription."""
        self.config = ClassicConsumerConfig.model_validate(
            {**self.config.model_dump(), "subscribed_topic_names": topics, "subscribed_topic_regex": regex}
        )
        if self.state is State.UNSUBSCRIBED:
            self.subscribe()
        else:
            self._request_rejoin("subscription changed")

    def close(self) -> None:
        """Kafka's ``onLeavePrepare`` then LeaveGroup: commit, revoke (lost if out of the group), leave."""
        if not self.alive or self._closing or self.state in (State.UNSUBSCRIBED, State.FATAL):
            return
        self._closing = True
        self._round += 1
        self._in_rebalance_callbacks = False
        owned = sorted(self.owned)
        self.pending_revocation |= self.owned
        stopped = self._stop_fetching(set(self.fetching))
        in_group = self.generation_id != NO_GENERATION and bool(self.member_id)
        then = partial(self._close_after_commit, owned, in_group)
        if in_group and self.config.enable_auto_commit and stopped:
            self._commit([], then, extra=stopped, cause="leave")
        else:
            then(True)

    def _close_after_commit(self, owned: list[TP], in_group: bool, _ok: bool) -> None:
        if owned:
            kind = "on_partitions_revoked" if in_group else "on_partitions_lost"
            self._call_back(kind, owned, self._leave)
        else:
            self._leave(True)

    def _leave(self, _ok: bool) -> None:
        if self.owned:
            self._release(set(self.owned))
        if self.member_id and not self.is_static:
            self._send_leave_group("the consumer is being closed")
        self._transition(State.UNSUBSCRIBED, "close")
        self.generation_id, self.assigned, self.rejoin_reason = NO_GENERATION, None, None
        self._rebalance_started_ms = None
        for key in ("heartbeat", "poll_timeout", "auto_commit", "join"):
            self._cancel(key)

    def _send_leave_group(self, reason: str) -> None:
        request = LeaveGroupRequest(
            group_id=self.config.group_id,
            members=[
                MemberIdentity(member_id=self.member_id, group_instance_id=self.config.instance_id, reason=reason)
            ],
        )
        self._send("LeaveGroup", request)

    # ------------------------------------------------------------------ the application thread
    def _may_auto_commit(self) -> bool:
        return self.state is State.STABLE and not self._closing

    def _offset_fetch_member_id(self) -> str | None:
        return None  # a classic consumer's OffsetFetch names no member (Kafka's ConsumerCoordinator)

    def _offset_fetch_member_epoch(self) -> int:
        return -1

    def _poll(self) -> None:
        """A call to poll(): keeps the poll timer alive; a pending rejoin starts here."""
        if not self.alive or self.paused:
            return
        self.last_poll_ms = max(self.now, self.app_busy_until)
        self._arm_poll_timer()
        self._run_queued_callbacks()
        self._maybe_join()

    def _poll_timer_expired(self) -> None:
        """Max.poll.interval.ms without a poll: leave the group (LeaveGroup unless static), as Kafka's
        heartbeat thread does; the partitions are lost when the application polls again."""
        if not (self.paused or self.app_busy_until > self.now):
            self._poll()
            return
        if self._closing or self.state not in (
            State.STABLE,
            State.PREPARING_REBALANCE,
            State.COMPLETING_REBALANCE,
        ):
            return
        self._note("poll timer expired: leaving the group", poll_timeout=True)
        if self.member_id and not self.is_static:
            self._send_leave_group("consumer poll timeout has expired")
        self._reset_generation(reset_member_id=not self.is_static)
        self._transition(State.UNJOINED, "poll timer expired, left the group")
        self._request_rejoin("poll timer expired")

    # ------------------------------------------------------------------ timers
    def fire_timer(self, key: Any) -> None:
        if not self.alive:
            return
        if key == "heartbeat":
            self._heartbeat()
        elif key == "join":
            self._maybe_join()
        elif key == "join_retry":
            if self.state is State.PREPARING_REBALANCE:
                self._send_join_group("JoinGroup retried")
        elif key == "auto_commit":
            self._auto_commit()
        elif key == "poll_timeout":
            self._poll_timer_expired()
        elif isinstance(key, tuple) and key[0] == "callback":
            self._callback_returned(key[1])
        elif isinstance(key, tuple) and key[0] == "request_timeout":
            self._request_timed_out(key[1])
        elif isinstance(key, tuple) and key[0] == "fetch_offsets":
            if self.state not in (State.UNSUBSCRIBED, State.FATAL):
                self._fetch_offsets_again(key[1])
        else:
            raise ValueError(f"{self.name}: unknown timer {key!r}")

    # ------------------------------------------------------------------ joining
    def _request_rejoin(self, reason: str) -> None:
        """Kafka's ``requestRejoin``: the next poll (now, unless the application is busy) joins."""
        if self.rejoin_reason is None:
            self.rejoin_reason = reason
            self._note(f"rejoin requested: {reason}", rejoin=reason)
        if self._rebalance_started_ms is None:
            self._rebalance_started_ms = self.now
        self._timer("join", 0)

    def _maybe_join(self) -> None:
        if (
            self.rejoin_reason is None
            or self._in_rebalance_callbacks
            or self._closing
            or self.paused
            or self._callback_running
            or self._queued
            or self.state not in (State.UNJOINED, State.STABLE)
        ):
            return
        self._prepare_join()

    def _prepare_join(self) -> None:
        """Kafka's ``onJoinPrepare``: commit, then lost / revoked callbacks by protocol, then JoinGroup."""
        self._in_rebalance_callbacks = True
        round_ = self._round
        fell_out = self.generation_id == NO_GENERATION or not self.member_id
        if fell_out:
            lost = sorted(self.owned)
            self._stop_for_revocation(set(lost))
            if lost:
                self._call_back("on_partitions_lost", lost, partial(self._prepared, round_, lost))
            else:
                self._prepared(round_, [], True)
            return
        if self.rebalance_protocol is RebalanceProtocol.EAGER:
            revoked = sorted(self.owned)
        else:
            revoked = sorted(tp for tp in self.owned if not self._subscribed(tp))
        stopped = self._stop_for_revocation(set(revoked))
        then = partial(self._prepare_after_commit, round_, revoked)
        if self.config.enable_auto_commit and (self.fetching or stopped):
            self._commit(self.fetching, then, extra=stopped, cause="revocation")
        else:
            then(True)

    def _prepare_after_commit(self, round_: int, revoked: list[TP], _ok: bool) -> None:
        if round_ != self._round:
            return
        # EAGER calls on_partitions_revoked even with nothing to revoke (Kafka's onJoinPrepare).
        if revoked or self.rebalance_protocol is RebalanceProtocol.EAGER:
            self._call_back("on_partitions_revoked", revoked, partial(self._prepared, round_, revoked))
        else:
            self._prepared(round_, revoked, True)

    def _prepared(self, round_: int, released: list[TP], _ok: bool) -> None:
        if round_ != self._round:
            return
        self._in_rebalance_callbacks = False
        if released:
            self._release(set(released))
        self._send_join_group("JoinGroup sent")

    def _send_join_group(self, trigger: str) -> None:
        if self.state in (State.UNSUBSCRIBED, State.FATAL) or self._closing:
            return
        self._transition(State.PREPARING_REBALANCE, trigger)
        self.rejoin_reason = None
        topics = sorted(self.config.subscribed_topic_names or ())
        cooperative = self.rebalance_protocol is RebalanceProtocol.COOPERATIVE
        protocols = []
        for name, assignor in self._assignors.items():
            subscription = ConsumerProtocolSubscription(
                version=HIGHEST_CONSUMER_PROTOCOL_VERSION,
                topics=topics,
                user_data=assignor.subscription_user_data(set(topics)),
                owned_partitions=self._topic_names(self.owned) if cooperative else [],
                generation_id=self.generation_id,
                rack_id=self.config.rack_id,
            )
            protocols.append(JoinGroupRequestProtocol(name=name, metadata=subscription.encode()))
        request = JoinGroupRequest(
            group_id=self.config.group_id,
            session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=self.config.max_poll_interval_ms,
            member_id=self.member_id,
            group_instance_id=self.config.instance_id,
            protocols=protocols,
            client_id=self.name,
        )
        correlation = self._send("JoinGroup", request, self._round)
        timeout = max(self.config.request_timeout_ms, self.config.max_poll_interval_ms + JOIN_TIMEOUT_MARGIN_MS)
        self._timer(("request_timeout", correlation), timeout)

    def _on_join_response(self, response: JoinGroupResponse, round_: int) -> None:
        if round_ != self._round or self.state is not State.PREPARING_REBALANCE:
            return
        error = response.error_code
        if error is Errors.NONE:
            self.member_id = response.member_id
            self.generation_id = response.generation_id
            self.protocol_name = response.protocol_name
            self.leader_id = response.leader
            self._transition(State.COMPLETING_REBALANCE, "joined, SyncGroup sent")
            assignments = self._assign_as_leader(response) if self.is_leader else []
            request = SyncGroupRequest(
                group_id=self.config.group_id,
                generation_id=self.generation_id,
                member_id=self.member_id,
                group_instance_id=self.config.instance_id,
                protocol_type=response.protocol_type,
                protocol_name=response.protocol_name,
                assignments=assignments,
            )
            correlation = self._send("SyncGroup", request, self._round)
            timeout = max(self.config.request_timeout_ms, self.config.max_poll_interval_ms + JOIN_TIMEOUT_MARGIN_MS)
            self._timer(("request_timeout", correlation), timeout)
            self._timer("heartbeat", self.config.heartbeat_interval_ms)
        elif error is Errors.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            self._send_join_group("MEMBER_ID_REQUIRED, JoinGroup again")
        elif error in FELL_OUT:
            self._fell_out(error)
        elif error is Errors.REBALANCE_IN_PROGRESS or error in RETRIABLE:
            self._timer("join_retry", self.config.retry_backoff_ms)
        else:
            self._fatal(error, "JoinGroup")

    def _assign_as_leader(self, response: JoinGroupResponse) -> list[SyncGroupRequestAssignment]:
        """Decode every subscription and run the group's assignor (Kafka ``ConsumerCoordinator.onLeaderElected``);
        under the Lab's ``kip`` profile, then KIP-429's leader rule (docs/decisions.md K3)."""
        name = response.protocol_name
        if name is None or name not in self._assignors:  # Kafka's onLeaderElected refuses it too
            raise RuntimeError(f"the coordinator chose assignment protocol {name!r}, which this member did not offer")
        assignor = self._assignors[name]
        # In the response's member order, which Kafka's leader puts into its subscriptions ``HashMap``.
        subscriptions = {m.member_id: ConsumerProtocolSubscription.decode(m.metadata) for m in response.members}
        topics = sorted(set().union(*(s.topics for s in subscriptions.values())))
        cluster = self.world.cluster
        partitions_per_topic = {t: cluster.topic(t).num_partitions for t in topics if t in cluster}
        intended = {
            member_id: a.assigned_partitions
            for member_id, a in assignor.assign(partitions_per_topic, subscriptions).items()
        }
        if self.world.coordinator.config.fidelity == "kip":
            final, withheld, returned = leader_adjustment(intended, subscriptions, partitions_per_topic)
        else:
            final, withheld, returned = intended, claimed_but_given_to_nobody(intended, subscriptions), []
        self.leader_partitions = partitions_per_topic
        self._note(
            f"leader {self.member_id} assigns generation {response.generation_id} with {response.protocol_name}",
            leader={
                "generation_id": response.generation_id,
                "assignor": response.protocol_name,
                "owned": {m: _names(s.owned_partitions) for m, s in sorted(subscriptions.items())},
                "intended": {m: _names(p) for m, p in intended.items()},
                "withheld": _names(withheld),
                "returned_to_claimer": _names(returned),
                "final": {m: _names(p) for m, p in final.items()},
            },
        )
        return [
            SyncGroupRequestAssignment(
                member_id=member_id,
                assignment=ConsumerProtocolAssignment(
                    version=HIGHEST_CONSUMER_PROTOCOL_VERSION, assigned_partitions=partitions
                ).encode(),
            )
            for member_id, partitions in sorted(final.items())
        ]

    def _on_sync_response(self, response: SyncGroupResponse, round_: int) -> None:
        if round_ != self._round or self.state is not State.COMPLETING_REBALANCE:
            return
        error = response.error_code
        if error is Errors.NONE:
            self._transition(State.STABLE, "SyncGroup answered")
            self._on_join_complete(ConsumerProtocolAssignment.decode(response.assignment))
        elif error in FELL_OUT:
            self._fell_out(error)
        elif error is Errors.REBALANCE_IN_PROGRESS or error in RETRIABLE:
            self._send_join_group("REBALANCE_IN_PROGRESS, JoinGroup sent")
        else:
            self._fatal(error, "SyncGroup")

    def _on_join_complete(self, assignment: ConsumerProtocolAssignment) -> None:
        """Kafka's ``onJoinComplete``: check the assignment, revoke, tell the assignor, assign."""
        subscribed = set(self.config.subscribed_topic_names or ())
        foreign = sorted({t for t, _ in assignment.assigned_partitions} - subscribed)
        if foreign:
            self._note(f"assignment names topics not subscribed to {foreign}: rejoin", assignment_refused=foreign)
            self._request_rejoin("assignment does not match the subscription")
            return
        assigned = self.partition_ids(assignment.assigned_partitions)
        self.assigned = frozenset(assigned)
        self._emit_assignment()
        if self.rebalance_protocol is RebalanceProtocol.EAGER:
            revoked: list[TP] = []
            added = sorted(assigned)
        else:
            revoked = sorted(self.owned - assigned)
            added = sorted(assigned - self.owned)
        round_ = self._round
        self._in_rebalance_callbacks = True  # callbacks of this sync run before any rejoin
        # No commit here (Kafka ``onJoinComplete``): committing what a revoked partition consumed
        # is the listener's job; auto-commit only runs before JoinGroup (docs/decisions.md K5).
        self._stop_for_revocation(set(revoked))
        then = partial(self._complete_after_revoke, round_, assignment, revoked, added)
        if revoked:
            self._call_back("on_partitions_revoked", revoked, then)
        else:
            then(True)

    def _complete_after_revoke(
        self, round_: int, assignment: ConsumerProtocolAssignment, revoked: list[TP], added: list[TP], _ok: bool
    ) -> None:
        if round_ != self._round:
            return
        if revoked:
            self._release(set(revoked))
        assignor = self._assignors.get(self.protocol_name or "")
        if assignor is not None:
            assignor.on_assignment(assignment, self.generation_id)
        self.world.emit(
            self.name,
            CallbackInvoked("on_assignment", tuple(f"{t}-{p}" for t, p in assignment.assigned_partitions), 0, None),
        )
        # on_partitions_assigned runs even when nothing is added (Kafka ``ConsumerCoordinator.onJoinComplete``).
        self._call_back("on_partitions_assigned", added, partial(self._complete_after_assign, round_, revoked, added))

    def _complete_after_assign(self, round_: int, revoked: list[TP], added: list[TP], _ok: bool) -> None:
        if round_ != self._round:
            return
        self._in_rebalance_callbacks = False
        if added:
            self.owned |= set(added)
            self._emit_assignment()
            self._fetch_offsets(added)
        self._rebalance_done(failed=False)
        if revoked:
            self._request_rejoin("revoked partitions: rejoin at once")
        else:
            self._maybe_join()  # a rejoin requested while the callbacks ran

    def _rebalance_done(self, failed: bool) -> None:
        """One rebalance ended (a sync completed, or the member fell out): metrics, poll's exception."""
        metrics = self.rebalance_metrics
        if failed:
            metrics.failed_rebalance_total += 1
        elif self._rebalance_started_ms is not None:
            metrics.rebalance_total += 1
            metrics.rebalance_latencies_ms.append(self.now - self._rebalance_started_ms)
            metrics.last_rebalance_ms = self.now
        # A rejoin requested meanwhile (while the callbacks ran) is the next rebalance, starting now.
        self._rebalance_started_ms = None if self.rejoin_reason is None else self.now
        if self._rebalance_error is not None:
            self.poll_errors.append(self._rebalance_error)
            self._note(f"poll() raises {self._rebalance_error}", poll_error=self._rebalance_error)
            self._rebalance_error = None

    def _stop_for_revocation(self, partitions: set[TP]) -> dict[TP, int]:
        """Stop fetching partitions about to be revoked or lost; returns the positions reached.

        Until they leave ``owned`` they are pending revocation: neither fetchable nor started by a
        late OffsetFetch answer. Kafka marks them so before an EAGER revocation
        (``ConsumerCoordinator.maybeMarkPartitionsPendingRevocation``, ``SubscriptionState.markPendingRevocation``);
        in every other case its listener runs on the thread that would apply the answer, which
        therefore lands only after they left the assignment and sets no position for them
        (``ConsumerUtils.refreshCommittedOffsets`` checks ``SubscriptionState.isAssigned``)."""
        self.pending_revocation |= partitions
        return self._stop_fetching(partitions)

    def _release(self, partitions: set[TP]) -> None:
        """The revoked or lost ``partitions`` leave the assignment, and stop being pending revocation."""
        self.owned -= partitions
        self.pending_revocation -= partitions
        self._emit_assignment()

    # ------------------------------------------------------------------ callbacks
    def _call_back(self, kind: str, partitions: list[TP], then: Any) -> None:
        """The shared application thread runs it; the first failure of a rebalance is kept for poll."""
        super()._call_back(kind, partitions, partial(self._callback_finished, kind, then))

    def _callback_finished(self, kind: str, then: Any, ok: bool) -> None:
        if ok:  # Kafka records a callback's latency only when it returns normally
            self.rebalance_metrics.callback_latencies_ms.setdefault(kind, []).append(self._last_callback_ms)
        elif self._rebalance_error is None:
            self._rebalance_error = f"{kind} raised"
        then(ok)
        self._maybe_join()  # a rejoin that waited for the application thread

    # ------------------------------------------------------------------ falling out, fatal errors
    def _reset_generation(self, reset_member_id: bool) -> None:
        self.generation_id = NO_GENERATION
        self.assigned = None
        self.protocol_name = None
        self.leader_id = ""
        if reset_member_id:
            self.member_id = UNKNOWN_MEMBER_ID
        self._round += 1
        self._in_rebalance_callbacks = False

    def _fell_out(self, error: Errors) -> None:
        """UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION: partitions are lost at the next join (KIP-429 C-4)."""
        if error is Errors.UNKNOWN_MEMBER_ID and self.is_static:
            self._fatal(error, "a static member")
            return
        self._note(f"fell out of the group: {error.name}")
        self._reset_generation(reset_member_id=error is Errors.UNKNOWN_MEMBER_ID)
        self._cancel("heartbeat")
        self._transition(State.UNJOINED, "fell out of the group")
        self._rebalance_done(failed=True)
        self._request_rejoin(f"fell out: {error.name}")

    def _fatal(self, error: Errors, where: str) -> None:
        self._note(f"fatal {where} error {error.name}", fatal=error.name)
        self._transition(State.FATAL, "fatal error")
        self._stop_fetching(set(self.fetching))
        self.world.scheduler.cancel_all(self)
        self._rebalance_done(failed=True)

    # ------------------------------------------------------------------ heartbeats and metadata
    def _heartbeat(self) -> None:
        if self.state not in (State.STABLE, State.COMPLETING_REBALANCE) or self._closing:
            return
        self._timer("heartbeat", self.config.heartbeat_interval_ms)
        if self.state is State.STABLE:
            self._check_metadata()
        if self._hb_in_flight is not None:
            return
        request = HeartbeatRequest(
            group_id=self.config.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.config.instance_id,
        )
        self._hb_in_flight = self._send("Heartbeat", request, (self._round, self.generation_id))
        self._timer(("request_timeout", self._hb_in_flight), self.config.request_timeout_ms)

    def _on_heartbeat_response(self, response: Any, context: tuple[int, int]) -> None:
        round_, generation = context
        if round_ != self._round or generation != self.generation_id or self._closing:
            return
        error = response.error_code
        if error is Errors.REBALANCE_IN_PROGRESS:
            if self.state is State.STABLE:  # the join itself waits for any callback under way
                self._request_rejoin("REBALANCE_IN_PROGRESS in a heartbeat")
        elif error in FELL_OUT or error is Errors.FENCED_INSTANCE_ID:
            if error is Errors.FENCED_INSTANCE_ID:
                self._fatal(error, "Heartbeat")
            else:
                self._fell_out(error)

    def _check_metadata(self) -> None:
        """The periodic metadata refresh: the leader rejoins when a topic of the group changed its
        partition count (or was deleted) since it assigned (Kafka ``ConsumerCoordinator.rejoinNeededOrPending``).
        Under the Lab's ``kip`` profile every member also calls ``on_partitions_lost`` for owned
        partitions of a deleted topic and rejoins (KIP-429, 'Consumer Coordinator Algorithm' step 1b)."""
        if self._in_rebalance_callbacks or self.rejoin_reason is not None:
            return
        cluster = self.world.cluster
        gone = sorted(tp for tp in self.owned if cluster.topic_by_id(tp[0]) is None)
        if gone and self.world.coordinator.config.fidelity == "kip":
            self._in_rebalance_callbacks = True
            self._stop_for_revocation(set(gone))
            round_ = self._round
            self._call_back("on_partitions_lost", gone, partial(self._lost_gone_topics, round_, gone))
            return
        if self._leader_metadata_changed():
            self._request_rejoin("the leader's metadata changed")

    def _lost_gone_topics(self, round_: int, gone: list[TP], _ok: bool) -> None:
        if round_ != self._round:
            return
        self._in_rebalance_callbacks = False
        self._release(set(gone))
        self._request_rejoin("owned partitions no longer exist")

    # ------------------------------------------------------------------ responses
    def receive(self, envelope: Any) -> None:
        pending = self._answered_request(envelope)
        if pending is None:
            return
        api, context = pending
        if api == "JoinGroup":
            self._on_join_response(envelope.payload, context)
        elif api == "SyncGroup":
            self._on_sync_response(envelope.payload, context)
        elif api == "Heartbeat":
            self._hb_in_flight = None
            self._on_heartbeat_response(envelope.payload, context)
        elif api == "OffsetCommit":
            self._on_commit_response(envelope.payload, context)
        elif api == "OffsetFetch":
            self._on_fetch_response(envelope.payload, context)

    def _request_timed_out(self, correlation: int) -> None:
        pending = self._timed_out_request(correlation)
        if pending is None:
            return
        api, context = pending
        if api == "Heartbeat":
            self._hb_in_flight = None
        elif api in ("JoinGroup", "SyncGroup") and context == self._round:
            if self.state is State.PREPARING_REBALANCE:
                self._send_join_group("JoinGroup retried")
            elif self.state is State.COMPLETING_REBALANCE:
                self._send_join_group("REBALANCE_IN_PROGRESS, JoinGroup sent")
        else:
            self._offset_request_timed_out(api, context)


def leader_adjustment(
    intended: dict[str, list[tuple[str, int]]],
    subscriptions: dict[str, ConsumerProtocolSubscription],
    partitions_per_topic: dict[str, int],
) -> tuple[dict[str, list[tuple[str, int]]], list[tuple[str, int]], list[tuple[str, int]]]:
    """KIP-429's leader rule over the assignor's output (KIP-429, 'Consumer Coordinator Algorithm', step 2).

    A partition given to a member while another member still claims it (maybe-revoking with a
    new owner) is withheld this round. A claimed partition the leader's metadata does not know
    (unknown-but-owned: a deleted topic, stale metadata) goes back to its claimer — the freshest
    claim (highest generation), then the lowest member id; a later rebalance sorts it out.
    Ready-to-migrate partitions pass through. Returns the final assignment, the withheld
    partitions (claimed, existing, given to nobody this round — whether this rule or a
    cooperative assignor itself held them back) and those returned to their claimers.
    """
    transferring = partitions_transferring_ownership(intended, subscriptions)
    final = {m: [tp for tp in parts if tp not in transferring] for m, parts in intended.items()}
    claims: dict[tuple[str, int], tuple[int, str]] = {}
    for member_id, subscription in sorted(subscriptions.items()):
        for tp in subscription.owned_partitions:
            best = claims.get(tp)
            if best is None or subscription.generation_id > best[0]:
                claims[tp] = (subscription.generation_id, member_id)
    returned = sorted(tp for tp in claims if tp[1] >= partitions_per_topic.get(tp[0], 0))
    for tp in returned:
        final.setdefault(claims[tp][1], []).append(tp)
    final = {m: sorted(parts) for m, parts in final.items()}
    return final, claimed_but_given_to_nobody(final, subscriptions), returned


def claimed_but_given_to_nobody(
    assignment: dict[str, list[tuple[str, int]]], subscriptions: dict[str, ConsumerProtocolSubscription]
) -> list[tuple[str, int]]:
    """The partitions some member claims that the assignment gives to nobody this round (withheld)."""
    given = {tp for parts in assignment.values() for tp in parts}
    return sorted({tp for s in subscriptions.values() for tp in s.owned_partitions} - given)


def _names(partitions) -> list[str]:
    return [f"{t}-{p}" for t, p in sorted(partitions)]
