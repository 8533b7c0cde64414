"""One broker's share-partition leadership: ShareFetch and ShareAcknowledge with share sessions.

The broker leads some topic-partitions (``add_log``); for each share group that reads one of
them it keeps a ``SharePartition``, loaded from the share coordinator on first use (KIP-932
"Share-partition initialization"). Requests follow the KIP's share-session matrix (epoch 0
opens, -1 closes, otherwise the cached epoch must match); acknowledgements piggy-backed on a
ShareFetch are applied before records are acquired; a session that closes, is replaced or
sits idle for 120 s releases the records its member still holds.

The leader answers only after the writes a request caused have completed (KIP-932: it waits
for the persister). ``share_fetch`` / ``share_acknowledge`` answer at once and need a
synchronous persister; ``begin_share_fetch`` / ``begin_share_acknowledge`` return a
``LeaderReply`` whose ``response()`` is ready once a deferred persister has delivered them,
so a simulation can put latency (or a share-coordinator failover) in between.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.share import (
    FINAL_SHARE_SESSION_EPOCH,
    INITIAL_SHARE_SESSION_EPOCH,
    AcknowledgementBatch,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeResponsePartition,
    ShareAcknowledgeResponseTopic,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareFetchResponsePartition,
    ShareFetchResponseTopic,
)
from kip_lab.runtime.scheduler import Scheduler
from kip_lab.share.config import SharePartitionConfig
from kip_lab.share.partition import PendingWrite, SharePartition
from kip_lab.share.persister import CoordinatorPersister
from kip_lab.share.session import (
    SHARE_SESSION_IDLE_TIMEOUT_MS,
    SessionKey,
    ShareSession,
    TopicPartition,
    next_session_epoch,
)
from kip_lab.share.topic_log import TopicLog

SharePartitionKey = tuple[str, str, int]
R = TypeVar("R")


class SessionIdleTimer(NamedTuple):
    """The timer key of a share session's idle timeout (KIP-932: a session idle for 120 s is evicted)."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class AcknowledgeOutcome:
    """One partition's acknowledgements: refused at once (``error``), or the write they caused."""

    write: PendingWrite | None
    error: Errors = Errors.NONE
    message: str | None = None
    client_error: Callable[[Errors], Errors] = Errors  # how a refused write reaches the client

    def result(self) -> tuple[Errors, str | None]:
        if self.write is None or self.write.error is Errors.NONE:
            return self.error, self.message
        if self.write.error is None:
            raise RuntimeError(f"write {self.write.write_id} of {self.write.origin} has not completed")
        return self.client_error(self.write.error), f"the share coordinator refused the write: {self.write.error.name}"


@dataclass(frozen=True, slots=True)
class LeaderReply(Generic[R]):
    """A request's answer, which the leader gives only once ``writes`` have completed (KIP-932: it waits
    for the persister). With a deferred persister: deliver its queue, then ``response()``."""

    writes: tuple[PendingWrite, ...]
    _build: Callable[[], R]

    @property
    def ready(self) -> bool:
        return all(write.error is not None for write in self.writes)

    def response(self) -> R:
        if not self.ready:
            pending = [w.write_id for w in self.writes if w.error is None]
            raise RuntimeError(f"the answer waits for writes {pending}: deliver the persister's queue first")
        return self._build()


