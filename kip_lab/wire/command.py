"""``kip-lab serve``: a Lab on the wall clock with Kafka's wire protocol in front of it.

The Lab is a scenario's (its topics, simulated members and timed faults, which then happen in
real time), or an empty one with the topics ``--topic`` names. Real clients connect to the
bootstrap address printed at start. Ctrl-C (or ``--duration``) stops it; it then prints each
group with its members and, with ``--trace``, writes the trace.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.runtime.collector import serve_until
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


# Named options of ``serve``: what a design review varies, each the Lab setting(s) it sets. A
# session timeout or heartbeat interval also widens its allowed range to include the value (the
# coordinator refuses a value outside [min, max], as Kafka's config validation does).
NAMED_SETTINGS: dict[str, tuple[str, ...]] = {
    "session_timeout_ms": ("coordinator.session_timeout_ms",),
    "heartbeat_interval_ms": ("coordinator.heartbeat_interval_ms",),
    "initial_rebalance_delay_ms": ("coordinator.initial_rebalance_delay_ms",),
    "assignors": ("coordinator.assignors",),
    "share_record_lock_duration_ms": ("share.record_lock_duration_ms",),
    "share_delivery_count_limit": ("share.delivery_count_limit",),
    "share_auto_offset_reset": ("share.auto_offset_reset",),
    "fidelity": ("coordinator.fidelity", "share.fidelity"),
}
RANGES = {
    "coordinator.session_timeout_ms": ("coordinator.min_session_timeout_ms", "coordinator.max_session_timeout_ms"),
    "coordinator.heartbeat_interval_ms": (
        "coordinator.min_heartbeat_interval_ms",
        "coordinator.max_heartbeat_interval_ms",
    ),
}


def parse_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with KEY a dotted path into the Lab's config; VALUE read as JSON when it is
    JSON (``10000``, ``true``), else as text (``kip``)."""
    key, equals, raw = text.partition("=")
    if not equals or not key:
        raise ValueError(f"--set {text!r}: expected KEY=VALUE, e.g. coordinator.session_timeout_ms=10000")
    try:
        return key.strip(), json.loads(raw)
    except json.JSONDecodeError:
        return key.strip(), raw


def chosen_settings(options: argparse.Namespace) -> list[tuple[str, Any]]:
    """(dotted key, value) for each ``--set KEY=VALUE`` of ``serve``'s parsed ``options``, then
    for each named option given."""
    chosen = [parse_setting(text) for text in options.set]
    for option, keys in NAMED_SETTINGS.items():
        if getattr(options, option) is not None:
            chosen += [(key, getattr(options, option)) for key in keys]
    return chosen


def lab_config(settings: list[tuple[str, Any]]) -> LabConfig:
    """The Lab's config with ``settings`` ((dotted key, value)) applied, validated as a whole."""
    values = LabConfig().model_dump()
    for key, value in settings:
        for bound, pick in zip(RANGES.get(key, ()), (min, max), strict=False):
            _put(values, bound, pick(_get(values, bound), value) if isinstance(value, int) else _get(values, bound))
        _put(values, key, value)
    try:
        return LabConfig.model_validate(values)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        message = str(problem["msg"]).removeprefix("Value error, ")
        raise ValueError(f"setting {where}: {message} (got {problem.get('input')!r})") from None


def _get(values: dict[str, Any], key: str) -> Any:
    node: Any = values
    for part in key.split("."):
        node = node[part]
    return node


def _put(values: dict[str, Any], key: str, value: Any) -> None:
    """Set a dotted ``key``; an unknown one is an error naming the keys there are."""
    *path, last = key.split(".")
    node: Any = values
    model: type[BaseModel] = LabConfig
    for depth, part in enumerate([*path, last]):
        fields = model.model_fields
        if part not in fields:
            known = ", ".join(sorted(fields))
            where = ".".join([*path, last][:depth]) or "the Lab's config"
            raise ValueError(f"setting {key}: {where} has no {part!r}; it has {known}")
        annotation = fields[part].annotation
        if depth < len(path):
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                raise ValueError(f"setting {key}: {'.'.join(path[: depth + 1])} is a value, not a group of settings")
            model, node = annotation, node[part]
    node[last] = value


def build(scenario_lab: Lab | None, topics: list[str], seed: int, config: LabConfig | None = None) -> Lab:
    if scenario_lab is not None and config is not None:
        raise ValueError("settings (--set and the named options) apply to an empty Lab; a scenario sets its own")
    lab = scenario_lab if scenario_lab is not None else Lab(seed=seed, config=config)
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
        serve_until(stop, duration_s)  # the process only serves: its collections go on a clock
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
