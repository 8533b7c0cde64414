"""The admin client's share-group methods (KIP-932 "Administration"), over the group coordinator.

``listShareGroups``, ``describeShareGroups``, ``deleteShareGroups``, ``listShareGroupOffsets``,
``alterShareGroupOffsets`` and ``deleteShareGroupOffsets``, plus ``kafka-share-groups.sh
--reset-offsets`` (to earliest, latest, or a date-time) and the dynamic group config
``group.share.auto.offset.reset``. Altering and deleting need an empty group
(GROUP_NOT_EMPTY otherwise); the coordinator enforces it. Results are plain dicts keyed as
the Java ``*Result`` objects are (group id, topic-partition or topic), errors by Kafka name.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import ConfigDict, Field

from kip_lab.contract import Model
from kip_lab.errors import KipLabError
from kip_lab.protocol.errors import Errors
from kip_lab.protocol.share_group import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupsRequest,
    DescribedShareGroup,
    DescribeShareGroupOffsetsRequest,
    ListShareGroupsRequest,
    ShareGroupDescribeRequest,
)
from kip_lab.share.config import SharePartitionConfig
from kip_lab.share.topic_log import TopicLog

TopicPartitionName = tuple[str, int]  # (topic name, partition)


class ResetSpec(Model):
    """Where ``--reset-offsets`` moves each share-partition start offset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    to: Literal["earliest", "latest", "datetime"]
    timestamp_ms: int | None = Field(None, ge=0, description="for 'datetime': the first offset at or after it")


class LogOffsets(Protocol):
    """The offsets ListOffsets would answer for a topic-partition (earliest, latest, by time)."""

    def earliest(self, topic: str, partition: int) -> int: ...
    def latest(self, topic: str, partition: int) -> int: ...
    def for_time(self, topic: str, partition: int, timestamp_ms: int) -> int: ...


@dataclass
class TimestampedLogs:
    """Topic logs with the time each batch was appended: what ``LogOffsets`` needs."""

    logs: dict[TopicPartitionName, TopicLog] = field(default_factory=dict)
    append_times: dict[TopicPartitionName, list[tuple[int, int]]] = field(default_factory=dict)  # (time, base)

    def appended(self, topic: str, partition: int, base_offset: int, time_ms: int) -> None:
        self.append_times.setdefault((topic, partition), []).append((time_ms, base_offset))

    def earliest(self, topic: str, partition: int) -> int:
        return self.logs[(topic, partition)].log_start_offset

    def latest(self, topic: str, partition: int) -> int:
        return self.logs[(topic, partition)].high_watermark

    def for_time(self, topic: str, partition: int, timestamp_ms: int) -> int:
        """The first batch appended at or after ``timestamp_ms`` (the log end if none)."""
        times = self.append_times.get((topic, partition), [])
        index = bisect.bisect_left(times, (timestamp_ms, -1))
        if index == len(times):
            return self.latest(topic, partition)
        return max(times[index][1], self.earliest(topic, partition))


