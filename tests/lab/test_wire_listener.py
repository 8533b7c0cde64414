"""The wire front door's listener: framing, version negotiation, refusals, and the broker-side APIs
that read the Lab directly (Metadata, FindCoordinator, CreateTopics).

Refusals follow a Kafka broker: an ApiVersions version it does not serve is answered with
UNSUPPORTED_VERSION and the versions it serves (Kafka `ApiVersionsRequest.getErrorResponse`,
KIP-511); any other request it cannot serve — unknown API, bad bytes, a frame over
``socket.request.max.bytes`` — closes the connection (Kafka `SocketServer` / `RequestContext.parseRequest`).
"""

from __future__ import annotations

import datetime
import socket
import struct

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.request_header.v2.header import RequestHeader

from kip_lab.events import MessageDropped
from kip_lab.lab.lab import Lab
from kip_lab.lab.trace import EventKind
from kip_lab.wire import codec, serve
from kip_lab.wire.handlers import SUPPORTED
from tests.wire_support import RawClient, wait_until


@pytest.fixture
def served():
    lab = Lab(seed=7)
    lab.create_topic("orders", 4, produce_rate_per_s=0)
    server = serve(lab, port=0, max_frame_bytes=64 * 1024)
    yield lab, server
    server.stop()


def test_listens_on_loopback_one_port_per_broker(served):
    lab, server = served
    assert server.host == "127.0.0.1"
    assert sorted(server.ports) == sorted(lab.world.brokers)
    assert len(set(server.ports.values())) == len(lab.world.brokers)
    assert server.port == server.ports["broker-0"]


def test_a_server_not_yet_started_or_stopped_says_so_and_serves_once():
    """What needs a serving front door (its ports, its clock) is a clear error before ``start``
    and after ``stop``; ``call`` then runs at once, the Lab being the caller's; a stopped server
    is not started again."""
    from kip_lab.wire.server import WireServer

    lab = Lab(seed=7)
    server = WireServer(lab)
    with pytest.raises(RuntimeError, match=r"has not started: serve\(lab\) starts one"):
        _ = server.bootstrap_servers
    with pytest.raises(RuntimeError, match="has not started"):
        _ = server.clock
    assert server.call(lambda lab: lab.now) == 0
    assert server.kill_connections() == 0
    with server.start():
        assert server.clock.lab is lab
    with pytest.raises(RuntimeError, match="has stopped"):
        _ = server.clock
    assert server.bootstrap_servers == f"127.0.0.1:{server.ports['broker-0']}"  # where it listened
    assert server.call(lambda lab: lab.step_count) == lab.step_count
    with pytest.raises(RuntimeError, match="serves once"):
        server.start()


def test_api_versions_lists_every_served_api(served):
    """Kafka `ApiVersionsRequest`/`ApiVersionsResponse`: each served API with its version range."""
    _, server = served
    client = RawClient(server.port)
    response = client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert response.error_code == ErrorCode.none
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges == SUPPORTED
    for key, (low, high) in ranges.items():  # every advertised version has a kio schema
        assert codec.has_schema(key, low) and codec.has_schema(key, high), codec.api_name(key)


