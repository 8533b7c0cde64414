"""Time the group coordinator on the paths a real cluster exercises most.

* steady-state heartbeats: a Stable 1,000-member group, every member heartbeating with
  nothing changed (the hot path of a coordinator) — target >= 20,000 per second;
* failover: rebuilding a 1,000-member group from its log and running the load duties —
  target <= 1 s.

Run ``python -m benchmarks.bench_coordinator`` (``--quick`` for small sizes, no targets).
Full mode exits 1 when a target is missed.
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
from kip_lab.coordinator.bootstrap import stable_group_log
from kip_lab.protocol import ConsumerGroupHeartbeatRequest, Errors


def stable_group(members: int, topics: int, partitions: int) -> tuple[GroupCoordinator, ClusterMetadata]:
    """A Stable group of ``members`` over ``topics`` x ``partitions``, round-robin assigned."""
    cluster = ClusterMetadata()
    names = [f"topic-{t}" for t in range(topics)]
    for name in names:
        cluster.create_topic(name, partitions)
    member_ids = [f"member-{i:05d}" for i in range(members)]
    assignment: dict[str, dict[str, list[int]]] = {m: {name: [] for name in names} for m in member_ids}
    slot = 0
    for name in names:
        for p in range(partitions):
            assignment[member_ids[slot % members]][name].append(p)
            slot += 1
    log = stable_group_log(cluster, "bench", 5, assignment)
    return GroupCoordinator.from_log(log, CoordinatorConfig(), cluster), cluster


def bench_heartbeats(members: int, rounds: int) -> tuple[float, int]:
    gc, _ = stable_group(members, topics=10, partitions=max(members, 100))
    requests = [
        ConsumerGroupHeartbeatRequest(group_id="bench", member_id=m, member_epoch=5)
        for m in sorted(gc.groups["bench"].members)
    ]
    count = 0
    start = time.perf_counter()
    for _ in range(rounds):
        for request in requests:
            result = gc.consumer_group_heartbeat(request)
            if result.response.error_code is not Errors.NONE or result.batches:
                raise AssertionError(f"steady heartbeat changed something: {result}")
            count += 1
        gc.advance(1_000)
    elapsed = time.perf_counter() - start
    return count / elapsed, count


def bench_rebuild(members: int, repeats: int) -> tuple[float, int]:
    gc, cluster = stable_group(members, topics=10, partitions=max(members, 100))
    # Give the log some history beyond the bootstrap: every member heartbeats, some leave and rejoin.
    for member_id in sorted(gc.groups["bench"].members)[: members // 10]:
        gc.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest(group_id="bench", member_id=member_id, member_epoch=-1)
        )
    times = []
    for _ in range(repeats):
        log = gc.log.truncated(gc.log.batch_count)
        start = time.perf_counter()
        rebuilt = GroupCoordinator.from_log(log, CoordinatorConfig(), cluster)
        times.append(time.perf_counter() - start)
        assert len(rebuilt.groups["bench"].members) == members - members // 10
    return statistics.median(times), len(gc.log)


def main(argv: list[str] | None = None) -> int:
    args = benchmark_parser(__doc__).parse_args(argv)
    members = 50 if args.quick else 1_000
    rate, count = bench_heartbeats(members, rounds=2 if args.quick else 20)
    rebuild_s, records = bench_rebuild(members, repeats=1 if args.quick else 5)
    rows = [
        (
            f"steady heartbeats, {members}-member Stable group ({count} heartbeats)",
            f"{rate:,.0f}/s",
            None if args.quick else rate >= 20_000,
            ">= 20,000/s",
        ),
        (
            f"rebuild {members}-member group from its log ({records} records) + load duties",
            f"{rebuild_s * 1000:,.1f} ms",
            None if args.quick else rebuild_s <= 1.0,
            "<= 1,000 ms",
        ),
    ]
    print(f"{'case':<80} {'result':>14}  target        verdict")
    for case, value, ok, target in rows:
        print(f"{case:<80} {value:>14}  {target:<12}  {verdict(ok)}")
    return 0 if all(ok is not False for _, _, ok, _ in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
