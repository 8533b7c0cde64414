"""What a scenario says: the cluster, its topics and members, timed events, how long to run, what to expect.

Python and YAML describe the same things: a YAML file is read into plain data and validated
by these models (``Scenario.model_validate(data)``), and the JSON Schema of ``Scenario``
documents both. Every model forbids unknown fields, so a misspelt setting is an error rather
than a default silently used. Cross-references (an event naming a member that does not
exist, a step already taken by setup) are checked here too, so that ``kip-lab validate``
catches everything a run would trip over.

Events reuse the Lab's action models (``kip_lab.lab.actions``) and add *when*:

* ``at_ms: T`` — performed when the simulated clock reaches T ms (a timer step of its own;
  events due at the same time happen in file order);
* ``at_step: N`` — applied as step N of the run, the step numbered N in the trace. Steps
  are numbered from 1 and setup takes the first ``Scenario.setup_steps`` of them (one per
  topic, one per autonomous member, one per delayed start, one per ``at_ms`` event, in that
  order), so N must be larger. The runner steps the Lab until N-1 steps are done, then the
  action *is* step N. This is how a reviewer pins a scripted request to an exact point in
  the message sequence ("at step 5, A heartbeats with epoch 1"): step numbers do not depend
  on latencies, only on the order things happen in.

Scripted members (``scripted: true``) are driven only by ``send_request`` events; their
name is the member id their requests use. In a request body, ``{topic: foo, ...}`` stands
for ``{topic_id: <id of foo>, ...}`` (the id ``foo`` has when the run starts), because topic
ids are derived, not chosen, and the KIP's requests carry ids only.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Mapping
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kip_lab.clients.classic_consumer import ClassicConsumerConfig
from kip_lab.clients.classic_member_state import ClassicMemberState
from kip_lab.clients.consumer import ConsumerConfig, check_subscription
from kip_lab.clients.member_state import MemberState as ClientState
from kip_lab.clients.share_consumer import ShareConsumerConfig
from kip_lab.coordinator import CoordinatorConfig, GroupState
from kip_lab.coordinator.config import lift_fidelity
from kip_lab.errors import KipLabError
from kip_lab.lab import actions as a
from kip_lab.lab.lab import LabConfig
from kip_lab.lab.network import LinkConfig
from kip_lab.lab.scripted import REQUESTS
from kip_lab.protocol import Errors
from kip_lab.regex import InvalidRegex, compile_subscription
from kip_lab.share.config import SharePartitionConfig

MAX_BROKERS = 100
MAX_TOPICS = 1_000
MAX_MEMBERS = 1_000  # members, and share members
MAX_EVENTS = 10_000
MAX_TOTAL_PARTITIONS = 100_000  # of every topic at any moment
MAX_PRODUCED_RECORDS = 1_000_000  # by one produce_share_records event (count x repeat x partitions)
LONG_MAX = 2**63 - 1


class FieldError(KipLabError, ValueError):
    """A cross-reference problem, with the path of the field at fault.

    Raised from ``Scenario``'s own validator, whose errors pydantic reports at the root;
    the path lets ``ScenarioError`` point at the right field and line anyway.
    """

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(f"{'.'.join(map(str, loc))}: {message}")
        self.loc = loc
        self.message = message


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LabSpec(_Spec):
    """The cluster: brokers, the client-broker links, the coordinator's configs.

    ``fidelity: kip`` here is short for ``coordinator: {fidelity: kip}``.
    """

    brokers: int = Field(3, ge=1, le=MAX_BROKERS)
    link: LinkConfig = LinkConfig()
    coordinator: CoordinatorConfig = CoordinatorConfig()
    snapshot_every: int = Field(256, ge=1, le=1_000_000, description="steps between time-travel snapshots")
    share: SharePartitionConfig = Field(
        SharePartitionConfig(), description="share-partition leaders' group.share.* settings (KIP-932)"
    )

    _fidelity_shorthand = model_validator(mode="before")(lift_fidelity)

    def config(self) -> LabConfig:
        return LabConfig(
            brokers=self.brokers,
            link=self.link,
            coordinator=self.coordinator,
            snapshot_every=self.snapshot_every,
            share=self.share,
        )


class TopicSpec(_Spec):
    """A topic that exists when the run starts."""

    name: str = Field(..., min_length=1)
    partitions: int = Field(..., ge=1, le=a.MAX_PARTITIONS)
    produce_rate_per_s: float = Field(
        100.0, ge=0, le=1_000_000, description="records produced per second per partition"
    )


CLASSIC_ONLY = ("partition_assignment_strategy", "session_timeout_ms", "heartbeat_interval_ms")


class MemberSpec(ConsumerConfig):
    """A member: a new-protocol consumer (``ConsumerConfig`` fields), a classic consumer
    (``group_protocol: classic`` and ``ClassicConsumerConfig`` fields), or ``scripted: true``."""

    scripted: bool = Field(False, description="driven only by send_request events; takes no consumer settings")
    start_at_ms: int = Field(0, ge=0, description="when the consumer subscribes (0: at once)")
    group_protocol: Literal["consumer", "classic"] = Field(
        "consumer", description="consumer: KIP-848 heartbeats; classic: JoinGroup/SyncGroup (KIP-429)"
    )
    partition_assignment_strategy: list[str] | None = Field(
        None, description="classic only: client-side assignors, preferred first (default: range, cooperative-sticky)"
    )
    session_timeout_ms: int | None = Field(None, gt=0, description="classic only (default 45000)")
    heartbeat_interval_ms: int | None = Field(None, gt=0, description="classic only (default 3000)")

    @model_validator(mode="after")
    def _subscription(self) -> MemberSpec:  # replaces ConsumerConfig's check: a scripted member has no subscription
        if self.scripted:
            fields = type(self).model_fields  # a dumped spec sets every field: only non-default values count
            extra = sorted(
                name
                for name in self.model_fields_set - {"scripted"}
                if getattr(self, name) != fields[name].get_default(call_default_factory=True)
            )
            if extra:
                raise ValueError(f"a scripted member takes no consumer settings; remove {', '.join(extra)}")
            return self
        check_subscription(self.subscribed_topic_names, self.subscribed_topic_regex)
        if self.subscribed_topic_regex is not None:
            _check_regex(self.subscribed_topic_regex)
        if self.group_protocol == "consumer":
            classic = [name for name in CLASSIC_ONLY if getattr(self, name) is not None]
            if classic:
                raise ValueError(f"{', '.join(classic)}: only for group_protocol: classic")
        else:
            try:
                self.consumer_config()
            except ValidationError as error:
                raise ValueError("; ".join(e["msg"] for e in error.errors())) from None
        return self

    def consumer_config(self) -> ConsumerConfig:
        settings = self.model_dump(exclude={"scripted", "start_at_ms", "group_protocol", *CLASSIC_ONLY})
        if self.group_protocol == "classic":
            classic = {name: getattr(self, name) for name in CLASSIC_ONLY if getattr(self, name) is not None}
            return ClassicConsumerConfig.model_validate({**settings, **classic, "group_protocol": "classic"})
        return ConsumerConfig.model_validate(settings)


def _check_regex(pattern: str) -> None:
    """Refuse a pattern RE2 would refuse, now rather than when the coordinator fences the member mid-run."""
    try:
        compile_subscription(pattern)
    except InvalidRegex as exc:
        raise ValueError(str(exc)) from None


class EventTiming(_Spec):
    at_ms: int | None = Field(None, ge=0, description="performed when the clock reaches this time (ms)")
    at_step: int | None = Field(None, ge=1, description="applied as the step with this number (see Scenario)")

    @model_validator(mode="after")
    def _one_time(self) -> EventTiming:
        if (self.at_ms is None) == (self.at_step is None):
            raise ValueError("an event needs exactly one of at_ms or at_step")
        return self


EVENT_ACTIONS: tuple[type[BaseModel], ...] = (
    *a.FAULTS,
    a.SendRequest,
    a.ProduceShareRecords,
    a.ResetShareGroupOffsets,
    a.SetShareAutoOffsetReset,
)

# One event model per action: the action's own fields plus at_ms/at_step.
EVENT_MODELS: dict[str, type[BaseModel]] = {
    action.model_fields["action"].default: type(
        f"{action.__name__}Event", (EventTiming, action), {"__module__": __name__, "__doc__": action.__doc__}
    )
    for action in EVENT_ACTIONS
}
ACTION_OF: dict[type[BaseModel], type[BaseModel]] = dict(zip(EVENT_MODELS.values(), EVENT_ACTIONS, strict=True))

if TYPE_CHECKING:
    # The union is built at run time from EVENT_ACTIONS; readers narrow an event with isinstance on its action.
    Event: TypeAlias = Any
else:
    Event = Annotated[reduce(operator.or_, EVENT_MODELS.values()), Field(discriminator="action")]


def event_action(event: Any) -> Any:
    """The Lab action an event performs (the event without its timing)."""
    return ACTION_OF[type(event)].model_validate(event.model_dump(exclude={"at_ms", "at_step"}))


class RunSpec(_Spec):
    """How long to run: to a time, or until the group settles after the last event; and the run's budget.

    A run stops, with a message saying which budget was spent, when it has taken ``max_steps``
    steps or its process has grown by ``max_memory_mb``; its end (``until_ms`` or
    ``timeout_ms``) may not be later than ``max_time_ms``.
    """

    until_ms: int | None = Field(None, gt=0, description="run until the clock reaches this time")
    until_stable: bool = Field(
        False, description="run until every event has happened and the Lab is stable (Lab.is_stable)"
    )
    timeout_ms: int = Field(600_000, gt=0, description="with until_stable: give up when the clock would pass this")
    max_steps: int = Field(100_000, ge=1, le=100_000_000, description="budget: stop after this many steps")
    max_time_ms: int = Field(
        86_400_000, ge=1, le=LONG_MAX, description="budget: the latest simulated time the run may end at (ms)"
    )
    max_memory_mb: int = Field(
        1_024, ge=16, le=1_048_576, description="budget: stop when the process has grown by this much (MiB)"
    )

    @model_validator(mode="after")
    def _one_mode(self) -> RunSpec:
        if (self.until_ms is None) == (not self.until_stable):
            raise ValueError("give either until_ms or until_stable: true")
        field = "until_ms" if self.until_ms is not None else "timeout_ms"
        if self.end_ms > self.max_time_ms:
            raise FieldError(
                (field,),
                f"{self.end_ms} is later than the run's time budget, max_time_ms {self.max_time_ms}; "
                "raise run.max_time_ms to run longer",
            )
        return self

    @property
    def end_ms(self) -> int:
        """The latest time the run reaches: until_ms, or timeout_ms with until_stable."""
        return self.until_ms if self.until_ms is not None else self.timeout_ms


if TYPE_CHECKING:
    ErrorName: TypeAlias = str  # at run time: a Literal of every error name, built from Errors
else:
    ErrorName = Literal[tuple(e.name for e in Errors)]
PartitionsByTopic = dict[str, list[int]]


class Expect(_Spec):
    """Outcomes asserted after the run; each one set is checked and reported with the actual value.

    Member names are the scenario's; ``assignment``, ``member_epochs`` and ``members_in_group``
    are the coordinator's view of group ``group_id``, ``member_states`` the client's.
    """

    group_id: str = "g"
    stable: bool | None = Field(None, description="Lab.is_stable() at the end of the run")
    group_state: GroupState | None = None
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    members_in_group: list[str] | None = Field(None, description="exactly these members are in the group")
    assignment: dict[str, PartitionsByTopic] | None = Field(
        None, description="member -> topic -> partitions it may use (the coordinator's current assignment)"
    )
    member_epochs: dict[str, int] | None = None
    member_states: dict[str, ClientState | ClassicMemberState] | None = Field(
        None, description="client state of autonomous members (a classic consumer's: ClassicMemberState)"
    )
    no_invariant_violations: bool | None = None
    max_time_to_stable_ms: int | None = Field(
        None, ge=0, description="the Lab became stable at most this long after the last event"
    )
    absent_errors: list[ErrorName] | None = Field(None, description="no coordinator response carried these errors")
    messages_dropped: int | None = Field(None, ge=0, description="exactly this many messages were dropped")
    share_at_least_once: bool | None = Field(
        None, description="every produced record of every share group ended Acknowledged or Archived"
    )
    share_records_archived: int | None = Field(None, ge=0, description="the share_records_archived metric")


def resolve_topic_refs(value: Any, topic_ids: Mapping[str, str], loc: tuple[str | int, ...] = ()) -> Any:
    """Replace every ``{topic: name, ...}`` in a request body with ``{topic_id: id, ...}``."""
    if isinstance(value, list):
        return [resolve_topic_refs(v, topic_ids, (*loc, i)) for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    out = {k: resolve_topic_refs(v, topic_ids, (*loc, k)) for k, v in value.items()}
    if "topic" in out:
        name = out.pop("topic")
        if name not in topic_ids:
            raise FieldError((*loc, "topic"), f"unknown topic {name!r}; topics: {sorted(topic_ids)}")
        out["topic_id"] = topic_ids[name]
    return out


class Scenario(_Spec):
    """A whole run: build the Lab, perform the events, run, check the expectations."""

    name: str = Field(..., min_length=1)
    description: str = ""
    seed: int = Field(
        0, ge=-LONG_MAX - 1, le=LONG_MAX, description="seeds the Lab's one RNG (latencies, losses, the coordinator)"
    )
    lab: LabSpec = LabSpec()
    topics: list[TopicSpec] = Field([], max_length=MAX_TOPICS)
    members: dict[str, MemberSpec] = Field({}, max_length=MAX_MEMBERS)
    share_members: dict[str, ShareConsumerConfig] = Field(
        {}, max_length=MAX_MEMBERS, description="share consumers (KIP-932), subscribed at once; one setup step each"
    )
    events: list[Event] = Field([], max_length=MAX_EVENTS)
    run: RunSpec = RunSpec(until_stable=True)
    expect: Expect = Expect()
    # Read, expanded into topics, members and events, and never dumped: a dump is the scenario the template built.
    template: str | None = Field(
        None,
        exclude=True,
        description="a deployment template (kip_lab.scenarios.templates) that builds topics, members and events",
    )
    params: dict[str, Any] = Field({}, exclude=True, description="the template's parameters")

    @model_validator(mode="before")
    @classmethod
    def _expand_template(cls, data: Any) -> Any:
        """A ``template:`` with its ``params`` becomes the topics, members and events it builds."""
        from kip_lab.scenarios.templates import expand_template  # the templates build Scenarios

        return expand_template(data)

    @property
    def setup_steps(self) -> int:
        """How many steps setup takes before the first timer (``at_step`` events come after)."""
        autonomous = [m for m in self.members.values() if not m.scripted]
        return (
            len(self.topics)
            + len(autonomous)
            + len(self.share_members)
            + sum(1 for m in autonomous if m.start_at_ms > 0)
            + sum(1 for e in self.events if e.at_ms is not None)
        )

    @property
    def first_event_ms(self) -> int | None:
        """When the first timed event (usually the fault) happens; ``None`` if none is timed."""
        return min((e.at_ms for e in self.events if e.at_ms is not None), default=None)

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        """The rules across fields, in this order: names, numbers, members, events, the world, expectations."""
        self._check_names()
        self._check_numbers()
        self._check_members()
        self._check_events()
        self._check_world()
        self._check_expect()
        return self

    def _check_names(self) -> None:
        """A topic is declared once; a share consumer's name is not a member's or a broker's."""
        names = [t.name for t in self.topics]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise FieldError(("topics", i, "name"), f"topic {name!r} is declared twice")
        for name in self.share_members:
            if name in self.members or name in self._brokers():
                raise FieldError(("share_members", name), f"{name!r} is already a member's or a broker's name")

    def _check_members(self) -> None:
        """A member's name is not a broker's, and it starts before the run ends."""
        for name, member in self.members.items():
            if name in self._brokers():
                raise FieldError(("members", name), f"{name!r} is a broker's name")
            if member.start_at_ms > self.run.end_ms:
                raise FieldError(("members", name, "start_at_ms"), f"{self._ends()}, before {member.start_at_ms} ms")

    def _check_events(self) -> None:
        """Each event on its own (``_check_event``), and each ``at_step`` on a free step of its own."""
        steps: set[int] = set()
        setup_steps = self.setup_steps
        known_topics = {t.name for t in self.topics} | {e.topic for e in self.events if isinstance(e, a.CreateTopic)}
        for i, event in enumerate(self.events):
            self._check_event(i, event, known_topics)
            if event.at_step is not None:
                self._check_step(i, event.at_step, setup_steps, steps)
                steps.add(event.at_step)

    def _check_step(self, i: int, step: int, setup_steps: int, taken: set[int]) -> None:
        """An ``at_step`` comes after setup, before the run stops, and on a step no other event has."""
        if step <= setup_steps:
            raise FieldError(
                ("events", i, "at_step"),
                f"step {step} is taken by setup (steps 1-{setup_steps}); the first free step is {setup_steps + 1}",
            )
        if step > self.run.max_steps:
            raise FieldError(
                ("events", i, "at_step"), f"the run stops at step {self.run.max_steps} (run.max_steps), before"
            )
        if step in taken:
            raise FieldError(("events", i, "at_step"), f"two events at step {step}")

    def _ends(self) -> str:
        field = "run.until_ms" if self.run.until_ms is not None else "run.timeout_ms"
        return f"the run ends at {self.run.end_ms} ms ({field})"

    def _check_numbers(self) -> None:
        """No number anywhere (a link's latency, a consume rate...) is infinite or NaN."""

        def walk(value: Any, loc: tuple[str | int, ...]) -> None:
            if isinstance(value, float) and not math.isfinite(value):
                raise FieldError(loc, f"{value} is not a finite number")
            if isinstance(value, dict):
                for key, item in value.items():
                    walk(item, (*loc, key))
            elif isinstance(value, list):
                for index, item in enumerate(value):
                    walk(item, (*loc, index))

        walk(self.model_dump(exclude={"expect"}), ())

    def _check_world(self) -> None:
        """Each timed event against the world it will meet: the topics and partitions that exist when it
        happens (events in time order), the kind of group it names, the kind of member it acts on."""
        partitions = {t.name: t.partitions for t in self.topics}  # the topics that exist, at each moment
        consumer_groups = {m.consumer_config().group_id for m in self.members.values() if not m.scripted}
        timed = [i for _, i in sorted((e.at_ms, i) for i, e in enumerate(self.events) if e.at_ms is not None)]
        untimed = [i for i, e in enumerate(self.events) if e.at_ms is None]
        for i in [*timed, *untimed]:  # at_step events: checked against the world after every timed one
            event = self.events[i]
            _follow_topics(i, event, partitions)
            if sum(partitions.values()) > MAX_TOTAL_PARTITIONS:
                raise FieldError(("events", i), f"the topics would have more than {MAX_TOTAL_PARTITIONS:,} partitions")
            _check_partitions_exist(i, event, partitions)
            _check_share_records_produced(i, event, partitions)
            share_admin = isinstance(event, a.ResetShareGroupOffsets | a.SetShareAutoOffsetReset)
            if share_admin and event.group_id in consumer_groups:
                group = event.group_id
                raise FieldError(("events", i, "group_id"), f"{group!r} is a consumer group, not a share group")

    def _check_event(self, i: int, event: Any, known_topics: set[str]) -> None:
        """One event's own fields and the names it refers to (topic, broker, member)."""
        if event.at_ms is not None and event.at_ms > self.run.end_ms:
            raise FieldError(("events", i, "at_ms"), f"{self._ends()}, before this event")
        if isinstance(event, a.ChangeSubscription) and event.regex is not None:
            try:
                _check_regex(event.regex)
            except ValueError as exc:
                raise FieldError(("events", i, "regex"), str(exc)) from None
        topic = getattr(event, "topic", None)
        if topic is not None and not isinstance(event, a.CreateTopic) and topic not in known_topics:
            raise FieldError(("events", i, "topic"), f"no topic named {topic!r}; topics: {sorted(known_topics)}")
        broker = getattr(event, "to_broker", None)
        if broker is not None and broker not in self._brokers():
            raise FieldError(("events", i, "to_broker"), f"no broker named {broker!r}; brokers: {self._brokers()}")
        member = getattr(event, "member", None)
        if member in self.share_members:
            _check_share_subscription(i, event, member)
        elif member is not None:
            self._check_member_event(i, event, member)

    def _check_member_event(self, i: int, event: Any, member: str) -> None:
        """An event on a member: the member exists, and is scripted exactly when the event is a raw request."""
        spec = self.members.get(member)
        if spec is None:
            raise FieldError(("events", i, "member"), f"no member named {member!r}; members: {sorted(self.members)}")
        if isinstance(event, a.SendRequest):
            self._check_scripted_request(i, event, member, spec)
        elif spec.scripted:
            raise FieldError(
                ("events", i, "member"), f"{event.action} acts on a consumer; {member!r} is a scripted member"
            )
        elif isinstance(event, a.ChangeSubscription):
            _check_new_subscription(i, event, member, spec)

    def _check_scripted_request(self, i: int, event: Any, member: str, spec: MemberSpec) -> None:
        """A raw request comes from a scripted member, under its own name, with a body its API accepts."""
        if not spec.scripted:
            raise FieldError(
                ("events", i, "member"), f"send_request needs a scripted member (scripted: true), not {member!r}"
            )
        body = resolve_topic_refs(event.body, {t.name: f"<{t.name}>" for t in self.topics}, ("events", i, "body"))
        if body.get("member_id") not in (None, "", member):
            raise FieldError(
                ("events", i, "body", "member_id"), f"a scripted member's requests use its name {member!r}"
            )
        try:
            REQUESTS[event.api].model_validate(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise FieldError(("events", i, "body", *first["loc"]), f"{event.api}: {first['msg']}") from None

    def _brokers(self) -> list[str]:
        return [f"broker-{i}" for i in range(self.lab.brokers)]

    def _check_expect(self) -> None:
        expect = self.expect
        per_member = {
            "assignment": expect.assignment,
            "member_epochs": expect.member_epochs,
            "member_states": expect.member_states,
        }
        for field, values in per_member.items():
            for name in values or {}:
                if name not in self.members:
                    raise FieldError(("expect", field, name), f"no member named {name!r}")
                if field == "member_states" and self.members[name].scripted:
                    raise FieldError(("expect", field, name), "a scripted member has no client state")
        for i, name in enumerate(expect.members_in_group or []):
            if name not in self.members:
                raise FieldError(("expect", "members_in_group", i), f"no member named {name!r}")


def _follow_topics(i: int, event: Any, partitions: dict[str, int]) -> None:
    """Apply the event's change to the topics that exist (name -> partition count); refuse a topic
    created twice or used when it does not exist (yet, or any more)."""
    topic: Any = getattr(event, "topic", None)  # a str on the events that name a topic
    if isinstance(event, a.CreateTopic):
        if topic in partitions:
            raise FieldError(("events", i, "topic"), f"topic {topic!r} already exists then")
        partitions[topic] = event.partitions
    elif topic is not None and topic not in partitions:
        raise FieldError(("events", i, "topic"), f"topic {topic!r} does not exist then (deleted before?)")
    if isinstance(event, a.DeleteTopic):
        del partitions[topic]
    elif isinstance(event, a.AddPartitions):
        partitions[topic] += event.count
    elif isinstance(event, a.RecreateTopic) and event.partitions is not None:
        partitions[topic] = event.partitions


def _check_partitions_exist(i: int, event: Any, partitions: Mapping[str, int]) -> None:
    """The partitions an event names exist in its topic when it happens."""
    field, named = _partitions_named(event)
    topic: Any = getattr(event, "topic", None)
    missing = [p for p in named if p >= partitions[topic]]
    if missing:
        raise FieldError(
            ("events", i, field), f"{topic!r} has partitions 0-{partitions[topic] - 1} then, not {missing}"
        )


def _check_share_records_produced(i: int, event: Any, partitions: Mapping[str, int]) -> None:
    """A produce_share_records event writes at most ``MAX_PRODUCED_RECORDS`` records."""
    if not isinstance(event, a.ProduceShareRecords):
        return
    records = event.count * event.repeat * (1 if event.partition is not None else partitions[event.topic])
    if records > MAX_PRODUCED_RECORDS:
        raise FieldError(
            ("events", i, "count"),
            f"count x repeat x partitions is {records:,} records; at most {MAX_PRODUCED_RECORDS:,}",
        )


def _check_share_subscription(i: int, event: Any, member: str) -> None:
    """A share consumer subscribes to at least one topic, by name."""
    if not isinstance(event, a.ChangeSubscription):
        return
    share_member = f"{member!r} is a share consumer"
    if event.regex is not None:  # KafkaShareConsumer.subscribe takes topic names only
        raise FieldError(("events", i, "regex"), f"{share_member}: it subscribes to topic names")
    if not event.topics:
        raise FieldError(("events", i, "topics"), f"{share_member}: it needs at least one topic")


def _check_new_subscription(i: int, event: Any, member: str, spec: MemberSpec) -> None:
    """The member's config with the new subscription must hold."""
    changed = {"subscribed_topic_names": event.topics, "subscribed_topic_regex": event.regex}
    try:
        MemberSpec.model_validate({**spec.model_dump(exclude_unset=True), **changed})
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise FieldError(("events", i), f"{member!r} cannot take this subscription: {message}") from None


def _partitions_named(event: Any) -> tuple[str, list[int]]:
    """The partitions of its topic an event names (its field, and the numbers)."""
    if isinstance(event, a.MoveShareLeader | a.ProduceShareRecords) and event.partition is not None:
        return "partition", [event.partition]
    if isinstance(event, a.ResetShareGroupOffsets) and event.partitions is not None:
        return "partitions", event.partitions
    return "partition", []


def scenario_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (YAML or JSON)."""
    schema = Scenario.model_json_schema()
    schema["title"] = "kip_lab scenario"
    return schema


def export_schema(path: str | Path) -> Path:
    """Write ``scenario_schema()`` to ``path`` (stable formatting, so the file can be committed)."""
    path = Path(path)
    path.write_text(json.dumps(scenario_schema(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
