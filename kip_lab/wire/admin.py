"""The admin APIs of the front door: topics, records, configs and producer ids.

CreateTopics, DeleteTopics, CreatePartitions and DeleteRecords are the Lab's own actions
(``create_topic``, ``delete_topic``, ``add_partitions``, ``delete_records``: steps in the trace,
which the groups then notice as in the notebooks); DescribeConfigs reads the Lab's settings
under Kafka's config names; InitProducerId hands out producer ids (``producers``). Errors and
messages are Kafka's (``ZkAdminManager`` / ``ControllerApis``, ``ReplicaManager.deleteRecords``).
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from pydantic import BaseModel

from kip_lab.lab import actions as a
from kip_lab.wire import codec

if TYPE_CHECKING:
    from kip_lab.lab.lab import Lab
    from kip_lab.wire.handlers import FrontDoor
    from kip_lab.wire.producers import ProducerStates
    from kip_lab.wire.records import RecordStore

DEFAULT_PARTITIONS = 1  # Kafka's num.partitions, for CreateTopics with num_partitions -1
LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME_LENGTH = 249
TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE = 2, 4, 32  # Kafka ConfigResource.Type
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 4, 5, 8  # Kafka DescribeConfigsResponse.ConfigSource
KAFKA_CONFIG_NAME = re.compile(r"(?:group|offset)\.[a-z0-9.]+")
# Kafka GroupConfig: a group's own settings, named as the broker's without "group."
GROUP_CONFIG_NAMES = (
    "consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms",
    "share.session.timeout.ms",
    "share.heartbeat.interval.ms",
    "share.record.lock.duration.ms",
    "share.auto.offset.reset",
)
LATEST_OFFSET = -1  # DeleteRecords to the high watermark
NO_TRANSACTIONS = "transactions are not served by kip-lab's front door (idempotent producers are)"


def invalid_topic_name(name: str) -> str | None:
    """Why Kafka refuses ``name`` as a topic name (Kafka `Topic.validate`), or None."""
    if name in ("", ".", ".."):
        return f"Topic name {name!r} is illegal"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not LEGAL_TOPIC_NAME.fullmatch(name):
        return f"Topic name {name!r} is illegal: only ASCII letters, digits, '.', '_' and '-' are allowed"
    return None


def kafka_settings(config: BaseModel) -> dict[str, str]:
    """Kafka config name -> value for each field of a Lab config whose description names one
    (``session_timeout_ms``: "group.consumer.session.timeout.ms"), nested configs included."""
    found: dict[str, str] = {}
    for name, info in type(config).model_fields.items():
        value = getattr(config, name)
        if isinstance(value, BaseModel):
            found.update(kafka_settings(value))
            continue
        match = KAFKA_CONFIG_NAME.match(info.description or "")
        if match and match.group() not in found:
            found[match.group()] = _config_text(value)
    return found


def _config_text(value: Any) -> str:
    """A setting as Kafka's DescribeConfigs writes it: ``true``, ``bidirectional``, a list as ``uniform,range``."""
    if isinstance(value, tuple | list):
        return ",".join(map(_config_text, value))
    return str(value.value if hasattr(value, "value") else value).lower()


