"""Classic groups at the coordinator: the JoinGroup/SyncGroup barrier, every state transition,
each error path, the timeouts, static membership (KIP-345), protocol selection, the records
written and failover (Kafka's GroupMetadataManager behaviour)."""

from __future__ import annotations

import uuid

import pytest

from kip_lab.assignors.java_hash_order import string_key_order
from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.coordinator.classic_group import (
    CLASSIC_GROUP_STATE_MACHINE,
    ClassicGroupState,
)
from kip_lab.coordinator.view import classic_group_row, describe_record
from kip_lab.machines import IllegalTransition
from kip_lab.protocol.classic_group import (
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kip_lab.protocol.records import GroupMetadataKey
from kip_lab.protocol.share_group import ShareGroupHeartbeatRequest

GROUP = "g"
SESSION = 45_000  # longer than the rebalance timeout: the timeouts below are told apart
REBALANCE = 30_000


def protocols(*names: str, metadata: bytes = b"sub") -> list[JoinGroupRequestProtocol]:
    return [JoinGroupRequestProtocol(name=n, metadata=metadata) for n in names]


class Classic:
    """A coordinator and explicit classic requests; ``refs`` are the callers' names."""

    def __init__(self, **config) -> None:
        self.cluster = ClusterMetadata()
        self.cluster.create_topic("foo", 4)
        self.config = CoordinatorConfig(**{"initial_rebalance_delay_ms": 0, **config})
        self.gc = GroupCoordinator(self.config, self.cluster)

    @property
    def group(self):
        return self.gc.classic_groups[GROUP]

    def join(self, member_id: str = "", ref: str = "", names=("range",), instance: str | None = None, **kw):
        request = JoinGroupRequest(
            group_id=kw.pop("group_id", GROUP),
            session_timeout_ms=kw.pop("session_timeout_ms", SESSION),
            rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", REBALANCE),
            member_id=member_id,
            group_instance_id=instance,
            protocols=kw.pop("protocols", None) or protocols(*names),
            **kw,
        )
        return self.gc.join_group(request, ref=ref or member_id or instance)

    def new_member(self, ref: str) -> str:
        """The MEMBER_ID_REQUIRED round trip, then the parked JoinGroup."""
        return self.new_member_with(("range",), ref)

    def new_member_with(self, names: tuple[str, ...], ref: str = "") -> str:
        first = self.join(ref=ref, names=names)
        assert first.response.error_code.name == "MEMBER_ID_REQUIRED"
        second = self.join(first.response.member_id, ref=ref or first.response.member_id, names=names)
        assert second.response is None  # parked until the join phase completes
        return first.response.member_id

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, **kw):
        request = SyncGroupRequest(
            group_id=GROUP,
            generation_id=generation,
            member_id=member_id,
            assignments=[SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()],
            **kw,
        )
        return self.gc.sync_group(request, ref=f"sync-{member_id}")

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> str:
        request = HeartbeatRequest(
            group_id=GROUP, generation_id=generation, member_id=member_id, group_instance_id=instance
        )
        return self.gc.heartbeat(request).response.error_code.name

    def leave(self, *identities: MemberIdentity):
        return self.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=list(identities)))

    def advance(self, ms: int) -> list:
        return self.gc.advance(ms)

    def joined_pair(self) -> tuple[str, str]:
        """Two dynamic members through the join phase (generation 1, no sync yet): (leader, follower)."""
        a, b = self.new_member("a"), self.new_member("b")
        self.advance(0)
        leader = self.group.leader_id
        return leader, (b if leader == a else a)

    def stable_group(self, n: int = 2) -> list[str]:
        """n dynamic members through one rebalance: generation 1, Stable, the leader assigns b'<id>'."""
        ids = [self.new_member(f"m{i}") for i in range(n)]
        self.advance(0)  # the initial delay (0 here) closes the join phase
        leader = self.group.leader_id
        for member_id in ids:
            if member_id != leader:
                assert self.sync(member_id, 1).response is None
        self.sync(leader, 1, {m: m.encode() for m in ids})
        assert self.group.state is ClassicGroupState.STABLE
        return ids