class SharePartitionLeader:
    """ShareFetch / ShareAcknowledge on one broker.

    ``group_configs`` overrides ``config`` per share group (the KIP's dynamic group configs).
    """

    def __init__(
        self,
        persister: CoordinatorPersister,
        *,
        scheduler: Scheduler | None = None,
        config: SharePartitionConfig | None = None,
        group_configs: dict[str, SharePartitionConfig] | None = None,
    ) -> None:
        self.persister = persister
        self.scheduler = scheduler if scheduler is not None else Scheduler()
        self.config = config or SharePartitionConfig()
        self.group_configs = dict(group_configs or {})
        self.logs: dict[TopicPartition, TopicLog] = {}
        self.leader_epochs: dict[TopicPartition, int] = {}
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions: dict[SessionKey, ShareSession] = {}

    # ------------------------------------------------------------------ leadership
    def add_log(self, log: TopicLog, leader_epoch: int = 0) -> None:
        """This broker leads ``log`` at ``leader_epoch``."""
        self.logs[(log.topic_id, log.partition)] = log
        self.leader_epochs[(log.topic_id, log.partition)] = leader_epoch

    def share_partition(self, group_id: str, topic_id: str, partition: int) -> SharePartition:
        """The group's share-partition, loaded from the share coordinator on first use (ApiError if it cannot be)."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is None or sp.fenced is not None:  # a fenced share-partition is read again (a reset, a new leader)
            log = self.logs.get((topic_id, partition))
            if log is None:
                raise ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"this broker does not lead {topic_id}:{partition}")
            sp = SharePartition.load(
                group_id,
                topic_id,
                partition,
                log,
                config=self.group_configs.get(group_id, self.config),
                scheduler=self.scheduler,
                persister=self.persister,
                leader_epoch=self.leader_epochs[(topic_id, partition)],
            )
            self.partitions[key] = sp
        return sp

    def _reload_if_reset(self, group_id: str, topic_partition: TopicPartition) -> None:
        """A share-partition's first session: re-read its state if its state epoch moved (an admin reset)."""
        sp = self.partitions.get((group_id, *topic_partition))
        if sp is None or any(
            s.group_id == group_id and topic_partition in s.partitions for s in self.sessions.values()
        ):
            return
        summary = self.persister.read_summary(group_id, *topic_partition, sp.leader_epoch)
        if summary.error_code is Errors.NONE and summary.state_epoch != sp.state_epoch:
            self.scheduler.cancel_all(sp)
            del self.partitions[(group_id, *topic_partition)]

    # ------------------------------------------------------------------ sessions
    def fire_timer(self, key: Hashable) -> None:
        """A share session sat idle too long: it ends, releasing what its member holds."""
        if not isinstance(key, SessionIdleTimer):
            raise ValueError(f"unknown timer {key!r}")
        session = self.sessions.get((key.group_id, key.member_id))
        if session is not None:
            self._end_session(session)

    def _touch(self, session: ShareSession) -> None:
        self.scheduler.schedule(self, SessionIdleTimer(*session.key), SHARE_SESSION_IDLE_TIMEOUT_MS)

    def _end_session(self, session: ShareSession) -> None:
        """Remove the session and release what its member still holds (KIP-932: closed, replaced, evicted)."""
        del self.sessions[session.key]
        self.scheduler.cancel(self, SessionIdleTimer(*session.key))
        for topic_id, partition in session.partitions:
            sp = self.partitions.get((session.group_id, topic_id, partition))
            if sp is not None:
                sp.release_member(session.member_id)

    def close_connection(self, group_id: str, member_id: str) -> None:
        """The member's connection closed: its session ends with it."""
        session = self.sessions.get((group_id, member_id))
        if session is not None:
            self._end_session(session)

    # ------------------------------------------------------------------ acknowledgements
    def _acknowledge(
        self, group_id: str, member_id: str, topic_id: str, partition: int, batches: list[AcknowledgementBatch]
    ) -> AcknowledgeOutcome:
        """One partition's acknowledgements: atomic; the answer waits for the write they caused."""
        try:
            sp = self.share_partition(group_id, topic_id, partition)
            write = sp.acknowledge(member_id, batches)
        except ApiError as error:
            return AcknowledgeOutcome(None, error.error, error.message)
        return AcknowledgeOutcome(write, client_error=sp.client_error)

    # ------------------------------------------------------------------ ShareFetch
    def share_fetch(self, request: ShareFetchRequest) -> ShareFetchResponse:
        """ShareFetch, answered at once (the persister must have completed the writes it caused)."""
        return self.begin_share_fetch(request).response()

    def _final_fetch_problem(self, request: ShareFetchRequest) -> str | None:
        """What makes a final (epoch -1) ShareFetch invalid (docs/decisions.md SP12).

        ``kafka`` (Kafka's ``SharePartitionManager.newContext``): a partition to fetch, i.e. with
        PartitionMaxBytes > 0; forgotten partitions are ignored. ``kip``: forgetting partitions
        (the partitions it names carry acknowledgements).
        """
        if self.config.fidelity == "kip":
            return "the final ShareFetch cannot forget partitions" if request.forgotten_topics_data else None
        if any(p.partition_max_bytes > 0 for t in request.topics for p in t.partitions):
            return "the final ShareFetch cannot fetch partitions (PartitionMaxBytes must be 0)"
        return None

    def begin_share_fetch(self, request: ShareFetchRequest) -> LeaderReply[ShareFetchResponse]:
        """ShareFetch whose answer is ready once the writes of its acknowledgements have completed.

        In the order of Kafka's ``KafkaApis.handleShareFetchRequest``: find (or open) the share
        session, apply the piggy-backed acknowledgements, then (unless the request closes the
        session) update the session's partitions and acquire records from them in its order.
        """
        try:
            session = self._fetch_session(request)
        except ApiError as error:
            return _ready(_fetch_error(error.error, error.message or ""))
        outcomes = self._acknowledge_piggybacked(request)
        if request.share_session_epoch == FINAL_SHARE_SESSION_EPOCH:
            self._end_session(session)
            return _fetch_reply({tp: {} for tp in outcomes}, outcomes)
        acknowledge_only = self._update_session(session, request)
        answers = self._acquire_records(request, session, acknowledge_only, outcomes)
        return _fetch_reply(answers, outcomes)

    def _fetch_session(self, request: ShareFetchRequest) -> ShareSession:
        """The share-session matrix: epoch 0 opens a session (replacing the member's old one); any other
        epoch needs the cached session (-1 closes it). ApiError when the request cannot have one."""
        epoch = request.share_session_epoch
        session = self.sessions.get((request.group_id, request.member_id))
        if epoch == INITIAL_SHARE_SESSION_EPOCH:
            if any(p.acknowledgement_batches for t in request.topics for p in t.partitions):
                raise ApiError(Errors.INVALID_REQUEST, "a ShareFetch that opens a session cannot acknowledge")
            if session is not None:
                self._end_session(session)
            return ShareSession(request.group_id, request.member_id)
        session = _require_session(session, epoch, request.member_id)
        if epoch == FINAL_SHARE_SESSION_EPOCH and (problem := self._final_fetch_problem(request)) is not None:
            raise ApiError(Errors.INVALID_REQUEST, problem)
        return session

    def _acknowledge_piggybacked(self, request: ShareFetchRequest) -> dict[TopicPartition, AcknowledgeOutcome]:
        """The acknowledgements a ShareFetch carries, applied before anything is acquired."""
        outcomes: dict[TopicPartition, AcknowledgeOutcome] = {}
        for topic in request.topics:
            for part in topic.partitions:
                if part.acknowledgement_batches:
                    tp = (topic.topic_id, part.partition_index)
                    outcomes[tp] = self._acknowledge(
                        request.group_id, request.member_id, *tp, part.acknowledgement_batches
                    )
        return outcomes

    def _update_session(self, session: ShareSession, request: ShareFetchRequest) -> set[TopicPartition]:
        """Add the request's partitions and drop its forgotten ones, move the epoch on and restart the idle
        timer. Returns the partitions named only to acknowledge (PartitionMaxBytes 0): nothing is fetched there."""
        acknowledge_only = set()
        for topic in request.topics:
            for part in topic.partitions:
                tp = (topic.topic_id, part.partition_index)
                if part.partition_max_bytes == 0:
                    acknowledge_only.add(tp)
                if tp not in session.partitions:
                    self._reload_if_reset(request.group_id, tp)
                    session.add(tp)
        for forgotten in request.forgotten_topics_data:
            for partition in forgotten.partitions:
                session.forget((forgotten.topic_id, partition))
        if request.share_session_epoch != INITIAL_SHARE_SESSION_EPOCH:
            session.epoch = next_session_epoch(session.epoch)
        self.sessions[session.key] = session
        self._touch(session)
        return acknowledge_only

    def _acquire_records(
        self,
        request: ShareFetchRequest,
        session: ShareSession,
        acknowledge_only: set[TopicPartition],
        outcomes: dict[TopicPartition, AcknowledgeOutcome],
    ) -> dict[TopicPartition, dict[str, Any]]:
        """Acquire up to ``max_records`` from the session's partitions in its rotating order.

        The answers: acknowledged partitions first, then each partition that has records or an error.
        """
        answers: dict[TopicPartition, dict[str, Any]] = {tp: {} for tp in outcomes}
        budget = request.max_records
        for tp in session.fetch_order():
            if tp in acknowledge_only:
                continue
            answer = answers.setdefault(tp, {})
            try:
                sp = self.share_partition(request.group_id, *tp)
            except ApiError as error:
                answer.update(error_code=error.error, error_message=error.message)
                continue
            if budget <= 0:  # a soft max_records (Kafka) may be overshot by the last batch taken
                continue
            acquired = sp.acquire(request.member_id, budget)
            if acquired:
                budget -= sum(r.last_offset - r.first_offset + 1 for r in acquired)
                answer["acquired_records"] = acquired
                answer["records"] = [rec for r in acquired for rec in sp.log.read(r.first_offset, r.last_offset)]
        return {tp: a for tp, a in answers.items() if a or tp in outcomes}

    # ------------------------------------------------------------------ ShareAcknowledge
    def share_acknowledge(self, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
        """ShareAcknowledge, answered at once (the persister must have completed the writes it caused)."""
        return self.begin_share_acknowledge(request).response()

    def begin_share_acknowledge(self, request: ShareAcknowledgeRequest) -> LeaderReply[ShareAcknowledgeResponse]:
        """ShareAcknowledge whose answer is ready once the writes it caused have completed."""
        key = (request.group_id, request.member_id)
        epoch = request.share_session_epoch
        session = self.sessions.get(key)
        if epoch == INITIAL_SHARE_SESSION_EPOCH:
            return _ready(
                _acknowledge_error(Errors.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a session")
            )
        try:
            session = _require_session(session, epoch, request.member_id)
        except ApiError as error:
            return _ready(_acknowledge_error(error.error, error.message or ""))
        outcomes = [
            (
                topic.topic_id,
                [
                    (
                        part.partition_index,
                        self._acknowledge(
                            request.group_id,
                            request.member_id,
                            topic.topic_id,
                            part.partition_index,
                            part.acknowledgement_batches,
                        ),
                    )
                    for part in topic.partitions
                ],
            )
            for topic in request.topics
        ]
        if epoch == FINAL_SHARE_SESSION_EPOCH:
            self._end_session(session)
        else:
            session.epoch = next_session_epoch(session.epoch)
            self._touch(session)

        def build() -> ShareAcknowledgeResponse:
            topics = []
            for topic_id, parts in outcomes:
                partitions = []
                for partition, outcome in parts:
                    code, message = outcome.result()
                    partitions.append(
                        ShareAcknowledgeResponsePartition(
                            partition_index=partition, error_code=code, error_message=message
                        )
                    )
                topics.append(ShareAcknowledgeResponseTopic(topic_id=topic_id, partitions=partitions))
            return ShareAcknowledgeResponse(responses=topics)

        return LeaderReply(tuple(o.write for _, parts in outcomes for _, o in parts if o.write is not None), build)


def _require_session(session: ShareSession | None, epoch: int, member_id: str) -> ShareSession:
    """The session a request past the opening one uses, or ApiError saying why it cannot (the final
    epoch matches any session epoch)."""
    if session is None:
        raise ApiError(Errors.SHARE_SESSION_NOT_FOUND, f"no share session for {member_id}")
    if epoch != FINAL_SHARE_SESSION_EPOCH and epoch != session.epoch:
        raise ApiError(Errors.INVALID_SHARE_SESSION_EPOCH, f"expected share session epoch {session.epoch}, got {epoch}")
    return session


def _fetch_error(error: Errors, message: str) -> ShareFetchResponse:
    return ShareFetchResponse(error_code=error, error_message=message)


def _acknowledge_error(error: Errors, message: str) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(error_code=error, error_message=message)


def _ready(response: R) -> LeaderReply[R]:
    return LeaderReply((), lambda: response)


def _fetch_reply(
    answers: dict[TopicPartition, dict], outcomes: dict[TopicPartition, AcknowledgeOutcome]
) -> LeaderReply[ShareFetchResponse]:
    """Per-partition answers grouped by topic, in the order the partitions were handled."""

    def build() -> ShareFetchResponse:
        topics: dict[str, list[ShareFetchResponsePartition]] = {}
        for tp, fields in answers.items():
            if tp in outcomes:
                code, message = outcomes[tp].result()
                fields = {**fields, "acknowledge_error_code": code, "acknowledge_error_message": message}
            topics.setdefault(tp[0], []).append(ShareFetchResponsePartition(partition_index=tp[1], **fields))
        return ShareFetchResponse(
            responses=[ShareFetchResponseTopic(topic_id=t, partitions=parts) for t, parts in topics.items()]
        )

    return LeaderReply(tuple(o.write for o in outcomes.values() if o.write is not None), build)
