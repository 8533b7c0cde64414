"""Time the share-partition leader and the share coordinator at the sizes KIP-932 cares about.

Run ``python -m benchmarks.bench_share`` (``--quick`` for small sizes, ``--runs N``). Cases:

* acquire + accept of 1,000,000 records in batches of 500 on one share-partition, every
  acknowledgement written through the persister to a share coordinator (target: at least
  200,000 records/s, i.e. at most 5,000 ms);
* replaying a 100,000-record ``__share_group_state`` log into a fresh share coordinator
  (target: at most 2,000 ms).

Only the measured loop is timed; building logs happens outside. Every run is checked (all
records acknowledged and durable; the replayed state equals the live one), so a fast but
wrong run cannot PASS. In full mode the exit status is 1 when a case misses its target.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import BenchRow, median_benchmark_main, time_runs
from kip_lab.protocol.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    DeliveryState,
    InitializeShareGroupStateRequest,
    InitializeStateData,
    InitializeStatePartition,
    StateBatch,
    WriteShareGroupStateRequest,
    WriteStateData,
    WriteStatePartition,
)
from kip_lab.runtime.log import PartitionLog
from kip_lab.runtime.scheduler import Scheduler
from kip_lab.share.config import SharePartitionConfig
from kip_lab.share.coordinator import ShareCoordinator
from kip_lab.share.partition import SharePartition
from kip_lab.share.persister import CoordinatorPersister
from kip_lab.share.topic_log import TopicLog

GROUP, TOPIC = "bench-group", "bench-topic"


@dataclass(frozen=True)
class BenchCase:
    """``prepare`` builds the inputs (untimed) and returns the timed callable; it checks its own result."""

    case: str
    prepare: Callable[[], Callable[[], None]]
    target_ms: float | None


def _initialize(coordinator: ShareCoordinator, partition: int, start_offset: int) -> None:
    coordinator.initialize_share_group_state(
        InitializeShareGroupStateRequest(
            group_id=GROUP,
            topics=[
                InitializeStateData(
                    topic_id=TOPIC,
                    partitions=[
                        InitializeStatePartition(partition=partition, state_epoch=0, start_offset=start_offset)
                    ],
                )
            ],
        )
    )


def acquire_accept(records: int, batch: int) -> Callable[[], None]:
    """One share-partition with ``records`` records in log batches of ``batch``; one member drains it."""
    log = TopicLog(TOPIC, 0)
    for _ in range(records // batch):
        log.append(batch)
    coordinator = ShareCoordinator()
    _initialize(coordinator, 0, 0)
    config = SharePartitionConfig(partition_max_record_locks=batch)
    sp = SharePartition.load(
        GROUP, TOPIC, 0, log, config=config, scheduler=Scheduler(), persister=CoordinatorPersister(coordinator)
    )
    accept = [AcknowledgeType.ACCEPT]

    def run() -> None:
        while True:
            acquired = sp.acquire("member-1", batch)
            if not acquired:
                break
            for r in acquired:
                ack = AcknowledgementBatch(
                    first_offset=r.first_offset, last_offset=r.last_offset, acknowledge_types=accept
                )
                sp.acknowledge("member-1", [ack])
        reloaded = SharePartition.load(  # what the durable state means: a new leader's SPSO
            GROUP, TOPIC, 0, log, config=config, scheduler=Scheduler(), persister=CoordinatorPersister(coordinator)
        )
        if sp.spso != records or reloaded.spso != records:
            raise AssertionError(f"not every record was acknowledged durably: SPSO {sp.spso}, {reloaded.spso} reloaded")

    return run


def share_state_log(records: int, partitions: int = 100) -> tuple[PartitionLog, ShareCoordinator]:
    """A state-topic log of ``records`` records: ``partitions`` share-partitions, each written in turn with
    a release of one offset and, every fifth write, an SPSO move (Kafka's default snapshot cadence)."""
    coordinator = ShareCoordinator()
    for partition in range(partitions):
        _initialize(coordinator, partition, 0)
    spso = [0] * partitions
    write = 0
    while len(coordinator.log) < records:
        partition = write % partitions
        if write // partitions % 5 == 4:
            spso[partition] += 10
            data = WriteStatePartition(partition=partition, state_epoch=0, leader_epoch=0, start_offset=spso[partition])
        else:
            offset = spso[partition] + write // partitions % 5
            state = StateBatch(
                first_offset=offset, last_offset=offset, delivery_state=DeliveryState.AVAILABLE, delivery_count=1
            )
            data = WriteStatePartition(
                partition=partition, state_epoch=0, leader_epoch=0, start_offset=-1, state_batches=[state]
            )
        coordinator.write_share_group_state(
            WriteShareGroupStateRequest(group_id=GROUP, topics=[WriteStateData(topic_id=TOPIC, partitions=[data])])
        )
        write += 1
    return coordinator.log, coordinator


def replay(records: int) -> Callable[[], None]:
    log, live = share_state_log(records)

    def run() -> None:
        if ShareCoordinator.from_log(log).states != live.states:
            raise AssertionError("the replayed state differs from the live one")

    return run


def _cases(quick: bool) -> list[BenchCase]:
    if quick:
        return [
            BenchCase("acquire+accept 20,000 records, batches of 500", lambda: acquire_accept(20_000, 500), None),
            BenchCase("replay a 2,000-record share-state log", lambda: replay(2_000), None),
        ]
    return [
        BenchCase("acquire+accept 1,000,000 records, batches of 500", lambda: acquire_accept(1_000_000, 500), 5_000.0),
        BenchCase("replay a 100,000-record share-state log", lambda: replay(100_000), 2_000.0),
    ]


def time_case(case: BenchCase, runs: int) -> BenchRow:
    """Median wall time of ``runs`` timed calls, each on freshly prepared inputs."""
    return time_runs(case.case, case.prepare, runs, case.target_ms)


def run_benchmarks(quick: bool = False, runs: int | None = None) -> list[BenchRow]:
    runs = runs if runs is not None else (1 if quick else 3)
    return [time_case(case, runs) for case in _cases(quick)]


def main(argv: list[str] | None = None) -> int:
    return median_benchmark_main(__doc__, argv, run_benchmarks)


if __name__ == "__main__":
    sys.exit(main())
