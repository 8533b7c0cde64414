"""The APIs the front door serves, each turning a kio request into a kio response.

Group APIs (ConsumerGroupHeartbeat, OffsetCommit, ...) are not answered here: the request is
converted to kip_lab's protocol model and sent to the Lab (``WireServer.submit``), where
the broker the connection reached hands it to the same coordinator handler a simulated client's
request reaches; the handler's answer is converted back. The rest — ApiVersions, Metadata,
FindCoordinator, CreateTopics and the data plane (Produce, Fetch, ListOffsets) — reads the
Lab's cluster, coordinator placement and topic logs directly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode
from pydantic import BaseModel, ValidationError

from kip_lab.errors import KipLabError
from kip_lab.lab import actions as a
from kip_lab.protocol import classic_group as classic
from kip_lab.protocol import consumer_group as cg
from kip_lab.protocol import share as share_rpc
from kip_lab.protocol import share_group as share_group_rpc
from kip_lab.protocol.consumer_protocol import ConsumerProtocolError
from kip_lab.wire import codec
from kip_lab.wire import consumer_protocol as embedded
from kip_lab.wire.admin import NO_TRANSACTIONS, AdminHandlers
from kip_lab.wire.connection import Connection
from kip_lab.wire.endpoint import WireClient, WireFetched
from kip_lab.wire.producers import BatchProducer, ProducerStates
from kip_lab.wire.records import RecordStore, end_offset, record_count, split_batches

if TYPE_CHECKING:
    from kip_lab.lab.lab import Lab
    from kip_lab.wire.clock import RealTimeClock

# API key -> (lowest, highest) version served: what Kafka 4.0's ApiVersions answers for each API
# the front door serves (KIP-896 removed the versions below these). Older versions keep their
# own semantics (``version_rules`` below and each handler).
SUPPORTED: dict[int, tuple[int, int]] = {
    0: (3, 12),  # Produce
    1: (4, 17),  # Fetch
    2: (1, 10),  # ListOffsets
    3: (0, 13),  # Metadata
    8: (2, 9),  # OffsetCommit
    9: (1, 9),  # OffsetFetch (one group per request before v8)
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup (v4+: a new member is given its id by MEMBER_ID_REQUIRED, KIP-394)
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId (idempotent producers; no transactions)
    32: (1, 4),  # DescribeConfigs
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    68: (0, 1),  # ConsumerGroupHeartbeat
    69: (0, 1),  # ConsumerGroupDescribe
    76: (1, 1),  # ShareGroupHeartbeat
    77: (1, 1),  # ShareGroupDescribe
    78: (1, 2),  # ShareFetch
    79: (1, 2),  # ShareAcknowledge
}

TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key type of a transactional id
T = TypeVar("T", bound=BaseModel)


class WireError(KipLabError):
    """A request the front door refuses by closing the connection (the reason is logged)."""


def node_id(broker: str) -> int:
    """The node id of a Lab broker name (``broker-2`` is node 2)."""
    return int(broker.rsplit("-", 1)[1])


def item_uses_id(item: Any) -> bool:
    """A Fetch topic named by id (Fetch v13+), not by name."""
    return getattr(item, "topic_id", None) is not None and not getattr(item, "topic", None)


class ClassicHandlers:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup (through the Lab), DescribeGroups and ListGroups.

    The consumer protocol's embedded bytes are converted between Kafka's binary form and the
    Lab's (``consumer_protocol``) when the group's protocol type is ``consumer``."""

    if TYPE_CHECKING:  # what the handlers class these are part of provides

        @property
        def lab(self) -> Lab: ...
        async def to_lab(self, connection: Connection, header: Any, api: str, request: Any) -> Any: ...

    async def join_group(self, connection, header, request, response_class) -> Any:
        lab_request = codec.to_lab(
            request,
            classic.JoinGroupRequest,
            client_id=header.client_id or "",
            client_host=connection.peer,
            require_known_member_id=request.__version__ >= classic.FIRST_VERSION_REQUIRING_MEMBER_ID,
        )
        if request.protocol_type == classic.CONSUMER_PROTOCOL_TYPE:
            lab_request = _embedded_to_lab(
                "JoinGroup", lab_request, "protocols", "metadata", embedded.subscription_to_lab
            )
        response = await self.to_lab(connection, header, "JoinGroup", lab_request)
        values = response.model_dump()
        if request.protocol_type == classic.CONSUMER_PROTOCOL_TYPE:
            for member in values["members"]:
                member["metadata"] = embedded.subscription_to_wire(member["metadata"])
        values["protocol_name"] = values["protocol_name"] or ""
        return codec.build(response_class, values)

    async def sync_group(self, connection, header, request, response_class) -> Any:
        lab_request = codec.to_lab(request, classic.SyncGroupRequest)
        if self._consumer_protocol(request.group_id, getattr(request, "protocol_type", None)):
            lab_request = _embedded_to_lab(
                "SyncGroup", lab_request, "assignments", "assignment", embedded.assignment_to_lab
            )
        response = await self.to_lab(connection, header, "SyncGroup", lab_request)
        values = response.model_dump()
        if self._consumer_protocol(request.group_id, response.protocol_type):
            values["assignment"] = embedded.assignment_to_wire(response.assignment)
        return codec.build(response_class, values)

    async def heartbeat(self, connection, header, request, response_class) -> Any:
        response = await self.to_lab(connection, header, "Heartbeat", codec.to_lab(request, classic.HeartbeatRequest))
        return codec.build(response_class, response)

    async def leave_group(self, connection, header, request, response_class) -> Any:
        if hasattr(request, "member_id"):  # v0-2: one member; v3+ (KIP-345): a members array
            lab_request = classic.LeaveGroupRequest(
                group_id=request.group_id, members=[classic.MemberIdentity(member_id=request.member_id)]
            )
        else:
            lab_request = codec.to_lab(request, classic.LeaveGroupRequest)
        response = await self.to_lab(connection, header, "LeaveGroup", lab_request)
        return codec.build(response_class, response)

    async def describe_groups(self, connection, header, request, response_class) -> Any:
        """Read-only, so served by the coordinator at once (nothing to trace); a broker that does
        not host the coordinator answers NOT_COORDINATOR for each group, as Kafka's does."""
        lab_request = codec.to_lab(request, classic.DescribeGroupsRequest)
        world = self.lab.world
        if world.coordinator_host != connection.broker:
            groups = [{"group_id": g, "error_code": ErrorCode.not_coordinator} for g in request.groups]
            return codec.build(response_class, groups=groups)
        response = world.coordinator.describe_groups(lab_request).response
        values = response.model_dump()
        for group in values["groups"]:
            if group["protocol_type"] == classic.CONSUMER_PROTOCOL_TYPE:
                for member in group["members"]:
                    member["member_metadata"] = _or_empty(embedded.subscription_to_wire, member["member_metadata"])
                    member["member_assignment"] = embedded.assignment_to_wire(member["member_assignment"])
        return codec.build(response_class, values)

    async def list_groups(self, connection, header, request, response_class) -> Any:
        """Each broker lists the groups it coordinates (Kafka `GroupCoordinator.handleListGroups`)."""
        world = self.lab.world
        if world.coordinator_host != connection.broker:
            return codec.build(response_class, groups=[])
        response = world.coordinator.list_groups(codec.to_lab(request, classic.ListGroupsRequest)).response
        return codec.build(response_class, response)

    def _consumer_protocol(self, group_id: str, protocol_type: str | None) -> bool:
        if protocol_type is not None:
            return protocol_type == classic.CONSUMER_PROTOCOL_TYPE
        group = self.lab.coordinator.classic_groups.get(group_id)
        return group is None or group.protocol_type in (None, classic.CONSUMER_PROTOCOL_TYPE)