def test_unsupported_api_versions_version_is_answered_with_the_ranges(served):
    """Kafka `ApiVersionsRequest.getErrorResponse`: a v0 answer with UNSUPPORTED_VERSION and the
    supported ranges, so the client retries with a version both sides know."""
    _, server = served
    client = RawClient(server.port)
    header = RequestHeader(request_api_key=18, request_api_version=99, correlation_id=41, client_id="t")
    frame = codec.encode_frame(header, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    client.send_raw(frame)
    client.correlation_id = 41
    response = client.read_response(18, 0)
    assert response.error_code == ErrorCode.unsupported_version
    assert {k.api_key for k in response.api_keys} == set(SUPPORTED)
    # the connection stays usable: the client retries with a version the broker serves
    assert client.request(ApiVersionsV0()).error_code == ErrorCode.none


def _closed_with(server, client: RawClient, reason: str) -> None:
    assert wait_until(client.is_closed_by_server, 10, "the server to close the connection")
    wait_until(lambda: any(k.startswith(reason) for k in server.stats.closed), 5, f"a close for {reason!r}")


def _still_serving(server) -> None:
    fresh = RawClient(server.port)
    assert fresh.request(ApiVersionsV0()).error_code == ErrorCode.none
    fresh.close()


def test_unknown_api_key_closes_the_connection_and_the_server_goes_on(served):
    """Kafka `SocketServer`: a request for an API the broker does not serve closes the connection."""
    _, server = served
    client = RawClient(server.port)
    client.send_raw(struct.pack(">ihhi", 10, 4242, 0, 1) + b"\xff\xff")
    _closed_with(server, client, "unsupported request")
    _still_serving(server)


def test_served_api_at_an_unserved_version_closes_the_connection(served):
    _, server = served
    client = RawClient(server.port)
    low = SUPPORTED[3][0]
    client.send_raw(struct.pack(">ihhi", 10, 3, low - 1, 1) + b"\xff\xff")  # Metadata below the range
    _closed_with(server, client, "unsupported request")
    _still_serving(server)


def test_malformed_body_closes_the_connection(served):
    """Bytes that do not decode as the named request: closed, never a crashed server."""
    _, server = served
    client = RawClient(server.port)
    header = struct.pack(">hhih", 3, 12, 5, 1) + b"x" + b"\x00"  # Metadata v12 header (flexible)
    body = b"\x05\xff\xff"  # a topics array of 4 entries, then nothing
    client.send_raw(struct.pack(">i", len(header + body)) + header + body)
    _closed_with(server, client, "malformed request")
    _still_serving(server)


def test_truncated_frame_shorter_than_a_header_closes_the_connection(served):
    _, server = served
    client = RawClient(server.port)
    client.send_raw(struct.pack(">i", 2) + b"\x00\x03")
    _closed_with(server, client, "malformed request")
    _still_serving(server)


def test_oversized_frame_closes_the_connection_before_reading_it(served):
    """Kafka `NetworkReceive`: a size over socket.request.max.bytes is refused unread."""
    _, server = served
    client = RawClient(server.port)
    client.send_raw(struct.pack(">i", 64 * 1024 + 1))
    _closed_with(server, client, "frame too large")
    client = RawClient(server.port)
    client.send_raw(struct.pack(">i", -5))
    _closed_with(server, client, "frame too large")
    _still_serving(server)


def test_metadata_lists_the_labs_brokers_and_topics(served):
    """Kafka `KafkaApis.handleTopicMetadataRequest`: brokers, and each topic's partitions and leaders."""
    lab, server = served
    client = RawClient(server.port)
    response = client.request(
        MetadataRequest(
            topics=(
                MetadataRequestTopic(topic_id=None, name="orders"),
                MetadataRequestTopic(topic_id=None, name="nope"),
            ),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    assert {(b.node_id, b.port) for b in response.brokers} == {
        (int(name.split("-")[1]), port) for name, port in server.ports.items()
    }
    orders, missing = response.topics
    assert orders.name == "orders" and codec.lab_topic_id(orders.topic_id) == lab.topic_id("orders")
    assert [p.partition_index for p in orders.partitions] == [0, 1, 2, 3]
    for p in orders.partitions:
        leader = lab.world.share.leader_of((lab.topic_id("orders"), p.partition_index))
        assert p.leader_id == int(leader.split("-")[1])
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    all_topics = client.request(
        MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    )
    assert [t.name for t in all_topics.topics] == ["orders"]


def test_find_coordinator_names_the_labs_coordinator_broker(served):
    """Kafka `KafkaApis.handleFindCoordinatorRequest` (v4+ batches keys): the broker hosting the
    group's ``__consumer_offsets`` partition — after a failover, the new one."""
    lab, server = served
    client = RawClient(server.port)

    def coordinator_node() -> int:
        response = client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=("g",)))
        (found,) = response.coordinators
        assert found.error_code == ErrorCode.none and found.port == server.ports[f"broker-{found.node_id}"]
        return found.node_id

    assert coordinator_node() == int(lab.world.coordinator_host.split("-")[1])
    server.call(lambda lab: lab.fail_over())
    assert coordinator_node() == int(server.call(lambda lab: lab.world.coordinator_host).split("-")[1]) == 1


def test_create_topics_creates_in_the_lab_and_refuses_a_duplicate(served):
    """Kafka `ControllerApis.createTopics`: TOPIC_ALREADY_EXISTS for a name taken, INVALID_TOPIC_EXCEPTION
    for a name `Topic.validate` refuses."""
    lab, server = served
    client = RawClient(server.port)
    response = client.request(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(name="payments", num_partitions=3, replication_factor=1, assignments=(), configs=()),
                CreatableTopic(name="orders", num_partitions=2, replication_factor=1, assignments=(), configs=()),
                CreatableTopic(name="no spaces", num_partitions=1, replication_factor=1, assignments=(), configs=()),
            ),
            timeout=datetime.timedelta(seconds=5),
            validate_only=False,
        )
    )
    created, duplicate, illegal = response.topics
    assert created.error_code == ErrorCode.none and created.num_partitions == 3
    assert duplicate.error_code == ErrorCode.topic_already_exists
    assert illegal.error_code == ErrorCode.invalid_topic_exception and "illegal" in illegal.error_message
    topics = server.call(lambda lab: {t.name: t.num_partitions for t in lab.cluster.topics()})
    assert topics == {"orders": 4, "payments": 3}
    assert codec.lab_topic_id(created.topic_id) == server.call(lambda lab: lab.topic_id("payments"))
    applied = [e.body.fields for e in lab.trace if e.kind is EventKind.ACTION_APPLIED]
    assert {"action": "create_topic", "topic": "payments", "partitions": 3, "produce_rate_per_s": 0.0} in applied


