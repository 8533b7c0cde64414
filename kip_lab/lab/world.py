"""Everything that changes during a Lab run, in one object graph.

The World holds the clock and timer heap, the one seeded RNG, the cluster, the network,
the brokers, the coordinator and its ``__consumer_offsets`` log, and the clients. The Lab
deep-copies it for snapshots and forks; nothing outside it changes while a run steps
(the trace lives outside and is cut back on ``seek``).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from operator import attrgetter
from typing import Any, cast

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, CoordinatorResult, GroupCoordinator
from kip_lab.errors import UnknownName
from kip_lab.events import ActionApplied, Event, FaultInjected, HandlerResult, TimerFired
from kip_lab.lab.network import Envelope, LinkConfig, Network
from kip_lab.lab.observed import ObservingClient
from kip_lab.lab.scripted import RequestingClient, ScriptedClient
from kip_lab.lab.share_world import SHARE_LEADER_APIS, ShareWorld
from kip_lab.protocol import Errors
from kip_lab.protocol.classic_group import HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, SyncGroupResponse
from kip_lab.protocol.consumer_group import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentResponse,
    DeletableGroupResult,
    DeleteGroupsResponse,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
)
from kip_lab.protocol.share_group import ShareGroupHeartbeatResponse
from kip_lab.runtime.log import PartitionLog
from kip_lab.runtime.scheduler import FiredTimer, Scheduler
from kip_lab.share.config import SharePartitionConfig

TP = tuple[str, int]

HANDLERS = {
    "ConsumerGroupHeartbeat": "consumer_group_heartbeat",
    "ConsumerGroupDescribe": "consumer_group_describe",
    "ConsumerGroupPrepareAssignment": "consumer_group_prepare_assignment",
    "ConsumerGroupInstallAssignment": "consumer_group_install_assignment",
    "OffsetCommit": "offset_commit",
    "OffsetFetch": "offset_fetch",
    "JoinGroup": "join_group",
    "SyncGroup": "sync_group",
    "Heartbeat": "heartbeat",
    "LeaveGroup": "leave_group",
    "ShareGroupHeartbeat": "share_group_heartbeat",
    "DeleteGroups": "delete_groups",
}


PARKED_APIS = frozenset({"JoinGroup", "SyncGroup"})  # a classic rebalance's barrier parks them


def not_coordinator_response(api: str, request: Any) -> Any:
    """What a broker that does not host the group answers (the client looks it up again)."""
    error = Errors.NOT_COORDINATOR
    if api == "ConsumerGroupHeartbeat":
        return ConsumerGroupHeartbeatResponse(error_code=error, member_epoch=request.member_epoch)
    if api == "OffsetCommit":
        return OffsetCommitResponse(
            topics=[
                OffsetCommitResponseTopic(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=[
                        OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=error)
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )
    if api == "OffsetFetch":
        return OffsetFetchResponse(
            groups=[OffsetFetchResponseGroup(group_id=g.group_id, error_code=error) for g in request.groups]
        )
    if api == "ConsumerGroupDescribe":
        return ConsumerGroupDescribeResponse(groups=[])
    if api == "ConsumerGroupPrepareAssignment":
        return ConsumerGroupPrepareAssignmentResponse(error_code=error)
    if api == "JoinGroup":
        return JoinGroupResponse(error_code=error, member_id=request.member_id)
    if api == "SyncGroup":
        return SyncGroupResponse(error_code=error)
    if api == "Heartbeat":
        return HeartbeatResponse(error_code=error)
    if api == "LeaveGroup":
        return LeaveGroupResponse(error_code=error)
    if api == "ShareGroupHeartbeat":
        return ShareGroupHeartbeatResponse(error_code=error, member_epoch=request.member_epoch)
    if api == "DeleteGroups":
        return DeleteGroupsResponse(
            results=[DeletableGroupResult(group_id=g, error_code=error) for g in request.groups_names]
        )
    return ConsumerGroupInstallAssignmentResponse(error_code=error)


@dataclass
class Broker:
    """A broker: it serves the group coordinator's RPCs when it hosts ``__consumer_offsets``."""

    name: str
    world: Any

    def receive(self, envelope: Envelope) -> None:
        world = self.world
        if envelope.api in SHARE_LEADER_APIS:  # served by this broker's share-partition leader
            response = world.share.serve(self.name, envelope.api, envelope.payload)
        elif world.coordinator_host != self.name:
            response = not_coordinator_response(envelope.api, envelope.payload)
        else:
            handler = getattr(world.coordinator, HANDLERS[envelope.api])
            if envelope.api in PARKED_APIS:  # answered now, or later as a deferred response to this ref
                result = handler(envelope.payload, ref=(envelope.source, envelope.correlation_id))
            else:
                result = handler(envelope.payload)
            world.emit_result(self.name, result, envelope.api)
            response = result.response
        if response is not None:
            world.network.send(self.name, envelope.source, envelope.api, response, envelope.correlation_id)


