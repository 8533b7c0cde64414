"""``kip-lab serve``: a Lab on the wall clock with Kafka's wire protocol in front of it.

The Lab is a scenario's (its topics, simulated members and timed faults, which then happen in
real time), or an empty one with the topics ``--topic`` names. Real clients connect to the
bootstrap address printed at start. Ctrl-C (or ``--duration``) stops it; it then prints each
group with its members and, with ``--trace``, writes the trace.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path

from kip_lab.lab.lab import Lab
from kip_lab.wire.server import serve

OK, INVALID = 0, 2


def parse_topic(text: str) -> tuple[str, int]:
    """``NAME:PARTITIONS`` (``NAME`` alone: one partition)."""
    name, _, count = text.partition(":")
    if not name:
        raise ValueError(f"--topic {text!r}: expected NAME or NAME:PARTITIONS")
    try:
        partitions = int(count) if count else 1
    except ValueError:
        raise ValueError(f"--topic {text!r}: PARTITIONS must be a whole number, got {count!r}") from None
    if partitions < 1:
        raise ValueError(f"--topic {text!r}: PARTITIONS must be at least 1")
    return name, partitions


def build(scenario_lab: Lab | None, topics: list[str], seed: int) -> Lab:
    lab = scenario_lab if scenario_lab is not None else Lab(seed=seed)
    for text in topics:
        name, partitions = parse_topic(text)
        if name in lab.cluster:
            raise ValueError(f"--topic {name}: the scenario already has this topic")
        lab.create_topic(name, partitions, produce_rate_per_s=0)
    return lab


def run(lab: Lab, *, host: str, port: int, duration_s: float | None, trace: Path | None, quiet: bool) -> int:
    """Serve ``lab`` until Ctrl-C or ``duration_s``; print what the groups look like at the end."""
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="%(name)s: %(message)s")
    try:
        server = serve(lab, port=port, host=host)
    except OSError as error:
        print(f"kip-lab serve: cannot listen on {host}:{port}: {error.strerror or error}", file=sys.stderr)
        return INVALID
    brokers = ", ".join(f"{name} on {port}" for name, port in sorted(server.ports.items()))
    print(f"kip-lab: serving Kafka's wire protocol; bootstrap.servers={server.bootstrap_servers} ({brokers})")
    if host not in ("127.0.0.1", "::1", "localhost"):
        print(f"kip-lab: listening on {host}, not loopback only: anyone who can reach it can use the Lab")
    print("kip-lab: Ctrl-C stops the server", flush=True)
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        stop.wait(duration_s)
    finally:
        signal.signal(signal.SIGINT, previous)
        server.stop()
    print(summary(lab))
    if trace is not None:
        lab.trace.save_jsonl(trace)
        print(f"trace: {len(lab.trace)} events written to {trace}")
    return OK


def summary(lab: Lab) -> str:
    """Each group, its state and epoch, and each member with its client id and partitions."""
    coordinator = lab.coordinator
    lines = [f"ran to {lab.now} ms in {lab.step_count} steps"]
    for group_id, group in sorted(coordinator.groups.items()):
        lines.append(f"consumer group {group_id}: {group.state.value}, epoch {group.group_epoch}")
        for member in sorted(group.members.values(), key=lambda m: m.client_id):
            parts = sorted(f"{lab.world.partition_name((t, p))}" for t, ps in member.assigned.items() for p in ps)
            lines.append(
                f"  {member.client_id or '?'} {member.member_id} epoch {member.member_epoch}: {', '.join(parts)}"
            )
    for group_id, classic_group in sorted(coordinator.classic_groups.items()):
        lines.append(f"classic group {group_id}: {classic_group.state.value}, generation {classic_group.generation_id}")
        for member_id, classic_member in sorted(classic_group.members.items()):
            lines.append(f"  {classic_member.client_id or '?'} {member_id}")
    for group_id, share_group in sorted(coordinator.share_groups.items()):
        lines.append(f"share group {group_id}: {share_group.state.value}, epoch {share_group.group_epoch}")
        for share_member in sorted(share_group.members.values(), key=lambda m: m.client_id):
            lines.append(
                f"  {share_member.client_id or '?'} {share_member.member_id} epoch {share_member.member_epoch}"
            )
    violations = lab.invariants.violations
    lines.append("invariants: all held" if not violations else f"invariants: VIOLATED ({len(violations)})")
    return "\n".join(lines)
