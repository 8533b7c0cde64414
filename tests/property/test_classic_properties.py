"""Hypothesis stateful properties of classic and mixed groups (classic + consumer protocol).

``MixedGroupMachine`` drives one coordinator with up to three eager classic consumers and two
consumer-protocol consumers on topic foo (6 partitions): joins (with the MEMBER_ID_REQUIRED
round trip), syncs (the leader assigns round-robin), heartbeats, leaves, crashes (a client that
just stops) and time. The group converts to a consumer group and back as the protocols come and
go (policy: bidirectional). Checked after every step:

* no partition is owned by two members in any generation: the coordinator's consumer-group
  ownership is disjoint, a Stable classic group's assignments are disjoint, and a classic client
  that believes it owns partitions at its member's current epoch owns nothing the coordinator
  gave someone else;
* the group's generation / group epoch never goes back while the group has members (across
  both conversions);
* a coordinator rebuilt from the log equals the live one for consumer groups, and for a classic
  group at rest (Stable).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from property_profile import examples

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import ClassicGroupState, CoordinatorConfig, GroupCoordinator
from kip_lab.protocol.classic_group import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from kip_lab.protocol.common import TopicPartitions, from_topic_partitions
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription

GROUP = "g"
PARTITIONS = 6
CLASSIC = ("c0", "c1", "c2")
CONSUMERS = ("n0", "n1")


@dataclass
class ClassicClient:
    """An eager classic consumer: revokes everything before it rejoins."""

    name: str
    member_id: str = ""
    generation: int = -1
    owned: list[int] = field(default_factory=list)
    phase: str = "idle"  # idle | joining | syncing | stable
    leader_members: list[str] = field(default_factory=list)

    def reset(self) -> None:
        self.member_id, self.generation, self.owned, self.phase, self.leader_members = "", -1, [], "idle", []


@dataclass
class ConsumerClient:
    name: str
    member_id: str = ""
    epoch: int = -1  # -1: not in the group
    owned: list[int] = field(default_factory=list)


class MixedGroupMachine(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.cluster = ClusterMetadata()
        self.foo = self.cluster.create_topic("foo", PARTITIONS)
        self.config = CoordinatorConfig(initial_rebalance_delay_ms=0)
        self.gc = GroupCoordinator(self.config, self.cluster)
        self.classic = {n: ClassicClient(n) for n in CLASSIC}
        self.consumers = {n: ConsumerClient(n) for n in CONSUMERS}
        self.last_epoch = 0

    # -- delivery -------------------------------------------------------------------
    def deliver(self, result) -> None:
        for deferred in result.deferred:
            name, api = deferred.ref
            self.on_classic_response(self.classic[name], api, deferred.response)

    def on_classic_response(self, client: ClassicClient, api: str, response) -> None:
        error = response.error_code.name
        if api == "JoinGroup":
            if error == "MEMBER_ID_REQUIRED":
                client.member_id, client.phase = response.member_id, "idle"
            elif error == "NONE":
                client.member_id, client.generation, client.phase = (
                    response.member_id,
                    response.generation_id,
                    "syncing",
                )
                client.leader_members = (
                    [m.member_id for m in response.members] if response.leader == client.member_id else []
                )
            elif error == "REBALANCE_IN_PROGRESS":
                client.phase = "idle"
            else:
                client.reset()
        elif api == "SyncGroup":
            if error == "NONE":
                decoded = ConsumerProtocolAssignment.decode(response.assignment) if response.assignment else None
                client.owned = sorted(p for _, p in decoded.assigned_partitions) if decoded else []
                client.phase = "stable"
            elif error in ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION"):
                client.owned, client.phase = [], "idle"
            else:
                client.reset()

    # -- classic rules --------------------------------------------------------------
    @rule(name=st.sampled_from(CLASSIC))
    def classic_progress(self, name: str) -> None:
        """What the client's poll loop does next: join when idle, sync after a join, else heartbeat."""
        phase = self.classic[name].phase
        if phase == "idle":
            self.classic_join(name)
        elif phase == "syncing":
            self.classic_sync(name)
        else:
            self.classic_heartbeat(name)

    @rule()
    def classic_settle(self) -> None:
        """Every classic client polls a few rounds with no time passing: a rebalance completes."""
        for _ in range(4):
            self.advance(0)
            for name in CLASSIC:
                self.classic_progress(name)

    @rule(name=st.sampled_from(CLASSIC))
    def classic_rejoin(self, name: str) -> None:
        """A stable client rejoins on its own (a subscription or metadata change)."""
        if self.classic[name].phase == "stable":
            self.classic_join(name)

    def classic_join(self, name: str) -> None:
        client = self.classic[name]
        client.owned = []  # eager: revoke everything before (re)joining
        subscription = ConsumerProtocolSubscription(version=3, topics=["foo"], generation_id=client.generation)
        result = self.gc.join_group(
            JoinGroupRequest(
                group_id=GROUP,
                session_timeout_ms=10_000,
                rebalance_timeout_ms=10_000,
                member_id=client.member_id,
                protocols=[JoinGroupRequestProtocol(name="roundrobin", metadata=subscription.encode())],
            ),
            ref=(name, "JoinGroup"),
        )
        client.phase = "joining"
        if result.response is not None:
            self.on_classic_response(client, "JoinGroup", result.response)
        self.deliver(result)

    def classic_sync(self, name: str) -> None:
        client = self.classic[name]
        assignments = []
        if client.leader_members:
            members = sorted(client.leader_members)
            for i, member_id in enumerate(members):
                parts = [("foo", p) for p in range(PARTITIONS) if p % len(members) == i]
                encoded = ConsumerProtocolAssignment(version=3, assigned_partitions=parts).encode()
                assignments.append(SyncGroupRequestAssignment(member_id=member_id, assignment=encoded))
        result = self.gc.sync_group(
            SyncGroupRequest(
                group_id=GROUP, generation_id=client.generation, member_id=client.member_id, assignments=assignments
            ),
            ref=(name, "SyncGroup"),
        )
        client.phase = "waiting sync"
        if result.response is not None:
            self.on_classic_response(client, "SyncGroup", result.response)
        self.deliver(result)

    def classic_heartbeat(self, name: str) -> None:
        client = self.classic[name]
        if not client.member_id or client.generation < 0:
            return
        result = self.gc.heartbeat(
            HeartbeatRequest(group_id=GROUP, generation_id=client.generation, member_id=client.member_id)
        )
        error = result.response.error_code.name
        if error == "REBALANCE_IN_PROGRESS" and client.phase == "stable":
            client.owned, client.phase = [], "idle"
        elif error in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "FENCED_INSTANCE_ID"):
            client.reset()

    @rule(name=st.sampled_from(CLASSIC), crash=st.booleans())
    def classic_leave(self, name: str, crash: bool) -> None:
        client = self.classic[name]
        if client.member_id and not crash:
            result = self.gc.leave_group(
                LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id=client.member_id)])
            )
            self.deliver(result)
        client.reset()

    # -- consumer-protocol rules ----------------------------------------------------
    def consumer_heartbeat_request(self, client: ConsumerClient, epoch: int) -> None:
        joining = epoch == 0
        result = self.gc.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest(
                group_id=GROUP,
                member_id=client.member_id or client.name,
                member_epoch=epoch,
                rebalance_timeout_ms=10_000 if joining else -1,
                subscribed_topic_names=["foo"] if joining else None,
                topic_partitions=[]
                if joining
                else [TopicPartitions(topic_id=self.foo, partitions=client.owned)]
                if epoch > 0
                else None,
            )
        )
        self.deliver(result)
        response = result.response
        if epoch < 0:
            client.member_id, client.epoch, client.owned = "", -1, []
            return
        if response.error_code.name != "NONE":
            client.member_id, client.epoch, client.owned = "", -1, []
            return
        client.member_id = response.member_id or client.member_id or client.name
        client.epoch = response.member_epoch
        if response.assignment is not None:
            assigned = from_topic_partitions(response.assignment.assigned_topic_partitions)
            client.owned = sorted(assigned.get(self.foo, ()))

    @rule(name=st.sampled_from(CONSUMERS))
    def consumer_heartbeat(self, name: str) -> None:
        client = self.consumers[name]
        if client.epoch < 0:
            # Rolling upgrades join a running classic group (or start afresh), not one mid-setup.
            classic = self.gc.classic_groups.get(GROUP)
            if classic is not None and classic.members and classic.state is not ClassicGroupState.STABLE:
                return
        self.consumer_heartbeat_request(client, 0 if client.epoch < 0 else client.epoch)

    @rule(name=st.sampled_from(CONSUMERS), crash=st.booleans())
    def consumer_leave(self, name: str, crash: bool) -> None:
        client = self.consumers[name]
        if client.epoch < 0:
            return
        if crash:
            client.member_id, client.epoch, client.owned = "", -1, []
        else:
            self.consumer_heartbeat_request(client, -1)

    @rule(ms=st.sampled_from([0, 1_000, 5_000, 12_000]))
    def advance(self, ms: int) -> None:
        for result in self.gc.advance(ms):
            self.deliver(result)

    # -- invariants -----------------------------------------------------------------
    @invariant()
    def no_partition_has_two_owners(self) -> None:
        group = self.gc.groups.get(GROUP)
        if group is not None:
            seen: dict[int, str] = {}
            for member_id, member in sorted(group.members.items()):
                for p in member.owned().get(self.foo, ()):
                    assert p not in seen, f"foo-{p} owned by {seen[p]} and {member_id}"
                    seen[p] = member_id
            for client in self.classic.values():
                member = group.members.get(client.member_id)
                if client.phase == "stable" and member is not None and member.member_epoch == client.generation:
                    assert set(client.owned) <= set(member.owned().get(self.foo, ())), (client, member)
        classic = self.gc.classic_groups.get(GROUP)
        if classic is not None and classic.state is ClassicGroupState.STABLE:
            seen = {}
            for member_id, member in sorted(classic.members.items()):
                decoded = ConsumerProtocolAssignment.decode(member.assignment) if member.assignment else None
                for _, p in decoded.assigned_partitions if decoded else ():
                    assert p not in seen, f"foo-{p} assigned to {seen[p]} and {member_id} in one generation"
                    seen[p] = member_id
            current = [
                c for c in self.classic.values() if c.phase == "stable" and c.generation == classic.generation_id
            ]
            owners: dict[int, str] = {}
            for client in current:
                for p in client.owned:
                    assert p not in owners, f"clients {owners[p]} and {client.name} both own foo-{p}"
                    owners[p] = client.name

    @invariant()
    def epochs_never_go_back(self) -> None:
        classic = self.gc.classic_groups.get(GROUP)
        group = self.gc.groups.get(GROUP)
        if group is not None and any(m.uses_classic_protocol for m in group.members.values()):
            event("mixed consumer group")
        if classic is not None:
            event(f"classic group {classic.state.value}")
        if classic is not None and classic.members:
            epoch = classic.generation_id
        elif group is not None and group.members:
            epoch = group.group_epoch
        else:
            self.last_epoch = 0  # no member: the id may be reused by a new group
            return
        assert epoch >= self.last_epoch
        self.last_epoch = epoch

    @invariant()
    def failover_rebuilds_the_group(self) -> None:
        live = self.gc.state_snapshot()
        rebuilt = GroupCoordinator.from_log(self.gc.log, self.config, self.cluster, load=False).state_snapshot()
        assert rebuilt["groups"] == live["groups"]
        classic = self.gc.classic_groups.get(GROUP)
        if classic is not None and classic.state is ClassicGroupState.STABLE:
            assert rebuilt["classic_groups"] == live["classic_groups"]


MixedGroupMachine.TestCase.settings = settings(
    max_examples=examples(60),
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMixedGroups = MixedGroupMachine.TestCase