def test_admin_client_lists_and_creates_topics():
    """A real librdkafka AdminClient against the front door."""
    admin_module = pytest.importorskip("confluent_kafka.admin", reason="needs confluent-kafka")
    lab = Lab(seed=3)
    lab.create_topic("orders", 2, produce_rate_per_s=0)
    with serve(lab) as server:
        admin = admin_module.AdminClient({"bootstrap.servers": server.bootstrap_servers, "client.id": "admin"})
        metadata = admin.list_topics(timeout=10)
        assert {name: len(t.partitions) for name, t in metadata.topics.items()} == {"orders": 2}
        assert len(metadata.brokers) == len(lab.world.brokers)
        futures = admin.create_topics([admin_module.NewTopic("fresh", 5, 1)], operation_timeout=10)
        assert futures["fresh"].result(10) is None
        assert server.call(lambda lab: lab.cluster.topic("fresh").num_partitions) == 5


def test_produce_with_acks_0_is_stored_and_not_answered():
    """Kafka `KafkaApis.handleProduceRequest`: with acks=0 the broker appends and sends no response."""
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka")
    lab = Lab(seed=3)
    lab.create_topic("orders", 1, produce_rate_per_s=0)
    with serve(lab) as server:
        producer = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap_servers, "acks": 0})
        for n in range(5):
            producer.produce("orders", value=f"r{n}")
        assert producer.flush(10) == 0
        end = wait_until(
            lambda: server.call(lambda lab: lab.world.share.topic_log((lab.topic_id("orders"), 0)).high_watermark) == 5,
            10,
            "the five records in the Lab's log",
        )
        assert end
        assert not any(reason.startswith("refused") for reason in server.stats.closed)


def test_a_reader_too_slow_to_take_its_answers_is_disconnected():
    """Kafka's broker closes a connection whose client does not read (its send buffer stays full);
    here after ``write_timeout_s``. Other connections are served meanwhile."""
    lab = Lab(seed=5)
    lab.create_topic("wide", 2_000, produce_rate_per_s=0)
    with serve(lab, write_timeout_s=1.0) as server:
        client = RawClient(server.port)
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        request = MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=1, client_id="slow")
        frame = codec.encode_frame(header, request)
        for _ in range(300):  # about 60 kB of answer each; never read
            client.send_raw(frame)
        wait_until(lambda: any(k.startswith("slow reader") for k in server.stats.closed), 30, "the slow reader's close")
        _still_serving(server)


def test_a_request_the_labs_protocol_model_refuses_closes_the_connection_with_the_reason(served):
    """A JoinGroup with a session timeout of 0 decodes, but kip_lab's JoinGroupRequest refuses it:
    the connection is closed naming the field, and the server goes on."""
    from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
    from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1

    _, server = served
    client = RawClient(server.port)
    request = JoinGroupRequest(
        group_id="g",
        session_timeout=datetime.timedelta(0),
        rebalance_timeout=datetime.timedelta(seconds=30),
        member_id="",
        group_instance_id=None,
        protocol_type="other",
        protocols=(JoinGroupRequestProtocol(name="p", metadata=b""),),
    )
    header = RequestHeaderV1(request_api_key=11, request_api_version=5, correlation_id=1, client_id="bad")
    client.send_raw(codec.encode_frame(header, request))
    _closed_with(server, client, "refused request")
    assert any("session_timeout_ms" in reason for reason in server.stats.reasons)
    _still_serving(server)


def _join_group_with_subscription(metadata: bytes):
    from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol

    return JoinGroupRequest(
        group_id="g",
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=30),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=metadata),),
    )


