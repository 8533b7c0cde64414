"""The share-group side of a Lab world (KIP-932): topic logs, share-partition leaders, the share coordinator.

Each broker runs a ``SharePartitionLeader`` for the topic-partitions it leads (leadership is
spread over the brokers by a stable hash); the share coordinator owns one
``__share_group_state`` partition whose log survives its failover. Every
WriteShareGroupState a leader sends and every acquisition it makes is traced, with the
share-partition's start and end offsets after it, which is what the invariants, the metrics
and the record-state strip read.

Actions: ``AddShareConsumer``, ``ProduceShareRecords`` (optionally repeating: the producer
model), and the faults ``FailOverShareCoordinator`` and ``MoveShareLeader`` (the old leader
becomes a zombie that the share coordinator fences by leader epoch). Slow processing (lock
timeouts) is a consumer setting (``processing_ms_per_record``, a ``hang`` failure rule).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from functools import cache
from typing import Any

from kip_lab.coordinator.share_group import call_share_coordinator
from kip_lab.errors import UnknownName
from kip_lab.events import Note, ShareAcquired, ShareStateRpc, ShareStateWrite
from kip_lab.protocol.common import Message
from kip_lab.runtime.log import PartitionLog
from kip_lab.share.admin import ResetSpec, ShareAdmin, TimestampedLogs
from kip_lab.share.config import ShareCoordinatorConfig, SharePartitionConfig
from kip_lab.share.coordinator import STATE_TOPIC, ShareCoordinator
from kip_lab.share.leader import SharePartitionLeader
from kip_lab.share.persister import CoordinatorPersister, SentWrite
from kip_lab.share.topic_log import TopicLog

TP = tuple[str, int]  # (topic id, partition)
SHARE_LEADER_APIS = ("ShareFetch", "ShareAcknowledge")


def _summary(model: Message | None) -> Any:
    return None if model is None else model.model_dump(mode="json")


class LabPersister(CoordinatorPersister):
    """One broker's persister: sends to the share coordinator of the moment and traces each write."""

    def __init__(self, share: ShareWorld, broker: str) -> None:
        super().__init__(share.coordinator_for)
        self.share = share
        self.broker = broker

    def _deliver(self, sent: SentWrite) -> None:
        coordinator = self.share.coordinator
        before = coordinator.log.end_offset
        super()._deliver(sent)
        sp, write = sent.partition, sent.write
        self.share.world.emit(
            self.broker,
            ShareStateWrite(
                group_id=sp.group_id,
                topic_id=sp.topic_id,
                partition=sp.partition,
                origin=write.origin,
                request=_summary(sent.request.topics[0].partitions[0]),
                transitions=tuple((t.first_offset, t.last_offset, t.trigger, t.target) for t in write.changes),
                error=None if write.error in (None, 0) else write.error.name,
                records=tuple(
                    {"type": type(e.record.key).__name__, "value": _summary(e.record.value)}
                    for e in coordinator.log.entries(before)
                ),
                spso=sp.spso,
                speo=sp.speo,
            ),
        )


