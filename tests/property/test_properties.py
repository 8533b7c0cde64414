"""Property-based tests of the KIP-848 group coordinator (Hypothesis).

``CoordinatorMachine`` drives ONE coordinator on a small cluster (topics from foo, bar, fox,
baz with 1-8 partitions) with up to six simulated consumers (``sim_clients.SimClient``):
joins by names or regex, heartbeats (correct, owned omitted, made-up owned set, stale or
future epoch), leaves, static leaves and rejoins, subscription changes, crashes and
restarts, time, topic changes, coordinator failover, and a "settle" step that checks
liveness. The invariants are checked after every step, and the cheap ones after every single
request and timer inside a step. Besides the rules of docs/rules.md (T, RC, F), they are:

* I1: the target epoch (TE) never passes the group epoch (GE);
* I2: every member epoch is at most TE, or -2 (a static member's temporary leave);
* I3: no partition is held (assigned or pending revocation) by two members;
* I4: a member's assigned and pending-revocation partitions are disjoint;
* I5: a partition is pending for a member only while another member still holds it;
* I6: correct members that keep heartbeating while nothing changes reach Stable, all at GE == TE;
* I7: then every subscribed partition is assigned to exactly one member.

Separate tests: liveness of quiescent groups, determinism of the log, and plain
regression tests for the bugs they found (fixed in the coordinator).
"""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from property_profile import examples
from sim_clients import (
    GROUP_ID,
    Harness,
    Owned,
    SimClient,
    Subscription,
    flatten,
    replay_trace,
)

from kip_lab.coordinator import ConsumerGroup, CoordinatorConfig, GroupCoordinator, GroupState, ReconciliationState
from kip_lab.coordinator.group import SubscriptionCounts, assignor_input
from kip_lab.protocol.common import from_topic_partitions
from kip_lab.protocol.errors import Errors
from kip_lab.runtime.scheduler import Scheduler

TOPIC_POOL = ("foo", "bar", "fox", "baz")
MAX_PARTITIONS = 12
MAX_CLIENTS = 6
HEARTBEAT_INTERVAL_MS = 5_000  # CoordinatorConfig's default
SETTLE_ROUNDS = 30  # 150 s of heartbeats: > session timeout (45 s) + reconciliation

NAME_SUBSCRIPTIONS = [("foo",), ("bar",), ("foo", "bar"), ("foo", "baz"), ("fox",), ("bar", "fox")]
REGEX_SUBSCRIPTIONS = ["fo.*", "ba.*", "f.*|b.*", "(foo|bar)"]
subscriptions = st.one_of(
    st.sampled_from(NAME_SUBSCRIPTIONS).map(lambda names: Subscription(names=names)),
    st.sampled_from(REGEX_SUBSCRIPTIONS).map(lambda regex: Subscription(regex=regex)),
)
server_assignors = st.sampled_from([None, "uniform", "range"])
rebalance_timeouts = st.sampled_from([5_000, 30_000, 60_000])


