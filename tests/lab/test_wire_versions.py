"""Every (API, version) the front door advertises answers a well-formed request.

The walk asks ApiVersions what is served, then sends one request of every version of every
API (built from the same field values, each version taking the fields it has), to the broker
that serves it, and reads the answer back as that version's response: no connection is
closed, and the answers say what a Kafka 4.0 broker says of the same request. Older versions
keep their own semantics: JoinGroup before v4 takes a new member at once (no
MEMBER_ID_REQUIRED), OffsetFetch before v8 asks for one group at the top level, Metadata v0
reads an empty topic list as "every topic".
"""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from kip_lab.coordinator import CoordinatorConfig
from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.wire import codec, serve
from tests.wire_support import RawClient, record_batch

TOPIC = "walk"
GROUP = "walk-group"
# Kafka 4.0's ApiVersions for the APIs the front door serves (KIP-896 removed the older versions)
KAFKA_4_0 = {
    "produce": (3, 12),
    "fetch": (4, 17),
    "list_offsets": (1, 10),
    "metadata": (0, 13),
    "offset_commit": (2, 9),
    "offset_fetch": (1, 9),
    "find_coordinator": (0, 6),
    "join_group": (0, 9),
    "heartbeat": (0, 4),
    "leave_group": (0, 5),
    "sync_group": (0, 5),
    "describe_groups": (0, 5),
    "list_groups": (0, 5),
    "api_versions": (0, 4),
    "create_topics": (2, 7),
    "delete_topics": (1, 6),
    "delete_records": (0, 2),
    "init_producer_id": (0, 5),
    "describe_configs": (1, 4),
    "create_partitions": (0, 3),
    "delete_groups": (0, 2),
    "consumer_group_heartbeat": (0, 1),
    "consumer_group_describe": (0, 1),
}
COORDINATOR_APIS = {
    "delete_groups",
    "offset_commit",
    "offset_fetch",
    "join_group",
    "heartbeat",
    "leave_group",
    "sync_group",
    "describe_groups",
    "list_groups",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "share_group_heartbeat",
    "share_group_describe",
}


