"""Time the classic group protocol and online migration at the coordinator.

* a classic rebalance from scratch: 500 members through MEMBER_ID_REQUIRED, the parked
  JoinGroup barrier, and the leader's SyncGroup — target <= 1 s;
* online upgrade: the first ConsumerGroupHeartbeat converting a Stable 500-member classic group
  (decoding every embedded subscription and assignment, writing the consumer group) — target
  <= 1 s.

Run ``python -m benchmarks.bench_classic`` (``--quick`` for small sizes, no targets). Full mode
exits 1 when a target is missed. Every run checks its result, so a fast but wrong path fails.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import benchmark_parser, verdict
from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.coordinator.bootstrap import stable_classic_group_log
from kip_lab.protocol.classic_group import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription

PARTITIONS = 5_000


def classic_rebalance(members: int) -> float:
    cluster = ClusterMetadata()
    cluster.create_topic("t", PARTITIONS)
    gc = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=0), cluster)
    metadata = ConsumerProtocolSubscription(version=3, topics=["t"]).encode()
    protocols = [JoinGroupRequestProtocol(name="range", metadata=metadata)]
    start = time.perf_counter()
    ids = []
    for i in range(members):
        request = JoinGroupRequest(group_id="g", session_timeout_ms=45_000, protocols=protocols)
        ids.append(gc.join_group(request, ref=i).response.member_id)
        assert gc.join_group(request.model_copy(update={"member_id": ids[-1]}), ref=i).response is None
    joined = {d.ref: d.response for fired in gc.advance(0) for d in fired.deferred}
    leader = next(r for r in joined.values() if r.members)
    for member_id in ids:
        if member_id != leader.member_id:
            gc.sync_group(SyncGroupRequest(group_id="g", generation_id=1, member_id=member_id), ref=member_id)
    assignments = [
        SyncGroupRequestAssignment(
            member_id=m.member_id,
            assignment=ConsumerProtocolAssignment(
                version=3, assigned_partitions=[("t", p) for p in range(i, PARTITIONS, members)]
            ).encode(),
        )
        for i, m in enumerate(leader.members)
    ]
    result = gc.sync_group(
        SyncGroupRequest(group_id="g", generation_id=1, member_id=leader.member_id, assignments=assignments), ref="L"
    )
    elapsed = time.perf_counter() - start
    assert len(joined) == members and len(result.deferred) == members - 1
    assert gc.classic_groups["g"].state.value == "Stable"
    return elapsed


def online_upgrade(members: int) -> float:
    cluster = ClusterMetadata()
    cluster.create_topic("t", PARTITIONS)
    assignment = {f"m{i:04d}": {"t": list(range(i, PARTITIONS, members))} for i in range(members)}
    log = stable_classic_group_log(cluster, "g", 7, assignment)
    gc = GroupCoordinator.from_log(log, CoordinatorConfig(), cluster)
    request = ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="new",
        member_epoch=0,
        rebalance_timeout_ms=60_000,
        subscribed_topic_names=["t"],
        topic_partitions=[],  # Kafka refuses a join without an empty list ("TopicPartitions must be empty")
    )
    start = time.perf_counter()
    result = gc.consumer_group_heartbeat(request)
    elapsed = time.perf_counter() - start
    assert result.response.error_code.name == "NONE"
    assert len(gc.groups["g"].members) == members + 1 and "g" not in gc.classic_groups
    return elapsed


def main(argv: list[str] | None = None) -> int:
    args = benchmark_parser(__doc__).parse_args(argv)
    members = 50 if args.quick else 500
    repeats = 1 if args.quick else 3
    rebalance_s = statistics.median(classic_rebalance(members) for _ in range(repeats))
    upgrade_s = statistics.median(online_upgrade(members) for _ in range(repeats))
    rows = [
        (f"classic rebalance from scratch, {members} members x {PARTITIONS} partitions", rebalance_s),
        (f"online upgrade of a Stable {members}-member classic group (first consumer join)", upgrade_s),
    ]
    print(f"{'case':<80} {'median':>10}  target     verdict")
    status = 0
    for case, seconds in rows:
        ok = None if args.quick else seconds <= 1.0
        status |= ok is False
        print(f"{case:<80} {seconds * 1000:>7,.0f} ms  <= 1,000 ms  {verdict(ok)}")
    return int(status)


if __name__ == "__main__":
    raise SystemExit(main())
