"""A real classic consumer that commits after every batch, in a child process that can crash.

``CommittingConsumer(client, config, topics)`` runs this file with ``client`` "confluent"
(librdkafka through confluent-kafka) or "kafka-python", ``config`` that client's settings
(auto-commit off). The child polls a batch, reports each record, processes the batch for
``pause_s``, then commits it synchronously and reports a failed commit: a test that kills it
mid-way most likely kills it with one batch processed but not committed. Events arrive as
``ConsumerProcess`` events do (``record``, ``assigned``, ``revoked``, ``error``, ``closed``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

from kip_lab.wire.consumer_process import ConsumerProcess, emit, partitions

BATCH = 5


class CommittingConsumer(ConsumerProcess):
    """``ConsumerProcess``'s handle (events, ``records``, ``close``, ``kill``) on this file's child."""

    def __init__(self, client: str, config: dict[str, Any], topics: list[str], pause_s: float = 0.3) -> None:
        self.name = config.get("client.id") or config.get("client_id") or client
        self.events = []
        self.process = subprocess.Popen(
            [sys.executable, __file__, client, json.dumps(config), str(pause_s), *topics],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin
        self._reader = threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True)
        self._reader.start()


def _confluent(config: dict[str, Any], topics: list[str], pause_s: float, stop: threading.Event) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({**config, "enable.auto.commit": False})
    consumer.subscribe(
        topics,
        on_assign=lambda c, tps: emit("assigned", partitions=partitions(tps)),
        on_revoke=lambda c, tps: emit("revoked", partitions=partitions(tps)),
    )
    while not stop.is_set():
        batch = [m for m in consumer.consume(num_messages=BATCH, timeout=0.2) if not m.error()]
        for m in batch:
            emit("record", topic=m.topic(), partition=m.partition(), offset=m.offset())
        if batch:
            time.sleep(pause_s)
            try:
                consumer.commit(asynchronous=False)
            except confluent_kafka.KafkaException as error:
                emit("error", error=f"commit: {error}")
    consumer.close()


def _kafka_python(config: dict[str, Any], topics: list[str], pause_s: float, stop: threading.Event) -> None:
    import kafka
    from kafka.errors import KafkaError

    class Listener(kafka.ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned):
            emit("assigned", partitions=partitions(assigned))

        def on_partitions_revoked(self, revoked):
            emit("revoked", partitions=partitions(revoked))

    assignors = {
        "range": kafka.coordinator.assignors.range.RangePartitionAssignor,
        "roundrobin": kafka.coordinator.assignors.roundrobin.RoundRobinPartitionAssignor,
        "sticky": kafka.coordinator.assignors.sticky.sticky_assignor.StickyPartitionAssignor,
    }
    strategy = [assignors[name] for name in config.pop("partition_assignment_strategy", ["range"])]
    consumer = kafka.KafkaConsumer(**config, partition_assignment_strategy=strategy, enable_auto_commit=False)
    consumer.subscribe(topics, listener=Listener())
    while not stop.is_set():
        batch = [m for records in consumer.poll(timeout_ms=200, max_records=BATCH).values() for m in records]
        for m in batch:
            emit("record", topic=m.topic, partition=m.partition, offset=m.offset)
        if batch:
            time.sleep(pause_s)
            try:
                consumer.commit()
            except KafkaError as error:
                emit("error", error=f"commit: {error!r}")
    consumer.close()


def main() -> None:
    client, config, pause_s, *topics = sys.argv[1:]
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    consume = {"confluent": _confluent, "kafka-python": _kafka_python}[client]
    consume(json.loads(config), topics, float(pause_s), stop)
    emit("closed")


if __name__ == "__main__":
    main()
