"""What a rebalance cost, computed from a trace alone.

``compute_metrics(trace)`` replays the trace's events — never the Lab that wrote them — so a
trace saved to JSONL or Parquet and loaded back gives the same numbers. Pure Python.

The replay keeps three small views, each changed only by events:

* **clients** (by name): group (``add_consumer``), alive (``crash`` / ``restart``), paused
  (``pause`` / ``resume``), state and member id (``state_transition``), owned and fetching
  partitions (``assignment_changed``). A ``subscribe`` transition starts with nothing owned.
* **groups** (by id), as the coordinator's records say (``handler_result`` records): group
  epoch, assignment epoch, partition metadata, and per member its epoch, server-side state
  and assigned partitions. The group state is derived as the coordinator derives it: Empty
  without members, Assigning while group epoch > assignment epoch, Stable when every member
  is STABLE at the assignment epoch, else Reconciling.
* **topics** (by name): partition counts, from ``create_topic``, ``add_partitions``,
  ``delete_topic`` and ``recreate_topic``.

Definitions
-----------
trigger
    A ``fault_injected`` event, or a group epoch bump (a ``ConsumerGroupMetadataKey`` record
    with an epoch above the group's last one). One entry per trigger, in trace order.
stable
    Checked after each step (all of a step's events applied). The Lab is stable when
    (1) every group with members is Stable; (2) every member the coordinator has belongs to a
    live client (alive, not UNSUBSCRIBED, FATAL or STALE) of that group — a crashed process
    still in the group is not stable; (3) every live client is STABLE, fetches exactly what it
    owns, and owns exactly what the coordinator assigned its member; (4) no STALE client
    that is polling again (not paused) is waiting to rejoin; (5) no group's partition
    metadata lags the cluster for the topics it names or its members subscribe to by name
    (an added partition or a deleted topic the coordinator has yet to notice), and every
    member's subscription is the one its client last asked for. Changes to what a regex
    matches are not checked. (6) Classic groups (``GroupMetadataKey`` records, written when a
    rebalance completes): every live classic client has no rejoin pending (a ``note`` with
    ``rejoin`` until its JoinGroup), no rebalance callback under way, owns what its last
    SyncGroup gave; the group's last generation holds exactly its live classic clients at that
    generation; and every partition of the topics they subscribe to is owned by a member (else
    the leader has yet to notice added partitions).
time to stable
    For each trigger: the time of the first step, at or after the trigger's step, after
    which the Lab is stable, minus the trigger's time. ``None`` if that never happens before
    the trace ends. Overlapping triggers end at the same moment.
partition unavailability
    Per group and partition (named ``topic-partition``): the milliseconds during which the
    partition existed for the group (it is in the group's partition metadata, or someone
    fetches it) and no client of the group was fetching it, up to ``end_ms``. A partition
    of a deleted topic stops counting when the group's metadata drops it. A recreated topic
    adds to the same name.
revocations
    Partitions passed to ``on_partitions_revoked`` (every call counts, failed ones too).
partition moves
    A client starts fetching a partition whose previous fetcher (in that group) was another
    client.
stops without move
    A client starts fetching a partition again that it (the same process, not a restarted one)
    was the last to fetch: the partition stopped and nobody else took it in between — an
    interruption that moved nothing (eager's
    revoke-everything barrier costs one per partition per rebalance; cooperative and KIP-848
    rebalances avoid them).
heartbeats sent
    ConsumerGroupHeartbeat (and classic Heartbeat) requests a client put on the network: ``message_sent`` from a
    non-broker, plus those the network dropped as they were sent.
records written
    Records in ``handler_result`` payloads (group records and offset commits).
invariant violations
    ``invariant_violated`` events.
share records acquired, redeliveries (KIP-932)
    Records in ``share_acquired`` events; those acquired with a delivery count above 1.
share records acknowledged, archived
    Records a successful ``share_state_write`` moved to Acknowledged, or to Archived (rejected,
    out of delivery attempts, or passed by the log start offset).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

TP = tuple[str, int]

GONE = ("UNSUBSCRIBED", "FATAL", "STALE")
HEARTBEAT_APIS = ("ConsumerGroupHeartbeat", "Heartbeat")  # the new consumer's and the classic one's


@dataclass
class _Client:
    group: str
    alive: bool = True
    paused: bool = False
    state: str = "UNSUBSCRIBED"
    member_id: str = ""
    owned: frozenset[TP] = frozenset()
    fetching: frozenset[TP] = frozenset()
    subscription: tuple[tuple[str, ...], str | None] = ((), None)  # sorted topic names, regex
    classic: bool = False  # group.protocol=classic
    generation: int = -1  # a classic client's generation
    assigned: frozenset[TP] | None = None  # a classic client's last SyncGroup assignment
    rejoin_pending: bool = False  # a classic client asked to rejoin and has not sent JoinGroup yet
    callbacks_running: int = 0  # a classic client's rebalance callbacks started and not completed

    @property
    def live(self) -> bool:
        return self.alive and self.state not in GONE


@dataclass
class _Member:
    epoch: int = 0
    state: str = "STABLE"
    assigned: frozenset[TP] = frozenset()
    subscribed: tuple[str, ...] = ()
    regex: str | None = None


@dataclass
class _Group:
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, _Member] = field(default_factory=dict)
    metadata: dict[str, tuple[str, int]] = field(default_factory=dict)  # topic id -> (name, partitions)

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        epoch = self.assignment_epoch
        if all(m.state == "STABLE" and m.epoch == epoch for m in self.members.values()):
            return "Stable"
        return "Reconciling"

    def partitions(self) -> set[TP]:
        return {(tid, p) for tid, (_, n) in self.metadata.items() for p in range(n)}


def _subscription(names: list[str] | None, regex: str | None) -> tuple[tuple[str, ...], str | None]:
    return tuple(sorted(names or ())), regex


def _partitions(items: Iterable[dict[str, Any]] | None) -> frozenset[TP]:
    return frozenset((t["topic_id"], p) for t in items or () for p in t.get("partitions", ()))


class _Replay:
    def __init__(self) -> None:
        self.clients: dict[str, _Client] = {}
        self.groups: dict[str, _Group] = {}
        self.classic_groups: dict[str, tuple[int, frozenset[str]]] = {}  # group -> (generation, member ids)
        self.topics: dict[str, int] = {}  # topic name -> partitions in the cluster
        self.names: dict[str, str] = {}  # topic id -> name
        # unavailability: (group, tp) -> state
        self.fetchers: dict[tuple[str, TP], int] = {}
        self.exists: set[tuple[str, TP]] = set()
        self.seen: set[tuple[str, TP]] = set()  # has existed or been fetched
        self.down_since: dict[tuple[str, TP], int] = {}
        self.unavailable: dict[tuple[str, TP], int] = {}
        self.last_fetcher: dict[tuple[str, TP], str] = {}
        self.moves = 0
        self.stops_without_move = 0
        self.incarnations: dict[str, int] = {}  # client name -> restarts so far
        self.fetched_by_incarnation: dict[tuple[str, TP], int] = {}  # the last fetcher's incarnation
        self.epoch_bumps: list[tuple[str, int]] = []  # of the step being applied

    # -- availability bookkeeping ---------------------------------------------------------
    def _update_down(self, key: tuple[str, TP], now: int) -> None:
        down = key in self.seen and key in self.exists and not self.fetchers.get(key)
        since = self.down_since.get(key)
        if down and since is None:
            self.down_since[key] = now
        elif not down and since is not None:
            self.unavailable[key] = self.unavailable.get(key, 0) + now - self.down_since.pop(key)

    def _set_fetching(self, name: str, client: _Client, fetching: frozenset[TP], now: int) -> None:
        group = client.group
        for tp in client.fetching - fetching:
            key = (group, tp)
            self.fetchers[key] = self.fetchers.get(key, 0) - 1
            self._update_down(key, now)
        for tp in fetching - client.fetching:
            key = (group, tp)
            self.fetchers[key] = self.fetchers.get(key, 0) + 1
            previous = self.last_fetcher.get(key)
            if previous is not None and previous != name:
                self.moves += 1
            elif previous == name and self.fetched_by_incarnation.get(key) == self.incarnations.get(name, 0):
                self.stops_without_move += 1
            self.fetched_by_incarnation[key] = self.incarnations.get(name, 0)
            self.last_fetcher[key] = name
            if key not in self.seen:
                self.seen.add(key)
                self.unavailable.setdefault(key, 0)
            if client.classic:
                self.exists.add(key)
            self._update_down(key, now)
        client.fetching = fetching

    def _set_metadata(self, group_id: str, group: _Group, metadata: dict[str, tuple[str, int]], now: int) -> None:
        before = group.partitions()
        group.metadata = metadata
        after = group.partitions()
        for tid, (name, _) in metadata.items():
            self.names[tid] = name
        for tp in before - after:
            key = (group_id, tp)
            self.exists.discard(key)
            self._update_down(key, now)
        for tp in after - before:
            key = (group_id, tp)
            self.exists.add(key)
            if key not in self.seen:
                self.seen.add(key)
                self.unavailable.setdefault(key, 0)
            self._update_down(key, now)

    # -- events ---------------------------------------------------------------------------
    def apply(self, event: Any, kind: str) -> None:
        """Apply one event; ``kind`` is ``_kind(event)``, which the caller has already worked out."""
        payload = event.payload
        now = event.time_ms
        if kind in ("action_applied", "fault_injected"):
            self._action(payload, now)
        elif kind == "state_transition":
            client = self.clients.get(event.actor)
            if client is None:
                return
            if payload.get("from") == "UNSUBSCRIBED" and payload.get("to") in ("JOINING", "UNJOINED"):
                client.owned = frozenset()
                self._set_fetching(event.actor, client, frozenset(), now)
            client.state = payload["to"]
            client.member_id = payload.get("member_id", client.member_id)
            if client.classic:
                client.generation = payload.get("generation_id", client.generation)
                if client.state in ("PREPARING_REBALANCE", *GONE):
                    client.rejoin_pending = False
        elif kind == "assignment_changed":
            client = self.clients.get(event.actor)
            if client is None:
                return
            client.member_id = payload.get("member_id", client.member_id)
            if client.classic:
                assigned = payload.get("assigned")
                client.assigned = None if assigned is None else frozenset(tuple(tp) for tp in assigned)
                self.names.update(payload.get("topic_names", {}))
            client.owned = frozenset(tuple(tp) for tp in payload.get("owned", ()))
            self._set_fetching(event.actor, client, frozenset(tuple(tp) for tp in payload.get("fetching", ())), now)
        elif kind == "handler_result":
            for record in payload.get("records") or ():
                self._record(record, now)
        elif kind == "note" and "rejoin" in payload and event.actor in self.clients:
            self.clients[event.actor].rejoin_pending = True
        elif kind in ("callback_invoked", "callback_completed") and event.actor in self.clients:
            client = self.clients[event.actor]
            if client.classic and payload.get("callback") != "on_assignment":  # on_assignment is instant
                client.callbacks_running += 1 if kind == "callback_invoked" else -1

    def _action(self, payload: dict[str, Any], now: int) -> None:
        action = payload.get("action")
        member = payload.get("member")
        if action == "add_consumer":
            config = payload["config"]
            self.clients[payload["member"]] = _Client(
                group=config["group_id"],
                subscription=_subscription(config.get("subscribed_topic_names"), config.get("subscribed_topic_regex")),
                classic=config.get("group_protocol") == "classic",
            )
        elif action == "change_subscription" and member in self.clients:
            self.clients[member].subscription = _subscription(payload.get("topics"), payload.get("regex"))
        elif action == "crash" and member in self.clients:
            self.clients[member].alive = False
        elif action == "restart" and member in self.clients:
            client = self.clients[member]
            client.alive, client.paused, client.state = True, False, "UNSUBSCRIBED"
            client.assigned, client.rejoin_pending, client.generation = None, False, -1
            client.callbacks_running = 0
            self.incarnations[member] = self.incarnations.get(member, 0) + 1
            config = payload.get("config")
            if config:  # restarted with another config: another version, or another group.protocol
                client.group = config["group_id"]
                client.subscription = _subscription(
                    config.get("subscribed_topic_names"), config.get("subscribed_topic_regex")
                )
                client.classic = config.get("group_protocol") == "classic"
        elif action == "pause" and member in self.clients:
            self.clients[member].paused = True
        elif action == "resume" and member in self.clients:
            self.clients[member].paused = False
        elif action in ("create_topic", "recreate_topic"):
            partitions = payload.get("partitions")
            self.topics[payload["topic"]] = (
                partitions if partitions is not None else self.topics.get(payload["topic"], 0)
            )
        elif action == "add_partitions" and payload.get("topic") in self.topics:
            self.topics[payload["topic"]] += payload["count"]
        elif action == "delete_topic":
            self.topics.pop(payload["topic"], None)
        if action in ("delete_topic", "recreate_topic"):
            self._classic_topic_gone(payload["topic"], now)

    def _record(self, record: dict[str, Any], now: int) -> None:
        key, value = record["key"], record["value"]
        kind = key.get("type")
        if kind == "GroupMetadataKey":
            self._classic_record(key["group"], value)
            return
        member: _Member | None
        group_id = key.get("group_id")
        if group_id is None:
            return  # an offset commit
        group = self.groups.get(group_id)
        if group is None:
            if value is None:
                return
            group = self.groups[group_id] = _Group()
        if kind == "ConsumerGroupMetadataKey":
            if value is None:
                self._set_metadata(group_id, group, {}, now)
                del self.groups[group_id]
            else:
                if value["epoch"] > group.group_epoch:
                    self.epoch_bumps.append((group_id, value["epoch"]))
                group.group_epoch = value["epoch"]
        elif kind == "ConsumerGroupPartitionMetadataKey":
            topics = (value or {}).get("topics", ())
            metadata = {t["topic_id"]: (t["topic_name"], t["num_partitions"]) for t in topics}
            self._set_metadata(group_id, group, metadata, now)
        elif kind == "ConsumerGroupTargetAssignmentMetadataKey":
            if value is not None:
                group.assignment_epoch = value["assignment_epoch"]
        elif kind == "ConsumerGroupMemberMetadataKey":
            member_id = key["member_id"]
            if value is None:
                group.members.pop(member_id, None)
            else:
                member = group.members.setdefault(member_id, _Member())
                member.subscribed = tuple(value.get("subscribed_topic_names", ()))
                member.regex = value.get("subscribed_topic_regex")
        elif kind == "ConsumerGroupCurrentMemberAssignmentKey":
            member = group.members.get(key["member_id"])
            if member is None:
                if value is None:
                    return
                member = group.members[key["member_id"]] = _Member()
            if value is None:
                member.epoch, member.state, member.assigned = 0, "STABLE", frozenset()
            else:
                member.epoch = value["member_epoch"]
                member.state = value.get("state", "STABLE")
                member.assigned = _partitions(value.get("topic_partitions"))

    # -- classic groups ---------------------------------------------------------------------
    def _classic_record(self, group_id: str, value: dict[str, Any] | None) -> None:
        """A classic group's GroupMetadataValue: written when a rebalance completes (None: deleted)."""
        if not value:
            self.classic_groups.pop(group_id, None)
            return
        members = frozenset(m["member_id"] for m in value.get("members", ()))
        self.classic_groups[group_id] = (value.get("generation", 0), members)

    def _is_classic_group(self, group_id: str) -> bool:
        return group_id in self.classic_groups or any(c.classic and c.group == group_id for c in self.clients.values())

    def _classic_topic_gone(self, topic: str, now: int) -> None:
        """A deleted (or recreated) topic's partitions stop existing for classic groups, which
        write no partition metadata; a classic group's partition exists once someone fetched it."""
        for key in sorted(self.exists):
            group_id, tp = key
            if self.names.get(tp[0]) == topic and self._is_classic_group(group_id):
                self.exists.discard(key)
                self._update_down(key, now)

    def _classic_stable(self, live: dict[tuple[str, str], _Client]) -> bool:
        """Each classic client STABLE with no rejoin pending and owning what its last SyncGroup gave;
        each classic group's last completed generation holds exactly its live classic clients."""
        for (group_id, member_id), client in live.items():
            if not client.classic:
                continue
            if client.rejoin_pending or client.callbacks_running or client.assigned != client.owned:
                return False
            classic = self.classic_groups.get(group_id)
            if classic is not None and (member_id not in classic[1] or client.generation != classic[0]):
                return False
            if classic is None and member_id not in self.groups.get(group_id, _Group()).members:
                return False
        for group_id, (_, members) in self.classic_groups.items():
            if any((group_id, member_id) not in live for member_id in members):
                return False  # a member whose process is gone, or one that left
        # Partitions added that the leader has not noticed yet: a subscribed topic not fully owned.
        owned: dict[tuple[str, str], int] = {}
        for (group_id, _), client in live.items():  # every member: a migrating group mixes protocols
            for tp in client.owned:
                name = self.names.get(tp[0], tp[0])
                owned[(group_id, name)] = owned.get((group_id, name), 0) + 1
        for (group_id, _), client in live.items():
            if client.classic and any(
                self.topics.get(name, 0) != owned.get((group_id, name), 0) for name in client.subscription[0]
            ):
                return False
        return True

    # -- stability ------------------------------------------------------------------------
    def is_stable(self) -> bool:
        live: dict[tuple[str, str], _Client] = {}
        for client in self.clients.values():
            if client.state == "STALE" and client.alive and not client.paused:
                return False  # polling again: it rejoins once its assignment is released
            if not client.live:
                continue
            if client.state != "STABLE" or client.owned != client.fetching:
                return False
            live[(client.group, client.member_id)] = client
        if not self._classic_stable(live):
            return False
        for group_id, group in self.groups.items():
            if not group.members:
                continue
            if group.state != "Stable":
                return False
            for member_id, member in group.members.items():
                live_client = live.get((group_id, member_id))
                if live_client is None or live_client.owned != member.assigned:
                    return False
                if live_client.subscription != (tuple(sorted(member.subscribed)), member.regex):
                    return False  # a subscription change the coordinator has not heard yet
            if self._metadata_lags(group):
                return False
        for group_id, member_id in live:
            known_group = self.groups.get(group_id)
            if live[(group_id, member_id)].classic and group_id in self.classic_groups:
                continue  # checked against its classic group above
            if known_group is None or member_id not in known_group.members:
                return False  # a live client the coordinator does not know (yet)
        return True

    def _metadata_lags(self, group: _Group) -> bool:
        named: dict[str, int] = {}
        for name, n in group.metadata.values():
            named[name] = named.get(name, 0) + n
        for name, n in named.items():
            if self.topics.get(name) != n:
                return True  # partitions added, or the topic deleted
        subscribed = {name for m in group.members.values() for name in m.subscribed}
        return any(name in self.topics and self.topics[name] > 0 and name not in named for name in subscribed)

    def finish(self, end_ms: int) -> None:
        for key in list(self.down_since):
            self.unavailable[key] = self.unavailable.get(key, 0) + max(0, end_ms - self.down_since.pop(key))

    def partition_name(self, tp: TP) -> str:
        return f"{self.names.get(tp[0], tp[0])}-{tp[1]}"