STATEFUL_SETTINGS = settings(
    max_examples=examples(150),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# ------------------------------------------------------------------------------ group checks
def _owned_counter(group: ConsumerGroup) -> Counter:
    """(topic id, partition) -> how many members hold it (assigned ∪ pending revocation)."""
    held: Counter = Counter()
    for member in group.members.values():
        for topic_id, parts in member.owned().items():
            held.update((topic_id, p) for p in parts)
    return held


def subscribed_partitions(group: ConsumerGroup) -> set[tuple[str, int]]:
    return {(tid, p) for tid, n in group.subscription_metadata.values() for p in range(n)}


def check_group(group: ConsumerGroup) -> None:
    """Structural invariants of one group, true at every instant between requests.

    * I1: TE <= GE.
    * I3 (coordinator side): no partition is in ``assigned ∪ pending_revocation`` of two
      members, and that union over members is exactly the keys of ``partition_epochs``,
      each mapped to its holder's member epoch.
    * I4: a member's ``assigned`` and ``pending_revocation`` are disjoint.
    * I2: every member epoch is <= TE, or the static-leave marker -2.
    * Targets of different members never share a partition.
    * When the target is current (GE == TE): the target has exactly one entry per member,
      only names partitions that exist in the group's subscription metadata, and (for a
      non-empty group) covers every subscribed partition exactly once (I7, server side).
    * A Stable group has GE == TE and every member at epoch TE, in state STABLE, with nothing
      pending revocation and ``assigned == target``.
    * Each member's kept assignor input is the one built from scratch from the member, the
      partition metadata and its target (never stale, after failover too).
    * The kept subscription counts (topic names, regexes, server and client-side assignors) are
      the ones counted from scratch over the members (Kafka ``ModernGroup.subscribedTopicNames``).
    """
    gid = group.group_id
    assert group.assignment_epoch <= group.group_epoch, f"{gid}: TE {group.assignment_epoch} > GE {group.group_epoch}"

    held = _owned_counter(group)
    doubled = sorted(tp for tp, n in held.items() if n > 1)
    assert not doubled, f"{gid}: partitions held by two members: {doubled}"
    epochs = {(t, p): e for t, parts in group.partition_epochs.items() for p, e in parts.items()}
    assert set(epochs) == set(held), (
        f"{gid}: partition_epochs {sorted(epochs)} != members' owned partitions {sorted(held)}"
    )
    for member in group.members.values():
        for topic_id, parts in member.owned().items():
            for p in parts:
                assert epochs[(topic_id, p)] == member.member_epoch, (
                    f"{gid}: {topic_id}-{p} recorded at epoch {epochs[(topic_id, p)]}, "
                    f"its holder {member.member_id} is at {member.member_epoch}"
                )
        both = flatten(member.assigned) & flatten(member.pending_revocation)
        assert not both, f"{gid}/{member.member_id}: assigned and pending revocation overlap: {both}"
        assert member.member_epoch <= group.assignment_epoch or member.member_epoch == -2, (
            f"{gid}/{member.member_id}: member epoch {member.member_epoch} > TE {group.assignment_epoch}"
        )

    targeted: Counter = Counter()
    for parts_by_topic in group.target.values():
        for topic_id, parts in parts_by_topic.items():
            targeted.update((topic_id, p) for p in parts)
    twice = sorted(tp for tp, n in targeted.items() if n > 1)
    assert not twice, f"{gid}: partitions in two members' targets: {twice}"

    if group.group_epoch == group.assignment_epoch and group.members:
        assert set(group.target) == set(group.members), (
            f"{gid}: current target is for {sorted(group.target)}, members are {sorted(group.members)}"
        )
        subscribed = subscribed_partitions(group)
        extra = sorted(set(targeted) - subscribed)
        assert not extra, f"{gid}: target names partitions outside the subscription metadata: {extra}"
        missing = sorted(subscribed - set(targeted))
        assert not missing, f"{gid}: current target (epoch {group.assignment_epoch}) leaves out {missing}"

    if group.state is GroupState.STABLE:
        assert group.group_epoch == group.assignment_epoch
        for member in group.members.values():
            where = f"{gid}/{member.member_id} in a Stable group"
            assert member.member_epoch == group.assignment_epoch, f"{where}: epoch {member.member_epoch}"
            assert member.state is ReconciliationState.STABLE, f"{where}: state {member.state}"
            assert not member.pending_revocation, f"{where}: pending revocation {member.pending_revocation}"
            assert member.assigned == group.target_of(member.member_id), (
                f"{where}: assigned {member.assigned} != target {group.target_of(member.member_id)}"
            )

    metadata = group.subscription_metadata
    fresh = {m: assignor_input(member, metadata, group.target.get(m, {})) for m, member in group.members.items()}
    stale = sorted(m for m in fresh if group.assignor_inputs.get(m) != fresh[m])
    assert not stale and set(group.assignor_inputs) == set(fresh), (
        f"{gid}: kept assignor inputs differ from rebuilt ones for {stale or sorted(group.assignor_inputs)}"
    )
    counted = SubscriptionCounts.of(group.members.values())
    assert group.subscriptions == counted, f"{gid}: kept counts {group.subscriptions} != counted {counted}"


def check_stable_and_complete(h: Harness) -> None:
    """I6 + I7 once a group has settled: everyone at GE == TE, every partition used once.

    Coordinator side: members are at epoch GE, their assigned sets partition the subscribed
    partitions. Client side: every live client is in the group and owns what the coordinator
    says it has.
    """
    group = h.gc.groups.get(GROUP_ID)
    if group is None or not group.members:
        assert not [c for c in h.clients.values() if c.live], "live clients but no members"
        return
    assert group.state is GroupState.STABLE, group.state
    assert group.assignment_epoch == group.group_epoch
    counts: Counter = Counter()
    for member in group.members.values():
        assert member.member_epoch == group.group_epoch
        counts.update(flatten(member.assigned))
    assert all(n == 1 for n in counts.values())
    assert set(counts) == subscribed_partitions(group), (
        f"assigned {sorted(counts)} != subscribed {sorted(subscribed_partitions(group))}"
    )
    # ... and, once a live member has heartbeated (they all did during settle), the group's
    # subscription metadata is the cluster as it is now (T5, T6: added partitions, created,
    # deleted and recreated topics, new regex matches were all noticed). A group with only
    # crashed members can stay Stable on old metadata: nobody heartbeats to notice.
    if not any(c.live for c in h.clients.values()):
        return
    wanted = set()
    for topic in h.cluster.topics():
        for member in group.members.values():
            regex = member.subscribed_topic_regex
            if topic.name in member.subscribed_topic_names or (regex and re.fullmatch(regex, topic.name)):
                wanted.update((topic.topic_id, p) for p in range(topic.num_partitions))
    assert subscribed_partitions(group) == wanted, (
        f"subscription metadata {sorted(group.subscription_metadata.items())} is not the cluster's "
        f"{[(t.name, t.topic_id, t.num_partitions) for t in h.cluster.topics()]}"
    )
    for client in h.clients.values():
        if client.live:
            assert client.status == "active"
            member = group.members.get(client.member_id)
            assert member is not None, f"client {client.slot} is live but not a member"
            assert client.epoch == member.member_epoch
            assert flatten(client.owned) == flatten(member.assigned)


def snapshot_without_timers(gc: GroupCoordinator) -> dict:
    snap = gc.state_snapshot()
    return {"groups": snap["groups"], "offsets": snap["offsets"]}


# ------------------------------------------------------------------------------ the machine
class CoordinatorMachine(RuleBasedStateMachine):
    """One coordinator, one group ("g"), up to six simulated consumers (max group size 5).

    Invariants, checked after every step (the cheap ones also after every request and every
    timer inside a step):

    1. Exclusive ownership.
       * Coordinator: see ``check_group`` (no partition in two members' assigned ∪
         pending-revocation sets; the union equals ``partition_epochs``).
       * Clients: take the clients whose process is running and that believe they are in the
         group (status ``active``) and whose member id the coordinator still lists with an
         epoch other than -2. Their believed-owned sets never overlap; each equals the
         coordinator's ``assigned`` for its member, or, for a client whose last response was
         lost (it may lag by an assignment), is a subset of what the coordinator has it
         holding (assigned ∪ pending revocation). Excluded on purpose: crashed or failed
         processes, clients fenced and not yet rejoined (they own nothing anyway), clients
         that left, and clients the coordinator removed (session or rebalance timeout) that
         have not heard so yet — such a zombie may still believe it owns partitions the
         coordinator gave away; KIP-848 only promises exclusivity among group members and
         stops zombies at commit time (the ``commit_offsets`` rule checks exactly that, F6).
         Clients that sent a made-up owned set are NOT excluded: the coordinator only trusts
         a reported set to release what it asked to revoke, and our clients drop revoked
         partitions at once, so lying cannot make the views diverge.
    2. Epochs never move backwards: GE and TE per group; each member's epoch per member id,
       unless the member rejoined (sent epoch 0) in between, left statically (-> -2) or came
       back from a static leave. TE <= GE; member epoch <= TE (or -2).
    3. Targets: disjoint, within the subscription metadata, and exactly covering it when
       GE == TE in a non-empty group (server-side mode; no client-side assignors here).
    4. Stable => every member at epoch TE, nothing pending revocation, assigned == target.
    5. Replay: replaying the log record by record (``from_log(load=False)``) gives exactly
       the live groups and offsets (timers excluded); a real ``from_log`` failover on a copy
       of the log, with a fresh scheduler, gives the same groups and offsets whenever its
       load duties wrote nothing, and structurally valid groups otherwise (the duties
       legitimately bump epochs when the cluster changed since a group's last heartbeat).
    6. Timers: every member has an armed session timer and no timer outlives its member;
       every member still revoking (UNREVOKED_PARTITIONS, not statically left) has a
       rebalance timer armed for its current epoch, so no member can hold a rebalance forever.

    Per request/response (``_on_exchange`` and ``Harness.send``):
    * no response both revokes and adds partitions (RC8); assigned and pending are disjoint;
    * outside UNREVOKED_PARTITIONS, assigned ∪ pending ⊆ the member's target; a pending
      partition is held by another member;
    * an accepted heartbeat never lowers the epoch and never goes past TE; an epoch that
      moves goes straight to TE (RC10);
    * one request bumps GE by at most one (T1-T9); in a Stable group a heartbeat with nothing
      new, with the cluster unchanged, writes no record;
    * a correct consumer's requests never get INVALID_REQUEST, UNSUPPORTED_ASSIGNOR or
      UNKNOWN_SERVER_ERROR; GROUP_MAX_SIZE_REACHED only comes when the group is full; a fresh
      join never gets a member id the coordinator already handed out.

    Liveness (the ``settle`` rule): with correct clients heartbeating and nothing changing,
    the group is Stable (or Empty) within SETTLE_ROUNDS heartbeat intervals, and then I6/I7
    hold and the subscription metadata matches the cluster.
    """

    def __init__(self) -> None:
        super().__init__()
        self.h: Harness | None = None
        self.seen_group_epochs: dict[str, tuple[int, int]] = {}
        self.seen_member_epochs: dict[tuple[str, str], int] = {}

    # -------------------------------------------------------------- setup
    @initialize(foo=st.integers(1, 8), bar=st.integers(1, 8))
    def setup(self, foo: int, bar: int) -> None:
        # One slot fewer than MAX_CLIENTS so that GROUP_MAX_SIZE_REACHED comes up too.
        self.h = Harness({"foo": foo, "bar": bar}, config=CoordinatorConfig(max_size=MAX_CLIENTS - 1))
        self.h.after_each = self.cheap_checks
        self.h.on_exchange = self._on_exchange

    # -------------------------------------------------------------- helpers
    def _clients(self, *statuses: str, static: bool | None = None) -> list[SimClient]:
        return [
            c
            for _, c in sorted(self.h.clients.items())
            if c.status in statuses and (static is None or (c.instance_id is not None) == static)
        ]

    def _in_sync(self) -> list[SimClient]:
        """Active clients whose last heartbeat was answered (else their next one must be full)."""
        return [c for c in self._clients("active") if not c.full_next]

    def _has_in_sync(self) -> bool:
        return any(c.status == "active" and not c.full_next for c in self.h.clients.values())

    def _group(self) -> ConsumerGroup | None:
        return self.h.gc.groups.get(GROUP_ID)

    def _existing(self) -> list[str]:
        return [n for n in TOPIC_POOL if n in self.h.cluster]

    def _on_exchange(self, client: SimClient, request, before: Owned, response) -> None:
        h = self.h
        group = self._group()
        # T1-T9: every triggering event bumps the group epoch by exactly one, so no single
        # request ever moves it by more.
        epoch_now = group.group_epoch if group else 0
        assert epoch_now - h.group_epoch_before <= 1, (
            f"one request moved the group epoch {h.group_epoch_before} -> {epoch_now}"
        )
        # N1: in a Stable group, a heartbeat with nothing new (the member's epoch, its
        # assignment or null as owned, no other field) from a member, with the cluster as the
        # previous request saw it, writes nothing.
        steady = (
            h.stable_before
            and h.cluster_unchanged
            and h.member_before is not None
            and request.member_epoch == h.member_before.member_epoch > 0
            and request.rebalance_timeout_ms == -1
            and request.subscribed_topic_names is None
            and request.subscribed_topic_regex is None
            and request.server_assignor is None
            and (
                request.topic_partitions is None
                or flatten(from_topic_partitions(request.topic_partitions)) == flatten(h.member_before.assigned)
            )
        )
        if steady:
            assert response.error_code is Errors.NONE, response
            assert h.gc.log.end_offset == h.log_end_before, (
                f"steady-state heartbeat wrote {[e.record.key for e in h.gc.log.entries(h.log_end_before)]}"
            )
        if response.error_code is not Errors.NONE or request.member_epoch < 0:
            return
        assert group is not None
        member = group.members.get(response.member_id or request.member_id)
        if response.assignment is not None:
            now = flatten(from_topic_partitions(response.assignment.assigned_topic_partitions))
            pending = flatten(from_topic_partitions(response.assignment.pending_topic_partitions))
            # RC8, judged on what both sides agree the member holds: what the coordinator had
            # given it before this request (the client's view may lag after a lost response:
            # it then learns of an earlier assignment and of a revocation in one answer, which
            # the consumer handles) and, if it reported a set, still claims. A partition a
            # lying client says it already dropped is not "revoked" by leaving it out.
            given = flatten(h.member_before.assigned) if h.member_before is not None else flatten(before)
            held = set(given)
            if request.topic_partitions is not None:
                held &= flatten(from_topic_partitions(request.topic_partitions))
            revoked, added = held - now, now - given
            assert not (revoked and added), (
                f"client {client.slot}: one response revokes {sorted(revoked)} and adds {sorted(added)}"
            )
            assert not now & pending, f"client {client.slot}: {sorted(now & pending)} both assigned and pending"
            assert member is not None
            target = flatten(group.target_of(member.member_id))
            # (A member still revoking toward an older target keeps what that target let it
            # keep until it has revoked — RC11 as Kafka reads it — so only when not revoking.)
            assert member.state is ReconciliationState.UNREVOKED_PARTITIONS or now | pending <= target, (
                f"client {client.slot}: assigned/pending {sorted((now | pending) - target)} outside its target"
            )
            # I5: a partition is pending only while another member still holds it.
            others = set()
            for other in group.members.values():
                if other.member_id != member.member_id:
                    others |= flatten(other.owned())
            unheld = pending - others
            assert not unheld, f"client {client.slot}: pending {sorted(unheld)} held by no other member"
        before_member = h.member_before
        # RC10: an epoch that moves goes straight to the target epoch, never in between.
        if (
            request.member_epoch > 0
            and before_member is not None
            and member is not None
            and member.member_epoch != before_member.member_epoch
        ):
            assert member.member_epoch == group.assignment_epoch, (
                f"client {client.slot}: epoch {before_member.member_epoch} -> {member.member_epoch}, "
                f"target epoch is {group.assignment_epoch}"
            )
        if request.member_epoch > 0:
            assert response.member_epoch >= request.member_epoch, (
                f"client {client.slot}: epoch {request.member_epoch} answered with {response.member_epoch}"
            )
        assert 0 < response.member_epoch <= group.assignment_epoch

    # -------------------------------------------------------------- membership rules
    @precondition(lambda self: len(self.h.clients) < MAX_CLIENTS)
    @rule(sub=subscriptions, static=st.booleans(), assignor=server_assignors, timeout=rebalance_timeouts)
    def new_member_joins(self, sub: Subscription, static: bool, assignor: str | None, timeout: int) -> None:
        slot = len(self.h.clients)
        client = self.h.add_client(slot, sub, static=static, server_assignor=assignor, rebalance_timeout_ms=timeout)
        self.h.join(client)

    @precondition(lambda self: any(c.status in ("new", "left") for c in self.h.clients.values()))
    @rule(data=st.data(), sub=st.none() | subscriptions)
    def member_joins_again(self, data: st.DataObject, sub: Subscription | None) -> None:
        client = data.draw(st.sampled_from(self._clients("new", "left")))
        if sub is not None:
            client.subscription = sub
        self.h.join(client)

    @precondition(lambda self: any(c.live for c in self.h.clients.values()))
    @rule(data=st.data(), ack_at_once=st.booleans(), full=st.booleans())
    def heartbeat(self, data: st.DataObject, ack_at_once: bool, full: bool) -> None:
        """Correct heartbeat (a join if the client was fenced; optionally with every field)."""
        client = data.draw(st.sampled_from(self._clients("active", "rejoin")))
        client.full_next = client.full_next or full
        self.h.heartbeat(client, ack_at_once=ack_at_once)

    @precondition(lambda self: any(c.live for c in self.h.clients.values()))
    @rule(data=st.data())
    def heartbeat_response_lost(self, data: st.DataObject) -> None:
        """The coordinator handles a correct heartbeat (or rejoin), the answer never arrives;
        the client's next heartbeat is a full one (RC13, F4: the previous epoch is accepted
        when the owned partitions are a subset of the assignment)."""
        self.h.heartbeat_response_lost(data.draw(st.sampled_from(self._clients("active", "rejoin"))))

    @precondition(lambda self: self._has_in_sync())
    @rule(data=st.data(), send_instance_id=st.booleans())
    def heartbeat_owned_omitted(self, data: st.DataObject, send_instance_id: bool) -> None:
        client = data.draw(st.sampled_from(self._in_sync()))
        self.h.send(client, client.heartbeat_request(owned=None, send_instance_id=send_instance_id))

    @precondition(lambda self: self._has_in_sync())
    @rule(data=st.data())
    def heartbeat_made_up_owned(self, data: st.DataObject) -> None:
        """A misbehaving client reports a subset or superset of what it really owns."""
        client = data.draw(st.sampled_from(self._in_sync()))
        mine = sorted(flatten(client.owned))
        group = self._group()
        others = sorted(
            {(t, p) for t, parts in (group.partition_epochs.items() if group else ()) for p in parts}
            | {(t.topic_id, p) for t in self.h.cluster.topics() for p in range(t.num_partitions)}
        )
        kept = data.draw(st.sets(st.sampled_from(mine))) if mine else set()
        added = data.draw(st.sets(st.sampled_from(others), max_size=4)) if others else set()
        reported: dict[str, set[int]] = {}
        for t, p in kept | added:
            reported.setdefault(t, set()).add(p)
        client.tainted = True
        self.h.send(client, client.heartbeat_request(owned={t: frozenset(p) for t, p in reported.items()}))

    @precondition(lambda self: self._has_in_sync())
    @rule(data=st.data(), future=st.booleans(), delta=st.integers(1, 3))
    def heartbeat_wrong_epoch(self, data: st.DataObject, future: bool, delta: int) -> None:
        """A stale epoch or one from the future; honest owned set."""
        client = data.draw(st.sampled_from(self._in_sync()))
        epoch = client.epoch + delta if future else max(1, client.epoch - delta)
        if epoch == client.epoch:
            return
        self.h.send(client, client.heartbeat_request(epoch=epoch))

    @precondition(lambda self: any(c.status == "active" for c in self.h.clients.values()))
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        client = data.draw(st.sampled_from(self._clients("active")))
        self.h.send(client, client.leave_request(static=False))

    @precondition(lambda self: any(c.status == "active" and c.instance_id for c in self.h.clients.values()))
    @rule(data=st.data())
    def static_leave(self, data: st.DataObject) -> None:
        client = data.draw(st.sampled_from(self._clients("active", static=True)))
        self.h.send(client, client.leave_request(static=True))

    @precondition(
        lambda self: any(
            c.status in ("static_left", "crashed", "failed") and c.instance_id for c in self.h.clients.values()
        )
    )
    @rule(data=st.data(), keep_member_id=st.booleans())
    def static_member_restarts(self, data: st.DataObject, keep_member_id: bool) -> None:
        """A new process with the same instance id (UNRELEASED_INSTANCE_ID if the old one is still in)."""
        old = data.draw(st.sampled_from(self._clients("static_left", "crashed", "failed", static=True)))
        self.h.join(self.h.restart(old.slot, keep_member_id=keep_member_id))

    @precondition(
        lambda self: any(c.status in ("crashed", "failed") and not c.instance_id for c in self.h.clients.values())
    )
    @rule(data=st.data())
    def dynamic_member_restarts(self, data: st.DataObject) -> None:
        old = data.draw(st.sampled_from(self._clients("crashed", "failed", static=False)))
        self.h.join(self.h.restart(old.slot))

    @precondition(lambda self: any(c.status == "active" for c in self.h.clients.values()))
    @rule(data=st.data())
    def member_rejoins_in_place(self, data: st.DataObject) -> None:
        """A member that lost its state rejoins with epoch 0 and its member id while still in the group."""
        self.h.join(data.draw(st.sampled_from(self._clients("active"))))

    @precondition(lambda self: any(c.status == "active" for c in self.h.clients.values()))
    @rule(data=st.data(), sub=subscriptions, assignor=server_assignors)
    def change_subscription(self, data: st.DataObject, sub: Subscription, assignor: str | None) -> None:
        """New topic names or regex, and maybe another server assignor (None: unchanged)."""
        client = data.draw(st.sampled_from(self._clients("active")))
        request = client.heartbeat_request(subscription=sub, full=client.full_next)
        if assignor is not None:
            request = request.model_copy(update={"server_assignor": assignor})
        response = self.h.send(client, request)
        if response.error_code is Errors.NONE:
            client.subscription = sub
            client.server_assignor = assignor or client.server_assignor

    @precondition(lambda self: any(c.member_id for c in self.h.clients.values()))
    @rule(data=st.data())
    def commit_offsets(self, data: st.DataObject) -> None:
        """F6: any process, zombies included, commits what it believes it owns at its epoch.

        Accepted exactly when the coordinator lists its member id at that epoch (a removed
        member gets UNKNOWN_MEMBER_ID, a member behind or ahead STALE_MEMBER_EPOCH); a topic
        id that no longer exists gets UNKNOWN_TOPIC_ID whoever commits, since Kafka drops unknown
        topics before the group is looked at (``KafkaApis.handleOffsetCommitRequest``, D23).
        """
        client = data.draw(st.sampled_from([c for _, c in sorted(self.h.clients.items()) if c.member_id]))
        owned = client.owned
        if not owned and self._existing():
            owned = {self.h.cluster.topic(self._existing()[0]).topic_id: frozenset({0})}
        if not owned:
            return
        group = self._group()
        member = group.members.get(client.member_id) if group else None
        if group is None:
            expected = Errors.GROUP_ID_NOT_FOUND
        elif member is None:
            expected = Errors.UNKNOWN_MEMBER_ID
        elif member.member_epoch != client.epoch:
            expected = Errors.STALE_MEMBER_EPOCH
        else:
            expected = Errors.NONE
        response = self.h.commit(client, owned)
        for topic in response.topics:
            gone = self.h.cluster.topic_by_id(topic.topic_id) is None
            want = Errors.UNKNOWN_TOPIC_ID if gone else expected
            for partition in topic.partitions:
                assert partition.error_code is want, (
                    f"client {client.slot} ({client.status}, epoch {client.epoch}) committing "
                    f"{topic.topic_id}-{partition.partition_index}: {partition.error_code.name}, expected {want.name}"
                )

    @precondition(lambda self: any(c.live for c in self.h.clients.values()))
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        data.draw(st.sampled_from(self._clients("active", "rejoin"))).status = "crashed"

    # -------------------------------------------------------------- time
    @rule(ms=st.integers(0, 60_000))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)

    @rule(order=st.permutations(range(MAX_CLIENTS)), tick=st.booleans())
    def heartbeat_round(self, order: list[int], tick: bool) -> None:
        """A heartbeat interval passes (optionally) and every live client heartbeats once."""
        if tick:
            self.h.advance(HEARTBEAT_INTERVAL_MS)
        self.h.round(order)

    @rule(order=st.permutations(range(MAX_CLIENTS)))
    def settle(self, order: list[int]) -> None:
        """Liveness: with only correct clients heartbeating and nothing changing, the
        group becomes Stable (or Empty) within SETTLE_ROUNDS heartbeat intervals — crashed and
        statically-left members time out, revocations get acknowledged, every subscribed
        partition ends up with exactly one member, and the clients agree."""
        for _ in range(SETTLE_ROUNDS):
            self.h.advance(HEARTBEAT_INTERVAL_MS)
            self.h.round(order)
            group = self._group()
            settled = group is None or group.state in (GroupState.STABLE, GroupState.EMPTY)
            if settled and all(c.status != "rejoin" for c in self.h.clients.values()):
                break
        check_stable_and_complete(self.h)

    # -------------------------------------------------------------- cluster
    @precondition(lambda self: bool(self._existing()))
    @rule(data=st.data(), count=st.integers(1, 3))
    def add_partitions(self, data: st.DataObject, count: int) -> None:
        name = data.draw(st.sampled_from(self._existing()))
        count = min(count, MAX_PARTITIONS - self.h.cluster.topic(name).num_partitions)
        if count > 0:
            self.h.cluster_change("add_partitions", name, count)

    @precondition(lambda self: len(self._existing()) < len(TOPIC_POOL))
    @rule(data=st.data(), partitions=st.integers(1, 8))
    def create_topic(self, data: st.DataObject, partitions: int) -> None:
        name = data.draw(st.sampled_from([n for n in TOPIC_POOL if n not in self.h.cluster]))
        self.h.cluster_change("create_topic", name, partitions)

    @precondition(lambda self: bool(self._existing()))
    @rule(data=st.data())
    def delete_topic(self, data: st.DataObject) -> None:
        self.h.cluster_change("delete_topic", data.draw(st.sampled_from(self._existing())))

    @precondition(lambda self: bool(self._existing()))
    @rule(data=st.data(), partitions=st.integers(1, 8))
    def recreate_topic(self, data: st.DataObject, partitions: int) -> None:
        self.h.cluster_change("recreate_topic", data.draw(st.sampled_from(self._existing())), partitions)

    # -------------------------------------------------------------- failover
    # Capped so that this argument-less rule (which Hypothesis tends to over-pick) leaves room
    # for the others; two failovers per run still exercise replay-after-replay.
    @precondition(lambda self: self.h.failovers < 2 and bool(self.h.clients))
    @rule()
    def failover(self) -> None:
        self.h.failover()

    # -------------------------------------------------------------- invariants
    def cheap_checks(self) -> None:
        gc = self.h.gc
        for group in gc.groups.values():
            check_group(group)
        self._check_epochs_monotonic()
        self._check_client_views()

    def _check_epochs_monotonic(self) -> None:
        gc = self.h.gc
        rejoined = self.h.rejoined
        present: set[tuple[str, str]] = set()
        for gid, group in gc.groups.items():
            ge, te = group.group_epoch, group.assignment_epoch
            old = self.seen_group_epochs.get(gid)
            if old is not None:
                assert ge >= old[0], f"{gid}: group epoch went back {old[0]} -> {ge}"
                assert te >= old[1], f"{gid}: assignment epoch went back {old[1]} -> {te}"
            self.seen_group_epochs[gid] = (ge, te)
            for mid, member in group.members.items():
                key = (gid, mid)
                present.add(key)
                before = self.seen_member_epochs.get(key)
                now = member.member_epoch
                if before is not None and mid not in rejoined and now != -2 and before != -2:
                    assert now >= before, f"{gid}/{mid}: member epoch went back {before} -> {now}"
                self.seen_member_epochs[key] = now
        for key in set(self.seen_member_epochs) - present:
            del self.seen_member_epochs[key]
        rejoined.clear()

    def _check_client_views(self) -> None:
        group = self._group()
        members = group.members if group else {}
        claims: dict[tuple[str, int], int] = {}
        for client in self.h.clients.values():
            member = members.get(client.member_id)
            if client.status != "active" or member is None or member.member_epoch == -2:
                continue
            if client.full_next:  # missed a response: may lag, but never holds what it was not given
                assert flatten(client.owned) <= flatten(member.owned()), (
                    f"client {client.slot} (response lost) believes it owns {sorted(flatten(client.owned))}, "
                    f"the coordinator has it holding {sorted(flatten(member.owned()))}"
                )
            else:
                assert flatten(client.owned) == flatten(member.assigned), (
                    f"client {client.slot} believes it owns {sorted(flatten(client.owned))}, "
                    f"the coordinator says {sorted(flatten(member.assigned))}"
                )
            for tp in flatten(client.owned):
                assert tp not in claims, f"{tp} believed owned by clients {claims[tp]} and {client.slot}"
                claims[tp] = client.slot

    @invariant()
    def cheap_invariants(self) -> None:
        if self.h is not None:
            self.cheap_checks()

    @invariant()
    def log_replays_to_the_live_state(self) -> None:
        if self.h is None:
            return
        gc, cluster = self.h.gc, self.h.cluster
        live = snapshot_without_timers(gc)
        # Pure replay: every record in order, nothing else (the coordinator's own claim that
        # replay is the only code that changes group state).
        replayed = GroupCoordinator.from_log(gc.log, gc.config, cluster, scheduler=Scheduler(gc.now_ms), load=False)
        assert snapshot_without_timers(replayed) == live
        # A real failover onto a copy of the log.
        copy = gc.log.truncated(gc.log.batch_count)
        rebuilt = GroupCoordinator.from_log(copy, gc.config, cluster, scheduler=Scheduler(gc.now_ms))
        if not any(result.batches for result in rebuilt.load_results):
            assert snapshot_without_timers(rebuilt) == live
        else:
            for group in rebuilt.groups.values():
                check_group(group)

    @invariant()
    def timers_match_members(self) -> None:
        if self.h is None:
            return
        gc = self.h.gc
        timers = gc.timers()
        sessions = {(g, m) for (kind, g, m) in timers if kind == "session"}
        members = {(gid, mid) for gid, group in gc.groups.items() for mid in group.members}
        assert sessions == members, f"session timers {sorted(sessions)} != members {sorted(members)}"
        rebalance = {(g, m) for (kind, g, m) in timers if kind == "rebalance"}
        revoking = {
            (gid, mid)
            for gid, group in gc.groups.items()
            for mid, m in group.members.items()
            if m.state is ReconciliationState.UNREVOKED_PARTITIONS and m.member_epoch != -2
        }
        assert revoking <= rebalance, f"members revoking without a rebalance timer: {sorted(revoking - rebalance)}"
        for gid, mid in revoking:  # ... armed for the epoch it is revoking at, or it fires for nothing
            epoch, armed = gc.groups[gid].members[mid].member_epoch, gc._rebalance_epochs.get((gid, mid))
            assert armed == epoch, f"{gid}/{mid}: rebalance timer armed for epoch {armed}, member at {epoch}"