def deferred_by_ref(result) -> dict:
    return {d.ref: d.response for d in result.deferred}


# -- the machine ------------------------------------------------------------------------
def test_state_machine_table_is_kafkas_valid_previous_states():
    edges = {(t.source, t.target) for t in CLASSIC_GROUP_STATE_MACHINE.transitions}
    assert edges == {
        ("Empty", "PreparingRebalance"),
        ("PreparingRebalance", "CompletingRebalance"),
        ("PreparingRebalance", "Empty"),
        ("CompletingRebalance", "Stable"),
        ("CompletingRebalance", "PreparingRebalance"),
        ("Stable", "PreparingRebalance"),
        ("Empty", "Dead"),
        ("PreparingRebalance", "Dead"),
        ("CompletingRebalance", "Dead"),
        ("Stable", "Dead"),
    }
    with pytest.raises(IllegalTransition):
        CLASSIC_GROUP_STATE_MACHINE.require_edge("Empty", "Stable")


# -- joining ----------------------------------------------------------------------------
def test_first_join_requires_a_member_id_and_writes_the_empty_group():
    """Kafka ``GroupMetadataManager.classicGroupJoinNewMember`` (MEMBER_ID_REQUIRED, the new group's record)
    and ``ClassicGroup.generateMemberId``."""
    c = Classic()
    result = c.join(ref="a")
    assert result.response.error_code.name == "MEMBER_ID_REQUIRED"
    # Kafka ClassicGroup.generateMemberId: client id (none here), "-", a java.util.UUID.
    prefix, _, random_part = result.response.member_id.partition("-")
    assert prefix == "" and str(uuid.UUID(random_part)) == random_part and uuid.UUID(random_part).version == 4
    assert [type(r.key) for r in result.records] == [GroupMetadataKey]
    assert result.records[0].value.generation == 0 and result.records[0].value.members == []
    assert c.group.state is ClassicGroupState.EMPTY
    assert result.response.member_id in c.group.pending_members


def test_initial_rebalance_waits_for_the_delay_and_extends_it_while_members_arrive():
    """Kafka ``GroupMetadataManager.tryCompleteInitialRebalanceElseSchedule``: a new group's first join phase waits for
    the delay, extended while members keep arriving."""
    c = Classic(initial_rebalance_delay_ms=3_000)
    a = c.new_member("a")
    assert c.group.state is ClassicGroupState.PREPARING_REBALANCE
    c.advance(2_000)
    b = c.new_member("b")  # a new member during the initial delay extends it
    fired = c.advance(1_000)
    assert c.group.state is ClassicGroupState.PREPARING_REBALANCE  # extended once
    assert [r.deferred for r in fired] == [()]
    fired = c.advance(3_000)
    assert c.group.state is ClassicGroupState.COMPLETING_REBALANCE
    responses = deferred_by_ref(fired[0])
    assert set(responses) == {"a", "b"}
    leader = c.group.leader_id
    assert leader == a  # the first member to join leads
    assert {r.generation_id for r in responses.values()} == {1}
    # The leader sees everyone, in Kafka's member-map order (ClassicGroup.currentClassicGroupMembers).
    assert [m.member_id for m in responses["a"].members] == string_key_order([a, b], 16)
    assert responses["b"].members == [] and responses["b"].leader == a
    assert b in c.group.members


def test_leader_sync_completes_the_rebalance_and_writes_the_group():
    """Kafka ``GroupMetadataManager.classicGroupSyncToClassicGroup``, ``setAndPropagateAssignment``: the leader's
    SyncGroup stores the group and answers every member."""
    c = Classic()
    a, b = c.new_member("a"), c.new_member("b")
    c.advance(0)
    follower = b if c.group.leader_id == a else a
    parked = c.sync(follower, 1)
    assert parked.response is None and parked.records == []
    result = c.sync(c.group.leader_id, 1, {a: b"A", b: b"B"})
    assert result.response.assignment == (b"A" if c.group.leader_id == a else b"B")
    assert deferred_by_ref(result)[f"sync-{follower}"].assignment == (b"B" if follower == b else b"A")
    assert c.group.state is ClassicGroupState.STABLE
    (record,) = result.records
    value = record.value
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == ("consumer", 1, "range", a)
    assert [(m.member_id, m.assignment, m.session_timeout, m.rebalance_timeout) for m in value.members] == sorted(
        [(a, b"A", SESSION, REBALANCE), (b, b"B", SESSION, REBALANCE)]
    )
    # the record is persisted, not replayed: the live group is what the handler built
    assert result.replay_records is False


