"""Scenario templates: named functions that build a whole Lab run (a ``Scenario``) from a few parameters.

A sweep varies a template's parameters over a grid. Each template declares its parameters as a
pydantic model (so a bad value is refused with the field's name before anything runs) and turns
one set of them into a ``Scenario`` — the same data a scenario file holds — so that any run of a
sweep can be written out and replayed with ``kip-lab run``.

Protocols: a member of a consumer-group template is written by the builder registered for the
group's ``protocol`` in ``PROTOCOLS`` — ``consumer`` (KIP-848), ``eager`` and ``cooperative``
(the classic protocol, KIP-429); a protocol is offered only once the Lab can run it. Share
groups (KIP-932) have their own template, ``share_lock_timeouts`` (protocol ``share``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kip_lab.assignors import BUILTIN_ASSIGNORS
from kip_lab.coordinator import CoordinatorConfig
from kip_lab.lab.actions import MAX_PARTITIONS, MAX_RECORDS
from kip_lab.scenarios import Scenario
from kip_lab.scenarios.model import MAX_MEMBERS, FieldError

TOPIC = "events"
SWEEP_SNAPSHOT_EVERY = 1_000_000  # sweeps never seek back: time-travel snapshots would be pure cost


@dataclass(frozen=True)
class Protocol:
    """How a group protocol's members are written in a scenario, and the assignors it takes."""

    name: str
    assignors: tuple[str, ...]  # the first is the default
    member: Callable[[GroupParams, str], dict[str, Any]]  # (params, assignor) -> a scenario member
    description: str


def _member(params: GroupParams) -> dict[str, Any]:
    callbacks = {"on_partitions_revoked_ms": params.revoke_ms, "on_partitions_assigned_ms": params.assign_ms}
    return {"subscribed_topic_names": [TOPIC], "enable_auto_commit": params.auto_commit, "callbacks": callbacks}


def _consumer_member(params: GroupParams, assignor: str) -> dict[str, Any]:
    return {**_member(params), "server_assignor": assignor}


def _classic_member(params: GroupParams, assignor: str) -> dict[str, Any]:
    return {
        **_member(params),
        "group_protocol": "classic",
        "partition_assignment_strategy": [assignor],
        "session_timeout_ms": params.session_timeout_ms,
    }


PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        Protocol("consumer", tuple(BUILTIN_ASSIGNORS), _consumer_member, "KIP-848: server-side assignor, heartbeats"),
        Protocol("eager", ("range", "roundrobin", "sticky"), _classic_member, "classic, eager: all revoke, rejoin"),
        Protocol("cooperative", ("cooperative-sticky",), _classic_member, "classic, cooperative (KIP-429)"),
    )
}
SHARE_PROTOCOL: Final = "share"  # KIP-932 share groups: the share_lock_timeouts template


def member_names(count: int, prefix: str = "m") -> list[str]:
    """m000, m001, ...: sortable names, so that member order is the same everywhere."""
    width = max(3, len(str(count - 1)))
    return [f"{prefix}{i:0{width}d}" for i in range(count)]