CoordinatorMachine.TestCase.settings = STATEFUL_SETTINGS
TestCoordinatorMachine = CoordinatorMachine.TestCase


# ------------------------------------------------------------------------------ liveness
member_specs = st.tuples(subscriptions, server_assignors, st.booleans(), st.integers(0, 3))
ROUNDS_TO_STABLE = 2  # rounds after the round of the last join (1 needed, 1 of slack)


@settings(max_examples=examples(100), deadline=None)
@given(
    foo=st.integers(1, 8),
    bar=st.integers(1, 8),
    fox=st.integers(0, 4),
    specs=st.lists(member_specs, min_size=1, max_size=5),
    orders=st.lists(st.permutations(range(5)), min_size=8, max_size=8),
)
def test_quiescent_group_becomes_stable(foo, bar, fox, specs, orders) -> None:
    """I6 + I7: correct members that keep heartbeating reach Stable quickly.

    Members join at the start of rounds 0-3 (``join_round``); in every round each live member
    heartbeats once, in a random order, one heartbeat interval apart, and acknowledges a
    revocation at once (as the real consumer does). In the round of the last join every
    member gets the new target and revokers release at once; the next round hands released
    partitions to members that heartbeated before their releaser. So the group must be
    Stable at the end of the round after the last join; the test allows one more round of
    slack (``ROUNDS_TO_STABLE``). At Stable, every member is at epoch GE == TE and every
    subscribed partition is assigned to exactly one member.
    """
    topics = {"foo": foo, "bar": bar} | ({"fox": fox} if fox else {})
    h = Harness(topics)
    last_join = max(spec[3] for spec in specs)
    for round_no in range(last_join + 1 + ROUNDS_TO_STABLE):
        h.advance(HEARTBEAT_INTERVAL_MS)
        for slot, (sub, assignor, static, join_round) in enumerate(specs):
            if join_round == round_no:
                h.join(h.add_client(slot, sub, static=static, server_assignor=assignor))
        h.round(orders[round_no % len(orders)])
        for group in h.gc.groups.values():
            check_group(group)
    group = h.gc.groups[GROUP_ID]
    assert group.state is GroupState.STABLE, (
        f"not Stable {ROUNDS_TO_STABLE} rounds after the last join: {group.state}, GE {group.group_epoch}, "
        f"TE {group.assignment_epoch}, members "
        f"{[(m.member_epoch, m.state.value) for m in group.members.values()]}"
    )
    check_stable_and_complete(h)