def test_missing_assignments_are_empty():
    """Kafka ``GroupMetadataManager.setAndPropagateAssignment``: a member the leader gave nothing gets an empty
    assignment."""
    c = Classic()
    leader, follower = c.joined_pair()
    c.sync(follower, 1)
    result = c.sync(leader, 1, {leader: b"only the leader"})
    assert deferred_by_ref(result)[f"sync-{follower}"].assignment == b""
    assert {m.member_id: m.assignment for m in result.records[0].value.members} == {
        leader: b"only the leader",
        follower: b"",
    }


def test_stable_group_follower_rejoining_unchanged_gets_current_generation_and_leader_forces_rebalance():
    """Kafka ``GroupMetadataManager.classicGroupJoinExistingMember``: in a Stable group a follower rejoining unchanged
    gets the current generation; the leader's rejoin starts a rebalance."""
    c = Classic()
    a, b = c.stable_group(2)
    leader = c.group.leader_id
    follower = b if leader == a else a
    same = c.join(follower, ref="again")
    assert same.response.generation_id == 1 and same.response.members == []
    assert c.group.state is ClassicGroupState.STABLE
    forced = c.join(leader, ref="leader")
    assert forced.response is None
    assert c.group.state is ClassicGroupState.PREPARING_REBALANCE


def test_changed_protocols_trigger_a_rebalance_and_heartbeats_answer_rebalance_in_progress():
    """Kafka ``GroupMetadataManager.updateMemberThenRebalanceOrCompleteJoin``, ``validateClassicGroupHeartbeat``:
    changed protocols rebalance; heartbeats answer REBALANCE_IN_PROGRESS."""
    c = Classic()
    a, b = c.stable_group(2)
    result = c.join(b, ref="b2", protocols=protocols("range", metadata=b"new subscription"))
    assert result.response is None
    assert c.group.state is ClassicGroupState.PREPARING_REBALANCE
    assert c.heartbeat(a, 1) == "REBALANCE_IN_PROGRESS"
    assert c.sync(a, 1).response.error_code.name == "REBALANCE_IN_PROGRESS"
    done = c.join(a, ref="a2")  # the last member rejoins: the barrier opens
    assert done.response.generation_id == 2
    assert deferred_by_ref(done)["b2"].generation_id == 2
    assert c.group.state is ClassicGroupState.COMPLETING_REBALANCE


def test_rebalance_during_completing_rebalance_answers_parked_syncs_with_rebalance_in_progress():
    """Kafka ``GroupMetadataManager.prepareRebalance`` (``resetAndPropagateAssignmentWithError``): parked SyncGroups
    are answered REBALANCE_IN_PROGRESS."""
    c = Classic()
    _leader, follower = c.joined_pair()
    assert c.sync(follower, 1).response is None
    newcomer = c.join(ref="c")
    result = c.join(newcomer.response.member_id, ref="c")
    assert c.group.state is ClassicGroupState.PREPARING_REBALANCE
    assert deferred_by_ref(result)[f"sync-{follower}"].error_code.name == "REBALANCE_IN_PROGRESS"


def test_rebalance_timeout_removes_members_that_did_not_rejoin():
    """Kafka ``GroupMetadataManager.completeClassicGroupJoin``: at the rebalance timeout, members that did not rejoin
    are removed."""
    c = Classic()
    a, _b = c.stable_group(2)
    c.join(a, ref="a2", protocols=protocols("range", metadata=b"changed"))
    fired = c.advance(REBALANCE)
    assert list(c.group.members) == [a]
    assert c.group.generation_id == 2
    assert deferred_by_ref(fired[-1])["a2"].members[0].member_id == a


