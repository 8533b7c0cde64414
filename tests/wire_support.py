"""Helpers for the wire front door's tests: real consumers in child processes, trace queries."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

kio = pytest.importorskip("kio", reason="the wire front door needs kio (pip install 'kip-lab[wire]')")

from kip_lab.events import EventKind, HandlerResult  # noqa: E402
from kip_lab.wire.client import RawClient  # noqa: E402
from kip_lab.wire.consumer_process import ConsumerProcess  # noqa: E402

__all__ = ["ConsumerProcess", "RawClient", "record_batch"]


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.05) -> Any:
    """Poll ``condition`` until it is truthy; fail the test naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(every_s)


def consumed(consumers: dict[str, ConsumerProcess]) -> set[Any]:
    """Every record any of ``consumers`` has received so far (a record read twice counts once)."""
    return set().union(*(c.records() for c in consumers.values()))


def handler_records(lab: Any, api: str | None = None) -> list[dict[str, Any]]:
    """The coordinator records of every handler result in the trace (optionally of one API's)."""
    out = []
    for event in lab.trace.of_type(HandlerResult):
        if api is None or event.body.origin == api:
            out.extend(event.body.records)
    return out


def messages(lab: Any, kind: EventKind, actor: str | None = None, api: str | None = None) -> list[Any]:
    """Message events of ``kind`` (sent/delivered/dropped), optionally from ``actor`` and of ``api``."""
    return [
        e
        for e in lab.trace
        if e.kind is kind and (actor is None or e.body.source == actor) and (api is None or e.body.api == api)
    ]


def group_members(lab: Any, group_id: str) -> dict[str, Any]:
    """client id -> the coordinator's member (KIP-848 group) right now."""
    group = lab.coordinator.groups.get(group_id)
    return {m.client_id: m for m in group.members.values()} if group else {}


def coordinator_assignment_history(lab: Any) -> list[dict[str, set[tuple[str, int]]]]:
    """The coordinator's view of who owns what, after each CurrentMemberAssignment record, in log
    order (member id -> set of (topic id, partition)); a tombstone removes the member."""
    owned: dict[str, set[tuple[str, int]]] = {}
    history = []
    for event in lab.trace.of_type(HandlerResult):
        for record in event.body.records:
            if record["key"]["type"] != "ConsumerGroupCurrentMemberAssignmentKey":
                continue
            member = record["key"]["member_id"]
            if record["value"] is None:
                owned.pop(member, None)
            else:
                owned[member] = {
                    (tp["topic_id"], p) for tp in record["value"].get("topic_partitions", []) for p in tp["partitions"]
                }
            history.append({m: set(v) for m, v in owned.items()})
    return history


def classic_generations(lab: Any, group_id: str) -> list[tuple[int, dict[str, set[tuple[str, int]]]]]:
    """Each generation the classic group stored (its GroupMetadata record), in log order, with
    client id -> the partitions the leader's SyncGroup assigned that member."""
    import json

    out = []
    for record in handler_records(lab):
        if record["key"]["type"] != "GroupMetadataKey" or record["key"].get("group") != group_id or not record["value"]:
            continue
        value = record["value"]
        members = {}
        for member in value.get("members", []):
            assignment = member.get("assignment") or ""
            parsed = json.loads(assignment) if assignment else {"assigned_partitions": {}}
            members[member.get("client_id", "")] = {
                (topic, p) for topic, parts in parsed["assigned_partitions"].items() for p in parts
            }
        out.append((value["generation"], members))
    return out


def record_batch(
    count: int, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False
) -> bytes:
    """A v2 record batch of ``count`` records (values ``v0``, ``v1``...), written by kafka-python's
    batch builder: with a producer id, epoch and first sequence number for an idempotent producer."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for n in range(count):
        builder.append(n, timestamp=None, key=None, value=f"v{n}".encode(), headers=[])
    return bytes(builder.build())
