"""Time real Kafka clients in the Lab: KIP-848 consumers joining until stable, and requests per second.

Cases:

* ``join N on P (Lab, wire)`` — N real librdkafka consumers (``group.protocol=consumer``, in this
  process) subscribe to a topic of P partitions through the wire front door; timed until the
  consumers' own assignments are disjoint, cover the topic and are balanced, and the Lab's
  coordinator holds every member at the group epoch with nothing left to revoke. N = P = 10 and
  100 (``--quick``: 3); and N = 2 and 4 on P = 4 (``--quick``: 2) beside the mock cluster.
* ``join N on 4 (librdkafka mock)`` — the same consumers against librdkafka's own mock cluster
  (``test.mock.num.brokers``; it creates a topic on first use, with 4 partitions), timed until
  the same client-side condition: the reference for the Lab's time to stable.
* ``heartbeats/s`` — the requests per second ``kip-lab serve`` (a process of its own) sustains
  when the request is a ConsumerGroupHeartbeat that crosses the Lab (a step to send it, the
  coordinator's handler, a step to answer): 200 connections, each a member heartbeating as fast
  as its answers come back, for 10 s (``--quick``: 4 connections, 2 s), measured by the load
  generator (``benchmarks.wire_load``) in another process. Over the whole run (the 200 joins
  included) and over its second half, which has a target: 10,000 per second (the full run fails
  below it). The full run measures three times, each against a fresh server, and judges the
  best second half (the others are listed): on a shared machine, other work only lowers a run.
  Beside them, the heartbeats answered per CPU-second of the server's process, and its peak
  memory.
* ``metadata/s`` — the same for Metadata, which the front door answers without the Lab.

A case that does not reach its condition within its timeout, or a Lab invariant violated, fails
the run (exit 1), as does a heartbeat rate under its target. The joins have no target: a
join's time is mostly librdkafka's and the coordinator's timers (the heartbeat interval: 1 s
for the Lab's large joins, 3 s beside the mock cluster, which is what the mock cluster uses).
Run ``python -m benchmarks.bench_wire`` (``--quick``: the small sizes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import benchmark_parser, verdict

JOIN_TIMEOUT_S = 240.0
TOPIC = "bench"


@dataclass(frozen=True)
class WireRow:
    case: str
    value: float
    unit: str
    ok: bool

    @property
    def verdict(self) -> str:
        return verdict(self.ok)


def _consumers(bootstrap: str, count: int) -> list:
    import confluent_kafka

    return [
        confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": f"bench-{n:03d}",
                "group.id": "bench",
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "log_level": 0,
            }
        )
        for n in range(count)
    ]


def _client_side_stable(consumers: list, partitions: int) -> bool:
    """The consumers' own assignments are disjoint, cover the topic and are balanced (each holds
    the floor or the ceiling of partitions / consumers): no one is still waiting for its share."""
    sizes = [len(c.assignment()) for c in consumers]
    owned = sorted(tp.partition for c in consumers for tp in c.assignment())
    low = partitions // len(consumers)
    return owned == list(range(partitions)) and all(low <= n <= -(-partitions // len(consumers)) for n in sizes)


def _join(consumers: list, partitions: int, lab_stable=None) -> float | None:
    """Seconds from subscribe until stable (client side, and the Lab's too when given); None on timeout."""
    started = time.monotonic()
    for consumer in consumers:
        consumer.subscribe([TOPIC])
    deadline = started + JOIN_TIMEOUT_S
    while time.monotonic() < deadline:
        for consumer in consumers:
            consumer.poll(0)
        if _client_side_stable(consumers, partitions) and (lab_stable is None or lab_stable()):
            return time.monotonic() - started
        time.sleep(0.02)
    return None


def _close(consumers: list) -> None:
    for consumer in consumers:
        consumer.close()


def lab_join(count: int, partitions: int, heartbeat_interval_ms: int = 1_000) -> WireRow:
    from kip_lab.coordinator import CoordinatorConfig
    from kip_lab.lab import Lab, LabConfig
    from kip_lab.wire import serve
    from kip_lab.wire.groups import settled_assignment

    coordinator = CoordinatorConfig(
        heartbeat_interval_ms=heartbeat_interval_ms, min_heartbeat_interval_ms=min(heartbeat_interval_ms, 5_000)
    )
    lab = Lab(seed=1, config=LabConfig(coordinator=coordinator))
    lab.create_topic(TOPIC, partitions, produce_rate_per_s=0)
    with serve(lab) as server:

        def lab_stable() -> bool:
            settled = server.call(lambda lab: settled_assignment(lab, "bench"))
            return settled is not None and len(settled) == count

        consumers = _consumers(server.bootstrap_servers, count)
        seconds = _join(consumers, partitions, lab_stable)
        _close(consumers)
        violations = lab.invariants.violations
    return WireRow(
        f"join {count} on {partitions} (Lab, wire, heartbeat {heartbeat_interval_ms / 1000:g} s)",
        -1 if seconds is None else seconds,
        "s",
        seconds is not None and not violations,
    )


MOCK_PARTITIONS = 4  # the partitions librdkafka's mock cluster gives a topic it creates (it has no CreateTopics)
MOCK_HEARTBEAT_INTERVAL_MS = 3_000  # the mock cluster's (two consumers there balance after one interval)


def mock_join(count: int) -> WireRow:
    import confluent_kafka

    holder = confluent_kafka.Producer({"test.mock.num.brokers": 3, "log_level": 0})  # owns the mock cluster
    holder.produce(TOPIC, b"created")  # the mock cluster creates the topic on first use
    holder.flush(15)
    metadata = holder.list_topics(TOPIC, timeout=10)
    partitions = len(metadata.topics[TOPIC].partitions)
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in metadata.brokers.values())
    consumers = _consumers(bootstrap, count)
    seconds = _join(consumers, partitions)
    _close(consumers)
    del holder
    ok = seconds is not None and partitions == MOCK_PARTITIONS
    return WireRow(f"join {count} on {partitions} (librdkafka mock)", -1 if seconds is None else seconds, "s", ok)