def test_pending_sync_expiry_removes_members_that_never_synced():
    """Kafka ``GroupMetadataManager.schedulePendingSync``, ``expirePendingSync``: members that never synced are removed
    at the deadline."""
    # The leader synced (Stable) but the follower never did: it is removed at the deadline.
    c = Classic()
    leader, follower = c.joined_pair()
    c.sync(leader, 1, {})
    assert c.group.state is ClassicGroupState.STABLE
    c.advance(REBALANCE)
    assert list(c.group.members) == [leader]
    assert c.group.state is ClassicGroupState.PREPARING_REBALANCE

    # The leader never synced: it is removed, and the follower's parked SyncGroup is told to rejoin.
    c = Classic()
    _leader, follower = c.joined_pair()
    assert c.sync(follower, 1).response is None
    (fired,) = c.advance(REBALANCE)
    assert list(c.group.members) == [follower]
    assert deferred_by_ref(fired)[f"sync-{follower}"].error_code.name == "REBALANCE_IN_PROGRESS"
    assert (c.group.state, c.group.generation_id) == (ClassicGroupState.PREPARING_REBALANCE, 1)


def test_session_timeout_removes_a_silent_member_and_the_last_one_empties_the_group():
    """Kafka ``GroupMetadataManager.expireClassicGroupMemberHeartbeat``, ``removeMemberAndUpdateClassicGroup``: a
    silent member is removed; the last one leaves the group Empty."""
    c = Classic()
    a, b = c.stable_group(2)
    c.advance(SESSION - 1)
    assert c.heartbeat(a, 1) == "NONE"
    c.advance(1)  # b's session expires
    assert b not in c.group.members
    assert c.group.state is ClassicGroupState.PREPARING_REBALANCE
    fired = c.advance(REBALANCE)  # a never rejoins: removed at the join deadline, the group empties
    assert c.group.members == {}
    assert c.group.state is ClassicGroupState.EMPTY
    assert c.group.generation_id == 2
    empty_record = [r for f in fired for r in f.records]
    assert empty_record[-1].value.generation == 2 and empty_record[-1].value.members == []


def test_pending_member_that_never_rejoins_expires():
    """Kafka ``GroupMetadataManager.classicGroupJoinNewDynamicMember``, ``removePendingMemberAndUpdateClassicGroup``: a
    pending member id expires after the session timeout."""
    c = Classic()
    first = c.join(ref="a")
    pending = first.response.member_id
    c.advance(SESSION)
    assert pending not in c.group.pending_members


# -- errors -----------------------------------------------------------------------------
def test_join_errors():
    """Kafka ``GroupMetadataManager.classicGroupJoin``, ``classicGroupJoinToClassicGroup``: JoinGroup's errors, as
    Kafka answers them."""
    c = Classic()
    assert c.join("someone", ref="x").response.error_code.name == "UNKNOWN_MEMBER_ID"  # no group yet
    assert c.join(ref="x", session_timeout_ms=1).response.error_code.name == "INVALID_SESSION_TIMEOUT"
    assert c.join(ref="x", group_id="").response.error_code.name == "INVALID_GROUP_ID"
    _a, _b = c.stable_group(2)
    assert c.join(ref="y", names=("roundrobin",)).response.error_code.name == "INCONSISTENT_GROUP_PROTOCOL"
    assert c.join(ref="y", protocol_type="connect").response.error_code.name == "INCONSISTENT_GROUP_PROTOCOL"
    assert c.join("ghost", ref="y").response.error_code.name == "UNKNOWN_MEMBER_ID"


def test_group_max_size():
    """Kafka ``GroupMetadataManager.classicGroupJoinToClassicGroup`` (``group.classic.max.size``): a new member of a
    full group is GROUP_MAX_SIZE_REACHED."""
    c = Classic(classic_max_size=1)
    c.stable_group(1)
    newcomer = c.join(ref="z")
    assert newcomer.response.error_code.name == "GROUP_MAX_SIZE_REACHED"