class ShareWorld:
    def __init__(self, world: Any, config: SharePartitionConfig | None = None) -> None:
        self.world = world
        self.config = config or SharePartitionConfig()
        self.log = PartitionLog(STATE_TOPIC, 0)  # replicated: survives the share coordinator's failover
        self.coordinator = ShareCoordinator(ShareCoordinatorConfig(fidelity=self.config.fidelity), log=self.log)
        self.coordinator_host = sorted(world.brokers)[0]
        self.group_configs: dict[str, SharePartitionConfig] = {}
        self.leaders = {
            b: SharePartitionLeader(
                LabPersister(self, b), scheduler=world.scheduler, config=self.config, group_configs=self.group_configs
            )
            for b in sorted(world.brokers)
        }
        self.logs = TimestampedLogs()  # by (topic name, partition), for the admin's offset lookups
        self.leadership: dict[TP, tuple[str, int]] = {}  # (topic id, partition) -> (broker, leader epoch)

    # ------------------------------------------------------------------ lookups
    def coordinator_for(self, group_id: str, topic_id: str, partition: int) -> ShareCoordinator:
        return self.coordinator

    def call_share_coordinator(self, request: Message) -> Any:
        """The group coordinator's InitializeShareGroupState / DeleteShareGroupState / summaries."""
        result = call_share_coordinator(self.coordinator, request)
        self.world.emit(
            self.coordinator_host,
            ShareStateRpc(
                api=type(request).__name__.removesuffix("Request"),
                request=_summary(request),
                response=_summary(result.response),
                records=tuple({"type": type(r.key).__name__, "value": _summary(r.value)} for r in result.records),
            ),
        )
        return result.response

    def topic_log(self, tp: TP) -> TopicLog:
        """The partition's log, created with its leader on first use."""
        self.leader_of(tp)
        topic = self.world.cluster.topic_by_id(tp[0])
        return self.logs.logs[(topic.name, tp[1])]

    def leader_of(self, tp: TP) -> str:
        """The broker leading ``tp`` (ShareFetch and ShareAcknowledge go there)."""
        found = self.leadership.get(tp)
        if found is not None:
            return found[0]
        topic = self.world.cluster.topic_by_id(tp[0])
        if topic is None:
            raise KeyError(f"unknown topic id {tp[0]!r}")
        names = sorted(self.world.brokers)
        broker = names[zlib.crc32(f"{topic.name}:{tp[1]}".encode()) % len(names)]
        log = self.logs.logs.setdefault((topic.name, tp[1]), TopicLog(tp[0], tp[1]))
        self.leaders[broker].add_log(log, 0)
        self.leadership[tp] = (broker, 0)
        return broker

    def share_partition(self, group_id: str, tp: TP) -> Any:
        """The current leader's share-partition for the group, if it has loaded one."""
        return self.leaders[self.leader_of(tp)].partitions.get((group_id, *tp))

    def admin(self) -> ShareAdmin:
        return ShareAdmin(self.world.coordinator, self.logs, self.group_configs)

    # ------------------------------------------------------------------ the brokers' side
    def serve(self, broker: str, api: str, request: Any) -> Any:
        """ShareFetch / ShareAcknowledge at ``broker``'s share-partition leader, traced."""
        leader = self.leaders[broker]
        if api != "ShareFetch":
            return leader.share_acknowledge(request)
        response = leader.share_fetch(request)
        for topic in response.responses:
            for p in topic.partitions:
                if not p.acquired_records:
                    continue
                sp = leader.partitions.get((request.group_id, topic.topic_id, p.partition_index))
                self.world.emit(
                    broker,
                    ShareAcquired(
                        group_id=request.group_id,
                        member_id=request.member_id,
                        topic_id=topic.topic_id,
                        partition=p.partition_index,
                        ranges=tuple((r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records),
                        spso=sp.spso if sp else None,
                        speo=sp.speo if sp else None,
                    ),
                )
        return response

    # ------------------------------------------------------------------ actions
    def perform(self, action: Any) -> None:
        """Carry out one share action (KIP-932); what each kind does: ``_share_action_handlers``."""
        from kip_lab.lab import actions as a

        handler = a.handler_for(_share_action_handlers(), type(action))
        if handler is None:
            raise TypeError(f"not a share action: {action!r}")
        handler(self, action)

    def _fail_over_coordinator(self, action: Any) -> None:
        """``__share_group_state`` moves to the next broker (or the one named); the new share coordinator replays it."""
        world = self.world
        names = sorted(world.brokers)
        target = action.to_broker or names[(names.index(self.coordinator_host) + 1) % len(names)]
        if target not in world.brokers:
            raise UnknownName(f"unknown broker {target!r}; brokers: {names}")
        self.coordinator_host = target
        self.coordinator = ShareCoordinator.from_log(self.log, self.coordinator.config)
        world.emit(target, Note(f"share coordinator loaded {self.log.end_offset} records"))

    def _move_leader(self, action: Any) -> None:
        """A partition's leadership moves, leader epoch + 1; the old leader serves on as a zombie until it learns so."""
        world = self.world
        topic = world.cluster.topic(action.topic)
        tp = (topic.topic_id, action.partition)
        old, epoch = self.leadership.get(tp) or (self.leader_of(tp), 0)
        names = sorted(world.brokers)
        target = action.to_broker or names[(names.index(old) + 1) % len(names)]
        if target not in world.brokers or target == old:
            raise ValueError(f"cannot move {action.topic}-{action.partition} from {old} to {target!r}")
        self.leadership[tp] = (target, epoch + 1)
        self.leaders[target].add_log(self.topic_log(tp), epoch + 1)
        world.emit(
            "lab",
            Note(
                f"{action.topic}-{action.partition}: leader {old} -> {target} (epoch {epoch + 1}); "
                f"{old} is a zombie until it learns so",
                {"share_leader_moved": list(tp)},
            ),
        )

    def _reset_offsets(self, action: Any) -> None:
        """The admin's reset of an empty share group's start offsets on a topic, traced with its records."""
        world = self.world
        topic = world.cluster.topic(action.topic)
        for partition in range(topic.num_partitions):  # a partition nothing was produced to has an empty log
            self.topic_log((topic.topic_id, partition))
        admin = self.admin()
        spec = ResetSpec(to=action.to, timestamp_ms=action.timestamp_ms)
        outcome = admin.reset_share_group_offsets(action.group_id, action.topic, spec, action.partitions)
        for result in admin.results:
            world.emit_result(world.coordinator_host, result, "admin")
        errors = {f"{topic}-{p}": error or "NONE" for (topic, p), error in sorted(outcome.items())}
        world.emit("admin", Note(f"reset {action.group_id} on {action.topic}", {"errors": errors}))

    def _set_auto_offset_reset(self, action: Any) -> None:
        self.admin().set_auto_offset_reset(action.group_id, action.value)
        for leader in self.leaders.values():  # each broker holds its own copy of the group configs
            leader.group_configs[action.group_id] = self.group_configs[action.group_id]

    def _delete_records(self, action: Any) -> None:
        topic = self.world.cluster.topic(action.topic)
        log = self.topic_log((topic.topic_id, action.partition))
        log.delete_records_before(action.before_offset)
        self.world.emit(
            "producer", Note(f"log start of {action.topic}-{action.partition} moved to {action.before_offset}", {})
        )

    def _produce(self, action: Any) -> None:
        world = self.world
        topic = world.cluster.topic(action.topic)
        partitions = range(topic.num_partitions) if action.partition is None else [action.partition]
        produced = {}
        for p in partitions:
            tp = (topic.topic_id, p)
            log = self.topic_log(tp)
            base = log.high_watermark
            values = []
            for n in range(base, base + action.count):
                poison = action.poison_every and (n + 1) % action.poison_every == 0
                values.append(f"poison-{n}" if poison else f"{action.value_prefix}{n}")
            for start in range(0, len(values), action.batch_size):
                chunk = values[start : start + action.batch_size]
                offsets = log.append(values=chunk)
                self.logs.appended(topic.name, p, offsets.start, world.scheduler.now_ms)
            produced[f"{topic.name}-{p}"] = [base, log.high_watermark]
        world.emit("producer", Note(f"produced {action.count} records per partition", {"produced": produced}))
        if action.repeat > 1:
            again = action.model_copy(update={"repeat": action.repeat - 1})
            world.schedule_action(again, world.scheduler.now_ms + action.every_ms)


@cache
def _share_action_handlers() -> dict[type, Callable[[ShareWorld, Any], object]]:
    """What ``ShareWorld.perform`` does for each share action."""
    from kip_lab.lab import actions as a

    return {
        a.AddShareConsumer: lambda share, action: share.world.add_client(action.member, action.config, action.start),
        a.ProduceShareRecords: ShareWorld._produce,
        a.DeleteRecords: ShareWorld._delete_records,
        a.FailOverShareCoordinator: ShareWorld._fail_over_coordinator,
        a.MoveShareLeader: ShareWorld._move_leader,
        a.ResetShareGroupOffsets: ShareWorld._reset_offsets,
        a.SetShareAutoOffsetReset: ShareWorld._set_auto_offset_reset,
    }
