"""Whether a Lab run is stable, tracked from what each step touched instead of rescanned.

A run is stable when every group with members is Stable, has seen the cluster's current
metadata and holds only members whose process is alive, and every live client is settled:
STABLE with nothing to reconcile, fetching what it owns, owning what the coordinator says at
the coordinator's epoch. ``StabilityTracker`` keeps the set of clients that are not settled
and re-evaluates only the clients a step touched (those that acted or were acted on, and those
whose coordinator member a record names); the group-level conditions are looked at only once
every client is settled, and again only after a record is written, a client comes or goes,
or the whole world may have changed (an action that names no member). Classic and share
consumers read coordinator state that no record names (a classic group's membership lives
in memory), so they are re-evaluated at every question — they are not what large groups
are made of.

``stable_by_scanning`` is the same question answered from scratch: the reference the tracker
is tested against, step for step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kip_lab.clients.classic_consumer import ClassicConsumer
from kip_lab.clients.consumer import Consumer
from kip_lab.clients.member_state import MemberState as ClientState
from kip_lab.clients.share_consumer import ShareConsumer
from kip_lab.coordinator import GroupState
from kip_lab.coordinator.classic_group import ClassicGroupState
from kip_lab.lab.observed import ObservingClient
from kip_lab.lab.touched import Touched, actor_of
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment
from kip_lab.protocol.records import OffsetCommitKey

GONE_STATES = (ClientState.UNSUBSCRIBED, ClientState.FATAL, ClientState.STALE)


def _live(client: Any) -> bool:
    return getattr(client, "alive", False) and getattr(client, "state", None) not in (None, *GONE_STATES)


class StabilityTracker:
    def __init__(self) -> None:
        self.touched = Touched()
        self.unsettled: set[str] = set()  # clients not settled when last evaluated
        self.rechecked: set[str] = set()  # classic and share consumers: evaluated at every question
        self.member_clients: dict[tuple[str, str], str] = {}  # (group id, member id) -> client name
        self.groups_changed = True  # the group-level conditions need another look
        self.groups_stable = False
        self.coordinator: Any = None  # the coordinator last asked about

    def step_done(self, events: Iterable[Any], batches: Iterable[Any]) -> None:
        """What a step touched: its events' actors, and the clients whose members its records name."""
        self.touched.names.update(map(actor_of, events))
        for batch in batches:
            if not batch or type(batch[0].key) is OffsetCommitKey:
                continue  # a commit's batch holds offsets only: no group or member changed
            self.groups_changed = True
            for key, _ in batch:
                member_id = getattr(key, "member_id", None)
                if member_id is not None:
                    name = self.member_clients.get((key.group_id, member_id))
                    if name is not None:
                        self.touched.names.add(name)

    def is_stable(self, world: Any) -> bool:
        clients = world.clients
        if world.coordinator is not self.coordinator:  # a failover's new coordinator: every answer may change
            self.coordinator = world.coordinator
            self.touched.everyone = True
        everyone = self.touched.everyone
        for name in self.touched.drain(clients):
            self._evaluate(world, name, clients[name])
        if everyone:
            self.groups_changed = True
        for name in [n for n in self.rechecked if n in clients]:
            self._evaluate(world, name, clients[name])
        if self.unsettled:
            return False
        if self.groups_changed:
            self.groups_stable = groups_stable(world)
            self.groups_changed = bool(world.coordinator.classic_groups)  # in-memory state: look every time
        return self.groups_stable

    def _evaluate(self, world: Any, name: str, client: Any) -> None:
        if isinstance(client, (ClassicConsumer, ShareConsumer, ObservingClient)):
            self.rechecked.add(name)
        else:
            self.rechecked.discard(name)
        key = None
        if _live(client):
            key = (client.config.group_id, client.member_id)
            if self.member_clients.get(key) != name:
                self.member_clients[key] = name
                self.groups_changed = True  # a new live member: the groups' members may all be live now
        if client_settled(world, client):
            self.unsettled.discard(name)
        else:
            self.unsettled.add(name)
        if key is None and name not in self.unsettled:
            self.groups_changed = True  # gone: its member may linger at the coordinator