def test_sync_and_heartbeat_errors():
    """Kafka ``GroupMetadataManager.validateSyncGroup``, ``validateClassicGroupHeartbeat``: SyncGroup and Heartbeat
    errors."""
    c = Classic()
    a, _b = c.stable_group(2)
    assert c.sync(a, 7).response.error_code.name == "ILLEGAL_GENERATION"
    assert c.sync("ghost", 1).response.error_code.name == "UNKNOWN_MEMBER_ID"
    assert c.sync(a, 1, protocol_name="roundrobin").response.error_code.name == "INCONSISTENT_GROUP_PROTOCOL"
    assert c.sync(a, 1).response.assignment == a.encode()  # Stable: the current assignment again
    assert c.heartbeat(a, 0) == "ILLEGAL_GENERATION"
    assert c.heartbeat("ghost", 1) == "UNKNOWN_MEMBER_ID"
    assert c.gc.heartbeat(HeartbeatRequest(group_id="none", generation_id=1, member_id=a)).response.error_code.name == (
        "UNKNOWN_MEMBER_ID"
    )
    assert c.gc.sync_group(
        SyncGroupRequest(group_id="none", generation_id=1, member_id=a)
    ).response.error_code.name == ("UNKNOWN_MEMBER_ID")


def test_leave_group_per_member_errors_and_rebalance():
    """Kafka ``GroupMetadataManager.classicGroupLeaveToClassicGroup``: an answer per member, and a rebalance when a
    known member left."""
    c = Classic()
    a, _b = c.stable_group(2)
    result = c.leave(
        MemberIdentity(member_id=a), MemberIdentity(member_id="ghost"), MemberIdentity(group_instance_id="x")
    )
    assert [m.error_code.name for m in result.response.members] == ["NONE", "UNKNOWN_MEMBER_ID", "UNKNOWN_MEMBER_ID"]
    assert a not in c.group.members
    assert c.group.state is ClassicGroupState.PREPARING_REBALANCE
    assert c.gc.leave_group(
        LeaveGroupRequest(group_id="none", members=[MemberIdentity(member_id=a)])
    ).response.error_code.name == ("UNKNOWN_MEMBER_ID")


def test_consumer_group_ids_are_not_classic_and_vice_versa():
    """Kafka ``GroupMetadataManager.getOrMaybeCreateConsumerGroup``: with migration disabled, a Stable classic
    group's id answers a consumer heartbeat GROUP_ID_NOT_FOUND, at any epoch (docs/decisions.md C2)."""
    c = Classic(migration_policy="disabled")
    _a, _ = c.stable_group(2)
    hb = ConsumerGroupHeartbeatRequest(
        group_id=GROUP,
        member_id="n",
        member_epoch=0,
        rebalance_timeout_ms=1,
        subscribed_topic_names=["foo"],
        topic_partitions=[],
    )
    assert c.gc.consumer_group_heartbeat(hb).response.error_code.name == "GROUP_ID_NOT_FOUND"
    later = hb.model_copy(update={"member_epoch": 3})
    assert c.gc.consumer_group_heartbeat(later).response.error_code.name == "GROUP_ID_NOT_FOUND"


# -- protocol selection -----------------------------------------------------------------
def test_protocol_selection_takes_the_common_protocol_with_most_votes():
    """Kafka ``ClassicGroup.selectProtocol``: the protocol with most votes among those every member supports."""
    c = Classic()
    x = c.join(ref="x", names=("sticky", "range"))
    c.join(x.response.member_id, ref="x", names=("sticky", "range"))
    y = c.join(ref="y", names=("range", "sticky", "roundrobin"))
    c.join(y.response.member_id, ref="y", names=("range", "sticky", "roundrobin"))
    z = c.join(ref="z", names=("range", "sticky"))
    c.join(z.response.member_id, ref="z", names=("range", "sticky"))
    c.advance(0)
    assert c.group.protocol_name == "range"  # two votes to one; roundrobin is not common


def test_protocol_selection_tie_goes_to_kafkas_vote_map_order():
    """Kafka ``ClassicGroup.selectProtocol``: the first protocol with the most votes in its vote ``HashMap``
    ("sticky" sits in bucket 8, "range" in bucket 9), not the smallest name."""
    c = Classic()
    x = c.join(ref="x", names=("sticky", "range"))
    c.join(x.response.member_id, ref="x", names=("sticky", "range"))
    y = c.join(ref="y", names=("range", "sticky"))
    c.join(y.response.member_id, ref="y", names=("range", "sticky"))
    c.advance(0)
    assert c.group.protocol_name == "sticky"