class AdminHandlers:
    """CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeConfigs, InitProducerId."""

    if TYPE_CHECKING:  # what the handlers class these are part of provides
        server: FrontDoor
        records: RecordStore
        producers: ProducerStates

        @property
        def lab(self) -> Lab: ...
        def partition_refusal(self, connection: Any, topic: Any, index: int, by_id: bool = False) -> Any: ...
        def _topic_of(self, item: Any) -> Any: ...

    async def create_topics(self, connection, header, request, response_class) -> Any:
        self.server.clock.advance()
        results = []
        for item in request.topics:
            partitions = item.num_partitions if item.num_partitions > 0 else DEFAULT_PARTITIONS
            result: dict[str, Any] = {"name": item.name, "num_partitions": partitions, "replication_factor": 1}
            invalid = invalid_topic_name(item.name)
            if invalid:
                result["error_code"] = ErrorCode.invalid_topic_exception
                result["error_message"] = invalid
            elif item.name in self.lab.cluster:
                result["error_code"] = ErrorCode.topic_already_exists
                result["error_message"] = f"Topic '{item.name}' already exists."
            elif not request.validate_only:
                self.lab.apply(a.CreateTopic(topic=item.name, partitions=partitions, produce_rate_per_s=0))
                result["topic_id"] = self.lab.topic_id(item.name)
            results.append(result)
        return codec.build(response_class, topics=results)

    async def delete_topics(self, connection, header, request, response_class) -> Any:
        """v1-5 name topics (``topic_names``); v6 by name or by id (``topics``)."""
        self.server.clock.advance()
        named = hasattr(request, "topic_names")
        items = [SimpleNamespace(name=n, topic_id=None) for n in request.topic_names] if named else request.topics
        results = []
        for item in items:
            topic = self._topic_of(item)
            result: dict[str, Any] = {"name": item.name, "topic_id": item.topic_id}
            if topic is None:
                by_id = not item.name
                result["error_code"] = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
                result["error_message"] = "This server does not host this topic ID." if by_id else None
            else:
                result.update(name=topic.name, topic_id=topic.topic_id)
                self.lab.apply(a.DeleteTopic(topic=topic.name))
                self.records.forget_topic(topic.topic_id)
                self.producers.forget_topic(topic.topic_id)
            results.append(result)
        return codec.build(response_class, responses=results)

    async def create_partitions(self, connection, header, request, response_class) -> Any:
        """``count`` is the new total (Kafka ``ReplicationControlManager.createPartitions``)."""
        self.server.clock.advance()
        results = []
        for item in request.topics:
            result: dict[str, Any] = {"name": item.name}
            topic = self.lab.cluster.topic(item.name) if item.name in self.lab.cluster else None
            if topic is None:
                result.update(error_code=ErrorCode.unknown_topic_or_partition, error_message=None)
            elif item.count < topic.num_partitions:
                message = (
                    f"Topic currently has {topic.num_partitions} partitions, "
                    f"which is higher than the requested {item.count}."
                )
                result.update(error_code=ErrorCode.invalid_partitions, error_message=message)
            elif item.count == topic.num_partitions:
                message = f"Topic already has {topic.num_partitions} partitions."
                result.update(error_code=ErrorCode.invalid_partitions, error_message=message)
            elif not request.validate_only:
                self.lab.apply(a.AddPartitions(topic=item.name, count=item.count - topic.num_partitions))
            results.append(result)
        return codec.build(response_class, results=results)

    async def delete_records(self, connection, header, request, response_class) -> Any:
        """Each partition's log start offset moves up to the given offset (-1: the high watermark);
        the answer is the new low watermark (Kafka ``ReplicaManager.deleteRecordsOnLocalLog``)."""
        self.server.clock.advance()
        topics = []
        for item in request.topics:
            topic = self._topic_of(item)
            partitions = []
            for part in item.partitions:
                entry: dict[str, Any] = {"partition_index": part.partition_index, "low_watermark": -1}
                refusal = self.partition_refusal(connection, topic, part.partition_index)
                if refusal is not None:
                    entry["error_code"] = refusal
                else:
                    log = self.lab.world.share.topic_log((topic.topic_id, part.partition_index))
                    offset = log.high_watermark if part.offset == LATEST_OFFSET else part.offset
                    if not 0 <= offset <= log.high_watermark:
                        entry["error_code"] = ErrorCode.offset_out_of_range
                    else:
                        if offset > log.log_start_offset:
                            self.lab.apply(
                                a.DeleteRecords(topic=topic.name, partition=part.partition_index, before_offset=offset)
                            )
                        entry["low_watermark"] = log.log_start_offset
                partitions.append(entry)
            topics.append({"name": item.name, "partitions": partitions})
        return codec.build(response_class, topics=topics)

    async def describe_configs(self, connection, header, request, response_class) -> Any:
        """The broker's group settings (the Lab's coordinator and share configs, by Kafka's names),
        a group's own (Kafka ``GroupConfig``), and a topic's (none are modelled: an empty list)."""
        broker = kafka_settings(self.lab.config.coordinator) | kafka_settings(self.lab.config.share)
        results = []
        for resource in request.resources:
            result: dict[str, Any] = {
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
                "configs": [],
            }
            if resource.resource_type == BROKER_RESOURCE:
                result["configs"] = [
                    {"name": name, "value": value, "read_only": True, "config_source": STATIC_BROKER_CONFIG}
                    for name, value in broker.items()
                ]
            elif resource.resource_type == GROUP_RESOURCE:
                group_share = self.lab.world.share.group_configs.get(resource.resource_name)
                own = kafka_settings(group_share) if group_share is not None else {}
                result["configs"] = [
                    {
                        "name": name,
                        "value": own.get(f"group.{name}", broker.get(f"group.{name}")),
                        "read_only": False,
                        "config_source": GROUP_CONFIG if f"group.{name}" in own else DEFAULT_CONFIG,
                    }
                    for name in GROUP_CONFIG_NAMES
                ]
            elif resource.resource_type == TOPIC_RESOURCE:
                if resource.resource_name not in self.lab.cluster:
                    result["error_code"] = ErrorCode.unknown_topic_or_partition
                    result["error_message"] = f"Topic {resource.resource_name} does not exist."
            else:
                result["error_code"] = ErrorCode.invalid_request
                result["error_message"] = (
                    f"kip-lab describes topic, broker and group configs, not type {resource.resource_type}"
                )
            if resource.configuration_keys is not None:
                result["configs"] = [c for c in result["configs"] if c["name"] in resource.configuration_keys]
            results.append(result)
        return codec.build(response_class, results=results)

    async def init_producer_id(self, connection, header, request, response_class) -> Any:
        """An idempotent producer gets a new producer id at epoch 0, every time (Kafka
        ``TransactionCoordinator.handleInitProducerId`` without a transactional id)."""
        if request.transactional_id is not None:  # no transaction coordinator: FindCoordinator says why
            return codec.build(
                response_class, error_code=ErrorCode.coordinator_not_available, producer_id=-1, producer_epoch=-1
            )
        return codec.build(response_class, producer_id=self.producers.new_producer_id(), producer_epoch=0)
