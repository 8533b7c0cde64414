"""Deployment templates: the situations a design review asks about, built from the few numbers that matter.

A template turns a handful of parameters ("30 members, static, rolled one every 20 s") into a
whole ``Scenario``: the topic, the members with their settings, the timed events and how long to
run. Each is a function here and a YAML form::

    from kip_lab.scenarios.templates import rolling_restart
    scenario = rolling_restart(members=30, static=True)

    # review.yaml
    name: our-rollout
    template: rolling_restart
    params: {members: 30, static: true}
    lab: {link: {latency: {ms: 5}}}          # optional: merged over what the template builds
    expect: {no_invariant_violations: true}  # optional, as in any scenario

The parameters are validated like any scenario field: an unknown or bad one is refused with its
name (``review.yaml:4: params.membres: rolling_restart has no parameter 'membres' (did you mean
'members'?) ...``). A template builds the topics, members and events, so a file that uses one
gives none of those itself; it may set ``lab`` (merged key by key over the template's),
``run``, ``expect``, ``seed`` and ``description``.

Every template shares the group's settings (``Deployment``): how many members, the protocol
(``consumer``: KIP-848; ``classic``: the classic protocol, cooperative-sticky by default), static
membership (``group.instance.id``), the session timeout, ``max.poll.interval.ms``, assignment
batching (``group.consumer.assignment.interval.ms``) and the fidelity profile. The first change
happens at ``first_event_ms``, once the group has formed, so a run's cost can be counted from it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kip_lab.assignors import BUILTIN_ASSIGNORS
from kip_lab.assignors.client import client_assignor
from kip_lab.contract import checked
from kip_lab.coordinator import CoordinatorConfig
from kip_lab.coordinator.config import ConsumerGroupMigrationPolicy
from kip_lab.errors import KipLabError
from kip_lab.lab.actions import MAX_PARTITIONS
from kip_lab.scenarios.model import MAX_MEMBERS, FieldError, Scenario

SERVER_ASSIGNORS = tuple(BUILTIN_ASSIGNORS)  # the coordinator's, for protocol: consumer
DEFAULT_CLASSIC_ASSIGNOR = "cooperative-sticky"


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Deployment(_Params):
    """The group every template starts from: its members, their protocol and settings, the coordinator's."""

    members: int = Field(6, ge=1, le=MAX_MEMBERS, description="consumers in the group when the run starts")
    partitions: int = Field(12, ge=1, le=MAX_PARTITIONS, description="partitions of the one topic")
    topic: str = Field("orders", min_length=1, description="the topic's name")
    protocol: Literal["consumer", "classic"] = Field(
        "consumer", description="consumer: KIP-848 (group.protocol=consumer); classic: JoinGroup/SyncGroup"
    )
    assignor: str | None = Field(
        None,
        description="consumer: the server assignor (uniform, range); classic: the client assignor "
        f"(default {DEFAULT_CLASSIC_ASSIGNOR})",
    )
    static: bool = Field(False, description="each member has a group.instance.id (static membership)")
    session_timeout_ms: int = Field(45_000, gt=0, description="how long a silent member stays in the group")
    max_poll_interval_ms: int = Field(300_000, gt=0, description="max.poll.interval.ms (the rebalance timeout)")
    assignment_interval_ms: int = Field(
        0, ge=0, description="group.consumer.assignment.interval.ms: assignment batching (0: off; Kafka 4.3: 1000)"
    )
    revoke_ms: int = Field(0, ge=0, description="how long on_partitions_revoked takes (commit, flush)")
    assign_ms: int = Field(0, ge=0, description="how long on_partitions_assigned takes (restore state)")
    first_event_ms: int = Field(30_000, ge=0, description="when the first change happens (the group has formed)")
    settle_timeout_ms: int = Field(180_000, gt=0, description="give up waiting for a stable group this long after")
    fidelity: Literal["kafka", "kip"] = Field("kafka", description="the coordinator's profile")

    @model_validator(mode="after")
    def _known_assignor(self) -> Deployment:
        if self.assignor is None:
            return self
        if self.protocol == "consumer" and self.assignor not in SERVER_ASSIGNORS:
            raise FieldError(("assignor",), f"{self.assignor!r} is not a server assignor; have: {SERVER_ASSIGNORS}")
        if self.protocol == "classic":
            try:
                client_assignor(self.assignor)
            except KipLabError as exc:
                raise FieldError(("assignor",), str(exc)) from None
        return self

    def member_names(self, count: int | None = None, start: int = 0) -> list[str]:
        """m00, m01, ...: sortable names, wide enough for every member the run will have."""
        width = max(2, len(str(self.members + self.added() - 1)))
        return [f"m{i:0{width}d}" for i in range(start, start + (self.members if count is None else count))]

    def added(self) -> int:
        """Members that join during the run (beside ``members``)."""
        return 0

    def member(self, name: str, protocol: str | None = None, assignor: str | None = None) -> dict[str, Any]:
        """One member's scenario settings, under ``protocol`` with ``assignor`` (default: the group's)."""
        if protocol is None:
            protocol, assignor = self.protocol, self.assignor
        member: dict[str, Any] = {
            "subscribed_topic_names": [self.topic],
            "max_poll_interval_ms": self.max_poll_interval_ms,
            "callbacks": {"on_partitions_revoked_ms": self.revoke_ms, "on_partitions_assigned_ms": self.assign_ms},
        }
        if self.static:
            member["instance_id"] = f"{name}-instance"
        if protocol == "classic":
            member["group_protocol"] = "classic"
            member["partition_assignment_strategy"] = [assignor or DEFAULT_CLASSIC_ASSIGNOR]
            member["session_timeout_ms"] = self.session_timeout_ms
        elif assignor is not None:
            member["server_assignor"] = assignor
        return member

    def coordinator(self) -> dict[str, Any]:
        defaults = CoordinatorConfig()
        return {
            "fidelity": self.fidelity,
            "session_timeout_ms": self.session_timeout_ms,
            "min_session_timeout_ms": min(defaults.min_session_timeout_ms, self.session_timeout_ms),
            "max_session_timeout_ms": max(defaults.max_session_timeout_ms, self.session_timeout_ms),
            "assignment_interval_ms": self.assignment_interval_ms,
        }

    def scenario_data(
        self,
        name: str,
        description: str,
        events: list[dict[str, Any]],
        members: dict[str, dict[str, Any]] | None = None,
        coordinator: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The scenario (as data) of this group with these events, run until stable after the last one."""
        if members is None:
            members = {name: self.member(name) for name in self.member_names()}
        last = max((e["at_ms"] for e in events), default=self.first_event_ms)
        return {
            "name": name,
            "description": description,
            "lab": {"coordinator": {**self.coordinator(), **(coordinator or {})}},
            "topics": [{"name": self.topic, "partitions": self.partitions}],
            "members": members,
            "events": sorted(events, key=lambda e: e["at_ms"]),  # stable: same-time events keep their order
            "run": {"until_stable": True, "timeout_ms": last + self.settle_timeout_ms},
        }

    def group_words(self) -> str:
        """The group in words: '6 static KIP-848 consumers on orders (12 partitions)'."""
        kind = "KIP-848" if self.protocol == "consumer" else f"classic ({self.assignor or DEFAULT_CLASSIC_ASSIGNOR})"
        membership = "static" if self.static else "dynamic"
        return f"{self.members} {membership} {kind} consumers of {self.topic} ({self.partitions} partitions)"


MAX_MEMBERS_ADDED = 1_000  # a scale-out adds at most this many members


def _count_fits(field: str, count: int | None, members: int) -> None:
    if count is not None and count > members:
        raise FieldError((field,), f"{field} ({count}) cannot exceed members ({members})")


# ---------------------------------------------------------------------------- rolling restart
class RollingRestart(Deployment):
    """Members restarted one at a time, as a deployment rolls pods: each closes (commit, revoke, leave)
    and its replacement starts ``down_ms`` later — with a new member id, or as the same static member."""

    restarts: int | None = Field(None, ge=1, description="how many members are restarted (default: all)")
    restart_every_ms: int = Field(20_000, gt=0, description="from one member's close to the next one's")
    down_ms: int = Field(3_000, ge=0, description="how long a member is gone before its replacement starts")

    @model_validator(mode="after")
    def _restarts_fit(self) -> RollingRestart:
        _count_fits("restarts", self.restarts, self.members)
        return self


def _rolling_restart(p: RollingRestart) -> dict[str, Any]:
    events = []
    restarted = p.member_names()[: p.restarts or p.members]
    for i, member in enumerate(restarted):
        at = p.first_event_ms + i * p.restart_every_ms
        events += [
            {"at_ms": at, "action": "close", "member": member},
            {"at_ms": at + p.down_ms, "action": "restart", "member": member},
        ]
    how = "back as the same static member" if p.static else "back with a new member id"
    description = (
        f"A rolling restart of {p.group_words()}: {len(restarted)} restarted one every "
        f"{p.restart_every_ms / 1000:g} s from {p.first_event_ms / 1000:g} s, each {how} {p.down_ms / 1000:g} s later."
    )
    return p.scenario_data("rolling_restart", description, events)


# ---------------------------------------------------------------------------- scale out / in
class Scale(Deployment):
    """The group grows by ``by`` members (new processes join), or shrinks by ``-by`` (members close)."""

    by: int = Field(..., description="members added (positive) or removed (negative)")
    stagger_ms: int = Field(0, ge=0, description="between one member's join (or close) and the next's; 0: together")

    @model_validator(mode="after")
    def _size(self) -> Scale:
        if self.by == 0:
            raise FieldError(("by",), "0 changes nothing: give the members to add (5) or remove (-5)")
        if self.by > MAX_MEMBERS_ADDED or self.members + self.by > MAX_MEMBERS:
            raise FieldError(("by",), f"at most {MAX_MEMBERS_ADDED} added, {MAX_MEMBERS} members in all")
        if self.members + self.by < 1:
            raise FieldError(("by",), f"removing {-self.by} of {self.members} members leaves none; keep at least one")
        return self

    def added(self) -> int:
        return max(0, self.by)


def _scale(p: Scale) -> dict[str, Any]:
    members = {name: p.member(name) for name in p.member_names()}
    events = []
    if p.by > 0:
        for i, name in enumerate(p.member_names(p.by, start=p.members)):
            members[name] = {**p.member(name), "start_at_ms": p.first_event_ms + i * p.stagger_ms}
        change = f"{p.by} members join"
    else:
        for i, name in enumerate(reversed(p.member_names()[p.by :])):
            events.append({"at_ms": p.first_event_ms + i * p.stagger_ms, "action": "close", "member": name})
        change = f"{-p.by} members leave"
    spacing = "together" if p.stagger_ms == 0 else f"{p.stagger_ms / 1000:g} s apart"
    description = f"{p.group_words()}; at {p.first_event_ms / 1000:g} s {change}, {spacing}."
    data = p.scenario_data("scale", description, events, members)
    if not events:  # the joins are the change: run until stable after the last one
        data["run"]["timeout_ms"] = p.first_event_ms + max(0, p.by - 1) * p.stagger_ms + p.settle_timeout_ms
    return data


# ---------------------------------------------------------------------------- slow consumer
class SlowConsumer(Deployment):
    """``slow_members`` members stop polling for ``stall_ms`` (a long GC, a stuck batch); past
    ``max_poll_interval_ms`` the client leaves the group and rejoins when it polls again."""

    slow_members: int = Field(1, ge=1, description="members whose application stalls")
    stall_ms: int = Field(360_000, gt=0, description="how long the application does not poll")

    @model_validator(mode="after")
    def _slow_fit(self) -> SlowConsumer:
        _count_fits("slow_members", self.slow_members, self.members)
        return self


def _slow_consumer(p: SlowConsumer) -> dict[str, Any]:
    events = []
    for name in p.member_names()[: p.slow_members]:
        events += [
            {"at_ms": p.first_event_ms, "action": "pause", "member": name},
            {"at_ms": p.first_event_ms + p.stall_ms, "action": "resume", "member": name},
        ]
    misses = "misses" if p.stall_ms > p.max_poll_interval_ms else "stays within"
    description = (
        f"{p.group_words()}; at {p.first_event_ms / 1000:g} s {p.slow_members} stop polling for "
        f"{p.stall_ms / 1000:g} s, which {misses} max.poll.interval.ms ({p.max_poll_interval_ms / 1000:g} s)."
    )
    return p.scenario_data("slow_consumer", description, events)


# ---------------------------------------------------------------------------- coordinator failover
class CoordinatorFailover(Deployment):
    """``__consumer_offsets`` moves to another broker; the new coordinator rebuilds the group from its
    log. With ``joining`` members starting just before, the failover lands in the middle of a rebalance."""

    to_broker: str = Field("broker-1", description="the broker that takes over")
    joining: int = Field(0, ge=0, le=MAX_MEMBERS_ADDED, description="members that join at first_event_ms")
    failover_after_ms: int = Field(10, ge=0, description="from the joins to the failover")

    def added(self) -> int:
        return self.joining


def _coordinator_failover(p: CoordinatorFailover) -> dict[str, Any]:
    members = {name: p.member(name) for name in p.member_names()}
    for name in p.member_names(p.joining, start=p.members):
        members[name] = {**p.member(name), "start_at_ms": p.first_event_ms}
    at = p.first_event_ms + (p.failover_after_ms if p.joining else 0)
    events = [{"at_ms": at, "action": "fail_over", "to_broker": p.to_broker}]
    during = f", {p.failover_after_ms} ms after {p.joining} members join" if p.joining else ""
    description = f"{p.group_words()}; at {at / 1000:g} s the coordinator moves to {p.to_broker}{during}."
    return p.scenario_data("coordinator_failover", description, events, members)


# ---------------------------------------------------------------------------- upgrade from classic
class UpgradeFromClassic(Deployment):
    """A classic group rolled onto the consumer protocol: one member at a time closes and comes back
    speaking KIP-848; the coordinator converts the group online and serves the mixed group meanwhile.
    ``protocol`` is the protocol members start with (classic); ``upgraded`` fewer than all leaves the
    group mixed."""

    protocol: Literal["consumer", "classic"] = Field("classic", description="the members' protocol before")
    upgraded: int | None = Field(None, ge=1, description="how many members move to KIP-848 (default: all)")
    restart_every_ms: int = Field(20_000, gt=0, description="from one member's close to the next one's")
    down_ms: int = Field(3_000, ge=0, description="how long a member is gone before it returns upgraded")
    server_assignor: str | None = Field(None, description="the upgraded members' group.remote.assignor")
    migration_policy: ConsumerGroupMigrationPolicy = Field(
        ConsumerGroupMigrationPolicy.BIDIRECTIONAL, description="group.consumer.migration.policy"
    )

    @model_validator(mode="after")
    def _upgrade_fits(self) -> UpgradeFromClassic:
        if self.protocol != "classic":
            raise FieldError(("protocol",), "an upgrade from classic starts with protocol: classic")
        _count_fits("upgraded", self.upgraded, self.members)
        if self.server_assignor is not None and self.server_assignor not in SERVER_ASSIGNORS:
            raise FieldError(("server_assignor",), f"have: {SERVER_ASSIGNORS}")
        return self


def _upgrade_from_classic(p: UpgradeFromClassic) -> dict[str, Any]:
    events = []
    upgraded = p.member_names()[: p.upgraded or p.members]
    for i, name in enumerate(upgraded):
        at = p.first_event_ms + i * p.restart_every_ms
        config = p.member(name, "consumer", p.server_assignor)
        events += [
            {"at_ms": at, "action": "close", "member": name},
            {"at_ms": at + p.down_ms, "action": "restart", "member": name, "config": config},
        ]
    mixed = "" if len(upgraded) == p.members else f"; {p.members - len(upgraded)} stay classic (a mixed group)"
    description = (
        f"An upgrade of {p.group_words()} to KIP-848: {len(upgraded)} members restarted onto the consumer "
        f"protocol one every {p.restart_every_ms / 1000:g} s{mixed} (migration policy {p.migration_policy.value})."
    )
    return p.scenario_data(
        "upgrade_from_classic", description, events, coordinator={"migration_policy": p.migration_policy.value}
    )


# ---------------------------------------------------------------------------- partition burst
class PartitionBurst(Deployment):
    """Partitions added to the topic in a burst: ``adds`` operations of ``count`` partitions, ``every_ms`` apart."""

    adds: int = Field(3, ge=1, le=1_000, description="add-partitions operations")
    count: int = Field(2, ge=1, le=MAX_PARTITIONS, description="partitions each adds")
    every_ms: int = Field(1_000, ge=0, description="between two adds")


def _partition_burst(p: PartitionBurst) -> dict[str, Any]:
    events = [
        {"at_ms": p.first_event_ms + i * p.every_ms, "action": "add_partitions", "topic": p.topic, "count": p.count}
        for i in range(p.adds)
    ]
    description = (
        f"{p.group_words()}; from {p.first_event_ms / 1000:g} s, {p.adds} times {p.count} partitions are added, "
        f"{p.every_ms / 1000:g} s apart."
    )
    return p.scenario_data("partition_burst", description, events)


# ---------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Template:
    """A named template: its parameter model and the function that builds the scenario's data."""

    name: str
    params: type[Deployment]
    build: Callable[[Any], dict[str, Any]]

    def validated(self, params: Mapping[str, Any]) -> Deployment:
        """The parameters, validated; a FieldError names the first bad one (``params.<name>``)."""
        try:
            return self.params.model_validate(dict(params))
        except ValidationError as exc:
            raise self._param_error(exc) from None

    def _param_error(self, exc: ValidationError) -> FieldError:
        error = exc.errors()[0]
        loc, message = tuple(error["loc"]), error["msg"].removeprefix("Value error, ")
        ctx = error.get("ctx") or {}
        if isinstance(ctx.get("error"), FieldError):
            loc, message = ctx["error"].loc, ctx["error"].message
        elif error["type"] == "extra_forbidden":
            guess = difflib.get_close_matches(str(loc[0]), self.params.model_fields, n=1)
            hint = f" (did you mean {guess[0]!r}?)" if guess else ""
            fields = ", ".join(sorted(self.params.model_fields))
            message = f"{self.name} has no parameter {loc[0]!r}{hint}; its parameters: {fields}"
        elif error["type"] == "missing":
            message = f"{self.name} needs this parameter"
        elif error["type"] not in ("value_error", "assertion_error"):
            message += f", got {error['input']!r}"
        return FieldError(("params", *loc), message)


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template("rolling_restart", RollingRestart, _rolling_restart),
        Template("scale", Scale, _scale),
        Template("slow_consumer", SlowConsumer, _slow_consumer),
        Template("coordinator_failover", CoordinatorFailover, _coordinator_failover),
        Template("upgrade_from_classic", UpgradeFromClassic, _upgrade_from_classic),
        Template("partition_burst", PartitionBurst, _partition_burst),
    )
}
BUILT = ("topics", "members", "share_members", "events")  # what a template writes, and a file may not


