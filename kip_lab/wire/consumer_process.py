"""A real confluent-kafka consumer in a child process: one that can crash.

``ConsumerProcess(config, topics)`` starts ``python -m kip_lab.wire.consumer_process`` with a
librdkafka consumer of ``config`` (``group.protocol``: ``consumer`` for KIP-848, ``classic``;
``"share": True`` for a KIP-932 ``ShareConsumer`` that acknowledges each record implicitly)
subscribed to ``topics``. Its events — ``assigned``, ``revoked``, ``lost`` (with partitions),
``record`` (topic, partition, offset, value), ``error``, ``closed`` — arrive in ``events``.
``close()`` closes the consumer, which leaves the group; ``kill()`` is a crash (SIGKILL): no
leave, so the coordinator only learns of it when the member's session times out. A child process
is what makes the crash real: an in-process consumer always leaves when it is destroyed.

The child prints one JSON line per event and closes cleanly on SIGTERM or when its stdin closes.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from typing import IO, Any


def emit(kind: str, **fields: Any) -> None:
    print(json.dumps({"event": kind, **fields}), flush=True)


def partitions(items: Any) -> list[list]:
    return sorted([tp.topic, tp.partition] for tp in items)


class ConsumerProcess:
    """A real confluent-kafka consumer in a child process: its
    events arrive as dicts in ``events``; ``close()`` leaves the group, ``kill()`` crashes it."""

    def __init__(self, config: dict[str, Any], topics: list[str]) -> None:
        self.name = config.get("client.id", "consumer")
        self.events: list[dict[str, Any]] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kip_lab.wire.consumer_process", json.dumps(config), *topics],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None  # both are pipes (subprocess.PIPE)
        self._stdin = stdin
        self._reader = threading.Thread(target=self._read, args=(stdout,), daemon=True)
        self._reader.start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def assignment(self) -> list[tuple[str, int]]:
        """What the consumer owns now, by its own rebalance callbacks (not a share consumer's)."""
        owned: set[tuple[str, int]] = set()
        for event in list(self.events):
            if event["event"] == "assigned":
                owned |= {tuple(tp) for tp in event["partitions"]}
            elif event["event"] in ("revoked", "lost"):
                owned -= {tuple(tp) for tp in event["partitions"]}
        return sorted(owned)

    def records(self) -> set[tuple[str, int, int]]:
        """(topic, partition, offset) of every record it has received."""
        return {(e["topic"], e["partition"], e["offset"]) for e in list(self.events) if e["event"] == "record"}

    def close(self, timeout_s: float = 20.0) -> None:
        """Stop polling and close the consumer (which leaves the group); wait for the process."""
        if self.process.poll() is None:
            self._stdin.close()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def kill(self) -> None:
        """SIGKILL: the process dies without leaving the group."""
        self.process.kill()
        self.process.wait(5)


def main() -> None:
    config = json.loads(sys.argv[1])
    topics = sys.argv[2:]
    share = config.pop("share", False)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=_stop_at_end_of_input, args=(stop,), daemon=True).start()
    if share:
        _consume_shared(config, topics, stop)
    else:
        _consume(config, topics, stop)
    emit("closed")


def _stop_at_end_of_input(stop: threading.Event) -> None:
    sys.stdin.read()
    stop.set()


def _consume(config: dict[str, Any], topics: list[str], stop: threading.Event) -> None:
    """A consumer group member (KIP-848 or classic): its rebalance callbacks are events too."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(config)
    consumer.subscribe(
        topics,
        on_assign=lambda c, tps: emit("assigned", partitions=partitions(tps)),
        on_revoke=lambda c, tps: emit("revoked", partitions=partitions(tps)),
        on_lost=lambda c, tps: emit("lost", partitions=partitions(tps)),
    )
    emit("started")
    while not stop.is_set():
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            emit("error", error=str(message.error()))
            continue
        value = message.value()
        emit(
            "record",
            topic=message.topic(),
            partition=message.partition(),
            offset=message.offset(),
            value=value.decode() if value is not None else None,
        )
    consumer.close()


def _consume_shared(config: dict[str, Any], topics: list[str], stop: threading.Event) -> None:
    """A share group member (KIP-932): each poll returns a batch, acknowledged implicitly."""
    import confluent_kafka

    consumer = confluent_kafka.ShareConsumer(config)
    consumer.subscribe(topics)
    emit("started")
    while not stop.is_set():
        for message in consumer.poll(0.2):
            if message.error():
                emit("error", error=str(message.error()))
                continue
            emit("record", topic=message.topic(), partition=message.partition(), offset=message.offset())
    consumer.close()


if __name__ == "__main__":
    main()
