"""The coordinator's composed parts: each works from the dependencies it is given, and a copy of
the coordinator (a time-travel snapshot, a deep copy) gets parts over the copy's own state."""

from __future__ import annotations

import copy
import pickle

from conftest import GROUP, Harness

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.coordinator.classic_group import ClassicGroup, ClassicGroupState
from kip_lab.coordinator.offsets import GroupOffsets, OffsetAnswers, OffsetManager
from kip_lab.protocol import (
    Errors,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
)
from kip_lab.protocol.share_group import ShareGroupHeartbeatRequest
from kip_lab.runtime.scheduler import Scheduler


def _commit(group_id: str, offset: int, member_epoch: int = -1, metadata: str | None = None) -> OffsetCommitRequest:
    partition = OffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_metadata=metadata)
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=member_epoch,
        topics=[OffsetCommitRequestTopic(name="foo", partitions=[partition])],
    )


def _fetched(result) -> list[tuple[str | None, int, int]]:
    return [
        (t.name, p.partition_index, p.committed_offset)
        for g in result.response.groups
        for t in g.topics
        for p in t.partitions
    ]


def test_the_offset_manager_works_from_its_own_dependencies_and_changes_offsets_only_by_replay() -> None:
    """Kafka ``OffsetMetadataManager``: built with its time, config and groups (its ``Builder``);
    ``commitOffset`` returns records and only ``replay`` stores them. Here without any coordinator."""
    cluster, scheduler, offsets = ClusterMetadata(), Scheduler(now_ms=1_234), dict[str, GroupOffsets]()
    cluster.create_topic("foo", 2)
    classic: dict[str, ClassicGroup] = {}
    kept: list[tuple[str, str]] = []
    manager = OffsetManager(
        offsets,
        cluster=cluster,
        group=classic.get,
        classic_groups=classic,
        keep_session=lambda group, member_id: kept.append((group.group_id, member_id)),
        clock=scheduler,
        metadata_max_bytes=4,
        answers=OffsetAnswers(),
    )

    result = manager.commit(_commit("g", 42))
    assert [p.error_code for t in result.response.topics for p in t.partitions] == [Errors.NONE]
    assert offsets == {}  # not stored before replay
    (record,) = result.records
    assert (record.value.offset, record.value.commit_timestamp) == (42, 1_234)  # stamped by the clock given
    assert classic == {}  # nor is the simple group made
    manager.replay(result.records)
    assert offsets["g"][("foo", 0)].offset == 42
    assert classic["g"].state is ClassicGroupState.EMPTY and classic["g"].members == {}  # in the groups given
    assert _fetched(manager.fetch(OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id="g")])))[0] == (
        "foo",
        0,
        42,
    )
    # the groups given: a member epoch for a group they do not hold is GROUP_ID_NOT_FOUND
    unknown = manager.commit(_commit("other", 1, member_epoch=3))
    assert [p.error_code for t in unknown.response.topics for p in t.partitions] == [Errors.GROUP_ID_NOT_FOUND]
    # the limit given
    too_long = manager.commit(_commit("g", 43, metadata="abcde"))
    assert [p.error_code for t in too_long.response.topics for p in t.partitions] == [Errors.OFFSET_METADATA_TOO_LARGE]
    assert kept == []  # an Empty group keeps no session


def test_a_copy_of_the_coordinator_gets_parts_over_its_own_state() -> None:
    """A snapshot (pickle) or deep copy rebuilds ``offset_manager`` and ``describer`` over the copy's
    dictionaries, and the share manager's timers belong to the copy: what the copy does leaves the
    original alone (Kafka ``GroupCoordinatorShard`` holds one ``OffsetMetadataManager`` per shard)."""
    h = Harness()
    h.join("A")
    h.settle()
    h.gc.offset_commit(_commit("manual", 5))  # a group the coordinator does not manage: any commit is taken
    for twin in (pickle.loads(pickle.dumps(h.gc)), copy.deepcopy(h.gc)):
        assert twin.offset_manager.offsets is twin.offsets
        assert twin.offset_manager.classic_groups is twin.classic_groups and twin.offset_manager.group.__self__ is twin
        assert twin.describer.groups is twin.groups and twin.describer.share_groups is twin.share_groups
        assert twin.share_manager.share_groups is twin.share_groups and twin.share_manager.timer_owner is twin
        twin.offset_commit(_commit("manual", 9))
        twin.share_group_heartbeat(
            ShareGroupHeartbeatRequest(group_id="sg", member_id="s1", member_epoch=0, subscribed_topic_names=["foo"])
        )
        assert twin.offsets["manual"][("foo", 0)].offset == 9 and "sg" in twin.share_groups
        assert h.gc.offsets["manual"][("foo", 0)].offset == 5 and "sg" not in h.gc.share_groups
        assert "share-session" in {key[0] for key in twin.timers()}


def test_a_new_config_reaches_the_composed_parts() -> None:
    """Kafka ``OffsetMetadataManager.isMetadataInvalid`` reads offset.metadata.max.bytes from the config
    it was built with; setting ``GroupCoordinator.config`` gives every part the new one."""
    h = Harness()
    h.gc.config = h.gc.config.model_copy(update={"offset_metadata_max_bytes": 4})
    result = h.gc.offset_commit(_commit(GROUP, 1, metadata="abcde"))
    assert [p.error_code for t in result.response.topics for p in t.partitions] == [Errors.OFFSET_METADATA_TOO_LARGE]
    assert h.gc.share_manager.config is h.gc.config


def test_unload_and_failover_keep_the_dictionaries_the_parts_hold() -> None:
    """A failover's replay drops dead groups, and ``unload`` empties the coordinator, in the very
    dictionaries the parts were given (Kafka: the shard's managers share one set of timeline maps)."""
    h = Harness()
    h.join("A")
    h.settle()
    h.gc.offset_commit(_commit("manual", 3))
    rebuilt = GroupCoordinator.from_log(h.gc.log, CoordinatorConfig(), h.cluster)
    assert rebuilt.describer.groups is rebuilt.groups and GROUP in rebuilt.groups
    assert rebuilt.offset_manager.offsets["manual"][("foo", 0)].offset == 3
    rebuilt.unload()
    assert rebuilt.groups == {} and rebuilt.describer.groups is rebuilt.groups
    assert rebuilt.share_manager.share_groups is rebuilt.share_groups