class NetworkParams(BaseModel):
    """What every template takes: how many members, how many partitions of the one topic, the network."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    members: int = Field(5, ge=1, le=MAX_MEMBERS, description="members in the group")
    partitions: int = Field(10, ge=1, le=MAX_PARTITIONS, description="partitions of the one topic")
    latency_ms: float = Field(1.0, ge=0, description="one-way latency of every client-broker link")
    jitter_ms: float = Field(0.0, ge=0, description="latency drawn uniformly in latency_ms +- jitter_ms")
    loss: float = Field(0.0, ge=0, lt=1, description="probability that a message is dropped")

    def lab(self) -> dict[str, Any]:
        low, high = max(0.0, self.latency_ms - self.jitter_ms), self.latency_ms + self.jitter_ms
        latency = {"kind": "uniform", "low": low, "high": high} if self.jitter_ms else {"ms": self.latency_ms}
        return {"link": {"latency": latency, "drop_probability": self.loss}, "snapshot_every": SWEEP_SNAPSHOT_EVERY}


class GroupParams(NetworkParams):
    """A consumer group under one of ``PROTOCOLS``."""

    protocol: str = Field("consumer", description="the group protocol: one of PROTOCOLS")
    assignor: str | None = Field(None, description="the protocol's assignor (default: the protocol's first)")
    session_timeout_ms: int = Field(45_000, gt=0, description="how long a silent member stays in the group")
    auto_commit: bool = Field(True, description="members commit offsets every 5 s")
    revoke_ms: int = Field(0, ge=0, description="how long on_partitions_revoked takes (commit, flush)")
    assign_ms: int = Field(0, ge=0, description="how long on_partitions_assigned takes (restore state)")
    settle_timeout_ms: int = Field(120_000, gt=0, description="give up waiting for stability this long after")
    fidelity: Literal["kafka", "kip"] = Field(
        "kafka", description="the coordinator's profile: Apache Kafka's behaviour, or the KIP text's (kip)"
    )

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, value: str) -> str:
        if value not in PROTOCOLS:
            raise ValueError(f"unknown protocol {value!r}; the Lab runs: {', '.join(PROTOCOLS)}")
        return value

    @model_validator(mode="after")
    def _known_assignor(self) -> GroupParams:
        allowed = PROTOCOLS[self.protocol].assignors
        if self.assignor is not None and self.assignor not in allowed:
            message = f"{self.assignor!r} is not one of the {self.protocol} protocol's: {allowed}"
            raise FieldError(("assignor",), message)
        return self

    def resolved_assignor(self) -> str:
        return self.assignor or PROTOCOLS[self.protocol].assignors[0]

    def scenario(self, name: str, seed: int, events: list[dict[str, Any]]) -> Scenario:
        """The scenario of this group with these timed events, run until stable after the last one."""
        defaults = CoordinatorConfig()
        coordinator = {
            "session_timeout_ms": self.session_timeout_ms,
            "min_session_timeout_ms": min(defaults.min_session_timeout_ms, self.session_timeout_ms),
            "max_session_timeout_ms": max(defaults.max_session_timeout_ms, self.session_timeout_ms),
            "fidelity": self.fidelity,
        }
        member = PROTOCOLS[self.protocol].member(self, self.resolved_assignor())
        last = max((e["at_ms"] for e in events), default=0)
        return Scenario.model_validate(
            {
                "name": name,
                "seed": seed,
                "lab": {**self.lab(), "coordinator": coordinator},
                "topics": [{"name": TOPIC, "partitions": self.partitions}],
                "members": {name: dict(member) for name in member_names(self.members)},
                "events": events,
                "run": {"until_stable": True, "timeout_ms": last + self.settle_timeout_ms},
            }
        )


class RollingBounce(GroupParams):
    """One member at a time closes (a graceful leave) and its replacement starts ``restart_after_ms`` later."""

    bounces: int | None = Field(None, ge=1, description="how many members are bounced (default: all)")
    first_bounce_at_ms: int = Field(15_000, ge=0)
    bounce_every_ms: int = Field(10_000, gt=0, description="between one member's close and the next's")
    restart_after_ms: int = Field(3_000, ge=0)

    @model_validator(mode="after")
    def _bounces_fit(self) -> RollingBounce:
        if self.bounces is not None and self.bounces > self.members:
            raise FieldError(("bounces",), f"bounces ({self.bounces}) cannot exceed members ({self.members})")
        return self


class MemberFailures(GroupParams):
    """``failures`` members fail (crash, close or lose their link), optionally coming back."""

    failures: int = Field(1, ge=1)
    fault: Literal["crash", "close", "partition_link"] = "crash"
    first_failure_at_ms: int = Field(15_000, ge=0)
    failure_every_ms: int = Field(0, ge=0, description="0: all fail at once")
    restart_after_ms: int | None = Field(None, ge=0, description="crash/close: restart this long after; None: never")
    outage_ms: int = Field(60_000, gt=0, description="partition_link: how long the link is cut")

    @model_validator(mode="after")
    def _failures_fit(self) -> MemberFailures:
        if self.failures > self.members:
            raise FieldError(("failures",), f"failures ({self.failures}) cannot exceed members ({self.members})")
        if self.fault == "partition_link" and self.restart_after_ms is not None:
            raise FieldError(("restart_after_ms",), "a cut link heals by itself (outage_ms); restarts are for crashes")
        return self


def rolling_bounce(params: RollingBounce, seed: int) -> Scenario:
    events = []
    for i, member in enumerate(member_names(params.members)[: params.bounces or params.members]):
        at = params.first_bounce_at_ms + i * params.bounce_every_ms
        events.append({"at_ms": at, "action": "close", "member": member})
        events.append({"at_ms": at + params.restart_after_ms, "action": "restart", "member": member})
    return params.scenario("rolling_bounce", seed, events)


def member_failures(params: MemberFailures, seed: int) -> Scenario:
    events: list[dict[str, Any]] = []
    for i, member in enumerate(member_names(params.members)[: params.failures]):
        at = params.first_failure_at_ms + i * params.failure_every_ms
        if params.fault == "partition_link":
            events.append({"at_ms": at, "action": "partition_link", "member": member, "duration_ms": params.outage_ms})
            continue
        events.append({"at_ms": at, "action": params.fault, "member": member})
        if params.restart_after_ms is not None:
            events.append({"at_ms": at + params.restart_after_ms, "action": "restart", "member": member})
    events.sort(key=lambda e: e["at_ms"])  # stable: same-time events keep member order
    return params.scenario("member_failures", seed, events)


class ShareLockTimeouts(NetworkParams):
    """Share consumers (KIP-932) read records of which some are poison; what the application does with a
    poison record decides how often it is redelivered: ``hang`` holds it past the acquisition lock
    (``record_lock_duration_ms``), ``release`` gives it back, ``reject`` archives it at once, ``none``
    processes it like any other. After ``delivery_count_limit`` deliveries a record is archived."""

    protocol: Literal["share"] = Field(SHARE_PROTOCOL, description="share groups (KIP-932)")
    members: int = Field(3, ge=1, le=MAX_MEMBERS, description="share consumers")
    partitions: int = Field(1, ge=1, le=MAX_PARTITIONS)
    acknowledgement: Literal["implicit", "explicit"] = "explicit"
    failure: Literal["none", "hang", "release", "reject"] = "hang"
    poison_every: int = Field(10, ge=1, description="every k-th record is poison")
    records: int = Field(50, ge=1, le=MAX_RECORDS, description="records produced to each partition")
    batch_size: int = Field(10, ge=1, description="records per produce")
    record_lock_duration_ms: int = Field(5_000, ge=1, description="group.share.record.lock.duration.ms")
    delivery_count_limit: int = Field(5, ge=2, le=10, description="group.share.delivery.count.limit")
    hang_ms: int = Field(60_000, ge=0, description="hang: how long processing a poison record takes")
    max_poll_records: int = Field(10, ge=1)
    run_ms: int = Field(120_000, gt=0, description="how long the run lasts")

    @model_validator(mode="after")
    def _explicit_for_failures(self) -> ShareLockTimeouts:
        if self.acknowledgement == "implicit" and self.failure in ("release", "reject"):
            raise FieldError(
                ("failure",), f"{self.failure} is an explicit acknowledgement; use acknowledgement: explicit"
            )
        return self


def share_lock_timeouts(params: ShareLockTimeouts, seed: int) -> Scenario:
    failures = []
    if params.failure != "none":
        failures = [{"value_regex": "poison-.*", "action": params.failure, "hang_ms": params.hang_ms}]
    consumer = {
        "subscribed_topic_names": [TOPIC],
        "acknowledgement": params.acknowledgement,
        "max_poll_records": params.max_poll_records,
        "failures": failures,
    }
    produce = {
        "at_ms": 1_000,
        "action": "produce_share_records",
        "topic": TOPIC,
        "count": params.records,
        "batch_size": params.batch_size,
        "poison_every": params.poison_every,
    }
    share = {
        "record_lock_duration_ms": params.record_lock_duration_ms,
        "delivery_count_limit": params.delivery_count_limit,
    }
    return Scenario.model_validate(
        {
            "name": "share_lock_timeouts",
            "seed": seed,
            "lab": {**params.lab(), "share": share},
            "topics": [{"name": TOPIC, "partitions": params.partitions, "produce_rate_per_s": 0}],
            "share_members": {name: dict(consumer) for name in member_names(params.members, "s")},
            "events": [produce],
            "run": {"until_ms": params.run_ms},
        }
    )


@dataclass(frozen=True)
class Template:
    """A named template: its parameter model and the function that builds the scenario."""

    name: str
    params: type[GroupParams] | type[ShareLockTimeouts]
    build: Callable[[Any, int], Scenario]

    def scenario(self, params: dict[str, Any], seed: int) -> Scenario:
        return self.build(self.params.model_validate(params), seed)


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template(name="rolling_bounce", params=RollingBounce, build=rolling_bounce),
        Template(name="member_failures", params=MemberFailures, build=member_failures),
        Template(name="share_lock_timeouts", params=ShareLockTimeouts, build=share_lock_timeouts),
    )
}
