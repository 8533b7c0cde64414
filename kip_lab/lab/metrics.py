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

The delivery ledger (``kip_lab.lab.ledger``), per group and partition; a run's number is the
sum over its groups (``ledger_by_group``), ``max_lag_records`` the maximum. A group's
*position* in a partition is the end of the furthest range any of its members processed.

records processed
    Offsets in ``records_processed`` ranges, counted once per range that holds them (a record
    processed twice counts twice). A consumer reports a range when it commits and when it
    stops processing the partition; a share consumer when its application has worked through
    a batch (accepted, released or rejected).
records reprocessed
    Offsets of a ``records_processed`` range that a range of the same group already held.
records skipped
    Consumer groups: offsets from where the group first started the partition (its first
    ``position_set``) up to its position that no range holds and no ``seek`` jumped over.
    Share groups: records a ``share_state_write`` archived that no range holds.
commits failed
    ``commit_result`` events with at least one partition's offset not committed (an error
    code, or ``REQUEST_TIMED_OUT`` when no answer came in time).
max lag records
    The largest number of records between a partition's log end offset (the topic's
    ``produce_rate_per_s`` times the time) and the position of a member processing it,
    taken where the ledger knows that position: at each ``position_set``, and at the start
    (the member's previous report or start) and the end of each range processed — a Lab
    consumer processes at a steady rate in between, so its lag in between lies between those
    two — and at ``end_ms`` from the group's position when nobody is processing it.
    Partitions of a topic whose producer rate the trace does not give are left out.
processing pause
    Milliseconds, from the group's first start of the partition up to ``end_ms``, during
    which no client of the group was processing it — fetching it (``assignment_changed``),
    alive, not paused and not running a rebalance callback (``callback_invoked`` until
    ``callback_completed``; a classic leader's ``on_assignment`` takes no time) — counted for
    each such window at whose end the log end offset was above the group's position
    (records were waiting). Share groups have none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import groupby
from operator import attrgetter
from typing import Any

from kip_lab.events import (
    ActionApplied,
    AssignmentChanged,
    CallbackCompleted,
    CallbackInvoked,
    Event,
    FaultInjected,
    HandlerResult,
    InvariantViolated,
    MessageDropped,
    MessageSent,
    Note,
    ShareAcquired,
    ShareStateWrite,
    StateTransition,
)
from kip_lab.lab.ledger import Ledger
from kip_lab.lab.trace import TraceEvent

TP = tuple[str, int]

GONE = ("UNSUBSCRIBED", "FATAL", "STALE")
HEARTBEAT_APIS = ("ConsumerGroupHeartbeat", "Heartbeat")  # the new consumer's and the classic one's


@dataclass
class _Client:
    group: str
    alive: bool = True
    paused: bool = False
    state: str = "UNSUBSCRIBED"
    member_id: str | None = ""
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
    def apply(self, event: TraceEvent) -> None:
        """Apply one event to the views (events no view reads change nothing)."""
        reader = _REPLAY_READS.get(type(event.body))
        if reader is not None:
            reader(self, event.actor, event.body, event.time_ms)

    def on_action(self, actor: str, event: ActionApplied, now: int) -> None:
        reader = _ACTION_READS.get(event.name)
        if reader is not None:
            reader(self, event.fields, now)

    def on_state_transition(self, actor: str, event: StateTransition, now: int) -> None:
        client = self.clients.get(actor)
        if client is None:
            return
        if event.from_state == "UNSUBSCRIBED" and event.to_state in ("JOINING", "UNJOINED"):
            client.owned = frozenset()
            self._set_fetching(actor, client, frozenset(), now)
        client.state = event.to_state
        client.member_id = event.member_id
        if client.classic:
            if event.generation_id is not None:
                client.generation = event.generation_id
            if client.state in ("PREPARING_REBALANCE", *GONE):
                client.rejoin_pending = False

    def on_assignment_changed(self, actor: str, event: AssignmentChanged, now: int) -> None:
        client = self.clients.get(actor)
        if client is None:
            return
        client.member_id = event.member_id
        if client.classic:
            client.assigned = None if event.assigned is None else frozenset(event.assigned)
            self.names.update(event.topic_names or {})
        client.owned = frozenset(event.owned or ())
        self._set_fetching(actor, client, frozenset(event.fetching or ()), now)

    def on_handler_result(self, actor: str, event: HandlerResult, now: int) -> None:
        for record in event.records:
            self._record(record, now)

    def on_note(self, actor: str, event: Note, now: int) -> None:
        if "rejoin" in event.details and actor in self.clients:
            self.clients[actor].rejoin_pending = True

    def on_callback(self, actor: str, event: CallbackInvoked | CallbackCompleted, now: int) -> None:
        client = self.clients.get(actor)
        if client is not None and client.classic and event.callback != "on_assignment":  # on_assignment is instant
            client.callbacks_running += 1 if isinstance(event, CallbackInvoked) else -1

    # -- actions (their fields, as JSON) ------------------------------------------------------
    def _add_consumer(self, action: dict[str, Any], now: int) -> None:
        self.clients[action["member"]] = _client_of(action["config"])  # a new name: the Lab refuses a taken one

    def _change_subscription(self, action: dict[str, Any], now: int) -> None:
        client = self.clients.get(action.get("member", ""))
        if client is not None:
            client.subscription = _subscription(action.get("topics"), action.get("regex"))

    def _crash(self, action: dict[str, Any], now: int) -> None:
        client = self.clients.get(action.get("member", ""))
        if client is not None:
            client.alive = False

    def _restart(self, action: dict[str, Any], now: int) -> None:
        member = action.get("member", "")
        client = self.clients.get(member)
        if client is None:
            return
        client.alive, client.paused, client.state = True, False, "UNSUBSCRIBED"
        client.assigned, client.rejoin_pending, client.generation = None, False, -1
        client.callbacks_running = 0
        self.incarnations[member] = self.incarnations.get(member, 0) + 1
        config = action.get("config")
        if config:  # restarted with another config: another version, or another group.protocol
            restarted = _client_of(config)
            client.group, client.subscription = restarted.group, restarted.subscription
            client.classic = restarted.classic

    def _pause(self, action: dict[str, Any], now: int) -> None:
        client = self.clients.get(action.get("member", ""))
        if client is not None:
            client.paused = action["action"] == "pause"

    def _create_topic(self, action: dict[str, Any], now: int) -> None:
        partitions = action.get("partitions")
        topic = action["topic"]
        self.topics[topic] = partitions if partitions is not None else self.topics.get(topic, 0)
        if action["action"] == "recreate_topic":
            self._classic_topic_gone(topic, now)

    def _add_partitions(self, action: dict[str, Any], now: int) -> None:
        if action.get("topic") in self.topics:
            self.topics[action["topic"]] += action["count"]

    def _delete_topic(self, action: dict[str, Any], now: int) -> None:
        self.topics.pop(action["topic"], None)
        self._classic_topic_gone(action["topic"], now)

    # -- coordinator records (summaries: {"key": {..., "type"}, "value"}) -----------------------
    def _record(self, record: dict[str, Any], now: int) -> None:
        key, value = record["key"], record["value"]
        kind = key.get("type")
        if kind == "GroupMetadataKey":
            self._classic_record(key["group"], value)
            return
        reader = _RECORD_READS.get(kind)
        group_id = key.get("group_id")
        if reader is None or group_id is None:
            return  # an offset commit, or a record no view reads
        group = self.groups.get(group_id)
        if group is None:
            if value is None:
                return
            group = self.groups[group_id] = _Group()
        reader(self, group_id, group, key, value, now)

    def _group_metadata(self, group_id: str, group: _Group, key: dict, value: dict | None, now: int) -> None:
        if value is None:
            self._set_metadata(group_id, group, {}, now)
            del self.groups[group_id]
            return
        if value["epoch"] > group.group_epoch:
            self.epoch_bumps.append((group_id, value["epoch"]))
        group.group_epoch = value["epoch"]

    def _partition_metadata(self, group_id: str, group: _Group, key: dict, value: dict | None, now: int) -> None:
        topics = (value or {}).get("topics", ())
        metadata = {t["topic_id"]: (t["topic_name"], t["num_partitions"]) for t in topics}
        self._set_metadata(group_id, group, metadata, now)

    def _target_metadata(self, group_id: str, group: _Group, key: dict, value: dict | None, now: int) -> None:
        if value is not None:
            group.assignment_epoch = value["assignment_epoch"]

    def _member_metadata(self, group_id: str, group: _Group, key: dict, value: dict | None, now: int) -> None:
        member_id = key["member_id"]
        if value is None:
            group.members.pop(member_id, None)
        else:
            member = group.members.setdefault(member_id, _Member())
            member.subscribed = tuple(value.get("subscribed_topic_names", ()))
            member.regex = value.get("subscribed_topic_regex")

    def _current_assignment(self, group_id: str, group: _Group, key: dict, value: dict | None, now: int) -> None:
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

    def _classic_stable(self, live: dict[tuple[str, str | None], _Client]) -> bool:
        """Each classic client STABLE with no rejoin pending and owning what its last SyncGroup gave;
        each classic group's last completed generation holds exactly its live classic clients."""
        if not all(self._classic_client_settled(group_id, member_id, c) for (group_id, member_id), c in live.items()):
            return False
        for group_id, (_, members) in self.classic_groups.items():
            if any((group_id, member_id) not in live for member_id in members):
                return False  # a member whose process is gone, or one that left
        return self._classic_topics_owned(live)

    def _classic_client_settled(self, group_id: str, member_id: str | None, client: _Client) -> bool:
        if not client.classic:
            return True
        if client.rejoin_pending or client.callbacks_running or client.assigned != client.owned:
            return False
        classic = self.classic_groups.get(group_id)
        if classic is not None:
            return member_id in classic[1] and client.generation == classic[0]
        return member_id in self.groups.get(group_id, _Group()).members

    def _classic_topics_owned(self, live: dict[tuple[str, str | None], _Client]) -> bool:
        """Every partition of the topics classic clients subscribe to is owned (else the leader
        has yet to notice added partitions). Every member counts: a migrating group mixes protocols."""
        owned: dict[tuple[str, str], int] = {}
        for (group_id, _), client in live.items():
            for tp in client.owned:
                name = self.names.get(tp[0], tp[0])
                owned[(group_id, name)] = owned.get((group_id, name), 0) + 1
        return not any(
            client.classic
            and any(self.topics.get(name, 0) != owned.get((group_id, name), 0) for name in client.subscription[0])
            for (group_id, _), client in live.items()
        )

    # -- stability ------------------------------------------------------------------------
    def is_stable(self) -> bool:
        """The module docstring's *stable*, (1) to (6)."""
        live = self._live_clients()
        if live is None or not self._classic_stable(live):
            return False
        if not all(self._group_settled(group_id, group, live) for group_id, group in self.groups.items()):
            return False
        for (group_id, member_id), client in live.items():
            known_group = self.groups.get(group_id)
            if client.classic and group_id in self.classic_groups:
                continue  # checked against its classic group
            if known_group is None or member_id not in known_group.members:
                return False  # a live client the coordinator does not know (yet)
        return True

    def _live_clients(self) -> dict[tuple[str, str | None], _Client] | None:
        """The live clients by (group, member id), or None when one is not settled yet."""
        live: dict[tuple[str, str | None], _Client] = {}
        for client in self.clients.values():
            if client.state == "STALE" and client.alive and not client.paused:
                return None  # polling again: it rejoins once its assignment is released
            if not client.live:
                continue
            if client.state != "STABLE" or client.owned != client.fetching:
                return None
            live[(client.group, client.member_id)] = client
        return live

    def _group_settled(self, group_id: str, group: _Group, live: dict[tuple[str, str | None], _Client]) -> bool:
        """A group with members is Stable, each member's client owns what it was assigned and
        asked for the subscription the coordinator has, and its metadata does not lag."""
        if not group.members:
            return True
        if group.state != "Stable":
            return False
        for member_id, member in group.members.items():
            live_client = live.get((group_id, member_id))
            if live_client is None or live_client.owned != member.assigned:
                return False
            if live_client.subscription != (tuple(sorted(member.subscribed)), member.regex):
                return False  # a subscription change the coordinator has not heard yet
        return not self._metadata_lags(group)

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
    trace: Iterable[TraceEvent], *, end_ms: int | None = None, totals_before_ms: int | None = None
) -> dict[str, Any]:
    """Rebalance metrics of a run, from its trace (a ``Trace`` or any iterable of ``TraceEvent``).

    ``end_ms`` closes the unavailability windows (default: the time of the last event).
    ``totals_before_ms``: also report, under ``totals_before``, the unavailability, revocations
    and moves of the events before that time (windows closed at it) — what
    ``compute_metrics`` of that prefix would give, taken in the same pass.
    See the module docstring for the exact definitions.
    """
    replay = _Replay()
    tally = _Tally()
    ledger = Ledger()
    totals_before: dict[str, int] | None = None
    last = 0
    for step, in_step in groupby(trace, key=attrgetter("step")):  # stability is checked once a step is applied
        for event in in_step:
            if totals_before is None and totals_before_ms is not None and event.time_ms >= totals_before_ms:
                totals_before = _totals_at(replay, tally.revocations, totals_before_ms)
            replay.epoch_bumps.clear()
            replay.apply(event)
            tally.add(event, replay.epoch_bumps)
            ledger.apply(event)
            last = event.time_ms
        if tally.pending and replay.is_stable():
            tally.settle(step, last)
    end = last if end_ms is None else end_ms
    if totals_before is None and totals_before_ms is not None:
        totals_before = _totals_at(replay, tally.revocations, totals_before_ms)
    replay.finish(end)
    ledger.finish(end)
    return {
        "end_ms": end,
        **tally.triggers_report(),
        "stable_at_end": replay.is_stable(),
        **_unavailability_report(replay),
        "revocations": tally.revocations,
        "partition_moves": replay.moves,
        "stops_without_move": replay.stops_without_move,
        "heartbeats_sent": tally.heartbeats,
        "records_written": tally.records,
        "invariant_violations": sum(tally.violations.values()),
        "invariant_violations_by_name": dict(sorted(tally.violations.items())),
        "share_records_acquired": tally.share["acquired"],
        "share_redeliveries": tally.share["redeliveries"],
        "share_records_acknowledged": tally.share["acknowledged"],
        "share_records_archived": tally.share["archived"],
        **ledger.totals(),
        "ledger_by_group": {group: ledger.totals(group) for group in ledger.groups()},
        **({} if totals_before is None else {"totals_before": totals_before}),
    }


class _Tally:
    """What ``compute_metrics`` counts from events, beside the replay's views: the triggers
    (and which still wait for stability), heartbeats, records, revocations, share records."""

    def __init__(self) -> None:
        self.triggers: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []  # triggers not followed by a stable step yet
        self.sent_ids: set[int] = set()
        self.senders: set[str] = set()  # consumers and scripted clients
        self.heartbeats = 0
        self.records = 0
        self.revocations = 0
        self.violations: dict[str, int] = {}
        self.share = {"acquired": 0, "redeliveries": 0, "acknowledged": 0, "archived": 0}

    def add(self, event: TraceEvent, epoch_bumps: list[tuple[str, int]]) -> None:
        reader = _TALLY_READS.get(type(event.body))
        if reader is not None:
            reader(self, event)
        for group_id, epoch in epoch_bumps:
            self._trigger(event, f"group {group_id} epoch {epoch}")

    def _trigger(self, event: TraceEvent, cause: str) -> None:
        trigger = {
            "step": event.step,
            "time_ms": event.time_ms,
            "cause": cause.strip(),
            "stable_step": None,
            "stable_time_ms": None,
            "time_to_stable_ms": None,
        }
        self.triggers.append(trigger)
        self.pending.append(trigger)

    def settle(self, step: int, time_ms: int) -> None:
        """The Lab is stable after ``step``: every pending trigger ends there."""
        for trigger in self.pending:
            trigger["stable_step"] = step
            trigger["stable_time_ms"] = time_ms
            trigger["time_to_stable_ms"] = time_ms - trigger["time_ms"]
        self.pending.clear()

    def triggers_report(self) -> dict[str, Any]:
        resolved = [t["time_to_stable_ms"] for t in self.triggers if t["time_to_stable_ms"] is not None]
        return {
            "triggers": self.triggers,
            "max_time_to_stable_ms": max(resolved) if resolved else None,
            "mean_time_to_stable_ms": sum(resolved) / len(resolved) if resolved else None,
            "unsettled_triggers": len(self.triggers) - len(resolved),
        }

    def on_action(self, event: TraceEvent[ActionApplied]) -> None:
        action = event.body
        if action.member:
            self.senders.add(action.member)
        if isinstance(action, FaultInjected):
            target = action.member or action.fields.get("topic") or action.fields.get("to_broker") or ""
            self._trigger(event, f"{action.name} {target}")

    def on_message_sent(self, event: TraceEvent[MessageSent]) -> None:
        message = event.body
        self.sent_ids.add(message.id)
        if message.api in HEARTBEAT_APIS and message.source in self.senders:
            self.heartbeats += 1

    def on_message_dropped(self, event: TraceEvent[MessageDropped]) -> None:
        message = event.body
        at_send = message.id not in self.sent_ids
        if at_send and message.api in HEARTBEAT_APIS and message.source in self.senders:
            self.heartbeats += 1

    def on_handler_result(self, event: TraceEvent[HandlerResult]) -> None:
        self.records += len(event.body.written or ())

    def on_callback_invoked(self, event: TraceEvent[CallbackInvoked]) -> None:
        if event.body.callback == "on_partitions_revoked":
            self.revocations += len(event.body.partitions)

    def on_share_acquired(self, event: TraceEvent[ShareAcquired]) -> None:
        for first, last, count in event.body.ranges:
            self.share["acquired"] += last - first + 1
            self.share["redeliveries"] += (last - first + 1) if count > 1 else 0

    def on_share_state_write(self, event: TraceEvent[ShareStateWrite]) -> None:
        if event.body.error is None:
            for first, last, _, target in event.body.transitions:
                if target in ("Acknowledged", "Archived"):
                    self.share[target.lower()] += last - first + 1

    def on_invariant_violated(self, event: TraceEvent[InvariantViolated]) -> None:
        name = event.body.invariant
        self.violations[name] = self.violations.get(name, 0) + 1


def _unavailability_report(replay: _Replay) -> dict[str, Any]:
    unavailability: dict[str, dict[str, int]] = {}
    for (group_id, tp), ms in sorted(replay.unavailable.items()):
        per_group = unavailability.setdefault(group_id, {})
        name = replay.partition_name(tp)
        per_group[name] = per_group.get(name, 0) + ms
    return {
        "partition_unavailability_ms": unavailability,
        "total_unavailability_ms": sum(ms for per_group in unavailability.values() for ms in per_group.values()),
    }


def _totals_at(replay: _Replay, revocations: int, at_ms: int) -> dict[str, int]:
    """The additive totals so far, with the open unavailability windows closed at ``at_ms``."""
    open_ms = sum(max(0, at_ms - since) for since in replay.down_since.values())
    return {
        "total_unavailability_ms": sum(replay.unavailable.values()) + open_ms,
        "revocations": revocations,
        "partition_moves": replay.moves,
    }


def stability_by_step(trace: Iterable[TraceEvent]) -> dict[int, bool]:
    """Whether the Lab was stable (as defined above) after each step that has events."""
    replay = _Replay()
    out: dict[int, bool] = {}
    for step, in_step in groupby(trace, key=attrgetter("step")):
        for event in in_step:
            replay.apply(event)
        out[step] = replay.is_stable()
    return out


def _client_of(config: dict[str, Any]) -> _Client:
    """A client as an ``add_consumer`` (or ``restart``) action's consumer config describes it."""
    return _Client(
        group=config["group_id"],
        subscription=_subscription(config.get("subscribed_topic_names"), config.get("subscribed_topic_regex")),
        classic=config.get("group_protocol") == "classic",
    )


# What each pass reads: event classes (the replay's views, the tally), action names, record key types.
_REPLAY_READS: dict[type[Event], Callable[[_Replay, str, Any, int], None]] = {
    ActionApplied: _Replay.on_action,
    FaultInjected: _Replay.on_action,
    StateTransition: _Replay.on_state_transition,
    AssignmentChanged: _Replay.on_assignment_changed,
    HandlerResult: _Replay.on_handler_result,
    Note: _Replay.on_note,
    CallbackInvoked: _Replay.on_callback,
    CallbackCompleted: _Replay.on_callback,
}
_ACTION_READS: dict[str, Callable[[_Replay, dict[str, Any], int], None]] = {
    "add_consumer": _Replay._add_consumer,
    "change_subscription": _Replay._change_subscription,
    "crash": _Replay._crash,
    "restart": _Replay._restart,
    "pause": _Replay._pause,
    "resume": _Replay._pause,
    "create_topic": _Replay._create_topic,
    "recreate_topic": _Replay._create_topic,
    "add_partitions": _Replay._add_partitions,
    "delete_topic": _Replay._delete_topic,
}
_RECORD_READS: dict[str, Callable[[_Replay, str, _Group, dict, dict | None, int], None]] = {
    "ConsumerGroupMetadataKey": _Replay._group_metadata,
    "ConsumerGroupPartitionMetadataKey": _Replay._partition_metadata,
    "ConsumerGroupTargetAssignmentMetadataKey": _Replay._target_metadata,
    "ConsumerGroupMemberMetadataKey": _Replay._member_metadata,
    "ConsumerGroupCurrentMemberAssignmentKey": _Replay._current_assignment,
}
_TALLY_READS: dict[type[Event], Callable[[_Tally, Any], None]] = {
    ActionApplied: _Tally.on_action,
    FaultInjected: _Tally.on_action,
    MessageSent: _Tally.on_message_sent,
    MessageDropped: _Tally.on_message_dropped,
    HandlerResult: _Tally.on_handler_result,
    CallbackInvoked: _Tally.on_callback_invoked,
    ShareAcquired: _Tally.on_share_acquired,
    ShareStateWrite: _Tally.on_share_state_write,
    InvariantViolated: _Tally.on_invariant_violated,
}