# ------------------------------------------------------------------------------ determinism
actions = st.one_of(
    st.tuples(st.just("join"), st.integers(0, 3), subscriptions, st.booleans()),
    st.tuples(st.just("heartbeat"), st.integers(0, 3)),
    st.tuples(st.just("round"), st.permutations(range(4))),
    st.tuples(st.just("omit_owned"), st.integers(0, 3)),
    st.tuples(st.just("lost_response"), st.integers(0, 3)),
    st.tuples(st.just("leave"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("crash"), st.integers(0, 3)),
    st.tuples(st.just("advance"), st.integers(0, 50_000)),
    st.tuples(st.just("add_partitions"), st.sampled_from(["foo", "bar"])),
    st.tuples(st.just("recreate"), st.sampled_from(["foo", "bar"])),
    st.tuples(st.just("failover")),
)


def run_script(script: list[tuple], seed: int) -> Harness:
    """Interpret ``script`` with simulated clients.

    ``join k`` starts client k (or restarts it if it stopped); the other client actions go to
    the k-th client (modulo) among those they apply to, and are skipped if there is none.
    """
    h = Harness({"foo": 3, "bar": 2}, seed=seed)

    def pick(k: int, *statuses: str) -> SimClient | None:
        eligible = [c for _, c in sorted(h.clients.items()) if c.status in statuses]
        return eligible[k % len(eligible)] if eligible else None

    for action in script:
        kind = action[0]
        if kind == "join":
            client = h.clients.get(action[1]) or h.add_client(action[1], action[2], static=action[3])
            if client.status in ("new", "left", "crashed", "failed", "static_left"):
                h.join(client if client.status == "new" else h.restart(client.slot))
        elif kind == "heartbeat" and (client := pick(action[1], "active", "rejoin")):
            h.heartbeat(client)
        elif kind == "round":
            h.round(action[1])
        elif kind == "omit_owned" and (client := pick(action[1], "active")) and not client.full_next:
            h.send(client, client.heartbeat_request(owned=None))
        elif kind == "lost_response" and (client := pick(action[1], "active", "rejoin")):
            h.heartbeat_response_lost(client)
        elif kind == "leave" and (client := pick(action[1], "active")):
            h.send(client, client.leave_request(static=action[2] and client.instance_id is not None))
        elif kind == "crash" and (client := pick(action[1], "active", "rejoin")):
            client.status = "crashed"
        elif kind == "advance":
            h.advance(action[1])
        elif kind == "add_partitions" and h.cluster.topic(action[1]).num_partitions < MAX_PARTITIONS:
            h.cluster_change("add_partitions", action[1], 1)
        elif kind == "recreate":
            h.cluster_change("recreate_topic", action[1], None)
        elif kind == "failover":
            h.failover()
    return h


def log_view(gc: GroupCoordinator) -> list[tuple[str, str]]:
    return [(repr(e.record.key), repr(e.record.value)) for e in gc.log]


joins = st.lists(st.tuples(st.just("join"), st.integers(0, 3), subscriptions, st.booleans()), min_size=1, max_size=4)


@settings(max_examples=examples(60), deadline=None)
@given(start=joins, script=st.lists(actions, min_size=10, max_size=40), seed=st.integers(0, 2**32))
def test_same_requests_same_log(start: list[tuple], script: list[tuple], seed: int) -> None:
    """Determinism: the same requests, timer steps and cluster changes, applied to two
    coordinators built with the same seed, give identical logs (and identical responses, as
    the simulated clients then act identically). Replaying the recorded inputs verbatim onto
    a third coordinator gives the same log again."""
    script = start + script
    first = run_script(script, seed)
    second = run_script(script, seed)
    assert log_view(first.gc) == log_view(second.gc)
    assert first.trace == second.trace
    third = replay_trace(first.trace, {"foo": 3, "bar": 2}, seed=seed)
    assert log_view(third) == log_view(first.gc)
    assert third.state_snapshot() == first.gc.state_snapshot()
    # Not vacuous: the KIP does reach the log (member ids come from it).
    if len(first.gc.log):
        assert log_view(run_script(script, seed + 1).gc) != log_view(first.gc)


# ------------------------------------------------------------------------------ bug reproductions
def test_member_ids_stay_unique_across_failover() -> None:
    """A member that joins after a failover must not get the id of a member already in the group.

    ``GroupCoordinator.from_log`` builds ``random.Random(seed)`` afresh, so the new coordinator
    hands out its predecessor's ids again; the second consumer's join then lands on the first
    member (treated as that member rejoining) and the group has one member instead of two.
    """
    h = Harness({"foo": 4})
    a = h.add_client(0, Subscription(names=("foo",)))
    h.join(a)
    h.gc.unload()
    h.gc = GroupCoordinator.from_log(h.gc.log, h.gc.config, h.cluster, scheduler=h.gc.scheduler)
    b = h.add_client(1, Subscription(names=("foo",)))
    response = h.gc.consumer_group_heartbeat(b.join_request()).response
    assert response.member_id != a.member_id
    assert len(h.gc.groups[GROUP_ID].members) == 2


def test_partition_coming_back_to_its_revoker_is_assigned_at_once() -> None:
    """I5 / Kafka's CurrentAssignmentBuilder: a partition is pending only while ANOTHER member
    holds it. Here the member revokes bar-0 (subscription shrinks), then, in the heartbeat that
    acknowledges the revocation, its target gets bar-0 back: nobody else holds bar-0, so it must
    be assigned in that response. ``reconcile``'s ``partition_held`` still sees the member's own
    ``pending_revocation`` and leaves it waiting in UNRELEASED_PARTITIONS for a release that
    already happened (it only gets bar-0 a heartbeat later).
    """
    h = Harness({"foo": 1, "bar": 1})
    a = h.add_client(0, Subscription(names=("foo", "bar")))
    h.join(a)
    h.send(a, a.heartbeat_request(subscription=Subscription(names=("foo",))))  # revoke bar-0
    assert flatten(a.owned) == {(h.cluster.topic_id("foo"), 0)}
    h.send(a, a.heartbeat_request(subscription=Subscription(names=("foo", "bar"))))  # ack; bar-0 back
    member = h.gc.groups[GROUP_ID].members[a.member_id]
    assert member.state is ReconciliationState.STABLE, member.state
    assert flatten(member.assigned) == {(h.cluster.topic_id("foo"), 0), (h.cluster.topic_id("bar"), 0)}
    assert h.gc.groups[GROUP_ID].state is GroupState.STABLE


def test_member_epoch_jumps_straight_to_the_target_epoch() -> None:
    """RC10: a member epoch only ever moves to the current target epoch (or stays put).

    A owns foo-0..5; B joins (epoch 2) and A is told to give up foo-3..5; before A
    acknowledges, C joins (epoch 3) and A must also give up foo-2. When A acknowledges the
    first revocation it still has foo-2 to revoke, so it must stay at its epoch (1) in
    UNREVOKED_PARTITIONS; ``reconcile`` moves it to epoch 2 (``member_epoch + 1``), an epoch
    that is neither its old one nor the target's. Kafka did the same until KAFKA-19974
    ("Do not bump member epoch when exiting UNREVOKED_PARTITIONS", apache/kafka#21107): the
    bump lets a partition be held by two members at the same epoch (not at the same time).
    """
    h = Harness({"foo": 6})
    a = h.add_client(0, Subscription(names=("foo",)))
    h.join(a)
    b = h.add_client(1, Subscription(names=("foo",)))
    h.join(b)
    h.send(a, a.heartbeat_request())  # A: revoke foo-3..5, stays at epoch 1
    c = h.add_client(2, Subscription(names=("foo",)))
    h.join(c)
    group = h.gc.groups[GROUP_ID]
    assert group.assignment_epoch == 3
    response = h.send(a, a.heartbeat_request())  # A acknowledges; must still revoke foo-2
    member = group.members[a.member_id]
    assert member.state is ReconciliationState.UNREVOKED_PARTITIONS
    assert response.member_epoch == member.member_epoch == 1
