"""Clients the Lab sees only through their messages: group membership observed from the wire.

A real client at the front door has no state machine the Lab can read; what it does show is
in its requests and the answers it gets. ``ObservingClient`` reads them and emits the events a
simulated client emits about itself — ``StateTransition`` along the same member state machine
(its ``machine`` name ends with ``OBSERVED``), ``AssignmentChanged`` when the partitions it
acknowledges change, and the ledger's ``PositionSet`` / ``RecordsProcessed`` / ``CommitResult``
from its Fetch and OffsetCommit exchanges — so the swimlanes, the stepper, the ledger and
``Lab.is_stable`` read real members as they read simulated ones.

What is observed, and so what these events can say:

* KIP-848 (ConsumerGroupHeartbeat): the member id and epoch the coordinator answers, the
  assignment it sends (``RECONCILING`` until acknowledged), the partitions the member lists as
  owned in its next heartbeat (``ACKNOWLEDGING``, then ``STABLE`` once answered), a fencing error
  (``FENCED``), a leave (epoch -1 or -2: ``UNSUBSCRIBED``).
* Classic (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): ``PREPARING_REBALANCE`` from a
  JoinGroup, ``COMPLETING_REBALANCE`` from its answer, ``STABLE`` with the SyncGroup's
  assignment, ``UNJOINED`` on UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION, ``UNSUBSCRIBED`` on leave.
* Commits: each OffsetCommit answered is a ``CommitResult`` with the answer's errors (cause
  ``manual``: the wire does not say why a client commits).

* Fetches (``observe_fetch``, a step the front door applies once it has answered a Fetch): the
  offset a client asks for in a partition it was not fetching is where it starts (``PositionSet``;
  its reason inferred: the group's committed offset is ``committed``, else the log start
  ``earliest``, the log end ``latest``, anything else ``seek``), and the records the answer sent
  it are what it processed (``RecordsProcessed``). What an application does with its records is
  not on the wire: a real client's processing is inferred from what it was sent, so records a
  client fetched ahead and never handed to its application (a crash, a rebalance that drops its
  buffer) count as processed.

A real client's own steps between messages (its callbacks) are not on the wire either, and a
client killed without leaving is seen only when its session expires at the coordinator: until
then its member counts as it was last seen, and from then on as gone (``observe_removal``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kip_lab.clients.classic_member_state import CLASSIC_MEMBER_MACHINE
from kip_lab.clients.member_state import CONSUMER_MEMBER_MACHINE
from kip_lab.events import AssignmentChanged, CommitResult, PositionSet, RecordsProcessed, StateTransition
from kip_lab.lab.scripted import RequestingClient
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolError
from kip_lab.protocol.errors import Errors

OBSERVED = " (observed from the wire)"
TP = tuple[str, int]
LEAVE_EPOCHS = (-1, -2)
FENCING_ERRORS = (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID)
CLASSIC_LOST_ERRORS = (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION)
GONE = ("UNSUBSCRIBED", "FATAL", None)
STILL_JOINING = ("JOINING", "PREPARING_REBALANCE", "COMPLETING_REBALANCE")


@dataclass(frozen=True)
class ObservedConfig:
    """The part of a consumer's config the wire shows: its group."""

    group_id: str


