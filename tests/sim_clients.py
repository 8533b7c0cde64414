"""Simulated KIP-848 consumers driving one ``GroupCoordinator``, for the property tests.

A ``SimClient`` is a tiny model of the real consumer's membership manager:

* it remembers the member id and member epoch the coordinator gave it;
* it believes it owns exactly the ``assigned_topic_partitions`` of the last response that
  carried an assignment (so revoked partitions are dropped at once, as soon as a response
  leaves them out), and reports that set in ``topic_partitions`` of its next heartbeat;
* on FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID it drops everything and its next heartbeat is a
  full join with epoch 0 and the same member id;
* on UNRELEASED_INSTANCE_ID or FENCED_INSTANCE_ID it fails (docs/rules.md SM5);
* a leave (-1) or static leave (-2) ends the process's membership; it owns nothing after.

``Harness`` holds the cluster, the coordinator and the clients, offers one method per action
the tests take (heartbeats of every flavour, crashes, time, topic changes, failover), and
records the inputs it fed the coordinator so that a run can be replayed verbatim.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.protocol.common import from_topic_partitions, to_topic_partitions
from kip_lab.protocol.consumer_group import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from kip_lab.protocol.errors import Errors
from kip_lab.runtime.scheduler import Scheduler

Owned = dict[str, frozenset[int]]  # topic id -> partitions

GROUP_ID = "g"
# Errors a request built by a well-behaved client must never get back.
NEVER_FOR_WELL_BEHAVED = frozenset({Errors.INVALID_REQUEST, Errors.UNKNOWN_SERVER_ERROR, Errors.UNSUPPORTED_ASSIGNOR})


@dataclass(frozen=True)
class Subscription:
    """Topic names or a regex (the KIP forbids both at once)."""

    names: tuple[str, ...] = ()
    regex: str | None = None

    def request_fields(self) -> dict:
        # Switching kinds clears the other one: names=[] / regex="" mean "none".
        if self.regex is not None:
            return {"subscribed_topic_names": [], "subscribed_topic_regex": self.regex}
        return {"subscribed_topic_names": list(self.names), "subscribed_topic_regex": ""}

    def join_fields(self) -> dict:
        if self.regex is not None:
            return {"subscribed_topic_regex": self.regex}
        return {"subscribed_topic_names": list(self.names)}


def owned_size(owned: Owned) -> int:
    return sum(len(p) for p in owned.values())


def flatten(owned: Owned) -> set[tuple[str, int]]:
    return {(t, p) for t, parts in owned.items() for p in parts}


@dataclass
class SimClient:
    """One consumer process (a restart replaces the object; the slot stays)."""

    slot: int
    instance_id: str | None
    subscription: Subscription
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 30_000
    member_id: str = ""
    epoch: int = 0
    owned: Owned = field(default_factory=dict)
    # new: never joined | active | rejoin: fenced, next heartbeat joins | left | static_left
    # crashed: stopped heartbeating | failed: fatal error (UNRELEASED/FENCED_INSTANCE_ID)
    status: str = "new"
    # Set when the process sent something a correct consumer never sends (a made-up owned
    # set); cleared when it (re)joins.
    tainted: bool = False
    # Set when a heartbeat response was lost: like Kafka's consumer (which resets its
    # "sent fields" after a failed heartbeat), the next heartbeat is a full one. Until an
    # answer arrives the client may be behind the coordinator (an epoch, an assignment).
    full_next: bool = False

    @property
    def live(self) -> bool:
        """The process runs and wants to be in the group."""
        return self.status in ("active", "rejoin")

    def join_request(self) -> ConsumerGroupHeartbeatRequest:
        return ConsumerGroupHeartbeatRequest(
            group_id=GROUP_ID,
            member_id=self.member_id,
            member_epoch=0,
            instance_id=self.instance_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            topic_partitions=[],
            **self.subscription.join_fields(),
        )

    def heartbeat_request(
        self,
        *,
        epoch: int | None = None,
        owned: Owned | str | None = "mine",
        send_instance_id: bool = True,
        subscription: Subscription | None = None,
        full: bool = False,
    ) -> ConsumerGroupHeartbeatRequest:
        """A heartbeat; ``full`` sends every field (rebalance timeout, subscription, owned)."""
        reported = self.owned if owned == "mine" else owned
        if subscription is None and full:
            subscription = self.subscription
        extra = subscription.request_fields() if subscription is not None else {}
        return ConsumerGroupHeartbeatRequest(
            group_id=GROUP_ID,
            member_id=self.member_id,
            member_epoch=self.epoch if epoch is None else epoch,
            instance_id=self.instance_id if send_instance_id or full else None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
            server_assignor=self.server_assignor if full else None,
            topic_partitions=None if reported is None else to_topic_partitions(reported),
            **extra,
        )

    def leave_request(self, static: bool) -> ConsumerGroupHeartbeatRequest:
        return ConsumerGroupHeartbeatRequest(
            group_id=GROUP_ID,
            member_id=self.member_id,
            member_epoch=-2 if static else -1,
            instance_id=self.instance_id,
        )

    def on_response(self, request: ConsumerGroupHeartbeatRequest, response: ConsumerGroupHeartbeatResponse) -> None:
        """What the consumer does with a heartbeat response."""
        code = response.error_code
        if request.member_epoch < 0:  # a leave: whatever the answer, the process is out
            self.owned = {}
            self.epoch = 0
            self.status = "static_left" if request.member_epoch == -2 and code is Errors.NONE else "left"
            return
        if code is Errors.NONE:
            if response.member_id:
                self.member_id = response.member_id
            self.epoch = response.member_epoch
            if response.assignment is not None:
                self.owned = {
                    t: p for t, p in from_topic_partitions(response.assignment.assigned_topic_partitions).items() if p
                }
            self.status = "active"
            self.full_next = False
            if request.member_epoch == 0:
                self.tainted = False
        elif code in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID):
            self.owned = {}
            self.epoch = 0
            self.status = "rejoin"
            self.full_next = False
        elif code in (Errors.UNRELEASED_INSTANCE_ID, Errors.FENCED_INSTANCE_ID, Errors.GROUP_MAX_SIZE_REACHED):
            self.owned = {}
            self.epoch = 0
            self.status = "failed"
        else:
            raise AssertionError(f"client {self.slot}: unexpected {code.name}: {response.error_message}")


class Harness:
    """A cluster, one coordinator, and up to a handful of simulated clients."""

    def __init__(
        self,
        topics: dict[str, int],
        *,
        seed: int = 0,
        config: CoordinatorConfig | None = None,
    ) -> None:
        self.cluster = ClusterMetadata()
        for name, partitions in topics.items():
            self.cluster.create_topic(name, partitions)
        self.seed = seed
        self.gc = GroupCoordinator(config, self.cluster, seed=seed)
        self.clients: dict[int, SimClient] = {}
        # Inputs in order, for a verbatim replay: ("hb", request) | ("advance", ms) |
        # ("cluster", method name, args) | ("failover", seed)
        self.trace: list[tuple] = []
        # Member ids that sent a join (epoch 0) since the checker last cleared this.
        self.rejoined: set[str] = set()
        # The coordinator's view just before the last request (see send).
        self.member_before = None
        self.group_epoch_before = 0
        self.log_end_before = 0
        self.stable_before = False
        self.cluster_unchanged = False
        # The cluster version the coordinator last compared the group's metadata with: an
        # accepted heartbeat (not a leave) or a failover's load duties do that.
        self.cluster_version_seen = -1
        # Every member id the coordinator handed out to a fresh join (must never repeat).
        self.issued_ids: set[str] = set()
        self.failovers = 0
        # Called after every request and time step (cheap checks only).
        self.after_each: Callable[[], None] | None = None
        # Every response together with the request and the client's view before it.
        self.on_exchange: (
            Callable[[SimClient, ConsumerGroupHeartbeatRequest, Owned, ConsumerGroupHeartbeatResponse], None] | None
        ) = None

    # ---------------------------------------------------------------- plumbing
    def _hook(self) -> None:
        if self.after_each is not None:
            self.after_each()

    def send(
        self, client: SimClient, request: ConsumerGroupHeartbeatRequest, *, well_behaved: bool = True
    ) -> ConsumerGroupHeartbeatResponse:
        self.trace.append(("hb", request))
        if request.member_epoch == 0 and request.member_id:
            self.rejoined.add(request.member_id)
        before = dict(client.owned)
        group = self.gc.groups.get(GROUP_ID)
        self.member_before = group.members.get(request.member_id) if group and request.member_id else None
        self.group_epoch_before = group.group_epoch if group else 0
        self.log_end_before = self.gc.log.end_offset
        self.stable_before = group is not None and group.state.value == "Stable"
        self.cluster_unchanged = self.cluster.version == self.cluster_version_seen
        response = self.gc.consumer_group_heartbeat(request).response
        self._saw_cluster(request, response)
        if well_behaved:
            assert response.error_code not in NEVER_FOR_WELL_BEHAVED, (
                f"client {client.slot}: {response.error_code.name} for {request!r}: {response.error_message}"
            )
        if response.error_code is Errors.GROUP_MAX_SIZE_REACHED:
            group = self.gc.groups.get(GROUP_ID)
            size = len(group.members) if group else 0
            # Kafka ``throwIfConsumerGroupIsFull`` runs before the member lookup: any request from a
            # member the full group does not hold gets it, whatever its epoch.
            known = group is not None and request.member_id in group.members
            assert not known and size >= self.gc.config.max_size, (
                f"GROUP_MAX_SIZE_REACHED with {size} members (max {self.gc.config.max_size})"
            )
        if response.error_code is Errors.NONE and request.member_epoch == 0 and response.member_id:
            self.rejoined.add(response.member_id)
            if not request.member_id:
                assert response.member_id not in self.issued_ids, (
                    f"client {client.slot} got member id {response.member_id}, which the coordinator already "
                    "gave to another member"
                )
            self.issued_ids.add(response.member_id)
        if not well_behaved and response.error_code in NEVER_FOR_WELL_BEHAVED:
            pass  # the client sent nonsense; it keeps its state
        else:
            client.on_response(request, response)
        if self.on_exchange is not None:
            self.on_exchange(client, request, before, response)
        self._hook()
        return response

    # ---------------------------------------------------------------- clients
    def add_client(
        self,
        slot: int,
        subscription: Subscription,
        *,
        static: bool = False,
        server_assignor: str | None = None,
        rebalance_timeout_ms: int = 30_000,
    ) -> SimClient:
        client = SimClient(
            slot=slot,
            instance_id=f"instance-{slot}" if static else None,
            subscription=subscription,
            server_assignor=server_assignor,
            rebalance_timeout_ms=rebalance_timeout_ms,
        )
        self.clients[slot] = client
        return client

    def restart(self, slot: int, *, keep_member_id: bool = False) -> SimClient:
        """A new process in ``slot`` (same instance id, subscription, assignor)."""
        old = self.clients[slot]
        client = SimClient(
            slot=slot,
            instance_id=old.instance_id,
            subscription=old.subscription,
            server_assignor=old.server_assignor,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            member_id=old.member_id if keep_member_id else "",
        )
        self.clients[slot] = client
        return client

    def join(self, client: SimClient) -> ConsumerGroupHeartbeatResponse:
        client.owned = {}
        client.tainted = False
        return self.send(client, client.join_request())

    def heartbeat(self, client: SimClient, *, ack_at_once: bool = True) -> ConsumerGroupHeartbeatResponse:
        """The consumer's regular heartbeat: a join after fencing, else epoch + owned.

        With ``ack_at_once`` a response that revoked partitions is acknowledged by a second
        heartbeat straight away, as the real consumer does (KIP-848: after revoking it "sends
        the next heartbeat at once"); without it the acknowledgement waits for the next
        regular heartbeat, which can miss a short rebalance timeout.
        """
        if client.status == "rejoin":
            return self.join(client)
        before = flatten(client.owned)
        response = self.send(client, client.heartbeat_request(full=client.full_next))
        if ack_at_once and client.status == "active" and before - flatten(client.owned):
            response = self.send(client, client.heartbeat_request())
        return response

    def _saw_cluster(self, request: ConsumerGroupHeartbeatRequest, response: ConsumerGroupHeartbeatResponse) -> None:
        if response.error_code is Errors.NONE and request.member_epoch >= 0:
            self.cluster_version_seen = self.cluster.version

    def heartbeat_response_lost(self, client: SimClient) -> ConsumerGroupHeartbeatResponse:
        """The coordinator processes a correct heartbeat but the client never sees the answer."""
        request = (
            client.join_request() if client.status == "rejoin" else client.heartbeat_request(full=client.full_next)
        )
        self.trace.append(("hb", request))
        if request.member_epoch == 0 and request.member_id:
            self.rejoined.add(request.member_id)
        response = self.gc.consumer_group_heartbeat(request).response
        self._saw_cluster(request, response)
        assert response.error_code not in NEVER_FOR_WELL_BEHAVED, (
            f"client {client.slot}: {response.error_code.name} for {request!r}: {response.error_message}"
        )
        if response.error_code is Errors.NONE and request.member_epoch == 0 and response.member_id:
            self.rejoined.add(response.member_id)
            self.issued_ids.add(response.member_id)
        client.full_next = True
        self._hook()
        return response

    def round(self, order: Iterable[int] | None = None) -> None:
        """Every live client heartbeats once (acknowledging revocations at once), in ``order``."""
        slots = sorted(self.clients) if order is None else list(order)
        for slot in slots:
            client = self.clients.get(slot)
            if client is not None and client.live:
                self.heartbeat(client)

    def advance(self, ms: int) -> None:
        self.trace.append(("advance", ms))
        self.gc.advance(ms)
        self._hook()

    def commit(self, client: SimClient, owned: Owned) -> OffsetCommitResponse:
        """OffsetCommit v9 (by topic id) at the client's member id and epoch, zombie or not."""
        request = OffsetCommitRequest(
            group_id=GROUP_ID,
            generation_id_or_member_epoch=client.epoch,
            member_id=client.member_id,
            group_instance_id=client.instance_id,
            topics=[
                OffsetCommitRequestTopic(
                    topic_id=topic_id,
                    partitions=[
                        OffsetCommitRequestPartition(partition_index=p, committed_offset=len(self.trace))
                        for p in sorted(parts)
                    ],
                )
                for topic_id, parts in sorted(owned.items())
            ],
        )
        self.trace.append(("commit", request))
        response = self.gc.offset_commit(request).response
        self._hook()
        return response

    # ---------------------------------------------------------------- cluster
    def cluster_change(self, method: str, *args) -> None:
        self.trace.append(("cluster", method, args))
        getattr(self.cluster, method)(*args)

    # ---------------------------------------------------------------- failover
    def failover(self) -> None:
        self.failovers += 1
        seed = self.seed
        self.trace.append(("failover", seed))
        old = self.gc
        old.unload()
        self.gc = GroupCoordinator.from_log(old.log, old.config, self.cluster, scheduler=old.scheduler, seed=seed)
        self.cluster_version_seen = self.cluster.version
        self._hook()

    # ---------------------------------------------------------------- views
    def member_ids_in_group(self) -> set[str]:
        group = self.gc.groups.get(GROUP_ID)
        return set(group.members) if group else set()


def replay_trace(
    trace: list[tuple], topics: dict[str, int], *, seed: int = 0, config: CoordinatorConfig | None = None
) -> GroupCoordinator:
    """Feed a recorded trace, verbatim, to a fresh coordinator; returns it."""
    cluster = ClusterMetadata()
    for name, partitions in topics.items():
        cluster.create_topic(name, partitions)
    scheduler = Scheduler()
    gc = GroupCoordinator(config, cluster, scheduler=scheduler, seed=seed)
    for item in trace:
        if item[0] == "hb":
            gc.consumer_group_heartbeat(item[1])
        elif item[0] == "advance":
            gc.advance(item[1])
        elif item[0] == "commit":
            gc.offset_commit(item[1])
        elif item[0] == "cluster":
            getattr(cluster, item[1])(*item[2])
        elif item[0] == "failover":
            gc.unload()
            gc = GroupCoordinator.from_log(gc.log, gc.config, cluster, scheduler=scheduler, seed=item[1])
        else:
            raise ValueError(item)
    return gc
