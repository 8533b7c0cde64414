"""A consumer group member of one Python Kafka client, for the life-cycle tests (run as a script).

``python consumer.py CLIENT BOOTSTRAP GROUP CLIENT_ID TOPIC [OPTION=VALUE ...]`` with CLIENT one of
``confluent`` (librdkafka; ``group.protocol=consumer`` or ``classic`` in the options),
``kafka-python`` or ``aiokafka``. It reads from the earliest offset when the group has none,
commits synchronously after each batch it polls (a refused commit is tried again, as an application
must: see ``Uncommitted``), and prints one JSON line per event:
``{"event": "record", "partition": p, "offset": o}``, ``{"event": "committed", "offsets":
{p: next offset}}``, ``{"event": "error", "error": text}``. It runs until killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
POLL_RECORDS = 20  # a small batch, so that a member commits many times


def emit(kind: str, **fields: Any) -> None:
    print(json.dumps({"event": kind, **fields}), flush=True)


def emit_batch(records: list[tuple[int, int]]) -> dict[int, int]:
    """Print each (partition, offset); the next offset of each partition, to commit."""
    commit: dict[int, int] = {}
    for partition, offset in records:
        emit("record", partition=partition, offset=offset)
        commit[partition] = offset + 1
    return commit


class Uncommitted:
    """Next offsets read but not yet committed, per partition.

    A commit is refused when a rebalance moves the generation on while it is in flight
    (ILLEGAL_GENERATION or REBALANCE_IN_PROGRESS, as Kafka's classic coordinator answers). An
    application that drops such a commit leaves its last records uncommitted for good if no more
    arrive, so this consumer tries again on its next poll, for the partitions it still owns: a
    partition that moved away is the new owner's to commit.
    """

    def __init__(self) -> None:
        self.offsets: dict[int, int] = {}

    def add(self, batch: dict[int, int]) -> None:
        self.offsets.update(batch)

    def to_commit(self, owned: set[int]) -> dict[int, int]:
        self.offsets = {p: o for p, o in self.offsets.items() if p in owned}
        return dict(self.offsets)

    def done(self, committed: dict[int, int]) -> None:
        for partition, offset in committed.items():
            if self.offsets.get(partition) == offset:
                del self.offsets[partition]


def python_client_settings(bootstrap: str, group: str, client_id: str, options: dict[str, str]) -> dict[str, Any]:
    """kafka-python's and aiokafka's consumer settings (the two name them alike)."""
    return {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "client_id": client_id,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
        "max_poll_records": POLL_RECORDS,
        **options,
    }


def confluent(bootstrap: str, group: str, client_id: str, topic: str, options: dict[str, str]) -> None:
    import confluent_kafka

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **options,
    }
    if config.get("group.protocol", "classic") == "classic":
        config.setdefault("session.timeout.ms", SESSION_TIMEOUT_MS)
        config.setdefault("heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS)
    consumer = confluent_kafka.Consumer(config)
    consumer.subscribe([topic])
    uncommitted = Uncommitted()
    while True:
        messages = consumer.consume(POLL_RECORDS, 0.2)
        good = [m for m in messages if not m.error()]
        for message in messages:
            if message.error():
                emit("error", error=str(message.error()))
        if good:
            uncommitted.add(emit_batch([(m.partition(), m.offset()) for m in good]))
        commit = uncommitted.to_commit({tp.partition for tp in consumer.assignment()})
        if commit:
            offsets = [confluent_kafka.TopicPartition(topic, p, o) for p, o in commit.items()]
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                uncommitted.done(commit)
                emit("committed", offsets=commit)
            except confluent_kafka.KafkaException as error:
                emit("error", error=str(error))


def kafka_python(bootstrap: str, group: str, client_id: str, topic: str, options: dict[str, str]) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(topic, **python_client_settings(bootstrap, group, client_id, options))
    uncommitted = Uncommitted()
    while True:
        batches = consumer.poll(timeout_ms=200)
        records = sorted((r.partition, r.offset) for rs in batches.values() for r in rs)
        if records:
            uncommitted.add(emit_batch(records))
        commit = uncommitted.to_commit({tp.partition for tp in consumer.assignment()})
        if commit:
            try:
                consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in commit.items()})
                uncommitted.done(commit)
                emit("committed", offsets=commit)
            except Exception as error:  # refused: reported, and tried again on the next poll
                emit("error", error=repr(error))


async def aiokafka(bootstrap: str, group: str, client_id: str, topic: str, options: dict[str, str]) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(topic, **python_client_settings(bootstrap, group, client_id, options))
    await consumer.start()
    uncommitted = Uncommitted()
    while True:
        batches = await consumer.getmany(timeout_ms=200)
        records = sorted((r.partition, r.offset) for rs in batches.values() for r in rs)
        if records:
            uncommitted.add(emit_batch(records))
        commit = uncommitted.to_commit({tp.partition for tp in consumer.assignment()})
        if commit:
            try:
                await consumer.commit({TopicPartition(topic, p): o for p, o in commit.items()})
                uncommitted.done(commit)
                emit("committed", offsets=commit)
            except Exception as error:  # refused: reported, and tried again on the next poll
                emit("error", error=repr(error))


def main() -> None:
    client, bootstrap, group, client_id, topic, *rest = sys.argv[1:]
    options = dict(option.split("=", 1) for option in rest)
    if client == "confluent":
        confluent(bootstrap, group, client_id, topic, options)
    elif client == "kafka-python":
        kafka_python(bootstrap, group, client_id, topic, options)
    elif client == "aiokafka":
        asyncio.run(aiokafka(bootstrap, group, client_id, topic, options))
    else:
        raise SystemExit(f"unknown client {client!r}: confluent, kafka-python or aiokafka")


if __name__ == "__main__":
    main()
