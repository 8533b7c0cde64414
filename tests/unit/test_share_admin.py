"""Share-group administration (KIP-932): list/describe/delete groups, alter/reset/delete start offsets."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kip_lab.coordinator import GroupCoordinator
from kip_lab.coordinator.share_group import share_coordinator_rpc
from kip_lab.protocol.share_group import ShareGroupHeartbeatRequest
from kip_lab.share.admin import ResetSpec, ShareAdmin, ShareAdminError, TimestampedLogs
from kip_lab.share.coordinator import ShareCoordinator
from kip_lab.share.leader import SharePartitionLeader
from kip_lab.share.persister import CoordinatorPersister
from kip_lab.share.topic_log import TopicLog


@pytest.fixture
def setup():
    coordinator = GroupCoordinator()
    share = ShareCoordinator()
    coordinator.share_state_rpc = share_coordinator_rpc(share)
    topic_id = coordinator.cluster.create_topic("T", 2)
    logs = TimestampedLogs()
    for p in range(2):
        log = logs.logs[("T", p)] = TopicLog(topic_id, p)
        for t in (1_000, 2_000, 3_000):
            logs.appended("T", p, log.append(10).start, t)
    return coordinator, share, ShareAdmin(coordinator, logs), topic_id


def _join(coordinator, group="G"):
    request = ShareGroupHeartbeatRequest(group_id=group, member_epoch=0, subscribed_topic_names=["T"])
    return coordinator.share_group_heartbeat(request).response


def _leave(coordinator, joined, group="G"):
    request = ShareGroupHeartbeatRequest(group_id=group, member_id=joined.member_id, member_epoch=-1)
    coordinator.share_group_heartbeat(request)


def test_list_and_describe(setup):
    coordinator, _, admin, _topic_id = setup
    joined = _join(coordinator)
    _join(coordinator, group="H")
    _leave(coordinator, _join(coordinator, group="H"), group="H")
    assert admin.list_share_groups() == {"G": "Stable", "H": "Stable"}
    assert admin.list_share_groups(["Stable"]) == {"G": "Stable", "H": "Stable"}
    described = admin.describe_share_groups(["G", "nope"])
    assert described["G"].group_state == "Stable" and described["G"].assignor_name == "simple"
    assert [m.member_id for m in described["G"].members] == [joined.member_id]
    assert described["nope"].error_code.name == "GROUP_ID_NOT_FOUND"


def test_altering_deleting_offsets_and_deleting_the_group_need_an_empty_group(setup):
    # GROUP_NOT_EMPTY while members are in.
    coordinator, _share, admin, _topic_id = setup
    joined = _join(coordinator)
    assert admin.alter_share_group_offsets("G", {("T", 0): 5}) == {("T", 0): "NON_EMPTY_GROUP"}
    assert admin.delete_share_group_offsets("G", ["T"]) == {"T": "NON_EMPTY_GROUP"}
    assert admin.delete_share_groups(["G"]) == {"G": "NON_EMPTY_GROUP"}
    assert admin.delete_share_groups(["unknown"]) == {"unknown": "GROUP_ID_NOT_FOUND"}
    _leave(coordinator, joined)
    assert coordinator.share_groups["G"].state.value == "Empty"


def test_alter_bumps_the_epoch_and_initializes_with_the_new_state_epoch(setup):
    # epoch e' written, Initialize(StateEpoch e', StartOffset 500), snapshot at the coordinator.
    coordinator, share, admin, topic_id = setup
    _leave(coordinator, _join(coordinator))
    epoch = coordinator.share_groups["G"].group_epoch
    assert admin.alter_share_group_offsets("G", {("T", 0): 500}) == {("T", 0): None}
    assert coordinator.share_groups["G"].group_epoch == epoch + 1
    request, _ = coordinator.share_state_calls[-1]
    assert (request.topics[0].partitions[0].state_epoch, request.topics[0].partitions[0].start_offset) == (
        epoch + 1,
        500,
    )
    state = share.state("G", topic_id, 0)
    assert (state.state_epoch, state.start_offset) == (epoch + 1, 500)
    assert admin.list_share_group_offsets("G") == {("T", 0): 500, ("T", 1): -1}


def test_reset_to_earliest_latest_and_a_time_resolves_offsets_from_the_log(setup):
    coordinator, _share, admin, _topic_id = setup
    _leave(coordinator, _join(coordinator))
    assert admin.reset_share_group_offsets("G", "T", ResetSpec(to="earliest")) == {("T", 0): None, ("T", 1): None}
    assert admin.list_share_group_offsets("G") == {("T", 0): 0, ("T", 1): 0}
    admin.reset_share_group_offsets("G", "T", ResetSpec(to="latest"), partitions=[1])
    assert admin.list_share_group_offsets("G") == {("T", 0): 0, ("T", 1): 30}
    admin.reset_share_group_offsets("G", "T", ResetSpec(to="datetime", timestamp_ms=1_500))
    assert admin.list_share_group_offsets("G") == {("T", 0): 10, ("T", 1): 10}
    with pytest.raises(ValueError, match="needs timestamp_ms"):
        admin.reset_share_group_offsets("G", "T", ResetSpec(to="datetime"))
    with pytest.raises(ValidationError):
        ResetSpec(to="yesterday")


def test_a_reset_discards_in_flight_state_at_the_leader_on_its_next_first_session(setup):
    # the leader sees the new state epoch and reloads.
    coordinator, share, admin, topic_id = setup
    leader = SharePartitionLeader(CoordinatorPersister(share), scheduler=coordinator.scheduler)
    leader.add_log(admin.offsets.logs[("T", 0)])
    _leave(coordinator, _join(coordinator))
    admin.reset_share_group_offsets("G", "T", ResetSpec(to="earliest"))
    sp = leader.share_partition("G", topic_id, 0)
    assert sp.spso == 0
    admin.alter_share_group_offsets("G", {("T", 0): 25})
    leader._reload_if_reset("G", (topic_id, 0))
    assert leader.share_partition("G", topic_id, 0).spso == 25


def test_delete_offsets_goes_through_deleting_topics_then_removes_the_state(setup):
    # Initialized -> Deleting, DeleteShareGroupState per partition, then gone.
    coordinator, share, admin, topic_id = setup
    _leave(coordinator, _join(coordinator))
    before = coordinator.log.end_offset
    assert admin.delete_share_group_offsets("G", ["T", "other"]) == {
        "other": "UNKNOWN_TOPIC_OR_PARTITION",
        "T": None,
    }
    written = [e.record for e in coordinator.log.entries(before)]
    assert [len(r.value.initialized_topics) for r in written] == [0, 0]
    assert [len(r.value.deleting_topics) for r in written] == [1, 0]
    assert share.state("G", topic_id, 0) is None and share.state("G", topic_id, 1) is None
    assert coordinator.share_groups["G"].initialized == {}


def test_delete_group_deletes_state_then_tombstones_with_the_group_metadata_last(setup):
    # Deleting the group: step 2.
    coordinator, share, admin, topic_id = setup
    _leave(coordinator, _join(coordinator))
    before = coordinator.log.end_offset
    assert admin.delete_share_groups(["G"]) == {"G": None}
    written = [e.record for e in coordinator.log.entries(before)]
    assert type(written[0].key).__name__ == "ShareGroupStatePartitionMetadataKey" and written[0].value.deleting_topics
    assert written[-1].value is None and type(written[-1].key).__name__ == "ShareGroupMetadataKey"
    assert "G" not in coordinator.share_groups and admin.list_share_groups() == {}
    assert share.state("G", topic_id, 0) is None
    rebuilt = GroupCoordinator.from_log(coordinator.log, cluster=coordinator.cluster, load=False)
    assert "G" not in rebuilt.share_groups
    # The id is free again, for any kind of group.
    assert _join(coordinator).error_code.name == "NONE"


def test_list_offsets_of_an_unknown_group_raises_a_clear_error(setup):
    _, _, admin, _ = setup
    with pytest.raises(ShareAdminError, match="GROUP_ID_NOT_FOUND"):
        admin.list_share_group_offsets("nope")


def test_auto_offset_reset_group_config_decides_where_an_unset_partition_starts(setup):
    coordinator, share, admin, topic_id = setup
    _join(coordinator)
    admin.set_auto_offset_reset("G", "earliest")
    leader = SharePartitionLeader(
        CoordinatorPersister(share), scheduler=coordinator.scheduler, group_configs=admin.group_configs
    )
    leader.add_log(admin.offsets.logs[("T", 0)])
    assert leader.share_partition("G", topic_id, 0).spso == 0
    other = SharePartitionLeader(CoordinatorPersister(share), scheduler=coordinator.scheduler)
    other.add_log(admin.offsets.logs[("T", 1)])
    assert other.share_partition("G", topic_id, 1).spso == 30  # latest, the default
    with pytest.raises(ValidationError):
        admin.set_auto_offset_reset("G", "sometimes")