def test_protocol_selection_tie_in_one_bucket_goes_to_the_first_vote():
    """Kafka ``ClassicGroup.selectProtocol``: "Aa" and "BB" share a bucket, so the vote counted first wins —
    the vote of the member Kafka's member map iterates first."""
    c = Classic()
    x = c.new_member_with(("Aa", "BB"))
    y = c.new_member_with(("BB", "Aa"))
    c.advance(0)
    first = string_key_order([x, y], 16)[0]
    assert c.group.protocol_name == ("Aa" if first == x else "BB")


def test_leader_that_does_not_rejoin_is_replaced_in_kafkas_member_map_order():
    """Kafka ``ClassicGroup.remove`` / ``maybeElectNewJoinedLeader``: the leader that did not rejoin is
    dropped and the first member Kafka's member ``HashMap`` iterates leads."""
    c = Classic()
    ids = c.stable_group(5)
    leader = c.group.leader_id
    rejoined = [m for m in ids if m != leader]
    for member_id in rejoined:  # changed protocols: a rebalance, which the leader sits out
        c.join(member_id, ref=member_id, names=("range", "roundrobin"))
    c.advance(REBALANCE)
    assert leader not in c.group.members and c.group.state is ClassicGroupState.COMPLETING_REBALANCE
    assert c.group.leader_id == next(m for m in string_key_order(ids, 16) if m in rejoined)


# -- static membership (KIP-345) ----------------------------------------------------------
def test_static_member_rejoining_unchanged_replaces_its_member_id_without_a_rebalance():
    """Kafka ``GroupMetadataManager.classicGroupJoinNewStaticMember``,
    ``updateStaticMemberThenRebalanceOrCompleteJoin``: a static member's new id replaces the old without a
    rebalance."""
    c = Classic()
    first = c.join(ref="s", instance="i-1")
    assert first.response is None  # static members skip MEMBER_ID_REQUIRED
    c.advance(0)
    old_id = c.group.static_members["i-1"]
    c.sync(old_id, 1, {old_id: b"mine"})
    again = c.join(ref="s2", instance="i-1")
    new_id = again.response.member_id
    assert new_id != old_id and c.group.static_members["i-1"] == new_id
    assert again.response.generation_id == 1 and again.response.skip_assignment is True  # it leads
    assert c.group.state is ClassicGroupState.STABLE
    assert c.group.members[new_id].assignment == b"mine"
    (record,) = again.records
    assert [m.member_id for m in record.value.members] == [new_id]
    # the old incarnation is fenced
    assert c.heartbeat(old_id, 1, instance="i-1") == "FENCED_INSTANCE_ID"
    assert c.heartbeat(new_id, 1, instance="i-1") == "NONE"


def test_static_member_rejoining_with_other_protocols_triggers_a_rebalance():
    """Kafka ``GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin``: a static member rejoining with
    other protocols starts a rebalance."""
    c = Classic()
    c.join(ref="s", instance="i-1")
    c.advance(0)
    old_id = c.group.static_members["i-1"]
    c.sync(old_id, 1, {})
    # still supports range (else INCONSISTENT_GROUP_PROTOCOL) but now prefers sticky: the vote changes
    changed = c.join(ref="s2", instance="i-1", names=("sticky", "range"))
    assert changed.response.generation_id == 2 and changed.response.protocol_name == "sticky"
    assert c.group.state is ClassicGroupState.COMPLETING_REBALANCE
    assert changed.records == []  # nothing persisted until the leader syncs


def test_static_members_are_not_removed_when_they_do_not_rejoin():
    """Kafka ``GroupMetadataManager.completeClassicGroupJoin``: static members that did not rejoin stay in the group."""
    c = Classic()
    c.join(ref="s", instance="i-1")
    d = c.join(ref="d")
    c.join(d.response.member_id, ref="d")
    c.advance(0)
    static_id = c.group.static_members["i-1"]
    c.sync(c.group.leader_id, 1, {})
    c.sync(static_id if static_id != c.group.leader_id else d.response.member_id, 1)
    c.join(d.response.member_id, ref="d2", protocols=protocols("range", metadata=b"x"))
    c.advance(REBALANCE)  # the static member did not rejoin: kept (only its session decides), generation 2
    assert static_id in c.group.members and c.group.generation_id == 2
    assert c.leave(MemberIdentity(group_instance_id="i-1")).response.members[0].error_code.name == "NONE"
    assert static_id not in c.group.members


