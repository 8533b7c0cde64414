"""OffsetCommit and OffsetFetch: offsets by topic name or id, validated by the group they go to.

Each kind of group validates its members' requests, as Kafka's ``Group.validateOffsetCommit``
and ``validateOffsetFetch`` do: a consumer group checks the member epoch (a zombie gets
STALE_MEMBER_EPOCH, a classic member in it ILLEGAL_GENERATION), a classic group the
generation, member, instance id and state. A commit without a generation to a group that does
not exist is accepted and makes a *simple* classic group: an empty one, created when its offsets
are replayed. A committed offset counts only for the topic incarnation (topic id) that committed
it, so a recreated topic starts fresh.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from operator import attrgetter
from typing import Protocol

from kip_lab.cluster import ClusterMetadata, Topic
from kip_lab.coordinator.classic_group import ClassicGroup, ClassicGroupState
from kip_lab.protocol.consumer_group import (
    OffsetCommitRequest,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.records import (
    OffsetCommitKey,
    OffsetCommitValue,
)
from kip_lab.runtime.log import Record
from kip_lab.runtime.memo import Memo
from kip_lab.runtime.result import CoordinatorResult
from kip_lab.runtime.scheduler import Clock


class _CommitKeys(dict):
    """partition -> the record key of its offset, for one group's topic: frozen values, each made
    once and shared by every commit of that partition.

    A stable group commits every partition every few seconds; building (and validating) the same
    key each time was a good part of the cost of a run.
    """

    def __init__(self, group: str, topic: str) -> None:
        super().__init__()
        self.group, self.topic = group, topic

    def __missing__(self, partition: int) -> OffsetCommitKey:
        key = self[partition] = OffsetCommitKey(group=self.group, topic=self.topic, partition=partition)
        return key


_partition_index = attrgetter("partition_index")


def _commit_answer(
    topics: tuple[tuple[str | None, str | None, tuple[int, ...], tuple[Errors, ...]], ...],
) -> OffsetCommitResponse:
    """The answer to a commit of ``topics`` (name, id, partitions, each partition's error)."""
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=name,
                topic_id=topic_id,
                partitions=[
                    OffsetCommitResponsePartition(partition_index=p, error_code=e)
                    for p, e in zip(partitions, errors, strict=True)
                ],
            )
            for name, topic_id, partitions, errors in topics
        ]
    )


class OffsetAnswers:
    """The frozen values a stable group's commits repeat, built once each and held by the coordinator
    (so snapshots carry them): a partition's record key, shared by every commit of it, and the
    answer to a member's commit of the same partitions, the same every interval. Building and
    validating them per commit was a good part of a stable group's run."""

    def __init__(self) -> None:
        self.keys: Memo[_CommitKeys] = Memo(_CommitKeys, limit=1 << 12)  # (group, topic) -> partition -> key
        self.answers: Memo[OffsetCommitResponse] = Memo(_commit_answer, limit=1 << 12)


def _invalid_commit(request: OffsetCommitRequest) -> ApiError | None:
    """INVALID_REQUEST for a topic without exactly one of name and id (an empty group id is allowed)."""
    for topic in request.topics:
        if topic.name and topic.topic_id:
            return ApiError(Errors.INVALID_REQUEST, "A topic can't have both a name and a topic id.")
        if not topic.name and not topic.topic_id:
            return ApiError(Errors.INVALID_REQUEST, "A topic needs a name or a topic id.")
    return None


def _metadata_too_large(metadata: str | None, limit: int) -> bool:
    """Kafka ``OffsetMetadataManager.isMetadataInvalid``: longer than the limit in Java chars (UTF-16 units)."""
    return metadata is not None and len(metadata) > limit and len(metadata.encode("utf-16-le")) // 2 > limit


class GroupOffsets(dict):
    """One group's committed offsets: (topic, partition) -> ``OffsetCommitValue``.

    A dict of frozen values, so a shallow copy taken at a time-travel snapshot is that moment's
    state: the snapshot keeps such a copy instead of pickling each of a large group's entries.
    """


class CommittingGroup(Protocol):
    """What the offset manager asks of the group a commit or fetch goes to (Kafka's
    ``Group.validateOffsetCommit`` and ``validateOffsetFetch``): each raises the ``ApiError`` to
    answer, or returns. ``ConsumerGroup``, ``ClassicGroup`` and ``ShareGroup`` are ones."""

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, member_epoch: int, api_version: int
    ) -> None: ...

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None: ...


# Kafka keeps a classic member's session alive on a commit in these states
# (``OffsetMetadataManager.commitOffset``).
_SESSION_KEEPING_STATES = frozenset({ClassicGroupState.STABLE, ClassicGroupState.PREPARING_REBALANCE})


