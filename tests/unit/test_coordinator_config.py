"""One ``CoordinatorConfig`` for every coordinator setting (consumer, classic, share), kept across a failover."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kip_lab.coordinator import GroupCoordinator
from kip_lab.coordinator.config import CoordinatorConfig
from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.protocol.share_group import ShareGroupHeartbeatRequest
from kip_lab.scenarios.loading import scenario_from_yaml
from kip_lab.share.group_config import ShareGroupConfig

SHARE = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 1_000}
CONFIG = CoordinatorConfig(heartbeat_interval_ms=7_000, share=ShareGroupConfig(**SHARE))


def _share_join(coordinator: GroupCoordinator) -> str:
    request = ShareGroupHeartbeatRequest(group_id="sg", member_epoch=0, subscribed_topic_names=["T1"])
    response = coordinator.share_group_heartbeat(request).response
    assert response.error_code == 0
    return response.member_id


def test_share_session_timeout_survives_a_failover():
    """Kafka's coordinator takes its settings from the broker's ``GroupCoordinatorConfig``, not from the
    log: one rebuilt from the log (``from_log``) keeps the share session timeout (10 s, not the 45 s
    default) and the consumer heartbeat interval."""
    coordinator = GroupCoordinator(CONFIG)
    coordinator.cluster.create_topic("T1", 2)
    member_id = _share_join(coordinator)
    successor = GroupCoordinator.from_log(coordinator.log, coordinator.config, coordinator.cluster)
    assert successor.share_config.session_timeout_ms == 10_000
    assert successor.config.heartbeat_interval_ms == 7_000
    # The re-armed share session timer is the configured 10 s: the member is gone just after it.
    successor.advance(9_999)
    assert member_id in successor.share_groups["sg"].members
    successor.advance(1)
    assert member_id not in successor.share_groups["sg"].members


def test_share_settings_reach_the_heartbeat_response():
    """Kafka ``GroupMetadataManager.shareGroupHeartbeat`` answers with the share heartbeat interval."""
    coordinator = GroupCoordinator(CONFIG)
    coordinator.cluster.create_topic("T1", 2)
    request = ShareGroupHeartbeatRequest(group_id="sg", member_epoch=0, subscribed_topic_names=["T1"])
    assert coordinator.share_group_heartbeat(request).response.heartbeat_interval_ms == 1_000


def test_lab_failover_keeps_every_coordinator_setting():
    """``LabConfig.coordinator.share`` reaches the Lab's coordinator and its successor after ``fail_over``."""
    lab = Lab(config=LabConfig(coordinator={"heartbeat_interval_ms": 7_000, "share": SHARE}))
    assert lab.coordinator.share_config.session_timeout_ms == 10_000
    lab.fail_over()
    assert lab.coordinator.share_config.session_timeout_ms == 10_000
    assert lab.coordinator.config.heartbeat_interval_ms == 7_000


def test_scenario_file_sets_share_group_settings():
    """A scenario's ``lab: {coordinator: {share: ...}}`` sets the share-group settings."""
    scenario = scenario_from_yaml(
        """
name: share_settings
topics: [{name: foo, partitions: 2}]
members: {A: {subscribed_topic_names: [foo]}}
lab: {coordinator: {share: {session_timeout_ms: 10000, heartbeat_interval_ms: 1000}}}
"""
    )
    assert scenario.lab.config().coordinator.share.session_timeout_ms == 10_000


def test_bad_share_setting_is_named():
    """A share heartbeat interval not below its session timeout is refused, naming the rule."""
    with pytest.raises(ValidationError, match="heartbeat_interval_ms must be smaller than session_timeout_ms"):
        CoordinatorConfig(share={"session_timeout_ms": 10_000, "heartbeat_interval_ms": 10_000})
