"""The application side every simulated consumer shares, whatever its group protocol.

The new consumer (``consumer.Consumer``, KIP-848) and the classic consumer
(``classic_consumer.ClassicConsumer``, KIP-429) differ in how they talk to the coordinator,
not in what the application does: rebalance callbacks run one at a time on the application
thread and take simulated time, ``poll`` keeps ``max.poll.interval.ms`` alive, fetched
partitions advance at the consumer's rate, positions are committed (auto-commit and before a
revocation) and fetched when a partition is assigned. ``ApplicationLoop`` holds that once, and
tells the trace what the delivery ledger (``kip_lab.lab.ledger``) is made of: where each
partition starts and why (``PositionSet``), the records processed (``RecordsProcessed``, when
positions are committed and when a partition stops), and how each commit went (``CommitResult``).

It stands on ``member_plumbing.MemberPlumbing`` (clock, timers, sending). A subclass is a
dataclass that adds its protocol's fields (``state``, ``member_id``...) and provides ``_poll``
(a call to poll), ``_may_auto_commit`` (is it in the group) and ``member_epoch`` (what it
commits with: the member epoch, or the classic generation).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kip_lab.clients.member_plumbing import MemberPlumbing
from kip_lab.events import (
    AssignmentChanged,
    CallbackCompleted,
    CallbackInvoked,
    CommitResult,
    PositionSet,
    RecordsProcessed,
)
from kip_lab.protocol import Errors
from kip_lab.protocol.consumer_group import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
)

TP = tuple[str, int]  # (topic id, partition)


def by_topic(partitions: Iterable[TP]) -> dict[str, list[int]]:
    """(topic id, partition) pairs grouped as topic id -> partitions, both sorted: the wire's shape."""
    grouped: dict[str, list[int]] = {}
    for topic_id, p in sorted(partitions):
        grouped.setdefault(topic_id, []).append(p)
    return grouped


@dataclass(slots=True)
class Fetch:
    """A partition being consumed: from ``offset`` at ``since_ms``. The records up to
    ``reported`` are in the trace already; the next range reported starts for ``start``'s reason."""

    since_ms: int
    offset: int
    reported: int
    start: str