def expand_template(data: Any) -> Any:
    """Scenario data with ``template``/``params`` replaced by what the template builds (other data as is).

    Called by ``Scenario``'s validation, so a file, a dict and a dump all read the same way.
    """
    if not isinstance(data, dict) or ("template" not in data and "params" not in data):
        return data
    data = dict(data)
    name, params = data.pop("template", None), data.pop("params", None) or {}
    if name is None:
        if params:
            raise FieldError(("params",), "parameters of no template: add template: <name>")
        return data
    template = TEMPLATES.get(name) if isinstance(name, str) else None
    if template is None:
        raise FieldError(("template",), f"unknown template {name!r}; templates: {', '.join(TEMPLATES)}")
    if not isinstance(params, dict):
        raise FieldError(("params",), f"the {name} template's parameters, as a mapping (members: 30, ...)")
    given = [key for key in BUILT if key in data]
    if given:
        raise FieldError(
            (given[0],), f"the {name} template builds the topics, members and events: set them through params"
        )
    built = template.build(template.validated(params))
    lab = _merged(built.pop("lab"), data.pop("lab", None) or {})
    if not data.get("description"):
        data.pop("description", None)
    return {**built, "lab": lab, **data}


def _merged(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` merged into ``base`` key by key (mappings recursively, anything else replaced)."""
    out = dict(base)
    for key, value in override.items():
        out[key] = _merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


def build(template: str, /, **params: Any) -> Scenario:
    """The scenario a template builds from ``params``; a bad parameter raises ``ScenarioError`` naming it."""
    from kip_lab.scenarios.loading import Problem, ScenarioError

    try:
        return Scenario.model_validate({"name": template, "template": template, "params": params})
    except ValidationError as exc:
        error = exc.errors()[0]
        ctx = error.get("ctx") or {}
        if isinstance(ctx.get("error"), FieldError):
            field_error = ctx["error"]
            problem = Problem(".".join(map(str, field_error.loc)), None, field_error.message)
            raise ScenarioError(template, [problem]) from None
        raise ScenarioError(template, [Problem(".".join(map(str, error["loc"])), None, error["msg"])]) from None


@checked
def rolling_restart(**params: Any) -> Scenario:
    """A rolling restart: ``RollingRestart``'s parameters (members, static, restarts, restart_every_ms, ...)."""
    return build("rolling_restart", **params)


@checked
def scale(**params: Any) -> Scenario:
    """Scale out (``by=5``) or in (``by=-5``): ``Scale``'s parameters."""
    return build("scale", **params)


@checked
def slow_consumer(**params: Any) -> Scenario:
    """Members that stop polling past ``max.poll.interval.ms``: ``SlowConsumer``'s parameters."""
    return build("slow_consumer", **params)


@checked
def coordinator_failover(**params: Any) -> Scenario:
    """The group coordinator moves to another broker: ``CoordinatorFailover``'s parameters."""
    return build("coordinator_failover", **params)


@checked
def upgrade_from_classic(**params: Any) -> Scenario:
    """A classic group rolled onto KIP-848, mixed meanwhile: ``UpgradeFromClassic``'s parameters."""
    return build("upgrade_from_classic", **params)


@checked
def partition_burst(**params: Any) -> Scenario:
    """A burst of partition adds: ``PartitionBurst``'s parameters."""
    return build("partition_burst", **params)