# -- failover ---------------------------------------------------------------------------
def test_failover_rebuilds_a_stable_group_and_re_arms_sessions():
    """Kafka ``GroupMetadataManager.replay`` (``GroupMetadataKey``), ``onLoaded``: a Stable group is rebuilt from its
    record and its sessions re-armed."""
    c = Classic()
    a, b = c.stable_group(2)
    live = c.gc.state_snapshot()["classic_groups"]
    rebuilt = GroupCoordinator.from_log(c.gc.log, c.config, c.cluster)
    assert rebuilt.state_snapshot()["classic_groups"] == live
    assert sorted(k for k in rebuilt.timers() if k[0] == "classic session") == sorted(
        [("classic session", GROUP, a), ("classic session", GROUP, b)]
    )
    group = rebuilt.classic_groups[GROUP]
    assert group.members[a].assignment == a.encode()
    assert rebuilt.heartbeat(
        HeartbeatRequest(group_id=GROUP, generation_id=1, member_id=a)
    ).response.error_code.name == ("NONE")


def test_a_rebalance_in_progress_is_soft_state_lost_on_failover():
    """Kafka ``GroupMetadataManager.replay``: only completed generations are written, so a rebalance in progress is
    lost on failover."""
    c = Classic()
    a, _b = c.stable_group(2)
    c.join(a, ref="a2", protocols=protocols("range", metadata=b"changed"))
    assert c.group.state is ClassicGroupState.PREPARING_REBALANCE
    rebuilt = GroupCoordinator.from_log(c.gc.log, c.config, c.cluster)
    assert rebuilt.classic_groups[GROUP].state is ClassicGroupState.STABLE
    assert rebuilt.classic_groups[GROUP].generation_id == 1


def test_unload_marks_classic_groups_dead():
    """Kafka ``GroupMetadataManager.onUnloaded``: a classic group turns Dead when its partition is unloaded."""
    c = Classic()
    c.stable_group(1)
    group = c.group
    c.gc.unload()
    assert group.state is ClassicGroupState.DEAD
    assert c.gc.classic_groups == {}


# -- admin view -------------------------------------------------------------------------
def test_list_and_describe_groups_cover_classic_and_consumer_groups():
    """Kafka ``GroupMetadataManager.listGroups``, ``describeGroups``: classic and consumer groups in one admin view."""
    c = Classic()
    a, b = c.stable_group(2)
    hb = ConsumerGroupHeartbeatRequest(
        group_id="cg",
        member_id="n",
        member_epoch=0,
        rebalance_timeout_ms=1,
        subscribed_topic_names=["foo"],
        topic_partitions=[],
    )
    c.gc.consumer_group_heartbeat(hb)
    listed = c.gc.list_groups(ListGroupsRequest()).response.groups
    assert [(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed] == [
        ("cg", "consumer", "Stable", "consumer"),
        (GROUP, "classic", "Stable", "consumer"),
    ]
    assert [g.group_id for g in c.gc.list_groups(ListGroupsRequest(types_filter=["classic"])).response.groups] == [
        GROUP
    ]
    assert c.gc.list_groups(ListGroupsRequest(states_filter=["empty"])).response.groups == []

    described = c.gc.describe_groups(DescribeGroupsRequest(groups=[GROUP, "cg", "none"])).response.groups
    classic, consumer, unknown = described
    assert (classic.group_state, classic.protocol_type, classic.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.member_assignment) for m in classic.members] == sorted([(a, a.encode()), (b, b.encode())])
    assert (consumer.group_state, [m.member_id for m in consumer.members]) == ("Stable", ["n"])
    assert b"foo" in consumer.members[0].member_assignment
    assert unknown.group_state == "Dead" and unknown.members == []

    c.join(a, ref="a2", protocols=protocols("range", metadata=b"changed"))  # rebalancing: no metadata shown
    during = c.gc.describe_groups(DescribeGroupsRequest(groups=[GROUP])).response.groups[0]
    assert during.group_state == "PreparingRebalance" and during.protocol_data == ""
    assert all(m.member_metadata == b"" and m.member_assignment == b"" for m in during.members)

    row = classic_group_row(c.group)
    assert (row["state"], row["generation"], row["protocol"]) == ("PreparingRebalance", 1, "range")
    record = next(e.record for e in c.gc.log if type(e.record.key) is GroupMetadataKey and e.record.value.members)
    assert describe_record(record).startswith(
        f"GroupMetadata: generation=1, protocol=range, leader={c.group.leader_id}"
    )