class ShareAdmin:
    """``Admin``'s share-group methods against one group coordinator."""

    def __init__(
        self,
        coordinator: Any,
        offsets: LogOffsets | None = None,
        group_configs: dict[str, SharePartitionConfig] | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.offsets = offsets
        # The share-partition leaders' per-group configs (KIP-932 dynamic group configs).
        self.group_configs = group_configs if group_configs is not None else {}
        self.results: list[Any] = []  # every CoordinatorResult, in order (the Lab traces them)

    def _call(self, handler: str, request: Any) -> Any:
        result = getattr(self.coordinator, handler)(request)
        self.results.append(result)
        return result.response

    # ------------------------------------------------------------------ groups
    def list_share_groups(self, in_states: Iterable[str] = ()) -> dict[str, str]:
        """group id -> state (Empty, Stable, Dead); ``in_states`` filters."""
        response = self._call("list_share_groups", ListShareGroupsRequest(states_filter=list(in_states)))
        return {g.group_id: g.group_state for g in response.groups}

    def describe_share_groups(self, group_ids: Iterable[str]) -> dict[str, DescribedShareGroup]:
        response = self._call("share_group_describe", ShareGroupDescribeRequest(group_ids=list(group_ids)))
        return {g.group_id: g for g in response.groups}

    def delete_share_groups(self, group_ids: Iterable[str]) -> dict[str, str | None]:
        """group id -> None when deleted, else the error's name (GROUP_NOT_EMPTY for a group with members)."""
        response = self._call("delete_share_groups", DeleteShareGroupsRequest(groups_names=list(group_ids)))
        return {r.group_id: _name(r.error_code) for r in response.results}

    # ------------------------------------------------------------------ start offsets
    def list_share_group_offsets(self, group_id: str) -> dict[TopicPartitionName, int]:
        """Each share-partition's start offset (SPSO), read from the share coordinator."""
        response = self._call("describe_share_group_offsets", DescribeShareGroupOffsetsRequest(group_id=group_id))
        if response.error_code is not Errors.NONE:
            raise ShareAdminError(response.error_code, response.error_message)
        return {
            (t.topic_name, p.partition_index): p.start_offset
            for t in response.responses
            for p in t.partitions
            if p.error_code is Errors.NONE
        }

    def alter_share_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartitionName, int]
    ) -> dict[TopicPartitionName, str | None]:
        """Set start offsets of an empty group; per partition None (done) or the error's name."""
        by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                AlterShareGroupOffsetsRequestPartition(partition_index=partition, start_offset=offset)
            )
        request = AlterShareGroupOffsetsRequest(
            group_id=group_id,
            topics=[AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        response = self._call("alter_share_group_offsets", request)
        if response.error_code is not Errors.NONE:
            return dict.fromkeys(offsets, _name(response.error_code))
        return {
            (t.topic_name, p.partition_index): _name(p.error_code) for t in response.responses for p in t.partitions
        }

    def reset_share_group_offsets(
        self, group_id: str, topic: str, spec: ResetSpec, partitions: Iterable[int] | None = None
    ) -> dict[TopicPartitionName, str | None]:
        """``kafka-share-groups.sh --reset-offsets --to-earliest | --to-latest | --to-datetime``."""
        if self.offsets is None:
            raise ValueError("resetting offsets needs the topic logs' offsets (ShareAdmin(offsets=...))")
        cluster = self.coordinator.cluster
        if topic not in cluster:
            raise ValueError(f"unknown topic {topic!r}")
        chosen = sorted(partitions) if partitions is not None else list(range(cluster.topic(topic).num_partitions))
        if spec.to == "datetime" and spec.timestamp_ms is None:
            raise ValueError("a reset to a date-time needs timestamp_ms")
        wanted = {}
        for p in chosen:
            if spec.to == "earliest":
                wanted[(topic, p)] = self.offsets.earliest(topic, p)
            elif spec.to == "latest":
                wanted[(topic, p)] = self.offsets.latest(topic, p)
            else:
                wanted[(topic, p)] = self.offsets.for_time(topic, p, spec.timestamp_ms or 0)
        return self.alter_share_group_offsets(group_id, wanted)

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]) -> dict[str, str | None]:
        """Remove whole topics' share state from an empty group; per topic None or the error's name."""
        names = list(topics)
        response = self._call(
            "delete_share_group_offsets", DeleteShareGroupOffsetsRequest(group_id=group_id, topic_names=names)
        )
        if response.error_code is not Errors.NONE:
            return dict.fromkeys(names, _name(response.error_code))
        return {t.topic_name: _name(t.error_code) for t in response.responses}

    # ------------------------------------------------------------------ group configs
    def set_auto_offset_reset(self, group_id: str, value: Literal["earliest", "latest"]) -> None:
        """``group.share.auto.offset.reset`` for one group: where a share-partition with no start offset begins."""
        base = self.group_configs.get(group_id, SharePartitionConfig())
        self.group_configs[group_id] = SharePartitionConfig(**{**base.model_dump(), "auto_offset_reset": value})


class ShareAdminError(KipLabError, RuntimeError):
    def __init__(self, error: Errors, message: str | None) -> None:
        super().__init__(f"{error.name}: {message}" if message else error.name)
        self.error = error


def _name(error: Errors) -> str | None:
    return None if error is Errors.NONE else error.name
