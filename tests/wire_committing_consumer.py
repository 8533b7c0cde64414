"""A real classic consumer that commits after every batch, in a child process that can crash.

``CommittingConsumer(client, config, topics)`` runs this file with ``client`` "confluent"
(librdkafka through confluent-kafka) or "kafka-python", ``config`` that client's settings
(auto-commit off). The child polls a batch, reports each record, processes the batch for
``pause_s``, then commits it synchronously and reports the outcome (``committed``, or an
``error``): a test that kills it mid-way most likely kills it with one batch processed but not
committed. After ``hold()`` it never commits again: the next batch it reads stays processed
and uncommitted until it is killed, for a test that needs exactly that. Events arrive as
``ConsumerProcess`` events do (``record``, ``assigned``, ``revoked``, ``committed``, ``error``,
``closed``).
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

    def hold(self) -> None:
        """From the next batch on, process and never commit (until killed)."""
        self._stdin.write("hold\n")
        self._stdin.flush()

    def refused_records(self) -> set[tuple[int, int]]:
        """(partition, offset) of every batch whose commit was refused: its records are the next
        owner's to read again, as from Kafka (a commit refused during a rebalance is not retried)."""
        refused: set[tuple[int, int]] = set()
        batch: list[tuple[int, int]] = []
        for event in list(self.events):
            if event["event"] == "record":
                batch.append((event["partition"], event["offset"]))
            elif event["event"] in ("committed", "error"):
                if event["event"] == "error":
                    refused.update(batch)
                batch = []
        return refused


def _hold_or_pause(pause_s: float, hold: threading.Event, stop: threading.Event) -> bool:
    """Process a batch: ``pause_s``, or until stopped once held; whether to commit it after."""
    if hold.is_set():
        stop.wait()
        return False
    time.sleep(pause_s)
    return True


def _confluent(
    config: dict[str, Any], topics: list[str], pause_s: float, hold: threading.Event, stop: threading.Event
) -> None:
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
        if batch and _hold_or_pause(pause_s, hold, stop):
            try:
                consumer.commit(asynchronous=False)
                emit("committed")
            except confluent_kafka.KafkaException as error:
                emit("error", error=f"commit: {error}")
    consumer.close()


def _kafka_python(
    config: dict[str, Any], topics: list[str], pause_s: float, hold: threading.Event, stop: threading.Event
) -> None:
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
        if batch and _hold_or_pause(pause_s, hold, stop):
            try:
                consumer.commit()
                emit("committed")
            except KafkaError as error:
                emit("error", error=f"commit: {error!r}")
    consumer.close()


def main() -> None:
    client, config, pause_s, *topics = sys.argv[1:]
    hold, stop = threading.Event(), threading.Event()

    def read_commands() -> None:
        for line in sys.stdin:  # "hold"; the end of input stops
            if line.strip() == "hold":
                hold.set()
        stop.set()

    threading.Thread(target=read_commands, daemon=True).start()
    consume = {"confluent": _confluent, "kafka-python": _kafka_python}[client]
    consume(json.loads(config), topics, float(pause_s), hold, stop)
    emit("closed")


if __name__ == "__main__":
    main()