HEARTBEAT_TARGET_PER_S = 10_000  # with 200 connections (the full run)
HEARTBEAT_RUNS = 3  # the full run judges the best second half of three (``request_rate``)


@dataclass(frozen=True)
class RateRun:
    """One run of the load generator against a fresh ``kip-lab serve``."""

    rate: float  # answers per second over the whole run
    steady: float  # answers per second over its second half
    per_cpu_second: float  # answers per CPU-second of the server's process
    answers: int
    peak_mib: float
    ok: bool  # no error answered, and every invariant held at the end


def request_rate(connections: int, duration_s: int, api: str, target: float = 0, runs: int = 1) -> list[WireRow]:
    """Requests per second ``kip-lab serve`` answers ``connections`` connections sending ``api``
    back to back: the server and the load generator (``benchmarks.wire_load``) each in a process
    of its own, as a user runs them. Each connection is a KIP-848 member for heartbeats (one
    partition each: they join, acknowledge and heartbeat).

    Four rows: the rate over the whole run (the 200 joins included), the rate once they are done
    (the run's second half), the requests answered per CPU-second of the server's process, and
    the server's peak memory (the Lab keeps every step it took). The server must end with every
    invariant held.

    With ``runs`` above one, each run starts a fresh server and the rows are the run with the
    best second half; its row lists the others. On a shared machine other work only takes CPU
    from the server, so a run's rate is at most what the server sustains with a core of its own,
    and the best of a few runs comes closest to it (the reasoning of ``timeit``'s best of repeats).
    """
    measured = sorted((_rate_run(connections, duration_s, api) for _ in range(runs)), key=lambda r: r.steady)
    best = measured[-1]
    others = ", ".join(f"{r.steady:,.0f}" for r in measured[:-1])
    label = f"{api}/s ({connections} connections"
    half = f"{label}, second half" + (f", best of {runs} runs; the others {others}" if runs > 1 else "")
    target_text = f", target {target:,.0f}/s)" if target else ")"
    ok = all(r.ok for r in measured)
    return [
        WireRow(f"{label}, whole run)", best.rate, "req/s", ok),
        WireRow(f"{half}{target_text}", best.steady, "req/s", ok and best.steady >= target),
        WireRow(f"{api} per server CPU-second ({connections} connections)", best.per_cpu_second, "req", ok),
        WireRow(f"{api}: server peak memory ({best.answers:,} answered)", best.peak_mib, "MiB", ok),
    ]