class OffsetManager:
    """OffsetCommit and OffsetFetch over one shard's committed offsets, as Kafka's ``OffsetMetadataManager``.

    Its dependencies are given, not reached for: the committed offsets it reads and replays into,
    the cluster that resolves topics, ``group`` (the group of any kind holding an id, or None),
    the classic groups (where a simple group is made), ``keep_session`` (re-arms a classic
    member's session timer), the clock that stamps a commit, the metadata size limit and the
    repeated answers (``OffsetAnswers``). A commit returns its records unapplied: the
    coordinator appends them to the log and replays them here (``replay``), the only way the
    offsets change.
    """

    def __init__(
        self,
        offsets: dict[str, GroupOffsets],
        *,
        cluster: ClusterMetadata,
        group: Callable[[str], CommittingGroup | None],
        classic_groups: MutableMapping[str, ClassicGroup],
        keep_session: Callable[[ClassicGroup, str], None],
        clock: Clock,
        metadata_max_bytes: int,
        answers: OffsetAnswers,
    ) -> None:
        self.offsets = offsets
        self.cluster = cluster
        self.group = group
        self.classic_groups = classic_groups
        self.keep_session = keep_session
        self.clock = clock
        self.metadata_max_bytes = metadata_max_bytes
        self.answers = answers

    def replay(self, records: Iterable[Record]) -> None:
        """Offset records (a commit writes one per partition of one group, all replayed in one loop).

        An offset for a group that does not exist makes a simple classic group: empty, without a
        protocol type (Kafka ``OffsetMetadataManager.replay``), so that a failover rebuilds it too.
        """
        offsets = self.offsets
        group_id: str | None = None
        group = GroupOffsets()  # replaced at the first record, whose group is never None
        for key, value in records:
            if key.group != group_id:
                group_id = key.group
                group = offsets.setdefault(group_id, GroupOffsets())
                if value is not None and self.group(group_id) is None:
                    self.classic_groups[group_id] = ClassicGroup(group_id)
            if value is None:
                group.pop(key.partition_key, None)
            else:
                group[key.partition_key] = value

    def _validate_commit(self, request: OffsetCommitRequest) -> None:
        """Kafka ``OffsetMetadataManager.validateOffsetCommit``: the group validates the member.

        A commit without a generation (-1) to a group that does not exist is accepted (its
        replay makes the simple group); one with a generation is GROUP_ID_NOT_FOUND from v9 on
        and ILLEGAL_GENERATION before (kept for older clients). A classic member's accepted
        commit keeps its session alive while the group is Stable or PreparingRebalance.
        """
        group = self.group(request.group_id)
        if group is None:
            if request.generation_id_or_member_epoch < 0:
                return
            if request.api_version >= 9:
                raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
            raise ApiError(Errors.ILLEGAL_GENERATION, f"Group {request.group_id} not found.")
        group.validate_offset_commit(
            request.member_id, request.group_instance_id, request.generation_id_or_member_epoch, request.api_version
        )
        if isinstance(group, ClassicGroup) and group.state in _SESSION_KEEPING_STATES:
            self.keep_session(group, request.member_id)

    def commit(self, request: OffsetCommitRequest) -> CoordinatorResult[OffsetCommitResponse]:
        """OffsetCommit: by topic name or id, validated by the group (``_validate_commit``); the
        records are not applied yet (``GroupCoordinator.offset_commit`` applies them).

        As Kafka: a partition of a topic the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION
        before the group is looked at (``KafkaApis.handleOffsetCommitRequest``; when no partition
        is left, the group is not checked at all); metadata longer than ``offset_metadata_max_bytes``
        is OFFSET_METADATA_TOO_LARGE for that partition alone (``OffsetMetadataManager.commitOffset``).
        An empty group id is a group like any other (Kafka ``GroupCoordinatorService.commitOffsets`` keeps
        it for backward compatibility).
        """
        invalid = _invalid_commit(request)
        resolved_topics = [self._resolve_commit_topic(topic, invalid) for topic in request.topics]
        to_coordinator = any(
            p.partition_index in known for topic, _, known in resolved_topics for p in topic.partitions
        )
        member_error = self._commit_member_error(request) if invalid is None and to_coordinator else None
        records: list[Record] = []
        topics = []
        for topic, resolved, known in resolved_topics:
            indexes = tuple(map(_partition_index, topic.partitions))
            errors = self._commit_errors(topic, resolved, known, invalid, member_error)
            if invalid is None and member_error is None and resolved is not None:
                records += self._commit_records(request.group_id, topic, resolved, errors)
            topics.append((topic.name, topic.topic_id, indexes, errors))
        batches = (tuple(records),) if records else ()
        return CoordinatorResult(self.answers.answers(tuple(topics)), batches, origin="OffsetCommit")

    def _resolve_commit_topic(
        self, topic: OffsetCommitRequestTopic, error: ApiError | None
    ) -> tuple[OffsetCommitRequestTopic, Topic | None, range | tuple[()]]:
        """The cluster's topic a commit names (by id, else by name) and its partition indexes."""
        if error is not None:
            return topic, None, ()
        if topic.topic_id is not None:
            resolved = self.cluster.topic_by_id(topic.topic_id)
        else:
            resolved = self.cluster.topic(topic.name or "") if topic.name in self.cluster else None
        return topic, resolved, range(resolved.num_partitions) if resolved is not None else ()

    def _commit_member_error(self, request: OffsetCommitRequest) -> ApiError | None:
        """The group's refusal of the commit (``_validate_commit``), or None."""
        try:
            self._validate_commit(request)
        except ApiError as exc:
            return exc
        return None

    def _commit_errors(
        self,
        topic: OffsetCommitRequestTopic,
        resolved: Topic | None,
        known: range | tuple[()],
        invalid: ApiError | None,
        member_error: ApiError | None,
    ) -> tuple[Errors, ...]:
        """Each partition's error: an invalid request's; else an unknown topic or partition, answered
        before the group is looked at (Kafka ``KafkaApis.handleOffsetCommitRequest``); else the member
        check's; else metadata too large."""
        if invalid is not None:
            return (invalid.error,) * len(topic.partitions)
        if resolved is None and topic.topic_id is not None:
            return (Errors.UNKNOWN_TOPIC_ID,) * len(topic.partitions)
        limit = self.metadata_max_bytes
        return tuple(
            Errors.UNKNOWN_TOPIC_OR_PARTITION
            if index not in known
            else member_error.error
            if member_error is not None
            else Errors.OFFSET_METADATA_TOO_LARGE
            if _metadata_too_large(metadata, limit)
            else Errors.NONE
            for index, _, _, metadata in topic.partitions
        )

    def _commit_records(
        self, group_id: str, topic: OffsetCommitRequestTopic, resolved: Topic, errors: tuple[Errors, ...]
    ) -> list[Record]:
        """One offset record per partition committed without error."""
        keys, now = self.answers.keys(group_id, resolved.name), self.clock.now_ms
        return [
            Record(keys[index], OffsetCommitValue(offset, now, leader_epoch, metadata, resolved.topic_id))
            for (index, offset, leader_epoch, metadata), code in zip(topic.partitions, errors, strict=True)
            if code is Errors.NONE
        ]

    def fetch(self, request: OffsetFetchRequest) -> CoordinatorResult[OffsetFetchResponse]:
        """OffsetFetch: an offset only counts for the topic incarnation that committed it."""
        return CoordinatorResult(
            OffsetFetchResponse(groups=[self._fetch_group(g) for g in request.groups]), origin="OffsetFetch"
        )

    def _fetch_group(self, request: OffsetFetchRequestGroup) -> OffsetFetchResponseGroup:
        """One group's committed offsets: every stored topic, or the topics the request names.

        Kafka ``OffsetMetadataManager.fetchOffsets`` / ``fetchAllOffsets``: the group validates
        the member (``validateOffsetFetch``); a group that does not exist, is Dead or is a share
        group has no offsets (every named partition -1, no topic when all are asked for), and
        any other refusal is the group's error.
        """
        stored: Mapping[tuple[str, int], OffsetCommitValue] = self.offsets.get(request.group_id, {})
        try:
            group = self.group(request.group_id)
            if group is None:
                raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
            group.validate_offset_fetch(request.member_id, request.member_epoch)
        except ApiError as error:
            if error.error is not Errors.GROUP_ID_NOT_FOUND:
                return OffsetFetchResponseGroup(group_id=request.group_id, error_code=error.error)
            stored = {}
        topics: list[tuple[str | None, str | None, list[int]]]
        if request.topics is None:
            names = sorted({topic for topic, _ in stored})
            topics = [(name, None, sorted(p for t, p in stored if t == name)) for name in names]
        else:
            topics = [(t.name, t.topic_id, t.partition_indexes) for t in request.topics]
        out = [self._fetch_topic(stored, name, topic_id, indexes) for name, topic_id, indexes in topics]
        return OffsetFetchResponseGroup(group_id=request.group_id, topics=out)

    def _fetch_topic(
        self,
        stored: Mapping[tuple[str, int], OffsetCommitValue],
        name: str | None,
        topic_id: str | None,
        indexes: list[int],
    ) -> OffsetFetchResponseTopic:
        """A topic's offsets; one committed to another incarnation of the topic (another id) is not shown."""
        if topic_id:
            current = self.cluster.topic_by_id(topic_id)
        else:
            current = self.cluster.topic(name) if name is not None and name in self.cluster else None
        lookup_name = current.name if current else name
        partitions = []
        for index in indexes:
            value = stored.get((lookup_name or "", index))
            fresh = value is not None and (
                value.topic_id is None or current is None or value.topic_id == current.topic_id
            )
            if topic_id is not None and current is None:
                partitions.append(
                    OffsetFetchResponsePartition(partition_index=index, error_code=Errors.UNKNOWN_TOPIC_ID)
                )
            elif fresh and value is not None:
                partitions.append(
                    OffsetFetchResponsePartition(
                        partition_index=index,
                        committed_offset=value.offset,
                        committed_leader_epoch=value.leader_epoch,
                        metadata=value.metadata,
                    )
                )
            else:
                partitions.append(OffsetFetchResponsePartition(partition_index=index))
        return OffsetFetchResponseTopic(name=name, topic_id=topic_id, partitions=partitions)