@dataclass
class ObservingClient(RequestingClient):
    """A client whose membership of one group is inferred from its requests and their answers."""

    config: ObservedConfig | None = None  # its group, from its first group request
    protocol: str | None = None  # "consumer" (KIP-848) or "classic"
    state: str | None = None  # a member state of the protocol's machine; None before it joins
    member_id: str | None = None
    member_epoch: int = 0  # the member epoch, or a classic member's generation
    incarnation: int = 0  # a new process under the same client id joins afresh: the next incarnation
    # What the member says it owns (KIP-848) or was assigned (classic). Not ``owned``: the
    # client-side invariants judge clients whose ownership they see first hand, not this.
    acknowledged: tuple[TP, ...] = ()
    target: tuple[TP, ...] | None = None  # an assignment sent and not yet acknowledged (KIP-848)
    requests: dict[int, tuple[str, Any]] = field(default_factory=dict)  # correlation id -> (api, request)
    # Where the member's next Fetch of each partition it is fetching should start: past what it was sent.
    positions: dict[TP, int] = field(default_factory=dict)

    # ------------------------------------------------------------------ what the wire shows
    def observe_request(self, correlation_id: int, api: str, request: Any) -> None:
        self.requests[correlation_id] = (api, request)
        if api == "ConsumerGroupHeartbeat":
            self._heartbeat_sent(request)
        elif api == "JoinGroup":
            self._join(request.group_id, "classic")
            if not request.member_id and self.state == "STABLE":
                self._new_incarnation()  # a stable member does not join without its id: a restart
            if not any("cooperative" in p.name for p in request.protocols):
                self._own(())  # an eager member gives everything up before it rejoins
            self._move("PREPARING_REBALANCE", "JoinGroup sent")
        elif api == "LeaveGroup" and self.protocol == "classic":
            self._own(())
            self._move("UNSUBSCRIBED", "close")

    def observe_response(self, correlation_id: int, response: Any) -> None:
        api, request = self.requests.pop(correlation_id, (None, None))
        if api == "ConsumerGroupHeartbeat":
            self._heartbeat_answered(request, response)
        elif api == "JoinGroup" and response.error_code == Errors.NONE:
            self.member_id, self.member_epoch = response.member_id, response.generation_id
            self._move("COMPLETING_REBALANCE", "joined, SyncGroup sent")
        elif api == "SyncGroup" and response.error_code == Errors.NONE and self.state == "COMPLETING_REBALANCE":
            try:
                assigned = ConsumerProtocolAssignment.decode(response.assignment).assigned_partitions
            except ConsumerProtocolError:  # a group of another protocol type: no partitions to read
                assigned = []
            self._own(self._topic_ids((name, p) for name, p in assigned))
            self._move("STABLE", "SyncGroup answered")
        elif api in ("Heartbeat", "SyncGroup") and response.error_code in CLASSIC_LOST_ERRORS:
            self._own(())
            self._move("UNJOINED", "fell out of the group")
        elif api == "OffsetCommit":
            self._commit_answered(request, response)

    # ------------------------------------------------------------------ KIP-848
    def _heartbeat_sent(self, request: Any) -> None:
        self._join(request.group_id, "consumer")
        epoch = request.member_epoch
        if epoch == 0 and self.member_id not in (None, request.member_id) and self.state not in GONE:
            self._new_incarnation()  # another member id joining: the client was restarted
        if epoch in LEAVE_EPOCHS:
            self._move("LEAVING", "unsubscribe or close")
            return
        if epoch == 0 and self.state in (*GONE, "FENCED"):
            self._move("JOINING", "subscribe" if self.state != "FENCED" else "partitions lost, rejoin")
        if request.topic_partitions is not None:
            owned = tuple(sorted((t.topic_id, p) for t in request.topic_partitions for p in t.partitions))
            self._own(owned)
            if self.state == "RECONCILING" and self.target is not None and set(owned) == set(self.target):
                self._move("ACKNOWLEDGING", "reconciled")

    def _heartbeat_answered(self, request: Any, response: Any) -> None:
        if request is not None and request.member_epoch in LEAVE_EPOCHS:
            self._own(())
            self._move("UNSUBSCRIBED", "leave heartbeat sent")
            return
        if response.error_code in FENCING_ERRORS:
            self._own(())
            self._move("FENCED", "fenced")
            return
        if response.error_code != Errors.NONE:
            return
        self.member_id, self.member_epoch = response.member_id or self.member_id, response.member_epoch
        if response.assignment is not None:
            self.target = tuple(
                sorted((t.topic_id, p) for t in response.assignment.assigned_topic_partitions for p in t.partitions)
            )
        if self.target is not None and set(self.target) != set(self.acknowledged):
            self._move("RECONCILING", "joined with an assignment" if self.state == "JOINING" else "new assignment")
        elif self.state == "JOINING":
            self._move("STABLE", "joined, nothing to reconcile")
        elif self.state in ("ACKNOWLEDGING", "RECONCILING"):
            self.target = None
            self._move("STABLE", "acknowledgement sent" if self.state == "ACKNOWLEDGING" else "nothing left to change")

    # ------------------------------------------------------------------ offsets (the ledger)
    def _commit_answered(self, request: Any, response: Any) -> None:
        if request is None or self.config is None or request.group_id != self.config.group_id:
            return
        errors = {
            (topic.topic_id or self._topic_id(topic.name), p.partition_index): p.error_code
            for topic in response.topics
            for p in topic.partitions
        }
        offsets = [
            (topic.topic_id or self._topic_id(topic.name), p.partition_index, p.committed_offset)
            for topic in request.topics
            for p in topic.partitions
        ]
        outcomes = tuple(
            (t, p, offset, None if errors.get((t, p), Errors.NONE) == Errors.NONE else errors[(t, p)].name)
            for t, p, offset in offsets
        )
        epoch = request.generation_id_or_member_epoch
        self._emit(CommitResult(self.config.group_id, self.member_id, epoch, "manual", outcomes))

    # ------------------------------------------------------------------ fetches (the ledger)
    def fetch_news(self, fetched: list[tuple[str, int, int, int]]) -> list[tuple[str, int, int, int]]:
        """The rows of a Fetch answer the ledger learns from: ``(topic id, partition, fetch offset, end)``,
        ``end`` past the last record sent; a row that sent nothing matters only as a new start."""
        if self.config is None:  # not in a group: nobody's ledger to keep
            return []
        return [row for row in fetched if row[3] > row[2] or self.positions.get((row[0], row[1])) != row[2]]

    def observe_fetch(self, fetched: list[tuple[str, int, int, int]]) -> None:
        """A Fetch answered (rows as ``fetch_news`` keeps them): positions set, records sent."""
        if self.config is None:
            return
        group = self.config.group_id
        ranges = []
        for topic_id, partition, offset, end in fetched:
            tp = (topic_id, partition)
            start = "continued"
            if self.positions.get(tp) != offset:
                start = self._start_reason(tp, offset)
                self._emit(PositionSet(group, self.member_id, self.incarnation, topic_id, partition, offset, start))
            self.positions[tp] = end
            if end > offset:
                ranges.append((topic_id, partition, offset, end, start))
        if ranges:
            self._emit(RecordsProcessed(group, self.member_id, self.incarnation, tuple(ranges)))

    def _start_reason(self, tp: TP, offset: int) -> str:
        """Why a real member starts ``tp`` at ``offset``, as the group's offsets and the log show it."""
        assert self.config is not None
        topic = self.world.cluster.topic_by_id(tp[0])
        stored = self.world.coordinator.offset_manager.offsets.get(self.config.group_id, {})
        committed = stored.get((topic.name, tp[1])) if topic else None
        if committed is not None and committed.offset == offset:
            return "committed"
        log = self.world.share.topic_log(tp)
        if offset == log.log_start_offset:
            return "earliest"
        return "latest" if offset == log.high_watermark else "seek"

    # ------------------------------------------------------------------ helpers
    def _join(self, group_id: str, protocol: str) -> None:
        if self.config is None or self.config.group_id != group_id or self.protocol != protocol:
            self.config, self.protocol, self.state = ObservedConfig(group_id), protocol, None

    def _new_incarnation(self) -> None:
        self._own(())
        self.incarnation += 1
        self.state, self.member_id, self.member_epoch, self.target = None, None, 0, None
        self.positions = {}  # a new process starts every partition afresh

    def _move(self, to_state: str, trigger: str) -> None:
        if self.state == to_state and to_state != "PREPARING_REBALANCE":
            return
        machine = CONSUMER_MEMBER_MACHINE if self.protocol == "consumer" else CLASSIC_MEMBER_MACHINE
        from_state = self.state or machine.initial
        self._emit(
            StateTransition(machine.name + OBSERVED, from_state, to_state, trigger, self.member_id, self.member_epoch)
        )
        self.state = to_state
        self.alive = to_state not in GONE  # live while the member the wire shows is in its group

    def _own(self, owned: Any) -> None:
        owned = tuple(sorted(owned))
        for tp in set(self.acknowledged) - set(owned):  # given up: fetching it again is a new start
            self.positions.pop(tp, None)
        if owned != self.acknowledged:
            self.acknowledged = owned
            self._emit(AssignmentChanged(self.member_id, self.member_epoch, owned=owned, fetching=owned))

    def _emit(self, event: Any) -> None:
        self.world.emit(self.name, event)

    def _topic_id(self, name: str | None) -> str:
        topic = self.world.cluster.topic(name) if name and name in self.world.cluster else None
        return topic.topic_id if topic else ""

    def _topic_ids(self, partitions: Any) -> set[TP]:
        return {(self._topic_id(name), p) for name, p in partitions if self._topic_id(name)}

    # ------------------------------------------------------------------ stability
    def settled(self, world: Any) -> bool:
        """Settled when gone, or STABLE with what the coordinator holds for its member: the same
        epoch (generation) and, for KIP-848, the partitions it owns."""
        if self.state in GONE or self.config is None:
            return True
        held = self._held_at(world.coordinator)
        if held is None:
            return self.state not in STILL_JOINING  # removed at the coordinator: gone
        if self.protocol == "classic":
            return self.state == "STABLE" and held.generation_id == self.member_epoch
        assigned = {(t, p) for t, parts in held.assigned.items() for p in parts}
        return self.state == "STABLE" and held.member_epoch == self.member_epoch and assigned == set(self.acknowledged)

    def observe_removal(self, coordinator: Any) -> None:
        """After a coordinator timer (a session or rebalance timeout): a member the coordinator no
        longer holds is drawn gone, owning nothing — a real client killed without leaving, or cut
        off for longer than its session. If it is alive, its next request finds out, as it would."""
        if self.config is None or self.member_id is None or self.state in (*GONE, *STILL_JOINING):
            return
        if self._held_at(coordinator) is None:
            self._own(())
            self._move("UNSUBSCRIBED", "removed by the coordinator: no heartbeat within its timeout")

    def _held_at(self, coordinator: Any) -> Any:
        """What the coordinator holds for this member: its KIP-848 member, or its classic group
        (whose generation it is at); None when the coordinator does not hold it."""
        assert self.config is not None
        if self.protocol == "classic":
            group = coordinator.classic_groups.get(self.config.group_id)
            return group if group is not None and self.member_id in group.members else None
        group = coordinator.groups.get(self.config.group_id)
        return group.members.get(self.member_id) if group is not None else None
