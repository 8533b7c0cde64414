"""Scenario templates: named functions that build a whole Lab run (a ``Scenario``) from a few parameters.

A sweep varies a template's parameters over a grid. Each template declares its parameters as a
pydantic model (so a bad value is refused with the field's name before anything runs) and turns
one set of them into a ``Scenario`` — the same data a scenario file holds — so that any run of a
sweep can be written out and replayed with ``kip-lab run``.

Protocols: a member of a template group is written by the builder registered for the group's
``protocol`` in ``PROTOCOLS``; a protocol is offered only once the Lab can run it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kip_lab.assignors import RANGE_ASSIGNOR_NAME, UNIFORM_ASSIGNOR_NAME
from kip_lab.coordinator import CoordinatorConfig
from kip_lab.scenarios import Scenario
from kip_lab.scenarios.model import FieldError

TOPIC = "events"
SWEEP_SNAPSHOT_EVERY = 1_000_000  # sweeps never seek back: time-travel snapshots would be pure cost


@dataclass(frozen=True)
class Protocol:
    """How a group protocol's members are written in a scenario, and the assignors it takes."""

    name: str
    assignors: tuple[str, ...]  # the first is the default
    member: Callable[[TemplateParams, str], dict[str, Any]]  # (params, assignor) -> a scenario member


def _consumer_member(params: TemplateParams, assignor: str) -> dict[str, Any]:
    return {
        "subscribed_topic_names": [TOPIC],
        "server_assignor": assignor,
        "enable_auto_commit": params.auto_commit,
    }


PROTOCOLS: dict[str, Protocol] = {
    "consumer": Protocol(
        name="consumer", assignors=(UNIFORM_ASSIGNOR_NAME, RANGE_ASSIGNOR_NAME), member=_consumer_member
    ),
}


def member_names(count: int) -> list[str]:
    """m000, m001, ...: sortable names, so that member order is the same everywhere."""
    width = max(3, len(str(count - 1)))
    return [f"m{i:0{width}d}" for i in range(count)]


class TemplateParams(BaseModel):
    """What every template takes: the group, its protocol and the network."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    protocol: str = Field("consumer", description="the group protocol: one of PROTOCOLS")
    assignor: str | None = Field(None, description="the protocol's assignor (default: the protocol's first)")
    members: int = Field(5, ge=1, le=100_000, description="members in the group")
    partitions: int = Field(10, ge=1, le=1_000_000, description="partitions of the one topic")
    latency_ms: float = Field(1.0, ge=0, description="one-way latency of every client-broker link")
    jitter_ms: float = Field(0.0, ge=0, description="latency drawn uniformly in latency_ms +- jitter_ms")
    loss: float = Field(0.0, ge=0, lt=1, description="probability that a message is dropped")
    session_timeout_ms: int = Field(45_000, gt=0, description="how long a silent member stays in the group")
    auto_commit: bool = Field(True, description="members commit offsets every 5 s")
    settle_timeout_ms: int = Field(120_000, gt=0, description="give up waiting for stability this long after")

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, value: str) -> str:
        if value not in PROTOCOLS:
            raise ValueError(f"unknown protocol {value!r}; the Lab runs: {', '.join(PROTOCOLS)}")
        return value

    @model_validator(mode="after")
    def _known_assignor(self) -> TemplateParams:
        allowed = PROTOCOLS[self.protocol].assignors
        if self.assignor is not None and self.assignor not in allowed:
            message = f"{self.assignor!r} is not one of the {self.protocol} protocol's: {allowed}"
            raise FieldError(("assignor",), message)
        return self

    def resolved_assignor(self) -> str:
        return self.assignor or PROTOCOLS[self.protocol].assignors[0]

    def scenario(self, name: str, seed: int, events: list[dict[str, Any]]) -> Scenario:
        """The scenario of this group with these timed events, run until stable after the last one."""
        low, high = max(0.0, self.latency_ms - self.jitter_ms), self.latency_ms + self.jitter_ms
        latency = {"kind": "uniform", "low": low, "high": high} if self.jitter_ms else {"ms": self.latency_ms}
        defaults = CoordinatorConfig()
        coordinator = {
            "session_timeout_ms": self.session_timeout_ms,
            "min_session_timeout_ms": min(defaults.min_session_timeout_ms, self.session_timeout_ms),
            "max_session_timeout_ms": max(defaults.max_session_timeout_ms, self.session_timeout_ms),
        }
        protocol = PROTOCOLS[self.protocol]
        member = protocol.member(self, self.resolved_assignor())
        last = max((e["at_ms"] for e in events), default=0)
        return Scenario.model_validate(
            {
                "name": name,
                "seed": seed,
                "lab": {
                    "link": {"latency": latency, "drop_probability": self.loss},
                    "coordinator": coordinator,
                    "snapshot_every": SWEEP_SNAPSHOT_EVERY,
                },
                "topics": [{"name": TOPIC, "partitions": self.partitions}],
                "members": {name: dict(member) for name in member_names(self.members)},
                "events": events,
                "run": {"until_stable": True, "timeout_ms": last + self.settle_timeout_ms},
            }
        )


class RollingBounce(TemplateParams):
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


class MemberFailures(TemplateParams):
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
    events = []
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


@dataclass(frozen=True)
class Template:
    """A named template: its parameter model and the function that builds the scenario."""

    name: str
    params: type[TemplateParams]
    build: Callable[[Any, int], Scenario]

    def scenario(self, params: dict[str, Any], seed: int) -> Scenario:
        return self.build(self.params.model_validate(params), seed)


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template(name="rolling_bounce", params=RollingBounce, build=rolling_bounce),
        Template(name="member_failures", params=MemberFailures, build=member_failures),
    )
}