_key_of = attrgetter("key")


_ERROR_NAMES = {error: error.name for error in Errors}  # an error code (int or Errors) -> its name


def _error_name(response: Any) -> str | None:
    """The name of a response's error code, when it has one (every handler result's event names it)."""
    error = getattr(response, "error_code", None)
    return None if error is None else _ERROR_NAMES[error]


class World:
    def __init__(
        self,
        seed: int,
        coordinator_config: CoordinatorConfig,
        link: LinkConfig,
        brokers: int,
        share_config: SharePartitionConfig | None = None,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.scheduler = Scheduler()
        self.cluster = ClusterMetadata(seed)
        self.network = Network(default_link=link, world=self)
        self.brokers = {f"broker-{i}": Broker(f"broker-{i}", self) for i in range(brokers)}
        self.log = PartitionLog()  # __consumer_offsets-0: replicated, so it survives a failover
        self.records_loaded = 0  # records new coordinators replayed from the log (failovers): work for the Lab
        self.coordinator_host = "broker-0"
        self.coordinator_config = coordinator_config
        self.coordinator = GroupCoordinator(
            coordinator_config, self.cluster, scheduler=self.scheduler, log=self.log, seed=seed
        )
        self.clients: dict[str, Any] = {}
        self.produce_rate: dict[str, float] = {}  # topic id -> records per ms per partition
        self.events: list[tuple[str, Event]] = []  # this step's events, not yet in the trace
        self.written_key_types: set[type] = set()  # the key types of this step's records (the Lab clears it)
        self.written_batches: list[tuple] = []  # this step's record batches: the groups and members they name
        self.scheduled: dict[int, Any] = {}  # scheduled actions (faults, scripted requests) by number
        self.actions_scheduled = 0
        self.action_timers = ScheduledActions(self)
        self.listeners: dict[str, Any] = {}  # user rebalance listeners by member name
        self.share = ShareWorld(self, share_config)  # KIP-932: topic logs, share leaders, share coordinator
        self.coordinator.share_state_rpc = self.share.call_share_coordinator

    def __deepcopy__(self, memo: dict) -> World:
        # The log only grows and its records are immutable: share them instead of copying.
        memo[id(self.log)] = self.log.truncated(self.log.batch_count)
        clone = World.__new__(World)
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            setattr(clone, key, copy.deepcopy(value, memo))
        return clone

    # -- what actors call -------------------------------------------------------------
    def emit(self, actor: str, event: Event) -> None:
        """Record that ``actor`` did ``event`` in this step (the Lab adds the step and time)."""
        self.events.append((actor, event))

    def emit_result(self, actor: str, result: CoordinatorResult, origin: str) -> None:
        """A coordinator handler or timer result, with the records it wrote; the responses it
        completes for parked requests (a classic rebalance's JoinGroup/SyncGroup) go out now.

        The event summarises the records only when read (``HandlerResult.records``); the
        invariants read the types of the records written this step from ``written_key_types``."""
        for deferred in result.deferred:
            client, correlation_id = cast(tuple[str, int], deferred.ref)  # the ref the Lab parked it with
            self.network.send(actor, client, deferred.api, deferred.response, correlation_id)
        if result.response is None and not result.batches:
            return
        for batch in result.batches:
            self.written_key_types.update(map(type, map(_key_of, batch)))
        self.written_batches += result.batches
        written = result.records if result.batches else None
        self.emit(actor, HandlerResult(result.origin or origin, _error_name(result.response), written))

    def endpoint(self, name: str) -> Any:
        return self.brokers.get(name) or self.clients[name]

    def coordinator_broker(self, group_id: str) -> str:
        """FindCoordinator, answered from cluster metadata (not modelled as an RPC)."""
        return self.coordinator_host

    def partition_name(self, tp: TP) -> str:
        topic = self.cluster.topic_by_id(tp[0])
        return f"{topic.name if topic else tp[0]}-{tp[1]}"

    def log_end_offset(self, tp: TP, now_ms: int) -> int:
        """Records produced to ``tp`` by ``now_ms``: each partition of a topic is produced to at
        the topic's rate, so all of them have the same end."""
        return int(self.produce_rate.get(tp[0], 0.0) * now_ms)

    # -- actions ------------------------------------------------------------------------
    def schedule_action(self, action: Any, at_ms: int) -> None:
        """Perform ``action`` when the clock reaches ``at_ms`` (as its own step)."""
        self.actions_scheduled += 1
        number = self.actions_scheduled
        self.scheduled[number] = action
        self.scheduler.schedule(self.action_timers, number, max(0, at_ms - self.scheduler.now_ms))

    def perform(self, action: Any) -> None:
        """Carry out one action on this world and record it in the trace (what each kind does: ``_action_handlers``)."""
        fault, handler = _performing(action.__class__)
        self.emit("lab", FaultInjected(action) if fault and self.clients else ActionApplied(action))
        handler(self, action)

    def _advance_clock(self, action: Any) -> None:
        if action.time_ms > self.scheduler.now_ms:
            self.advance_to(action.time_ms)

    def _restart(self, action: Any) -> None:
        """The process dies (if it still runs) and comes back as a new incarnation, with its old config by default."""
        old = self.client(action.member)
        if old.alive:
            old.crash()
        client = self.new_client(action.member, action.config or old.config, incarnation=old.incarnation + 1)
        self.clients[action.member] = client
        client.subscribe()

    def _drop_messages(self, action: Any) -> None:
        self.network.link_faults(action.member, self.coordinator_host).drop_next += action.count

    def _delay_messages(self, action: Any) -> None:
        faults = self.network.link_faults(action.member, self.coordinator_host)
        faults.delay_next += action.count
        faults.delay_ms = action.delay_ms

    def _partition_link(self, action: Any) -> None:
        """Every broker is out of the member's reach: no request gets through, and a consumer fetches no records."""
        until = self.scheduler.now_ms + action.duration_ms
        for broker in self.brokers:
            self.network.link_faults(action.member, broker).down_until_ms = until
        client = self.clients.get(action.member)
        if client is not None and hasattr(client, "cut_off"):
            client.cut_off(until)

    def _configure_link(self, action: Any) -> None:
        for broker in self.brokers:
            self.network.configure(action.member, broker, action.link)

    def _create_topic(self, action: Any) -> None:
        topic_id = self.cluster.create_topic(action.topic, action.partitions)
        self.produce_rate[topic_id] = action.produce_rate_per_s / 1000.0

    def _recreate_topic(self, action: Any) -> None:
        """A new topic id under the old name; the producer keeps its rate."""
        rate = self.produce_rate.get(self.cluster.topic(action.topic).topic_id, 0.0)
        topic_id = self.cluster.recreate_topic(action.topic, action.partitions)
        self.produce_rate[topic_id] = rate

    def _send_request(self, action: Any) -> None:
        """By a scripted client, or by the kind of client the action names (a real client's)."""
        self.scripted(action.member, getattr(action, "client_kind", None)).send(action.api, action.body)

    def add_client(self, name: str, config: Any, start: bool) -> None:
        """A new consumer process named ``name`` (any kind, by its config); ``start`` subscribes it at once."""
        if name in self.clients or name in self.brokers:
            raise ValueError(f"an actor named {name!r} already exists")
        client = self.new_client(name, config)
        self.clients[name] = client
        if start:
            client.subscribe()

    def new_client(self, name: str, config: Any, incarnation: int = 0) -> Any:
        """A consumer process of the protocol its config names (classic, consumer, or a share consumer)."""
        from kip_lab.clients.classic_consumer import ClassicConsumer, ClassicConsumerConfig
        from kip_lab.clients.consumer import Consumer
        from kip_lab.clients.share_consumer import ShareConsumer, ShareConsumerConfig

        if isinstance(config, ShareConsumerConfig):
            return ShareConsumer(name, config, self, incarnation=incarnation)

        kind = ClassicConsumer if isinstance(config, ClassicConsumerConfig) else Consumer
        return kind(name, config, self, listener=self.listeners.get(name), incarnation=incarnation)

    def advance_to(self, time_ms: int) -> None:
        """Fire every timer due by ``time_ms``, tracing what the coordinator's timers wrote."""
        scheduler = self.scheduler
        while (fired := scheduler.fire_next(time_ms)) is not None:
            self.trace_fired(fired)
        scheduler.run(time_ms)

    def trace_fired(self, fired: FiredTimer) -> None:
        """Trace a coordinator timer and what its handler wrote (clients and the network trace
        their own timers' effects)."""
        if isinstance(fired.owner, GroupCoordinator):
            self.emit("coordinator", TimerFired(cast(tuple, fired.key)))  # a tuple key
            self.emit_result(self.coordinator_host, fired.result, "timer")
            for client in self.clients.values():  # a real member the timer removed is drawn gone
                if isinstance(client, ObservingClient):
                    client.observe_removal(fired.owner)

    def client(self, name: str) -> Any:
        try:
            return self.clients[name]
        except KeyError:
            raise UnknownName(f"no member named {name!r}; members: {sorted(self.clients)}") from None

    def scripted(self, name: str, kind: type | None = None) -> Any:
        client = self.clients.get(name)
        if client is None:
            client = self.clients[name] = (kind or ScriptedClient)(name, self)
        if not isinstance(client, RequestingClient):
            raise ValueError(f"{name!r} is an autonomous consumer; scripted requests need their own name")
        return client

    def fail_over(self, to_broker: str | None) -> None:
        """The partition leader moves: the old coordinator unloads, a new one loads the log."""
        names = sorted(self.brokers)
        target = to_broker or names[(names.index(self.coordinator_host) + 1) % len(names)]
        if target not in self.brokers:
            raise UnknownName(f"unknown broker {target!r}; brokers: {names}")
        self.coordinator.unload()
        self.coordinator_host = target
        self.records_loaded += self.log.end_offset
        self.coordinator = GroupCoordinator.from_log(
            self.log, self.coordinator_config, self.cluster, scheduler=self.scheduler, seed=self.rng.getrandbits(32)
        )
        self.coordinator.share_state_rpc = self.share.call_share_coordinator
        for result in self.coordinator.load_results + self.coordinator.sync_share_state():
            self.emit_result(target, result, "load")


@cache
def _action_handlers() -> dict[type, Callable[[World, Any], object]]:
    """What ``World.perform`` does for each kind of action; the share actions go to the ``ShareWorld``."""
    from kip_lab.lab import actions as a

    handlers: dict[type, Callable[[World, Any], object]] = {
        a.AddConsumer: lambda world, action: world.add_client(action.member, action.config, action.start),
        a.AdvanceTo: World._advance_clock,
        a.Start: lambda world, action: world.client(action.member).subscribe(),
        a.Close: lambda world, action: world.client(action.member).close(),
        a.Crash: lambda world, action: world.client(action.member).crash(),
        a.Restart: World._restart,
        a.Pause: lambda world, action: world.client(action.member).pause(),
        a.Resume: lambda world, action: world.client(action.member).resume(),
        a.DropMessages: World._drop_messages,
        a.DelayMessages: World._delay_messages,
        a.PartitionLink: World._partition_link,
        a.ConfigureLink: World._configure_link,
        a.FailOver: lambda world, action: world.fail_over(action.to_broker),
        a.CreateTopic: World._create_topic,
        a.AddPartitions: lambda world, action: world.cluster.add_partitions(action.topic, action.count),
        a.DeleteTopic: lambda world, action: world.cluster.delete_topic(action.topic),
        a.RecreateTopic: World._recreate_topic,
        a.ChangeSubscription: lambda world, action: world.client(action.member).change_subscription(
            action.topics, action.regex
        ),
        a.ClientRequest: World._send_request,
    }
    for share_action in a.SHARE_ACTIONS:
        handlers[share_action] = lambda world, action: world.share.perform(action)
    return handlers


@cache
def _performing(kind: type) -> tuple[bool, Callable[[World, Any], object]]:
    """Whether an action class is a fault, and its handler (``_action_handlers``): looked up once a class."""
    from kip_lab.lab import actions as a

    handler = a.handler_for(_action_handlers(), kind)
    if handler is None:
        raise TypeError(f"unknown action {kind.__name__}")
    return issubclass(kind, a.FAULTS), handler


class ScheduledActions:
    """Owner of the timers that perform scheduled actions (a scenario's "at t=30s, crash A")."""

    performs_actions = True  # its timer may touch any client (the incremental checks look at all)

    def __init__(self, world: World) -> None:
        self.world = world

    def fire_timer(self, key: int) -> None:
        self.world.perform(self.world.scheduled.pop(key))
