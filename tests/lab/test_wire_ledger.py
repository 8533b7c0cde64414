"""The delivery ledger covers real clients: what the front door's Fetch answers sent each one.

Two real confluent-kafka consumers (classic, range) join a group, then 120 records are produced
and read, each consumer committing after every batch. Then c1 is held (it will process its next
batch and never commit it), one more record is produced to a partition c1 owns, and once c1 has
it, c1 is killed (SIGKILL: no leave, no commit); c3 joins in its place and reads that record
again: exactly one re-read. A real client's
processing is what it was sent (``kip_lab.lab.observed``), so once every record is read and
committed the ledger must count exactly the records the programs report receiving: processed
(re-reads included), re-processed (the re-reads), none skipped, and the ledger's invariants hold.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.wire_committing_consumer import CommittingConsumer
from tests.wire_support import consumed, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")

from kip_lab.events import PositionSet  # noqa: E402
from kip_lab.lab.lab import Lab  # noqa: E402
from kip_lab.lab.ledger import build_ledger  # noqa: E402
from kip_lab.lab.metrics import compute_metrics  # noqa: E402
from kip_lab.wire import serve  # noqa: E402

PARTITIONS = 4
RECORDS = 120
PER_PARTITION = RECORDS // PARTITIONS


def settings(bootstrap: str, name: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "g",
        "client.id": name,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6_000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "range",
    }


def stable_with(names: set[str]):
    def check(lab: Lab) -> bool:
        clients = [lab.world.clients.get(name) for name in names]
        return lab.is_stable() and all(c is not None and c.acknowledged for c in clients)

    return check


def committed(lab: Lab) -> dict[int, int]:
    return {p: v.offset for (_, p), v in lab.coordinator.offsets.get("g", {}).items()}


@pytest.mark.slow
def test_the_ledger_counts_what_real_consumers_received_across_a_crash():
    lab = Lab(seed=5)
    lab.create_topic("orders", PARTITIONS, produce_rate_per_s=0)
    with serve(lab) as server:
        bootstrap = server.bootstrap_servers
        consumers = {
            "c1": CommittingConsumer("confluent", settings(bootstrap, "c1"), ["orders"], pause_s=0.2),
            "c2": CommittingConsumer("confluent", settings(bootstrap, "c2"), ["orders"], pause_s=0.2),
        }
        try:
            wait_until(lambda: server.call(stable_with({"c1", "c2"})), 40, "c1 and c2 to own their partitions")
            producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": "producer"})
            for n in range(RECORDS):
                producer.produce("orders", value=f"record-{n}", partition=n % PARTITIONS)
            assert producer.flush(15) == 0
            wait_until(lambda: len(consumed(consumers)) == RECORDS, 40, "every record read once")
            wait_until(
                lambda: server.call(committed) == dict.fromkeys(range(PARTITIONS), PER_PARTITION), 20, "all committed"
            )
            consumers["c1"].hold()
            held = consumers["c1"].assignment()[0][1]  # a partition c1 owns
            producer.produce("orders", value="held", partition=held)
            assert producer.flush(15) == 0
            wait_until(lambda: ("orders", held, PER_PARTITION) in consumers["c1"].records(), 20, "c1 to read it")
            consumers["c1"].kill()  # processed, never committed
            consumers["c3"] = CommittingConsumer("confluent", settings(bootstrap, "c3"), ["orders"], pause_s=0.2)
            everything = {**dict.fromkeys(range(PARTITIONS), PER_PARTITION), held: PER_PARTITION + 1}
            wait_until(lambda: server.call(committed) == everything, 40, "every record committed")
            wait_until(lambda: server.call(stable_with({"c2", "c3"})), 30, "c2 and c3 to own the partitions")
            violations = server.call(lambda lab: list(lab.invariants.violations))
        finally:
            for consumer in consumers.values():
                consumer.kill()

    received = Counter(
        (e["partition"], e["offset"]) for c in consumers.values() for e in list(c.events) if e["event"] == "record"
    )
    assert set(received) == {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)} | {(held, PER_PARTITION)}
    metrics = compute_metrics(lab.trace)
    assert metrics["records_processed"] == sum(received.values())
    assert metrics["records_reprocessed"] == sum(n - 1 for n in received.values())
    assert metrics["records_reprocessed"] == 1  # the held record, never committed: c3 reads it again
    assert received[(held, PER_PARTITION)] == 2
    assert metrics["records_skipped"] == 0
    assert violations == []
    assert build_ledger(lab.trace).found == []
    # Each real member started each partition it took at the group's committed offset, or at the
    # log start before anything was committed: the reasons inferred from the wire.
    starts = [e.body for e in lab.trace.of_type(PositionSet)]
    assert {s.reason for s in starts} <= {"committed", "earliest"}
    assert {e.actor for e in lab.trace.of_type(PositionSet)} >= {"c1", "c2"}
