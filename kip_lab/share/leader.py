"""One broker's share-partition leadership: ShareFetch and ShareAcknowledge with share sessions.

The broker leads some topic-partitions (``add_log``); for each share group that reads one of
them it keeps a ``SharePartition``, loaded from the share coordinator on first use (KIP-932
"Share-partition initialization"). Requests follow the KIP's share-session matrix (epoch 0
opens, -1 closes, otherwise the cached epoch must match); acknowledgements piggy-backed on a
ShareFetch are applied before records are acquired; a session that closes, is replaced or
sits idle for 120 s releases the records its member still holds.

The leader answers after the persister has completed each write (synchronous persister);
``SharePartition`` itself keeps writes pending, for simulations that put latency in between.
"""

from __future__ import annotations

from collections.abc import Hashable

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
from kip_lab.share.partition import SharePartition
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
        if sp is None:
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
        kind, group_id, member_id = key  # type: ignore[misc]
        if kind != "session idle":
            raise ValueError(f"unknown timer {key!r}")
        session = self.sessions.get((group_id, member_id))
        if session is not None:
            self._end_session(session)

    def _touch(self, session: ShareSession) -> None:
        self.scheduler.schedule(self, ("session idle", *session.key), SHARE_SESSION_IDLE_TIMEOUT_MS)

    def _end_session(self, session: ShareSession) -> None:
        """Remove the session and release what its member still holds (KIP-932: closed, replaced, evicted)."""
        del self.sessions[session.key]
        self.scheduler.cancel(self, ("session idle", *session.key))
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
    ) -> tuple[Errors, str | None]:
        """One partition's acknowledgements: atomic, answered once the write has completed."""
        try:
            write = self.share_partition(group_id, topic_id, partition).acknowledge(member_id, batches)
        except ApiError as error:
            return error.error, error.message
        if write is not None and write.error not in (None, Errors.NONE):
            return write.error, f"the share coordinator refused the write: {write.error.name}"
        return Errors.NONE, None

    # ------------------------------------------------------------------ ShareFetch
    def share_fetch(self, request: ShareFetchRequest) -> ShareFetchResponse:
        key = (request.group_id, request.member_id)
        epoch = request.share_session_epoch
        session = self.sessions.get(key)
        has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
        if epoch == INITIAL_SHARE_SESSION_EPOCH:
            if has_acks:
                return _fetch_error(Errors.INVALID_REQUEST, "a ShareFetch that opens a session cannot acknowledge")
            if session is not None:
                self._end_session(session)
            session = ShareSession(request.group_id, request.member_id)
        elif session is None:
            return _fetch_error(Errors.SHARE_SESSION_NOT_FOUND, f"no share session for member {request.member_id}")
        elif epoch == FINAL_SHARE_SESSION_EPOCH:
            if request.forgotten_topics_data:
                return _fetch_error(Errors.INVALID_REQUEST, "the final ShareFetch cannot forget partitions")
        elif epoch != session.epoch:
            return _fetch_error(
                Errors.INVALID_SHARE_SESSION_EPOCH, f"expected share session epoch {session.epoch}, got {epoch}"
            )

        answers: dict[TopicPartition, dict] = {}
        for topic in request.topics:
            for part in topic.partitions:
                if part.acknowledgement_batches:
                    code, message = self._acknowledge(
                        request.group_id,
                        request.member_id,
                        topic.topic_id,
                        part.partition_index,
                        part.acknowledgement_batches,
                    )
                    answers[(topic.topic_id, part.partition_index)] = {
                        "acknowledge_error_code": code,
                        "acknowledge_error_message": message,
                    }
        if epoch == FINAL_SHARE_SESSION_EPOCH:
            self._end_session(session)
            return _fetch_response(answers)

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
        if epoch != INITIAL_SHARE_SESSION_EPOCH:
            session.epoch = next_session_epoch(session.epoch)
        self.sessions[key] = session
        self._touch(session)

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
            if budget == 0:
                continue
            acquired = sp.acquire(request.member_id, budget)
            if acquired:
                budget -= sum(r.last_offset - r.first_offset + 1 for r in acquired)
                answer["acquired_records"] = acquired
                answer["records"] = [rec for r in acquired for rec in sp.log.read(r.first_offset, r.last_offset)]
        return _fetch_response({tp: a for tp, a in answers.items() if a})

    # ------------------------------------------------------------------ ShareAcknowledge
    def share_acknowledge(self, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
        key = (request.group_id, request.member_id)
        epoch = request.share_session_epoch
        session = self.sessions.get(key)
        if epoch == INITIAL_SHARE_SESSION_EPOCH:
            return ShareAcknowledgeResponse(
                error_code=Errors.INVALID_SHARE_SESSION_EPOCH, error_message="ShareAcknowledge cannot open a session"
            )
        if session is None:
            return ShareAcknowledgeResponse(
                error_code=Errors.SHARE_SESSION_NOT_FOUND, error_message=f"no share session for {request.member_id}"
            )
        if epoch != FINAL_SHARE_SESSION_EPOCH and epoch != session.epoch:
            return ShareAcknowledgeResponse(
                error_code=Errors.INVALID_SHARE_SESSION_EPOCH,
                error_message=f"expected share session epoch {session.epoch}, got {epoch}",
            )
        topics = []
        for topic in request.topics:
            partitions = []
            for part in topic.partitions:
                code, message = self._acknowledge(
                    request.group_id,
                    request.member_id,
                    topic.topic_id,
                    part.partition_index,
                    part.acknowledgement_batches,
                )
                partitions.append(
                    ShareAcknowledgeResponsePartition(
                        partition_index=part.partition_index, error_code=code, error_message=message
                    )
                )
            topics.append(ShareAcknowledgeResponseTopic(topic_id=topic.topic_id, partitions=partitions))
        if epoch == FINAL_SHARE_SESSION_EPOCH:
            self._end_session(session)
        else:
            session.epoch = next_session_epoch(session.epoch)
            self._touch(session)
        return ShareAcknowledgeResponse(responses=topics)


def _fetch_error(error: Errors, message: str) -> ShareFetchResponse:
    return ShareFetchResponse(error_code=error, error_message=message)


def _fetch_response(answers: dict[TopicPartition, dict]) -> ShareFetchResponse:
    """Per-partition answers grouped by topic, in the order the partitions were handled."""
    topics: dict[str, list[ShareFetchResponsePartition]] = {}
    for (topic_id, partition), fields in answers.items():
        topics.setdefault(topic_id, []).append(ShareFetchResponsePartition(partition_index=partition, **fields))
    return ShareFetchResponse(
        responses=[ShareFetchResponseTopic(topic_id=t, partitions=parts) for t, parts in topics.items()]
    )