def _sync_group_with_assignment(assignment: bytes):
    from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment

    return SyncGroupRequest(
        group_id="g",
        generation_id=1,
        member_id="m",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(SyncGroupRequestAssignment(member_id="m", assignment=assignment),),
    )


@pytest.mark.parametrize(
    ("api_key", "request_of", "why"),
    [
        (11, _join_group_with_subscription, "JoinGroup: consumer_protocol_subscription: 1 bytes, no version"),
        (14, _sync_group_with_assignment, "SyncGroup: consumer_protocol_assignment: 1 bytes, no version"),
    ],
)
def test_consumer_protocol_bytes_that_do_not_decode_close_the_connection_naming_the_api(
    served, api_key, request_of, why
):
    """A group of protocol type ``consumer`` carries Kafka `ConsumerProtocol`'s embedded bytes
    (`ConsumerProtocol.deserializeSubscription`, `deserializeAssignment`: an int16 version, then
    the fields). The front door reads them for the Lab's coordinator, so bytes that are not that
    close the connection with the API and the reason, and the server goes on."""
    from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1

    _, server = served
    client = RawClient(server.port)
    request = request_of(b"\x00")
    header_class = RequestHeader if request.__flexible__ else RequestHeaderV1
    header = header_class(request_api_key=api_key, request_api_version=5, correlation_id=1, client_id="bad")
    client.send_raw(codec.encode_frame(header, request))
    _closed_with(server, client, "refused request")
    assert f"refused request: {why}" in server.stats.reasons
    _still_serving(server)


def test_list_offsets_answers_earliest_latest_and_max_timestamp():
    """Kafka `UnifiedLog.fetchOffsetByTimestamp`: -2 the log start, -1 the log end, -3 the record
    with the largest timestamp (the last one here: records are appended in time order)."""
    from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

    lab = Lab(seed=8)
    lab.create_topic("orders", 1, produce_rate_per_s=0)
    lab.produce_share_records("orders", 7, batch_size=3)
    with serve(lab) as server:
        leader = lab.world.share.leader_of((lab.topic_id("orders"), 0))
        client = RawClient(server.ports[leader])

        def offset(timestamp: int) -> int:
            partition = ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)
            request = ListOffsetsRequest(
                replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(name="orders", partitions=(partition,)),)
            )
            (answer,) = client.request(request).topics[0].partitions
            assert answer.error_code == ErrorCode.none
            return answer.offset

        assert (offset(-2), offset(-1), offset(-3)) == (0, 7, 6)


def _join_heartbeat():
    from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest

    return ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="m-1",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=("orders",),
        server_assignor=None,
        topic_partitions=(),
    )


def _send_a_request_the_lab_drops(lab, server, client: RawClient) -> None:
    """Join, then send a heartbeat whose message the Lab's network drops: no answer will come."""
    assert client.request(_join_heartbeat()).error_code == ErrorCode.none
    server.call(lambda lab: lab.drop_messages(client.client_id, count=1))
    header = RequestHeader(request_api_key=68, request_api_version=0, correlation_id=2, client_id=client.client_id)
    client.send_raw(codec.encode_frame(header, _join_heartbeat()))
    wait_until(lambda: server.call(lambda lab: lab.trace.of_type(MessageDropped)), 10, "the Lab to drop the heartbeat")


def test_a_request_whose_client_left_before_its_answer_is_given_up(served):
    """The Lab's network lost a heartbeat and its client closed the connection: the server stops
    waiting for the answer (within its half-second sweep) and says why."""
    lab, server = served
    client = RawClient(server.port, client_id="leaver")
    _send_a_request_the_lab_drops(lab, server, client)
    client.close()
    reason = "refused request: the client closed the connection while its ConsumerGroupHeartbeat had no answer"
    assert wait_until(lambda: reason in server.stats.reasons, 5, "the wait to be given up")
    _still_serving(server)


def test_a_request_with_no_answer_in_time_closes_its_connection(served, monkeypatch):
    """A request the Lab never answers (here, dropped) is given up after the server's deadline
    (330 s; 1 s here), closing the connection, as a broker's request timeout would."""
    from kip_lab.wire import server as server_module

    monkeypatch.setattr(server_module, "NO_ANSWER_TIMEOUT_S", 1.0)
    lab, server = served
    client = RawClient(server.port, client_id="patient")
    _send_a_request_the_lab_drops(lab, server, client)
    _closed_with(server, client, "refused request")
    assert "refused request: no answer to ConsumerGroupHeartbeat within 1.0 s" in server.stats.reasons