def compute_metrics(
    trace: Iterable[Any], *, end_ms: int | None = None, totals_before_ms: int | None = None
) -> dict[str, Any]:
    """Rebalance metrics of a run, from its trace (a ``Trace`` or any iterable of ``TraceEvent``).

    ``end_ms`` closes the unavailability windows (default: the time of the last event).
    ``totals_before_ms``: also report, under ``totals_before``, the unavailability, revocations
    and moves of the events before that time (windows closed at it) — what
    ``compute_metrics`` of that prefix would give, taken in the same pass.
    See the module docstring for the exact definitions.
    """
    events = list(trace)
    replay = _Replay()
    totals_before: dict[str, int] | None = None
    triggers: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    sent_ids: set[Any] = set()
    heartbeats = 0
    records = 0
    revocations = 0
    violations: dict[str, int] = {}
    senders: set[str] = set()  # consumers and scripted clients
    share = {"acquired": 0, "redeliveries": 0, "acknowledged": 0, "archived": 0}

    def settle(step: int, time_ms: int) -> None:
        if pending and replay.is_stable():
            for trigger in pending:
                trigger["stable_step"] = step
                trigger["stable_time_ms"] = time_ms
                trigger["time_to_stable_ms"] = time_ms - trigger["time_ms"]
            pending.clear()

    index = 0
    while index < len(events):
        step = events[index].step
        time_ms = events[index].time_ms
        relevant = False
        while index < len(events) and events[index].step == step:
            event = events[index]
            if totals_before is None and totals_before_ms is not None and event.time_ms >= totals_before_ms:
                totals_before = _totals_at(replay, revocations, totals_before_ms)
            index += 1
            time_ms = event.time_ms
            kind = _kind(event)
            payload = event.payload
            replay.epoch_bumps.clear()
            replay.apply(event, kind)
            if kind in ("action_applied", "fault_injected") and payload.get("member"):
                senders.add(payload["member"])
            if kind == "fault_injected":
                target = payload.get("member") or payload.get("topic") or payload.get("to_broker") or ""
                trigger = _trigger(event, f"{payload.get('action')} {target}")
                triggers.append(trigger)
                pending.append(trigger)
            for group_id, epoch in replay.epoch_bumps:
                trigger = _trigger(event, f"group {group_id} epoch {epoch}")
                triggers.append(trigger)
                pending.append(trigger)
            if kind == "message_sent":
                sent_ids.add(payload.get("id"))
                if payload.get("api") in HEARTBEAT_APIS and payload.get("from") in senders:
                    heartbeats += 1
            elif kind == "message_dropped":
                at_send = payload.get("id") not in sent_ids
                if at_send and payload.get("api") in HEARTBEAT_APIS and payload.get("from") in senders:
                    heartbeats += 1
            elif kind == "handler_result":
                records += len(payload.get("records") or ())
            elif kind == "callback_invoked" and payload.get("callback") == "on_partitions_revoked":
                revocations += len(payload.get("partitions", ()))
            elif kind == "share_acquired":
                for first, last, count in payload["ranges"]:
                    share["acquired"] += last - first + 1
                    share["redeliveries"] += (last - first + 1) if count > 1 else 0
            elif kind == "share_state_write" and payload.get("error") is None:
                for first, last, _, target in payload["transitions"]:
                    if target in ("Acknowledged", "Archived"):
                        share[target.lower()] += last - first + 1
            elif kind == "invariant_violated":
                name = payload.get("invariant", "?")
                violations[name] = violations.get(name, 0) + 1
            relevant = relevant or kind in _STATE_KINDS
        if relevant or pending:
            settle(step, time_ms)

    last = events[-1].time_ms if events else 0
    end = last if end_ms is None else end_ms
    if totals_before is None and totals_before_ms is not None:
        totals_before = _totals_at(replay, revocations, totals_before_ms)
    replay.finish(end)
    unavailability: dict[str, dict[str, int]] = {}
    for (group_id, tp), ms in sorted(replay.unavailable.items()):
        per_group = unavailability.setdefault(group_id, {})
        name = replay.partition_name(tp)
        per_group[name] = per_group.get(name, 0) + ms
    resolved = [t["time_to_stable_ms"] for t in triggers if t["time_to_stable_ms"] is not None]
    return {
        "end_ms": end,
        "triggers": triggers,
        "max_time_to_stable_ms": max(resolved) if resolved else None,
        "mean_time_to_stable_ms": sum(resolved) / len(resolved) if resolved else None,
        "unsettled_triggers": len(triggers) - len(resolved),
        "stable_at_end": replay.is_stable(),
        "partition_unavailability_ms": unavailability,
        "total_unavailability_ms": sum(ms for per_group in unavailability.values() for ms in per_group.values()),
        "revocations": revocations,
        "partition_moves": replay.moves,
        "stops_without_move": replay.stops_without_move,
        "heartbeats_sent": heartbeats,
        "records_written": records,
        "invariant_violations": sum(violations.values()),
        "invariant_violations_by_name": dict(sorted(violations.items())),
        "share_records_acquired": share["acquired"],
        "share_redeliveries": share["redeliveries"],
        "share_records_acknowledged": share["acknowledged"],
        "share_records_archived": share["archived"],
        **({} if totals_before is None else {"totals_before": totals_before}),
    }