@dataclass
class ApplicationLoop(MemberPlumbing):
    """Callbacks, consumption and offsets, shared by the new and the classic consumer.

    The fields this loop keeps are declared here once; each consumer's dataclass adds its
    protocol's own (and narrows ``config``).
    """

    name: str
    config: Any
    world: Any
    listener: Any = None
    incarnation: int = 0
    owned: set[TP] = field(default_factory=set)
    fetching: dict[TP, Fetch] = field(default_factory=dict)
    # Still owned but being revoked: not fetchable, and a position that arrives for one is ignored
    # (Kafka ``SubscriptionState.markPendingRevocation``).
    pending_revocation: set[TP] = field(default_factory=set)
    committed: dict[TP, int] = field(default_factory=dict)
    app_busy_until: int = 0
    paused: bool = False
    alive: bool = True
    last_poll_ms: int = 0
    fetch_blocked_until: int = 0  # cut off from every broker until then: nothing is fetched, so nothing processed
    _hb_in_flight: int | None = None
    _pending: dict[int, tuple[str, Any]] = field(default_factory=dict)
    _callback_seq: int = 0
    _queued: list[tuple[str, list[TP], Any]] = field(default_factory=list)
    _callback_running: bool = False
    _callback_then: tuple = ()
    _last_callback_ms: int = 0  # how long the latest callback took (simulated ms)

    # ------------------------------------------------------------------ what a protocol provides
    def _poll(self) -> None:
        raise NotImplementedError

    def _may_auto_commit(self) -> bool:
        """Whether the auto-commit timer commits now (the member is in the group)."""
        raise NotImplementedError

    def _offset_fetch_member_id(self) -> str | None:
        return self.member_id

    def _offset_fetch_member_epoch(self) -> int:
        return self.member_epoch

    # ------------------------------------------------------------------ helpers
    @property
    def is_static(self) -> bool:
        """A static member (``group.instance.id`` set, KIP-345) keeps its place across a restart."""
        return self.config.instance_id is not None

    def _names(self, partitions) -> list[str]:
        return sorted(self.world.partition_name(tp) for tp in partitions)

    def _emit_assignment(self) -> None:
        self.world.emit(self.name, self._assignment_event())

    def _assignment_event(self) -> AssignmentChanged:
        return AssignmentChanged(
            self.member_id, self.member_epoch, owned=tuple(sorted(self.owned)), fetching=tuple(sorted(self.fetching))
        )

    def _send(self, api: str, request: Any, context: Any = None) -> int:
        """Send to the group coordinator."""
        return self._send_to(self.world.coordinator_broker(self.config.group_id), api, request, context)

    def crash(self) -> None:
        """The process dies: no leave, no commit; timers stop, messages to it are lost."""
        self._stop_fetching(set(self.fetching))
        self.alive = False
        self.world.scheduler.cancel_all(self)
        self._pending.clear()
        self._hb_in_flight = None

    def pause(self) -> None:
        """The application thread stops calling poll (a long GC, a stuck handler).

        Records are processed only inside poll, so every position stops where it is: what is
        committed meanwhile (auto-commit runs in the background) is what was processed.
        """
        if self.paused:
            return
        now = self.now
        if self.alive:  # it was polling until now: max.poll.interval.ms runs from here
            self.last_poll_ms = max(now, self.app_busy_until)
            self._arm_poll_timer()
        self._hold_positions()
        self.paused = True

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self._continue_positions()
        self._poll()

    def cut_off(self, until_ms: int) -> None:
        """No broker answers until ``until_ms`` (a partitioned link): positions stop where they are and
        move on from then. The records already fetched are not modelled; the fetch buffer runs dry at once."""
        self._hold_positions()
        self.fetch_blocked_until = max(self.fetch_blocked_until, until_ms)

    @property
    def _processing(self) -> bool:
        """Whether the application thread processes records: it polls, no rebalance callback runs on it, and
        it can fetch."""
        return not self.paused and not self._callback_running and self.now >= self.fetch_blocked_until

    def _hold_positions(self) -> None:
        """The application thread stops processing: every position stays where it has reached."""
        now = self.now
        reached = self._positions(self.fetching)
        self._report_processed(reached)
        for tp, offset in reached.items():
            fetch = self.fetching[tp]
            fetch.offset, fetch.since_ms = offset, now

    def _continue_positions(self) -> None:
        """The application thread processes again, from where each position was held."""
        if self._processing:
            now = self.now
            for fetch in self.fetching.values():
                fetch.since_ms = now

    # ------------------------------------------------------------------ the application thread
    def _arm_poll_timer(self) -> None:
        self._timer("poll_timeout", self.last_poll_ms + self.config.max_poll_interval_ms - self.now)

    def _call_back(self, kind: str, partitions: list[TP], then: Any) -> None:
        """Queue a callback for the application thread; ``then(ok)`` runs when it returns."""
        self._queued.append((kind, partitions, then))
        self._run_queued_callbacks()

    def _run_queued_callbacks(self) -> None:
        if self.paused or not self._queued or self._callback_running:
            return
        kind, partitions, then = self._queued.pop(0)
        names = self._names(partitions)
        self._callback_seq += 1
        error = None
        # A listener without on_partitions_lost has on_partitions_revoked called instead (Kafka's default
        # method; KIP-429, *ConsumerRebalanceListener and ConsumerPartitionAssignor Semantics*).
        method = getattr(self.listener, kind, None) or self.listener.on_partitions_revoked
        try:
            duration = int(method(names) or 0)
        except Exception as exc:  # a user callback may raise anything; Kafka logs and carries on
            duration, error = 0, f"{type(exc).__name__}: {exc}"
        self.world.emit(self.name, CallbackInvoked(kind, tuple(names), duration, error))
        self.app_busy_until = self.now + duration
        self._last_callback_ms = duration
        self._hold_positions()  # the callback runs on the application thread, inside poll: nothing is processed
        self._callback_running = True
        self._callback_then = (self._callback_seq, kind, then, error is None)
        self._timer(("callback", self._callback_seq), duration)

    def _callback_returned(self, seq: int) -> None:
        """The ``("callback", seq)`` timer: the callback's simulated time is over; continue."""
        expected, kind, then, ok = self._callback_then
        if seq != expected:
            return
        self._callback_then = ()
        self._callback_running = False
        self._continue_positions()
        self.world.emit(self.name, CallbackCompleted(kind, ok))
        self.last_poll_ms = self.now
        if not self.paused:
            self._arm_poll_timer()
        then(ok)
        self._run_queued_callbacks()

    # ------------------------------------------------------------------ consumption and offsets
    def _positions(self, partitions: Iterable[TP]) -> dict[TP, int]:
        """The position of each of ``partitions`` being fetched, in one pass (a commit asks for all of them)."""
        fetching = self.fetching
        if not self._processing:  # nothing is processed while the application does not poll, or runs a callback
            return {tp: fetching[tp].offset for tp in partitions if tp in fetching}
        now = self.world.scheduler.now_ms
        rate = self.config.consume_rate_per_ms
        blocked_until = self.fetch_blocked_until  # a cut-off: processing starts again from its end
        ends: dict[str, int] = {}  # topic id -> its log end offset now (the same for all its partitions)
        positions = {}
        for tp in partitions:
            fetch = fetching.get(tp)
            if fetch is None:
                continue
            end = ends.get(tp[0])
            if end is None:
                end = ends[tp[0]] = self.world.log_end_offset(tp, now)
            reached = fetch.offset + int((now - max(fetch.since_ms, blocked_until)) * rate)
            positions[tp] = reached if reached < end else end
        return positions

    def _stop_fetching(self, partitions: set[TP]) -> dict[TP, int]:
        """Stop consuming ``partitions``; returns the position each had reached."""
        positions = self._positions(sorted(partitions))
        self._report_processed(positions)
        for tp in positions:
            del self.fetching[tp]
        if positions:
            self._emit_assignment()
        return positions

    def _report_processed(self, positions: dict[TP, int]) -> None:
        """Trace the records processed since the last report, up to ``positions`` (partitions being fetched)."""
        ranges = []
        for tp, reached in sorted(positions.items()):
            fetch = self.fetching[tp]
            if reached > fetch.reported:
                ranges.append((tp[0], tp[1], fetch.reported, reached, fetch.start))
                fetch.reported, fetch.start = reached, "continued"
        if ranges:
            self.world.emit(
                self.name, RecordsProcessed(self.config.group_id, self.member_id, self.incarnation, tuple(ranges))
            )

    def _fetch_offsets(self, partitions: list[TP]) -> None:
        request = OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    group_id=self.config.group_id,
                    member_id=self._offset_fetch_member_id(),
                    member_epoch=self._offset_fetch_member_epoch(),
                    topics=[
                        OffsetFetchRequestTopic(topic_id=t, partition_indexes=ps)
                        for t, ps in by_topic(partitions).items()
                    ],
                )
            ]
        )
        correlation = self._send("OffsetFetch", request, list(partitions))
        self._timer(("request_timeout", correlation), self.config.request_timeout_ms)

    def _awaits_position(self, tp: TP) -> bool:
        """Owned, not fetching and not being revoked: a committed offset for it starts fetching
        (Kafka ``ConsumerUtils.refreshCommittedOffsets`` sets positions of assigned partitions only,
        and ``SubscriptionState.isFetchable`` excludes those pending revocation)."""
        return tp in self.owned and tp not in self.fetching and tp not in self.pending_revocation

    def _fetch_offsets_again(self, partitions: tuple[TP, ...]) -> None:
        """The ``("fetch_offsets", partitions)`` timer: retry what still awaits a position."""
        still = [tp for tp in partitions if self._awaits_position(tp)]
        if still:
            self._fetch_offsets(still)

    def _retry_fetch_offsets(self, partitions: list[TP]) -> None:
        """A failed or lost OffsetFetch: the positions are still needed, so ask again after the backoff.

        Kafka keeps retrying to initialise positions (STALE_MEMBER_EPOCH until the heartbeat
        brings the new epoch, NOT_COORDINATOR across a failover, a lost response).
        """
        still = tuple(tp for tp in partitions if self._awaits_position(tp))
        if still:
            self._timer(("fetch_offsets", still), self.config.retry_backoff_ms)

    def _offset_request_timed_out(self, api: str, context: Any) -> None:
        """A request of this loop got no answer: a commit has failed (its continuation is told), a fetch is retried.

        Other APIs are the protocol's own: nothing to do here.
        """
        if api == "OffsetCommit":
            offsets, then, cause = context
            self._commit_result(offsets, cause, {}, Errors.REQUEST_TIMED_OUT)
            if then is not None:
                then(False)
        elif api == "OffsetFetch":
            self._retry_fetch_offsets(context)

    def _on_fetch_response(self, response: OffsetFetchResponse, partitions: list[TP]) -> None:
        group = response.groups[0]
        if group.error_code is not Errors.NONE:
            self._retry_fetch_offsets(partitions)
            return
        offsets = {(t.topic_id, p.partition_index): p.committed_offset for t in group.topics for p in t.partitions}
        started = False
        for tp in partitions:
            if not self._awaits_position(tp):
                continue
            position, reason = offsets.get(tp, -1), "committed"
            if position < 0:
                reason = self.config.auto_offset_reset
                position = 0 if reason == "earliest" else self.world.log_end_offset(tp, self.now)
            self.fetching[tp] = Fetch(self.now, position, position, reason)
            self.world.emit(
                self.name,
                PositionSet(self.config.group_id, self.member_id, self.incarnation, tp[0], tp[1], position, reason),
            )
            started = True
        if started:
            self._emit_assignment()

    def _auto_commit(self) -> None:
        self._timer("auto_commit", self.config.auto_commit_interval_ms)
        if self.fetching and self._may_auto_commit():
            self._commit(self.fetching, None, cause="auto")

    def _commit(self, partitions: Iterable[TP], then: Any, extra: dict[TP, int] | None = None, *, cause: str) -> None:
        """Commit the positions of ``partitions`` (plus ``extra``, positions of partitions already
        stopped), in any order: the request lists them sorted by topic and partition. ``cause``
        (``auto``, ``revocation``, ``leave``) goes to the trace with the outcome."""
        offsets = self._positions(partitions)
        self._report_processed(offsets)  # a committed position has been processed
        if extra:
            offsets.update(extra)
        if not offsets:
            if then is not None:
                then(True)
            return
        # Built, not validated: the client's own positions, already of the wire's types; a
        # stable group commits every fetching partition every interval, so this is among the Lab's
        # most frequent work.
        topics: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic_id, p), offset in sorted(offsets.items()):  # the wire's order: by topic, then partition
            topics.setdefault(topic_id, []).append(OffsetCommitRequestPartition(p, offset, -1, None))
        request = OffsetCommitRequest.model_construct(
            group_id=self.config.group_id,
            member_id=self.member_id,
            generation_id_or_member_epoch=self.member_epoch,
            topics=[OffsetCommitRequestTopic.model_construct(topic_id=t, partitions=ps) for t, ps in topics.items()],
        )
        correlation = self._send("OffsetCommit", request, (offsets, then, cause))
        self._timer(("request_timeout", correlation), self.config.request_timeout_ms)

    def _on_commit_response(self, response: OffsetCommitResponse, context: Any) -> None:
        offsets, then, cause = context
        ok = response.error_codes <= {Errors.NONE}
        errors = {(t.topic_id, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
        self._commit_result(offsets, cause, errors, min(response.error_codes - {Errors.NONE}, default=Errors.NONE))
        if ok:
            self.committed.update(offsets)
        if then is not None:
            then(ok)

    def _commit_result(
        self, offsets: dict[TP, int], cause: str, errors: dict[tuple[str | None, int], Errors], other: Errors
    ) -> None:
        """Trace how a commit went: each partition's error from ``errors``, else ``other``."""
        outcome = tuple(
            (tp[0], tp[1], offset, None if (e := errors.get(tp, other)) is Errors.NONE else e.name)
            for tp, offset in sorted(offsets.items())
        )
        group = self.config.group_id
        self.world.emit(self.name, CommitResult(group, self.member_id, self.member_epoch, cause, outcome))