def client_settled(world: Any, client: Any) -> bool:
    """One client's part of stability: settled, or not alive (then its group decides)."""
    if isinstance(client, ShareConsumer):
        return client.settled()
    if isinstance(client, ObservingClient):  # a real client: as its messages show it
        return client.settled(world)
    state = getattr(client, "state", None)
    if state is None or not client.alive:
        return True
    if isinstance(client, ClassicConsumer):
        return state in GONE_STATES or (client.settled() and _classic_member_converged(world, client))
    if isinstance(client, Consumer):
        return _consumer_settled(world, client)
    return True


def _consumer_settled(world: Any, client: Consumer) -> bool:
    """A live consumer-protocol client: STABLE with nothing to reconcile, fetching what it owns,
    and the coordinator agrees (``_coordinator_agrees``); or gone."""
    state = client.state
    if state is ClientState.STALE and not client.paused:
        return False  # polled again: it rejoins once on_partitions_lost has run
    if state in GONE_STATES:
        return True
    if state is not ClientState.STABLE or client.reconciling or client.target is not None:
        return False
    return set(client.owned) == set(client.fetching) and _coordinator_agrees(world, client)


def _coordinator_agrees(world: Any, client: Consumer) -> bool:
    """The coordinator holds the client's member at its epoch, with its subscription, assigning
    it what it owns."""
    member = _consumer_member(world, client)
    if member is None or member.member_epoch != client.member_epoch:
        return False
    if sorted(member.subscribed_topic_names) != sorted(client.config.subscribed_topic_names or ()) or (
        member.subscribed_topic_regex != client.config.subscribed_topic_regex
    ):
        return False  # a subscription change the coordinator has not heard yet
    return set(client.owned) == _assigned(member)


def _consumer_member(world: Any, client: Any) -> Any:
    """The client's member in its consumer group at the coordinator, or None."""
    group = world.coordinator.groups.get(client.config.group_id)
    return group.members.get(client.member_id) if group else None


def _assigned(member: Any) -> set[tuple[str, int]]:
    return {(t, p) for t, parts in member.assigned.items() for p in parts}


def _classic_member_converged(world: Any, client: ClassicConsumer) -> bool:
    """The coordinator holds the member at the client's generation with what the client owns.

    In a classic group that is the assignment its SyncGroup stored; after an online
    migration the member is in a consumer group and its assignment is the coordinator's.
    """
    classic = world.coordinator.classic_groups.get(client.config.group_id)
    if classic is not None and client.member_id in classic.members:
        if classic.generation_id != client.generation_id:
            return False
        stored = ConsumerProtocolAssignment.decode(classic.members[client.member_id].assignment)
        return client.partition_ids(stored.assigned_partitions) == set(client.owned)
    member = _consumer_member(world, client)
    return member is not None and set(client.owned) == _assigned(member)


def groups_stable(world: Any) -> bool:
    """The group-level part: every group with members Stable, its metadata current, its members live."""
    coordinator = world.coordinator
    if not (_consumer_groups_stable(coordinator) and _share_groups_caught_up(coordinator)):
        return False
    live = {(c.config.group_id, c.member_id) for c in world.clients.values() if _live(c)}
    groups = coordinator.groups
    if any((gid, m) not in live for gid, g in groups.items() for m in g.members):
        return False  # a member whose process is gone: its session has yet to expire
    return _classic_groups_stable(coordinator, live)


def _consumer_groups_stable(coordinator: Any) -> bool:
    """Every consumer group with members Stable, and none with a topic change still to notice
    (added partitions, a new topic matching its regex: a rebalance still to come)."""
    groups = coordinator.groups
    if any(g.state is not GroupState.STABLE for g in groups.values() if g.members):
        return False
    return not any(coordinator.has_unseen_metadata(group_id) for group_id in groups)


def _share_groups_caught_up(coordinator: Any) -> bool:
    """No share group's target is held back by assignment batching."""
    return not any(g.group_epoch > g.assignment_epoch for g in coordinator.share_groups.values() if g.members)


def _classic_groups_stable(coordinator: Any, live: set[tuple[str, str]]) -> bool:
    """Every classic group with members Stable, its members' processes alive."""
    for group_id, group in coordinator.classic_groups.items():
        if not group.members:
            continue
        if group.state is not ClassicGroupState.STABLE:
            return False
        if any((group_id, member_id) not in live for member_id in group.members):
            return False
    return True


def stable_by_scanning(world: Any) -> bool:
    """Every group Stable and every live member settled, from scratch (the tracker's reference)."""
    return all(client_settled(world, c) for c in world.clients.values()) and groups_stable(world)