def _totals_at(replay: _Replay, revocations: int, at_ms: int) -> dict[str, int]:
    """The additive totals so far, with the open unavailability windows closed at ``at_ms``."""
    open_ms = sum(max(0, at_ms - since) for since in replay.down_since.values())
    return {
        "total_unavailability_ms": sum(replay.unavailable.values()) + open_ms,
        "revocations": revocations,
        "partition_moves": replay.moves,
    }


_STATE_KINDS = {"state_transition", "assignment_changed", "handler_result", "fault_injected", "action_applied"}


def _kind(event: Any) -> str:
    return event.kind.value if hasattr(event.kind, "value") else str(event.kind)


def _trigger(event: Any, cause: str) -> dict[str, Any]:
    return {
        "step": event.step,
        "time_ms": event.time_ms,
        "cause": cause.strip(),
        "stable_step": None,
        "stable_time_ms": None,
        "time_to_stable_ms": None,
    }


def stability_by_step(trace: Iterable[Any]) -> dict[int, bool]:
    """Whether the Lab was stable (as defined above) after each step that has events."""
    replay = _Replay()
    out: dict[int, bool] = {}
    events = list(trace)
    for index, event in enumerate(events):
        replay.apply(event, _kind(event))
        if index + 1 == len(events) or events[index + 1].step != event.step:
            out[event.step] = replay.is_stable()
    return out