def _or_empty(convert, data: bytes) -> bytes:
    return convert(data) if data else data


def _embedded_to_lab(api: str, request: T, items: str, embedded_field: str, convert: Callable[[bytes], Any]) -> T:
    """``request`` with the consumer protocol's bytes in ``embedded_field`` of each of its ``items``
    in the Lab's form; bytes that are not the consumer protocol's refuse the request."""
    try:
        converted = [
            item.model_copy(update={embedded_field: convert(getattr(item, embedded_field))})
            for item in getattr(request, items)
        ]
    except ConsumerProtocolError as error:
        raise WireError(f"{api}: {error}") from None
    return request.model_copy(update={items: converted})


class FrontDoor(Protocol):
    """What the handlers ask of the server that owns them (``WireServer``): the Lab, where each
    broker listens, the clock that moves the Lab, and a way to put a request into the Lab."""

    lab: Lab
    host: str
    ports: dict[str, int]

    @property
    def broker_names(self) -> list[str]: ...

    @property
    def clock(self) -> RealTimeClock: ...

    def submit(self, actor: str, connection: Connection, api: str, request: Any) -> asyncio.Future: ...


class Handlers(ClassicHandlers, AdminHandlers):
    """One method per API, named after it; each returns the kio response of the request's version
    (or its bytes, already encoded, for an answer sent many times over: a steady heartbeat's)."""

    def __init__(self, server: FrontDoor) -> None:
        self.server = server
        self.records = RecordStore()
        self.producers = ProducerStates()

    @property
    def lab(self) -> Lab:
        return self.server.lab

    async def handle(self, connection: Connection, header: Any, request: Any) -> Any:
        name = codec.api_name(header.request_api_key)
        method = getattr(self, name)
        response_class = codec.response_class(header.request_api_key, header.request_api_version)
        try:
            return await method(connection, header, request, response_class)
        except ValidationError as error:  # decodable, but not a request kip_lab's protocol model accepts
            problem = error.errors()[0]
            where = ".".join(map(str, problem["loc"]))
            raise WireError(f"{name}: {where}: {problem['msg']}") from None

    # ------------------------------------------------------------------ helpers
    def actor(self, header: Any) -> str:
        """The Lab actor of a real client: its client.id, unless a simulated client or a broker has that name."""
        name = header.client_id or "client"
        existing = self.lab.world.clients.get(name)
        if name in self.lab.world.brokers or (existing is not None and not isinstance(existing, WireClient)):
            name = f"{name}~real"
        return name

    def broker_endpoint(self, broker: str) -> dict[str, Any]:
        return {"node_id": node_id(broker), "host": self.server.host, "port": self.server.ports[broker]}

    def leader(self, topic_id: str, partition: int) -> str:
        """The broker leading a partition: the Lab's one placement rule (its share-partition leaders')."""
        return self.lab.world.share.leader_of((topic_id, partition))

    async def to_lab(self, connection: Connection, header: Any, api: str, request: Any) -> Any:
        """Send ``request`` (a kip_lab model) to the Lab as this client's and await the answer.

        When the Lab's network loses the request or its answer (a drop or partition fault), no
        answer comes, as from a real broker behind a lossy link: the client times the request out
        and closes the connection, and the server then ends the wait (``WireServer.submit``)."""
        return await self.server.submit(self.actor(header), connection, api, request)

    def partition_refusal(self, connection: Connection, topic: Any, index: int, by_id: bool = False) -> Any:
        """Why this broker refuses a data request for partition ``index`` of ``topic``: an unknown
        topic or partition (UNKNOWN_TOPIC_ID when named by id), or another broker leads it; None
        when it serves it (its log then exists: a partition's log is made with its leader)."""
        if topic is None or not 0 <= index < topic.num_partitions:
            return ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
        if self.leader(topic.topic_id, index) != connection.broker:
            return ErrorCode.not_leader_or_follower
        return None

    def topic_name(self, topic_id: str) -> str:
        topic = self.lab.cluster.topic_by_id(topic_id)
        return topic.name if topic else ""

    # ------------------------------------------------------------------ ApiVersions
    def api_keys(self) -> list[dict[str, int]]:
        return [{"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in SUPPORTED.items()]

    async def api_versions(self, connection, header, request, response_class) -> Any:
        return codec.build(response_class, error_code=ErrorCode.none, api_keys=self.api_keys())

    def unsupported_api_versions(self, correlation_id: int) -> bytes:
        """A broker's answer to an ApiVersions version it does not know: v0, UNSUPPORTED_VERSION,
        and the versions it serves (KIP-511)."""
        body = codec.build(
            codec.response_class(codec.API_VERSIONS_KEY, 0),
            error_code=ErrorCode.unsupported_version,
            api_keys=self.api_keys(),
        )
        return codec.encode_response(codec.API_VERSIONS_KEY, 0, correlation_id, body)

    # ------------------------------------------------------------------ Metadata
    async def metadata(self, connection, header, request, response_class) -> Any:
        cluster = self.lab.cluster
        if request.topics is None or (request.__version__ == 0 and not request.topics):  # v0: [] is every topic
            wanted = [(t.name, t) for t in cluster.topics()]
        else:
            wanted = []
            for item in request.topics:
                topic = None
                if item.name is not None:
                    topic = cluster.topic(item.name) if item.name in cluster else None
                elif getattr(item, "topic_id", None) is not None:
                    topic = cluster.topic_by_id(codec.lab_topic_id(item.topic_id))
                wanted.append((item.name or "", topic))
        topics = []
        for name, topic in wanted:
            if topic is None:
                topics.append({"name": name, "error_code": ErrorCode.unknown_topic_or_partition, "partitions": []})
                continue
            partitions = []
            for p in range(topic.num_partitions):
                leader = node_id(self.leader(topic.topic_id, p))
                partitions.append(
                    {"partition_index": p, "leader_id": leader, "replica_nodes": [leader], "isr_nodes": [leader]}
                )
            topics.append({"name": topic.name, "topic_id": topic.topic_id, "partitions": partitions})
        return codec.build(
            response_class,
            brokers=[self.broker_endpoint(b) for b in self.server.broker_names],
            cluster_id="kip-lab",
            controller_id=0,
            topics=topics,
        )

    # ------------------------------------------------------------------ FindCoordinator
    async def find_coordinator(self, connection, header, request, response_class) -> Any:
        keys = list(request.coordinator_keys) if hasattr(request, "coordinator_keys") else [request.key]
        key_type = getattr(request, "key_type", 0)
        coordinators = []
        for key in keys:
            if key_type == TRANSACTION_KEY_TYPE:  # a fatal answer: the producer stops with this message
                coordinators.append(
                    {
                        "key": key,
                        "node_id": -1,
                        "error_code": ErrorCode.invalid_request,
                        "error_message": NO_TRANSACTIONS,
                    }
                )
                continue
            if key_type != 0:  # share-state coordinators are not modelled
                coordinators.append({"key": key, "node_id": -1, "error_code": ErrorCode.coordinator_not_available})
                continue
            broker = self.lab.world.coordinator_broker(key)
            coordinators.append({"key": key, **self.broker_endpoint(broker)})
        if hasattr(request, "coordinator_keys"):
            return codec.build(response_class, coordinators=coordinators)
        return codec.build(response_class, coordinators[0])

    # ------------------------------------------------------------------ the data plane
    def _topic_of(self, item: Any) -> Any:
        """The Lab topic a request's topic entry names (by name, or by id in newer versions)."""
        name = getattr(item, "name", None) or getattr(item, "topic", None)
        if name:
            return self.lab.cluster.topic(name) if name in self.lab.cluster else None
        return self.lab.cluster.topic_by_id(codec.lab_topic_id(getattr(item, "topic_id", None)))

    async def produce(self, connection, header, request, response_class) -> Any:
        """Each record batch is the Lab action ``produce_share_records`` of as many records to its
        partition (a step: the Lab's log assigns the offsets and the trace shows the append); the
        batch's bytes are kept for Fetch and ShareFetch."""
        self.server.clock.advance()
        responses = []
        for item in request.topic_data:
            topic = self._topic_of(item)
            partitions = []
            for data in item.partition_data:
                entry: dict[str, Any] = {"index": data.index, "base_offset": -1}
                refusal = self.partition_refusal(connection, topic, data.index)
                if refusal is not None:
                    entry["error_code"] = refusal
                else:
                    try:
                        batches = split_batches(bytes(data.records or b""))
                    except ValueError as error:
                        entry["error_code"] = ErrorCode.corrupt_message
                        entry["error_message"] = str(error)
                    else:
                        entry.update(self._append(self.actor(header), topic, data.index, batches))
                partitions.append(entry)
            responses.append({"name": item.name, "partition_responses": partitions})
        self.records.appended.set()
        self.records.appended = asyncio.Event()
        if request.acks == 0:  # the producer waits for no answer, and a broker sends none
            return None
        return codec.build(response_class, responses=responses)

    def _append(self, actor: str, topic: Any, partition: int, batches: list[bytes]) -> dict[str, Any]:
        """Append ``batches`` to the partition's log in the Lab, once their producer's sequence
        numbers are checked (``producers``); the answer's fields: the first offset, or an error."""
        where = (topic.topic_id, partition)
        writers = [BatchProducer.of(batch) for batch in batches]
        for writer in writers:
            verdict = self.producers.check(where, writer)
            if verdict.error:
                return {"error_code": verdict.error, "error_message": verdict.message}
            if verdict.duplicate_of is not None:
                return {"base_offset": verdict.duplicate_of}
        log = self.lab.world.share.topic_log(where)
        first = log.high_watermark
        for batch, writer in zip(batches, writers, strict=True):
            self.producers.appended(where, writer, log.high_watermark)
            count = record_count(batch)
            self.lab.apply(
                a.ProduceShareRecords(
                    topic=topic.name, count=count, partition=partition, batch_size=count, value_prefix=f"{actor}:"
                )
            )
            log = self.lab.world.share.topic_log((topic.topic_id, partition))
            self.records.store(topic.topic_id, partition, log.high_watermark - count, batch)
        return {"base_offset": first}

    async def fetch(self, connection, header, request, response_class) -> Any:
        waited = False
        while True:
            responses, total = self._fetch_once(connection, request)
            if waited or total >= max(request.min_bytes, 1) or request.max_wait.total_seconds() <= 0:
                break
            waited = True
            event = self.records.appended
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), request.max_wait.total_seconds())
        self._record_fetched(header, request, responses)
        return codec.build(response_class, responses=responses)

    def _record_fetched(self, header: Any, request: Any, responses: list[dict[str, Any]]) -> None:
        """Tell the Lab, as a step of the client's (``WireFetched``), where the answer started each
        partition and what records it sent, when that is news to the ledger."""
        client = self.lab.world.clients.get(self.actor(header))
        if not isinstance(client, WireClient):
            return
        fetched = []
        for item, answered in zip(request.topics, responses, strict=True):
            topic = self._topic_of(item)
            for part, entry in zip(item.partitions, answered["partitions"], strict=True):
                if "records" in entry:
                    data = entry["records"]
                    end = end_offset(data) if data else part.fetch_offset
                    fetched.append((topic.topic_id, part.partition, part.fetch_offset, max(end, part.fetch_offset)))
        news = client.fetch_news(fetched)
        if news:
            self.server.clock.advance()
            self.lab.apply(WireFetched(member=client.name, body={"fetched": news}))

    def _fetch_once(self, connection, request) -> tuple[list[dict[str, Any]], int]:
        responses = []
        total = 0
        budget = request.max_bytes
        for item in request.topics:
            topic = self._topic_of(item)
            partitions = []
            for part in item.partitions:
                index = part.partition
                entry: dict[str, Any] = {"partition_index": index, "high_watermark": -1, "last_stable_offset": -1}
                refusal = self.partition_refusal(connection, topic, index, by_id=item_uses_id(item))
                if refusal is not None:
                    entry["error_code"] = refusal
                else:
                    log = self.lab.world.share.topic_log((topic.topic_id, index))
                    end = log.high_watermark
                    entry.update(high_watermark=end, last_stable_offset=end, log_start_offset=log.log_start_offset)
                    if not log.log_start_offset <= part.fetch_offset <= end:
                        entry["error_code"] = ErrorCode.offset_out_of_range
                    else:
                        limit = min(part.partition_max_bytes, budget)
                        data = self.records.read(log.topic_id, index, part.fetch_offset, limit)
                        budget -= len(data)
                        total += len(data)
                        entry["records"] = data
                partitions.append(entry)
            responses.append(
                {
                    "topic": getattr(item, "topic", ""),
                    "topic_id": getattr(item, "topic_id", None),
                    "partitions": partitions,
                }
            )
        return responses, total

    async def list_offsets(self, connection, header, request, response_class) -> Any:
        topics = []
        for item in request.topics:
            topic = self._topic_of(item)
            partitions = []
            for part in item.partitions:
                entry: dict[str, Any] = {"partition_index": part.partition_index, "offset": -1, "timestamp": -1}
                refusal = self.partition_refusal(connection, topic, part.partition_index)
                if refusal is not None:
                    entry["error_code"] = refusal
                else:
                    logs = self.lab.world.share.logs
                    name, index = topic.name, part.partition_index
                    if part.timestamp in (-2, -4):  # EARLIEST, EARLIEST_LOCAL (no tiered storage here)
                        entry["offset"] = logs.earliest(name, index)
                    elif part.timestamp == -1:  # LATEST
                        entry["offset"] = logs.latest(name, index)
                    elif part.timestamp == -3:  # MAX_TIMESTAMP: the last record (appended in time order)
                        entry["offset"] = logs.latest(name, index) - 1
                    elif part.timestamp < 0:
                        entry["error_code"] = ErrorCode.unsupported_version
                    else:
                        entry["offset"] = logs.for_time(name, index, part.timestamp)
                        entry["timestamp"] = part.timestamp
                partitions.append(entry)
            topics.append({"name": item.name, "partitions": partitions})
        return codec.build(response_class, topics=topics)

    # ------------------------------------------------------------------ KIP-848
    async def consumer_group_heartbeat(self, connection, header, request, response_class) -> Any:
        lab_request = _lab_heartbeat(request, header.client_id or "", connection.peer)
        response = await self.to_lab(connection, header, "ConsumerGroupHeartbeat", lab_request)
        if response.assignment is None:
            return _wire_heartbeat_answer(response_class, response)
        values = response.model_dump()
        values["assignment"] = {"topic_partitions": values["assignment"]["assigned_topic_partitions"]}
        return codec.build(response_class, values)

    async def consumer_group_describe(self, connection, header, request, response_class) -> Any:
        lab_request = codec.to_lab(request, cg.ConsumerGroupDescribeRequest)
        response = await self.to_lab(connection, header, "ConsumerGroupDescribe", lab_request)
        return codec.build(response_class, response)

    async def offset_commit(self, connection, header, request, response_class) -> Any:
        topics = []
        for item in request.topics:
            topic_id = codec.lab_topic_id(getattr(item, "topic_id", None)) or None
            partitions = [
                cg.OffsetCommitRequestPartition(
                    p.partition_index,
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                )
                for p in item.partitions
            ]
            name = getattr(item, "name", None) if topic_id is None else None
            topics.append(cg.OffsetCommitRequestTopic(name=name, topic_id=topic_id, partitions=partitions))
        lab_request = cg.OffsetCommitRequest(
            group_id=request.group_id,
            generation_id_or_member_epoch=request.generation_id_or_member_epoch,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            topics=topics,
            api_version=header.request_api_version,
        )
        response = await self.to_lab(connection, header, "OffsetCommit", lab_request)
        return codec.build(response_class, response)

    async def delete_groups(self, connection, header, request, response_class) -> Any:
        lab_request = cg.DeleteGroupsRequest(groups_names=list(request.groups_names))
        response = await self.to_lab(connection, header, "DeleteGroups", lab_request)
        return codec.build(response_class, response)

    async def offset_fetch(self, connection, header, request, response_class) -> Any:
        """v8+ asks for many groups; v1-7 for one (``group_id`` and its ``topics`` at the top),
        answered with that group's topics and error at the top, and before v2 (which added the
        top-level error) the group's error in each partition, as Kafka's OffsetFetchResponse does."""
        one_group = not hasattr(request, "groups")
        if one_group:
            topics = request.topics  # None (v2+): every committed offset
            group = {
                "group_id": request.group_id,
                "topics": None if topics is None else [codec.to_lab(t, cg.OffsetFetchRequestTopic) for t in topics],
            }
            lab_request = codec.to_lab(request, cg.OffsetFetchRequest, groups=[group])
        else:
            lab_request = codec.to_lab(request, cg.OffsetFetchRequest)
        response = await self.to_lab(connection, header, "OffsetFetch", lab_request)
        values = response.model_dump()
        for group in values["groups"]:
            for topic in group["topics"]:
                if not topic.get("name") and topic.get("topic_id"):
                    topic["name"] = self.topic_name(topic["topic_id"])
        if not one_group:
            return codec.build(response_class, values)
        (group,) = values["groups"]
        if request.__version__ < 2 and group["error_code"]:
            for topic in group["topics"]:
                for partition in topic["partitions"]:
                    partition["error_code"] = partition["error_code"] or group["error_code"]
        return codec.build(response_class, topics=group["topics"], error_code=group["error_code"])

    # ------------------------------------------------------------------ KIP-932
    async def share_group_heartbeat(self, connection, header, request, response_class) -> Any:
        lab_request = codec.to_lab(
            request,
            share_group_rpc.ShareGroupHeartbeatRequest,
            client_id=header.client_id or "",
            client_host=connection.peer,
        )
        response = await self.to_lab(connection, header, "ShareGroupHeartbeat", lab_request)
        return codec.build(response_class, response)

    async def share_group_describe(self, connection, header, request, response_class) -> Any:
        """Read-only: served by the coordinator at once (see ``describe_groups``)."""
        world = self.lab.world
        if world.coordinator_host != connection.broker:
            groups = [{"group_id": g, "error_code": ErrorCode.not_coordinator} for g in request.group_ids]
            return codec.build(response_class, groups=groups)
        lab_request = codec.to_lab(request, share_group_rpc.ShareGroupDescribeRequest)
        response = world.coordinator.share_group_describe(lab_request).response
        values = response.model_dump()
        for group in values["groups"]:
            for member in group.get("members", []):
                member["assignment"] = {"topic_partitions": member["assignment"]}
        return codec.build(response_class, values)

    async def share_fetch(self, connection, header, request, response_class) -> Any:
        """The broker's share-partition leader acquires records (through the Lab); the answer
        carries the batches holding them. An answer with nothing acquired is held until records
        arrive or ``max_wait`` passes, as a broker holds a share fetch, so an idle consumer does
        not spin."""
        lab_request = codec.to_lab(request, share_rpc.ShareFetchRequest)
        response = await self.to_lab(connection, header, "ShareFetch", lab_request)
        acquired = any(p.acquired_records for t in response.responses for p in t.partitions)
        wait_s = request.max_wait.total_seconds()
        if not acquired and wait_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.records.appended.wait(), wait_s)
        values = response.model_dump()
        for topic in values["responses"]:
            for partition in topic["partitions"]:
                ranges = partition["acquired_records"]
                partition["records"] = (
                    self.records.batches_between(
                        topic["topic_id"],
                        partition["partition_index"],
                        min(r["first_offset"] for r in ranges),
                        max(r["last_offset"] for r in ranges),
                    )
                    if ranges
                    else b""
                )
        lock_ms = self.lab.config.share.record_lock_duration_ms
        return codec.build(
            response_class,
            values,
            acquisition_lock_timeout_ms=lock_ms,
            node_endpoints=[self.broker_endpoint(b) for b in self.server.broker_names],
        )

    async def share_acknowledge(self, connection, header, request, response_class) -> Any:
        lab_request = codec.to_lab(request, share_rpc.ShareAcknowledgeRequest)
        response = await self.to_lab(connection, header, "ShareAcknowledge", lab_request)
        return codec.build(
            response_class, response, node_endpoints=[self.broker_endpoint(b) for b in self.server.broker_names]
        )


# A member heartbeating steadily sends the same request each time and the coordinator answers it
# with the same response object (frozen, both), so each is converted once, not once a heartbeat.
STEADY_HEARTBEATS_CACHED = 4096


@lru_cache(maxsize=STEADY_HEARTBEATS_CACHED)
def _lab_heartbeat(request: Any, client_id: str, client_host: str) -> cg.ConsumerGroupHeartbeatRequest:
    """kip_lab's ConsumerGroupHeartbeat for a kio one (a frozen, hashable dataclass)."""
    return codec.to_lab(request, cg.ConsumerGroupHeartbeatRequest, client_id=client_id, client_host=client_host)


@lru_cache(maxsize=STEADY_HEARTBEATS_CACHED)
def _wire_heartbeat_answer(response_class: type, response: cg.ConsumerGroupHeartbeatResponse) -> bytes:
    """The encoded answer (``codec.encode_body``) to a heartbeat response that carries no assignment."""
    return codec.encode_body(codec.build(response_class, response.model_dump()))