def test_a_share_group_id_is_not_a_classic_group():
    """Kafka ``GroupMetadataManager.classicGroupJoin``, ``shareGroup``: a share group's id refuses classic requests."""
    c = Classic()
    share = c.gc.share_group_heartbeat(
        ShareGroupHeartbeatRequest(group_id=GROUP, member_id="s", member_epoch=0, subscribed_topic_names=["foo"])
    )
    assert share.response.error_code.name == "NONE"
    result = c.join(ref="x")
    assert result.response.error_code.name == "INCONSISTENT_GROUP_PROTOCOL"
    assert GROUP not in c.gc.classic_groups
    assert c.heartbeat("s", 1) == "UNKNOWN_MEMBER_ID"


def test_static_member_errors():
    """Kafka ``GroupMetadataManager.classicGroupJoinExistingMember``: an instance id held by another member id is
    FENCED_INSTANCE_ID; a known member id under an unknown instance id is UNKNOWN_MEMBER_ID."""
    c = Classic()
    c.join(ref="s", instance="i-1")
    c.advance(0)
    static_id = c.group.static_members["i-1"]
    c.sync(static_id, 1, {})
    assert c.join("someone-else", ref="x", instance="i-1").response.error_code.name == "FENCED_INSTANCE_ID"
    assert c.join(static_id, ref="x", instance="i-2").response.error_code.name == "UNKNOWN_MEMBER_ID"
    # the member itself is accepted; as the leader its JoinGroup forces a rebalance (its own: generation 2)
    assert c.join(static_id, ref="x", instance="i-1").response.generation_id == 2


def test_static_replacement_during_a_rebalance_fences_the_old_requests_and_rebalances():
    """Kafka ``GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin``: replacing a static member
    mid-rebalance fences the old member's parked SyncGroup and starts a new rebalance."""
    c = Classic()
    d = c.new_member("d")  # joins first: the leader
    c.join(ref="s", instance="i-1")
    c.advance(0)
    old_id = c.group.static_members["i-1"]
    assert c.group.state is ClassicGroupState.COMPLETING_REBALANCE and c.group.leader_id == d
    assert c.sync(old_id, 1).response is None  # the old process waits for its assignment
    replaced = c.join(ref="s2", instance="i-1")  # a new process with the same instance id
    new_id = c.group.static_members["i-1"]
    assert new_id != old_id and old_id not in c.group.members
    # the leader may already have computed an assignment naming the old id: rebalance
    assert c.group.state is ClassicGroupState.PREPARING_REBALANCE
    assert deferred_by_ref(replaced)[f"sync-{old_id}"].error_code.name == "FENCED_INSTANCE_ID"
    done = c.join(d, ref="d2")  # the leader rejoins: everyone has, generation 2
    assert done.response.generation_id == 2
    assert deferred_by_ref(done)["s2"].generation_id == 2


def test_a_second_join_group_replaces_the_parked_one_which_is_never_answered():
    """Kafka ``ClassicGroup.updateMember``: the new request's future replaces the parked one (docs/decisions.md C9)."""
    c = Classic()
    a = c.new_member("a-first")  # parked during the initial delay
    second = c.join(a, ref="a-second")
    assert second.response is None and second.deferred == ()  # the first request gets no answer
    fired = c.advance(0)
    answered = deferred_by_ref(fired[0])
    assert set(answered) == {"a-second"} and answered["a-second"].generation_id == 1