def well_formed(api: str, version: int, topic_id: str) -> dict[str, Any]:
    """Field values for a request of ``api``; a version takes those it has."""
    partition = {"partition_index": 0, "partition": 0, "index": 0, "current_leader_epoch": -1}
    member = f"walk-member-{api}-{version:02d}-0000000000"
    topic = {"name": TOPIC, "topic": TOPIC, "topic_id": topic_id}
    values: dict[str, dict[str, Any]] = {
        "produce": {
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [{**topic, "partition_data": [{**partition, "records": record_batch(2)}]}],
        },
        "fetch": {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": TOPIC if version < 13 else "",
                    "topic_id": topic_id,
                    "partitions": [
                        {**partition, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
            "forgotten_topics_data": [],
        },
        "list_offsets": {"replica_id": -1, "topics": [{**topic, "partitions": [{**partition, "timestamp": -1}]}]},
        "metadata": {"topics": [{"name": TOPIC, "topic_id": None}]},
        "offset_commit": {
            "group_id": GROUP,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time_ms": -1,
            "topics": [{**topic, "partitions": [{**partition, "committed_offset": 1, "committed_leader_epoch": -1}]}],
        },
        "offset_fetch": {
            "group_id": GROUP,
            "topics": [{"name": TOPIC, "partition_indexes": [0]}],
            "groups": [{"group_id": GROUP, "member_epoch": -1, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
        },
        "find_coordinator": {"key": GROUP, "key_type": 0, "coordinator_keys": [GROUP]},
        "join_group": {
            "group_id": f"walk-join-{version}",
            "session_timeout_ms": 10_000,
            "rebalance_timeout_ms": 10_000,
            "protocol_type": "walk",
            "protocols": [{"name": "walk", "metadata": b"m"}],
        },
        "heartbeat": {"group_id": GROUP, "generation_id": 1, "member_id": member},
        "leave_group": {"group_id": GROUP, "member_id": member, "members": [{"member_id": member}]},
        "sync_group": {"group_id": GROUP, "generation_id": 1, "member_id": member, "assignments": []},
        "describe_groups": {"groups": [GROUP]},
        "list_groups": {},
        "api_versions": {"client_software_name": "walk", "client_software_version": "1"},
        "create_topics": {
            "topics": [{"name": f"walk-created-{version}", "num_partitions": 1, "replication_factor": 1}],
            "timeout_ms": 5000,
        },
        "delete_topics": {"topic_names": ["walk-absent"], "topics": [{"name": "walk-absent"}], "timeout_ms": 5000},
        "delete_records": {"topics": [{"name": TOPIC, "partitions": [{**partition, "offset": 0}]}], "timeout_ms": 5000},
        "init_producer_id": {
            "transactional_id": None,
            "transaction_timeout_ms": 1000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
        "describe_configs": {"resources": [{"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None}]},
        "create_partitions": {
            "topics": [{"name": TOPIC, "count": 2, "assignments": None}],
            "timeout_ms": 5000,
            "validate_only": True,
        },
        "consumer_group_heartbeat": {
            "group_id": "walk-848",
            "member_id": member,
            "member_epoch": 0,
            "rebalance_timeout_ms": 10_000,
            "subscribed_topic_names": [TOPIC],
            "topic_partitions": [],
        },
        "consumer_group_describe": {"group_ids": ["walk-848"]},
        "delete_groups": {"groups_names": ["walk-absent"]},
        "share_group_heartbeat": {
            "group_id": "walk-share",
            "member_id": member,
            "member_epoch": 0,
            "subscribed_topic_names": [TOPIC],
        },
        "share_group_describe": {"group_ids": ["walk-share"]},
        "share_fetch": {
            "group_id": "walk-share",
            "member_id": member,
            "share_session_epoch": 0,
            "max_bytes": 1 << 20,
            "max_records": 100,
            "batch_size": 100,
            "topics": [],
        },
        "share_acknowledge": {"group_id": "walk-share", "member_id": member, "share_session_epoch": 0, "topics": []},
    }
    return values[api]


def errors_in(response: Any) -> set[ErrorCode]:
    """Every error code anywhere in a kio response."""
    import dataclasses

    found: set[ErrorCode] = set()
    if isinstance(response, tuple):
        for item in response:
            found |= errors_in(item)
    elif dataclasses.is_dataclass(response):
        for field in dataclasses.fields(response):
            value = getattr(response, field.name)
            if isinstance(value, ErrorCode):
                found.add(value)
            else:
                found |= errors_in(value)
    return found


# What a Kafka 4.0 broker answers the walk's requests (any other error fails the walk).
EXPECTED_ERRORS = {
    "heartbeat": {ErrorCode.unknown_member_id},  # no such member in the group
    "sync_group": {ErrorCode.unknown_member_id},
    "leave_group": {ErrorCode.unknown_member_id},
    "delete_topics": {ErrorCode.unknown_topic_or_partition},
    "delete_groups": {ErrorCode.group_id_not_found},
    "join_group": {ErrorCode.member_id_required},  # v4+ (KIP-394)
    "share_fetch": {ErrorCode.unknown_member_id, ErrorCode.invalid_request},
    "share_acknowledge": {ErrorCode.invalid_share_session_epoch, ErrorCode.unknown_member_id},
    "create_partitions": set(),
}


@pytest.mark.slow
def test_every_advertised_version_of_every_api_answers_a_well_formed_request():
    lab = Lab(seed=11, config=LabConfig(coordinator=CoordinatorConfig(initial_rebalance_delay_ms=0)))
    lab.create_topic(TOPIC, 1, produce_rate_per_s=0)
    with serve(lab) as server:
        bootstrap = RawClient(server.port, client_id="walk")
        advertised = bootstrap.request(ApiVersionsRequest(client_software_name="walk", client_software_version="1"))
        served = {codec.api_name(k.api_key): (k.min_version, k.max_version) for k in advertised.api_keys}
        for api, versions in KAFKA_4_0.items():
            assert served.get(api) == versions, f"{api}: serves {served.get(api)}, Kafka 4.0 {versions}"
        topic_id = lab.topic_id(TOPIC)
        leader = server.call(lambda lab: lab.world.share.leader_of((topic_id, 0)))
        coordinator = server.call(lambda lab: lab.world.coordinator_host)
        clients = {b: RawClient(server.ports[b], client_id="walk") for b in server.broker_names}
        walked = 0
        for key, (low, high) in sorted((k.api_key, (k.min_version, k.max_version)) for k in advertised.api_keys):
            api = codec.api_name(key)
            client = clients[coordinator if api in COORDINATOR_APIS else leader]
            for version in range(low, high + 1):
                request = codec.build(codec.request_class(key, version), well_formed(api, version, topic_id))
                try:
                    response = client.request(request)
                except ConnectionError:
                    pytest.fail(f"{api} v{version}: the server closed the connection: {list(server.stats.reasons)}")
                assert type(response) is codec.response_class(key, version), (api, version)
                unexpected = errors_in(response) - {ErrorCode.none} - EXPECTED_ERRORS.get(api, set())
                if api == "join_group" and version < 4:
                    assert response.error_code == ErrorCode.none and response.member_id, (api, version, response)
                assert not unexpected, f"{api} v{version}: {unexpected}"
                walked += 1
        assert walked == sum(high - low + 1 for low, high in served.values())
        assert server.stats.closed == {}, server.stats.reasons
