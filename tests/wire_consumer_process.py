"""A real confluent-kafka consumer in its own process, for the wire tests.

Run as ``python wire_consumer_process.py '<json config>' topic [topic...]``. It prints one JSON
line per event — ``assigned``/``revoked``/``lost`` (with partitions), ``record`` (partition,
offset, value), ``closed`` — and closes cleanly (leaving the group) on SIGTERM or when stdin
closes. SIGKILL is a crash: no leave, so the coordinator only learns of it by the session timeout.
``"share": true`` in the config makes it a share consumer (KIP-932) that acknowledges each record.
"""

from __future__ import annotations

import json
import signal
import sys
import threading


def emit(kind: str, **fields) -> None:
    print(json.dumps({"event": kind, **fields}), flush=True)


def partitions(items) -> list[list]:
    return sorted([tp.topic, tp.partition] for tp in items)


def main() -> None:
    import confluent_kafka

    config = json.loads(sys.argv[1])
    topics = sys.argv[2:]
    share = config.pop("share", False)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    if share:
        consumer = confluent_kafka.ShareConsumer(config)
        consumer.subscribe(topics)
    else:
        consumer = confluent_kafka.Consumer(config)
        consumer.subscribe(
            topics,
            on_assign=lambda c, tps: emit("assigned", partitions=partitions(tps)),
            on_revoke=lambda c, tps: emit("revoked", partitions=partitions(tps)),
            on_lost=lambda c, tps: emit("lost", partitions=partitions(tps)),
        )
    emit("started")
    while not stop.is_set():
        if share:
            batch = consumer.poll(0.2) or []
            for message in batch:
                if message.error():
                    emit("error", error=str(message.error()))
                    continue
                emit("record", topic=message.topic(), partition=message.partition(), offset=message.offset())
            continue
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            emit("error", error=str(message.error()))
            continue
        value = message.value().decode() if message.value() is not None else None
        emit("record", topic=message.topic(), partition=message.partition(), offset=message.offset(), value=value)
    consumer.close()
    emit("closed")


if __name__ == "__main__":
    main()
