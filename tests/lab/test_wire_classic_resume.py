"""Real classic consumers commit over the wire, and a restarted member resumes at the commits.

confluent-kafka (range, roundrobin, cooperative-sticky) and kafka-python (range, roundrobin,
sticky) consumers read 400 records through the front door, committing after every batch. One
is killed mid-way (no leave, no last commit) and another member joins in its place. The
outcome a user counts, from the Lab's trace and the consumers' own reports: every OffsetCommit
is accepted (but one sent at a generation the group is leaving, refused as Kafka refuses it);
every member starts each partition at exactly the offset committed last before
it (Kafka ``OffsetMetadataManager.commitOffset`` / ``fetchOffsets``); nothing is skipped; and
the only records read twice are the killed member's processed-but-uncommitted batch.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.wire_committing_consumer import BATCH, CommittingConsumer
from tests.wire_support import consumed, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")

from kip_lab.events import HandlerResult, MessageSent  # noqa: E402
from kip_lab.lab.lab import Lab  # noqa: E402
from kip_lab.protocol import Errors  # noqa: E402
from kip_lab.wire import serve  # noqa: E402

PARTITIONS = 4
RECORDS = 400
PER_PARTITION = RECORDS // PARTITIONS
SESSION_TIMEOUT_MS = 6_000
REBALANCE_REFUSALS = (Errors.ILLEGAL_GENERATION, Errors.REBALANCE_IN_PROGRESS)


def produce(bootstrap: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": "producer"})
    for n in range(RECORDS):
        producer.produce("orders", value=f"record-{n}", partition=n % PARTITIONS)
    assert producer.flush(15) == 0


def settings(client: str, strategy: str, bootstrap: str, name: str) -> dict[str, Any]:
    if client == "kafka-python":
        return {
            "bootstrap_servers": bootstrap,
            "group_id": "g",
            "client_id": name,
            "auto_offset_reset": "earliest",
            "session_timeout_ms": SESSION_TIMEOUT_MS,
            "heartbeat_interval_ms": 500,
            "partition_assignment_strategy": [strategy],
        }
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "g",
        "client.id": name,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": strategy,
    }


def committed(lab: Lab) -> dict[int, int]:
    return {p: v.offset for (_, p), v in lab.coordinator.offsets.get("g", {}).items()}


def commit_history(lab: Lab) -> dict[str, Any]:
    """From the trace: each partition's committed offsets in log order, with the step each was
    written at; each client's OffsetCommit requests (step, partitions) and the error codes of
    every OffsetCommit answer it was sent; and how many generations the group stored."""
    written: dict[int, list[tuple[int, int]]] = {}
    for e in lab.trace.of_type(HandlerResult):
        if e.body.origin == "OffsetCommit":
            for record in e.body.records:
                written.setdefault(record["key"]["partition"], []).append((e.step, record["value"]["offset"]))
    requests: dict[str, list[tuple[int, set[int]]]] = {}
    answers: dict[str, Counter] = {}
    for e in lab.trace.of_type(MessageSent):
        if e.body.api != "OffsetCommit":
            continue
        message = e.body.message
        if e.body.destination.startswith("broker-"):
            partitions = {p.partition_index for t in message.topics for p in t.partitions}
            requests.setdefault(e.body.source, []).append((e.step, partitions))
        else:
            errors = answers.setdefault(e.body.destination, Counter())
            errors.update(p.error_code for t in message.topics for p in t.partitions)
    generations = sum(
        1
        for e in lab.trace.of_type(HandlerResult)
        for record in e.body.records
        if record["key"]["type"] == "GroupMetadataKey" and record["value"]
    )
    return {"written": written, "requests": requests, "answers": answers, "generations": generations}


def committed_before(written: list[tuple[int, int]], step: int) -> int:
    """The offset committed last before ``step`` (0, the log start, when none was)."""
    earlier = [offset for at, offset in written if at < step]
    return earlier[-1] if earlier else 0


CASES = [
    ("confluent", "range"),
    ("confluent", "roundrobin"),
    ("confluent", "cooperative-sticky"),
    ("kafka-python", "range"),
    ("kafka-python", "roundrobin"),
    ("kafka-python", "sticky"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("client", "strategy"), CASES, ids=[f"{c}-{s}" for c, s in CASES])
def test_a_restarted_classic_member_resumes_exactly_at_the_committed_offsets(client, strategy):
    """c1 is killed after 40 records; c3 joins; every member's start, every commit answer and
    every record read are checked as the module docstring says."""
    lab = Lab(seed=7)
    lab.create_topic("orders", PARTITIONS, produce_rate_per_s=0)
    with serve(lab) as server:
        produce(server.bootstrap_servers)
        consumers = {
            name: CommittingConsumer(client, settings(client, strategy, server.bootstrap_servers, name), ["orders"])
            for name in ("c1", "c2")
        }
        try:
            wait_until(lambda: len(consumers["c1"].records()) >= 40, 60, "c1 to read 40 records")
            consumers["c1"].kill()
            killed_read = consumers["c1"].records()
            consumers["c3"] = CommittingConsumer(
                client, settings(client, strategy, server.bootstrap_servers, "c3"), ["orders"]
            )
            wait_until(
                lambda: (
                    len(consumed(consumers)) == RECORDS
                    and server.call(committed) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
                ),
                90,
                "every record read and committed",
            )
            history = server.call(commit_history)
            assert server.call(lambda lab: lab.invariants.violations) == []
        finally:
            for consumer in consumers.values():
                consumer.kill()

    # Every OffsetCommit accepted, but for one sent with a generation the group is leaving: a
    # cooperative member goes on committing while it rejoins, and the commit it sends after the
    # JoinGroup answer named the next generation gets ILLEGAL_GENERATION (REBALANCE_IN_PROGRESS
    # once at it, before the leader's SyncGroup) — as from Kafka (``ClassicGroup.validateOffsetCommit``).
    assert {"c2", "c3"} <= set(history["answers"]) <= {"c1", "c2", "c3"}
    accepted = 0
    for name, errors in history["answers"].items():
        assert set(errors) <= {Errors.NONE, *REBALANCE_REFUSALS}, (name, errors)
        assert sum(errors[e] for e in REBALANCE_REFUSALS) <= history["generations"], (name, errors)
        accepted += errors[Errors.NONE]
    assert accepted >= RECORDS // BATCH // 2
    refusals = [e for c in consumers.values() for e in c.events if e["event"] == "error"]
    assert all("ILLEGAL_GENERATION" in e["error"] or "REBALANCE_IN_PROGRESS" in e["error"] for e in refusals)

    # Nothing skipped: every offset of every partition was read.
    assert consumed(consumers) == {("orders", p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}

    # Each member started each partition exactly at the offset committed last before it took it.
    starts = {}
    for name, consumer in consumers.items():
        for _, p, offset in sorted(consumer.records(), key=lambda r: (r[1], r[2])):
            starts.setdefault((name, p), offset)
    for (name, p), first in starts.items():
        first_commit = next((step for step, partitions in history["requests"].get(name, ()) if p in partitions), None)
        if first_commit is None:  # killed before it committed p: it started at a committed offset
            assert name == "c1" and first in {0} | {offset for _, offset in history["written"][p]}, (name, p)
            continue
        assert first == committed_before(history["written"][p], first_commit), (name, p)
    assert any(name == "c3" for name, _ in starts), "the restarted member got partitions"

    # Read twice: only records the killed member had read (and not committed: the starts above),
    # at most the one batch it was processing.
    counts = Counter((p, o) for c in consumers.values() for _, p, o in c.records())
    reread = {tp for tp, n in counts.items() if n > 1}
    assert reread <= {(p, o) for _, p, o in killed_read}
    assert len(reread) <= BATCH


def test_the_offset_commit_version_reaches_the_coordinator():
    """The front door passes the client's OffsetCommit version to the coordinator: a generation to a
    group that does not exist is ILLEGAL_GENERATION in v8, GROUP_ID_NOT_FOUND in v9 (Kafka
    ``OffsetMetadataManager.validateOffsetCommit``, ``testOffsetCommitWithUnknownGroup``); a v8
    commit without a generation makes the simple group and is stored."""
    from kio.schema.errors import ErrorCode
    from kio.schema.offset_commit import v8, v9

    from tests.wire_support import RawClient

    def commit(version, generation: int, offset: int):
        module = {8: v8, 9: v9}[version].request
        partition = module.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=None
        )
        request = module.OffsetCommitRequest(
            group_id="missing",
            generation_id_or_member_epoch=generation,
            member_id="m",
            group_instance_id=None,
            topics=(module.OffsetCommitRequestTopic(name="orders", partitions=(partition,)),),
        )
        (topic,) = client.request(request).topics
        return [p.error_code for p in topic.partitions]

    lab = Lab(seed=1)
    lab.create_topic("orders", 1, produce_rate_per_s=0)
    with serve(lab) as server:
        client = RawClient(server.port)
        try:
            assert commit(8, 5, 10) == [ErrorCode.illegal_generation]
            assert commit(9, 5, 10) == [ErrorCode.group_id_not_found]
            assert commit(8, -1, 10) == [ErrorCode.none]
            stored = server.call(
                lambda lab: (
                    lab.coordinator.offsets["missing"][("orders", 0)].offset,
                    lab.coordinator.classic_groups["missing"].members,
                )
            )
            assert stored == (10, {})
        finally:
            client.close()