def _rate_run(connections: int, duration_s: int, api: str) -> RateRun:
    import json
    import signal

    root = Path(__file__).resolve().parent.parent
    command = [sys.executable, "-m", "kip_lab.cli", "serve", "--port", "0", "--quiet"]
    server = subprocess.Popen(
        [*command, "--topic", f"{TOPIC}:{connections}"], stdout=subprocess.PIPE, text=True, cwd=root
    )
    try:
        port = _bootstrap_port(server)
        cpu_before = _process_cpu_seconds(server.pid)
        generator = subprocess.run(
            [sys.executable, "-m", "benchmarks.wire_load", str(port), str(connections), str(duration_s), api],
            capture_output=True,
            text=True,
            timeout=duration_s + 120,
            cwd=root,
        )
        cpu = _process_cpu_seconds(server.pid) - cpu_before
        peak_mib = _peak_memory_mib(server.pid)
        server.send_signal(signal.SIGINT)
        summary, _ = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    if generator.returncode != 0:
        raise RuntimeError(f"the load generator failed: {generator.stderr.strip()[-500:]}")
    measured = json.loads(generator.stdout)
    rate = measured["answers"] / measured["seconds"]
    second_half = measured["per_second"][duration_s // 2 :]
    return RateRun(
        rate=rate,
        steady=sum(second_half) / len(second_half),
        per_cpu_second=measured["answers"] / cpu,
        answers=measured["answers"],
        peak_mib=peak_mib,
        ok=not measured["errors"] and rate > 0 and "invariants: all held" in summary,
    )


def _bootstrap_port(server: subprocess.Popen) -> int:
    """The port ``kip-lab serve`` prints it listens on (``bootstrap.servers=HOST:PORT``)."""
    assert server.stdout is not None
    for line in server.stdout:
        if "bootstrap.servers=" in line:
            return int(line.split("bootstrap.servers=")[1].split()[0].rsplit(":", 1)[1])
    raise RuntimeError(f"kip-lab serve stopped before it listened (exit {server.wait()})")


def _peak_memory_mib(pid: int) -> float:
    """The most memory process ``pid`` has held (its peak resident set), from Linux's /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def _process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has used, from Linux's /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_benchmarks(quick: bool) -> list[WireRow]:
    rows = [lab_join(count, count) for count in ((3,) if quick else (10, 100))]
    for count in (2,) if quick else (2, 4):  # no more consumers than the mock's partitions: each gets some
        rows.append(lab_join(count, MOCK_PARTITIONS, MOCK_HEARTBEAT_INTERVAL_MS))
        rows.append(mock_join(count))
    connections, duration = (4, 2) if quick else (200, 10)
    target, runs = (0, 1) if quick else (HEARTBEAT_TARGET_PER_S, HEARTBEAT_RUNS)
    rows += request_rate(connections, duration, "heartbeats", target, runs)
    rows += request_rate(connections, duration, "metadata")
    return rows


def format_table(rows: list[WireRow]) -> str:
    width = max(len(r.case) for r in rows)
    lines = [f"{'case':<{width}}  {'value':>10}  unit   verdict"]
    lines += [f"{r.case:<{width}}  {r.value:>10.2f}  {r.unit:<5}  {r.verdict}" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = benchmark_parser(__doc__).parse_args(argv)
    try:
        import confluent_kafka  # noqa: F401
        import kio  # noqa: F401
    except ImportError as error:
        print(f"bench_wire needs the wire and test extras (kio, confluent-kafka): {error}")
        return 0
    rows = run_benchmarks(args.quick)
    print(format_table(rows))
    return 1 if any(not r.ok for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
