"""Invariants checked after every step of a Lab run.

Each has a name and a one-line explanation. A check only looks at what the step could have
changed (a client's assignment, records the coordinator wrote), so a quiet step costs
nothing. A violation is written to the trace at the step that caused it, or raised.

Two ways to check, with the same verdicts at every step (``LabConfig(invariants=...)``):

* ``"incremental"`` (the default) looks only at the clients, groups and members the step
  touched — the clients that acted or were acted on since the last check, the groups and
  members named by the records written — and keeps per-group indexes (who owns which
  partition, how often the target gives out each partition, which members are not
  converged) up to date from those alone, so a check costs what the step changed, not what
  the world holds. A violation that lasts (two owners of one partition, a Stable group with
  a member that is not converged) is reported again at every checked step, as a full check
  would. A coordinator replaced (a failover loads the log; a seek or a fork restores a
  snapshot) is noticed at the next check: its groups are checked whole and indexed anew.
* ``"full"`` rescans every client and every group at each checked step: the reference the
  incremental checks are tested against (a property test runs both over random faulty runs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Set
from itertools import pairwise
from operator import attrgetter, itemgetter
from typing import Any, Literal, Protocol

from kip_lab.clients.member_state import MemberState as ClientState
from kip_lab.coordinator import GroupState
from kip_lab.coordinator.member import ReconciliationState
from kip_lab.errors import KipLabError
from kip_lab.lab.ledger import LEDGER_INVARIANTS, LEDGER_KINDS, Ledger
from kip_lab.lab.share_invariants import READS as SHARE_READS
from kip_lab.lab.share_invariants import SHARE_INVARIANTS, ShareInvariants
from kip_lab.lab.touched import Touched, actor_of
from kip_lab.lab.trace import EventKind
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment
from kip_lab.protocol.records import OffsetCommitKey

INVARIANTS: dict[str, str] = {
    "single-owner": "No partition is owned by two live members of the group, as the clients see it "
    "(classic and mixed groups included, across generations).",
    "epochs-never-go-back": "Group, assignment and member epochs never decrease (a rejoin restarts at 0).",
    "target-covers-subscriptions": "A current target assigns every subscribed partition exactly once.",
    "stable-means-converged": "In a Stable group every member is at the group epoch with nothing pending.",
    "partition-epochs-match-ownership": "The coordinator's partition epochs are exactly what its members hold.",
    "classic-assignment-disjoint": "A classic generation's stored assignment gives each partition to one member.",
}

INVARIANTS.update(SHARE_INVARIANTS)
INVARIANTS.update(LEDGER_INVARIANTS)

GONE = (ClientState.UNSUBSCRIBED, ClientState.FENCED, ClientState.STALE, ClientState.FATAL)

# What each group check reads, by the record types that can change it (replay is the only writer).
TARGET_INPUTS = frozenset(
    {
        "ConsumerGroupMemberMetadataKey",
        "ConsumerGroupMetadataKey",
        "ConsumerGroupPartitionMetadataKey",
        "ConsumerGroupTargetAssignmentMetadataKey",
        "ConsumerGroupTargetAssignmentMemberKey",
    }
)
OWNERSHIP_INPUTS = frozenset({"ConsumerGroupMemberMetadataKey", "ConsumerGroupCurrentMemberAssignmentKey"})
ALL_RECORDS = TARGET_INPUTS | OWNERSHIP_INPUTS
NO_GROUP_CHANGE = frozenset({OffsetCommitKey})  # offsets change no group
NOTHING_WRITTEN: frozenset[str] = frozenset()
_kind_of = attrgetter("kind")  # TraceEvent.kind
CheckMode = Literal["incremental", "full"]
TP = tuple[str, int]
OWNERSHIP_EVENTS = frozenset({EventKind.ASSIGNMENT_CHANGED, EventKind.STATE_TRANSITION})  # what the clients own
QUIET_EVENTS = frozenset(EventKind) - OWNERSHIP_EVENTS - SHARE_READS - LEDGER_KINDS  # no check reads what these tell


_INDEXES = ("_touched", "_owners", "_views", "_lasting", "_unindexed", "_indexed")  # rebuilt, not saved


class InvariantViolation(KipLabError, AssertionError):
    """Raised instead of only tracing when the Lab is built with ``raise_on_violation``."""


class InvariantChecker:
    def __init__(self, raise_on_violation: bool = False, mode: CheckMode = "incremental") -> None:
        if mode not in ("incremental", "full"):
            raise ValueError(f"invariants must be 'incremental' or 'full', got {mode!r}")
        self.raise_on_violation = raise_on_violation
        self.mode = mode
        self.group_epochs: dict[str, tuple[int, int]] = {}
        self.member_epochs: dict[tuple[str, str], int] = {}
        self.client_epochs: dict[tuple[str, int], int] = {}
        self.violations: list[tuple[str, str]] = []
        self.share = ShareInvariants()
        self.ledger = Ledger()  # the delivery ledger: no-skip, commits-monotonic, reprocessing-explained
        self.ownership_checks = 0  # steps that changed what members own: the Lab weighs them as work
        # incremental: the clients touched since the last ownership check (None: full checks)
        self._touched = Touched() if mode == "incremental" else None
        self._owners = _Owners()
        self._views: dict[str, _GroupView] = {}
        self._lasting: set[str] = set()  # groups whose last check found a violation that lasts
        self._unindexed: set[str] = set()  # groups to check whole at the next group check (state replaced)
        self._indexed: Any = None  # the coordinator whose groups the views index

    def __getstate__(self) -> dict[str, Any]:
        """What a snapshot keeps: the memories of what was seen, not the incremental indexes (they
        are as large as the world; a restored checker rebuilds them at its first check)."""
        return {k: v for k, v in self.__dict__.items() if k not in _INDEXES}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._touched = Touched() if self.mode == "incremental" else None  # everyone, at the first check
        self._owners = _Owners()
        self._views = {}
        self._lasting = set()
        self._unindexed = set()
        self._indexed = None  # a restored world: its coordinator is new to the checker

    # -- what the Lab tells the incremental checks, besides each step's events ----------------
    def timer_fired(self, owner: Any) -> None:
        """A timer fired: a client's own timer touches that client; a scheduled action may touch any."""
        if self._touched is not None:
            self._touched.timer_fired(owner)

    def action_applied(self, action: Any) -> None:
        """An action touches the member it names; one that names none may touch every client."""
        if self._touched is not None:
            self._touched.action_applied(action)

    def check(self, world: Any, events: Iterable[Any]) -> list[tuple[str, str]]:
        """Check what this step's ``events`` and records (``world.written_key_types``) can have changed."""
        if self._touched is not None:  # incremental
            self._touched.names.update(map(actor_of, events))
            if world.coordinator is not self._indexed:
                self._coordinator_replaced(world.coordinator)
        if QUIET_EVENTS.issuperset(map(_kind_of, events)) and world.written_key_types <= NO_GROUP_CHANGE:
            return []  # most steps: a message sent or delivered, a heartbeat answered, offsets written
        kinds = set(map(_kind_of, events))
        changed = world.written_key_types - NO_GROUP_CHANGE  # a commit step: empty, with no names made
        written = {t.__name__ for t in changed} if changed else NOTHING_WRITTEN
        found: list[tuple[str, str]] = []
        if written or not kinds.isdisjoint(OWNERSHIP_EVENTS):
            found += self._ownership(world)
        if written:
            found += self._groups(world, written)
        if "GroupMetadataKey" in written:
            found += self._classic_assignments(world)
        if not kinds.isdisjoint(SHARE_READS):
            found += self.share.check(events)
        if not kinds.isdisjoint(LEDGER_KINDS):
            found += self._ledger(world, events)
        if found:
            self._report(found)
        return found

    def _ledger(self, world: Any, events: Iterable[Any]) -> list[tuple[str, str]]:
        """The ledger's invariants: the consumers' positions, processed records and commits of this step."""
        ledger = self.ledger
        ledger.namer = world.partition_name  # for the explanations; not kept (a snapshot copies the ledger)
        try:
            for event in events:
                if event.kind in LEDGER_KINDS:
                    ledger.apply(event)
        finally:
            ledger.namer = None
        return ledger.take_found()

    def _report(self, found: list[tuple[str, str]]) -> None:
        self.violations += found
        if self.raise_on_violation:
            raise InvariantViolation("; ".join(f"{name}: {text}" for name, text in found))

    def _ownership(self, world: Any) -> list[tuple[str, str]]:
        """single-owner and the clients' epochs: a step that changed what members own."""
        self.ownership_checks += 1
        if self.mode == "full":
            return self._single_owner(world) + self._client_epochs(world, world.clients)
        return self._ownership_incremental(world)

    def _groups(self, world: Any, written: Set[str]) -> list[tuple[str, str]]:
        """The consumer groups' checks: a step that wrote group records."""
        if self.mode == "full":
            return [f for group in world.coordinator.groups.values() for f in self._group(group, written)]
        return self._groups_incremental(world, written)

    def _coordinator_replaced(self, coordinator: Any) -> None:
        """A coordinator loaded from the log (a failover) or restored from a snapshot (a seek, a
        fork) holds new group objects whose state may differ from what the views saw: every
        group is checked whole at the next group check, as a new group is, and indexed anew."""
        self._indexed = coordinator
        self._views.clear()
        self._lasting.clear()
        self._unindexed = set(coordinator.groups)

    # -- the rules both ways share --------------------------------------------------------------
    def _client_epochs(self, world: Any, names: Iterable[str]) -> list[tuple[str, str]]:
        """Each of ``names``' member epoch against the last one seen for that incarnation."""
        found = []
        memory = self.client_epochs
        clients = world.clients
        for name in names:
            client = clients[name]
            epoch = getattr(client, "member_epoch", None)
            if epoch is None:
                continue
            key = (name, client.incarnation)
            before = memory.get(key)
            if before is not None and 0 < epoch < before:
                found.append(_epoch_went_back(name, before, epoch))
            memory[key] = epoch
        return found

    def _group_epochs(self, group: Any) -> list[tuple[str, str]]:
        found = []
        gid = group.group_id
        epochs = (group.group_epoch, group.assignment_epoch)
        before = self.group_epochs.get(gid)
        if before is not None and (epochs[0] < before[0] or epochs[1] < before[1]):
            found.append(("epochs-never-go-back", f"group {gid} went from epochs {before} to {epochs}"))
        if group.assignment_epoch > group.group_epoch:
            found.append(("epochs-never-go-back", f"group {gid}: assignment epoch ahead of group epoch {epochs}"))
        self.group_epochs[gid] = epochs
        return found

    def _member_epochs(self, group: Any, member_ids: Iterable[str]) -> list[tuple[str, str]]:
        """epochs-never-go-back for ``member_ids``, in member order; those that left are forgotten."""
        gid, members, memory = group.group_id, group.members, self.member_epochs
        found = []
        for member_id in member_ids:
            member = members.get(member_id)
            if member is None:
                memory.pop((gid, member_id), None)
                continue
            last = memory.get((gid, member_id))
            memory[(gid, member_id)] = member.member_epoch
            if last is not None and 0 < member.member_epoch < last:
                found.append((member_id, _epoch_went_back(member_id, last, member.member_epoch)))
        if len(found) > 1:  # in member order, as a scan of the group finds them
            position = {m: i for i, m in enumerate(members)}
            found.sort(key=lambda item: position[item[0]])
        return [f for _, f in found]

    def _whole_group_epochs(self, group: Any) -> list[tuple[str, str]]:
        """Every member's epoch; the members the group no longer has are forgotten."""
        gid = group.group_id
        for key in [k for k in self.member_epochs if k[0] == gid and k[1] not in group.members]:
            del self.member_epochs[key]
        return self._member_epochs(group, group.members)

    # -- the full checks ----------------------------------------------------------------------
    def _single_owner(self, world: Any) -> list[tuple[str, str]]:
        """Within each group (two groups may well read the same partition); classic and mixed
        groups too, whatever generation each member is at."""
        owners = _owners_by_group(world)
        return [f for group_id in sorted(owners) for f in _shared_partitions(world, owners[group_id])]

    def _classic_assignments(self, world: Any) -> list[tuple[str, str]]:
        """The leader's SyncGroup assignment, as the coordinator stored it for the generation."""
        found = []
        for group_id, group in sorted(world.coordinator.classic_groups.items()):
            seen: dict[tuple[str, int], str] = {}
            for member_id, member in sorted(group.members.items()):
                if not member.assignment:
                    continue
                for tp in ConsumerProtocolAssignment.decode(member.assignment).assigned_partitions:
                    if tp in seen:
                        found.append(
                            (
                                "classic-assignment-disjoint",
                                f"group {group_id} generation {group.generation_id}: {tp[0]}-{tp[1]} "
                                f"assigned to {seen[tp]} and {member_id}",
                            )
                        )
                    seen[tp] = member_id
        return found

    def _group(self, group: Any, written: Set[str] = ALL_RECORDS) -> list[tuple[str, str]]:
        """The group checks, from a scan of the whole group (the incremental views' reference)."""
        found = self._group_epochs(group) + self._whole_group_epochs(group)
        return found + _group_rules(group, _GroupScan(group), written)

    # -- the incremental checks -----------------------------------------------------------------
    def _ownership_incremental(self, world: Any) -> list[tuple[str, str]]:
        """single-owner and the clients' epochs, from the clients touched since the last check."""
        clients = world.clients
        assert self._touched is not None, "the incremental checks run in mode 'incremental'"
        touched = self._touched.drain(clients)
        for name in touched:
            self._owners.update(name, clients[name])
        epochs = [(name, f) for name in touched for f in self._client_epochs(world, (name,))]
        if len(epochs) > 1:  # in the clients' order, as the full check finds them
            position = {name: i for i, name in enumerate(clients)}
            epochs.sort(key=lambda item: position[item[0]])
        return self._owners.findings(world) + [f for _, f in epochs]

    def _groups_incremental(self, world: Any, written: Set[str]) -> list[tuple[str, str]]:
        """The group checks of the groups the step's records name and of those a replaced
        coordinator holds, plus the lasting violations of the others (unchanged since their last
        check, as their state is)."""
        named = _named_by_records(world.written_batches)
        groups = world.coordinator.groups
        for gid in [gid for gid in self._views if gid not in groups]:
            del self._views[gid]
        self._lasting &= groups.keys()
        wanted = named.keys() | self._lasting | self._unindexed
        self._unindexed = set()
        found: list[tuple[str, str]] = []
        for gid in _in_group_order(groups, wanted):
            found += self._group_incremental(groups[gid], named.get(gid), written)
        return found

    def _group_incremental(self, group: Any, named: set[str] | None, written: Set[str]) -> list[tuple[str, str]]:
        """One group's checks from its view, updated from the members its records ``named`` (None:
        no record named the group; every member when the view is new)."""
        gid = group.group_id
        found = self._group_epochs(group)  # untouched: the epochs did not move, but "ahead" lasts
        view = self._views.get(gid)
        if view is None or view.group is not group:  # a new group, or one whose state was replaced
            view = self._views[gid] = _GroupView(group)
            found += self._whole_group_epochs(group)
        elif named is not None:
            found += self._member_epochs(group, named)
            view.update(named)
        rules = _group_rules(group, view, written)
        _toggle(self._lasting, gid, bool(rules) or view.lasts())
        return found + rules


def _epoch_went_back(who: str, before: int, now: int) -> tuple[str, str]:
    return ("epochs-never-go-back", f"{who} went from epoch {before} to {now}")


def _owning(client: Any) -> bool:
    """A client that counts for single-owner: alive, not gone, owning something."""
    return bool(
        getattr(client, "alive", False) and hasattr(client, "owned") and client.state not in GONE and client.owned
    )


def _owners_by_group(world: Any) -> dict[str, list[tuple[str, Any]]]:
    """The owning clients the coordinator still has as members, by group (a removed member is a
    zombie until it hears so)."""
    coordinator = world.coordinator
    members: dict[str, list[tuple[str, Any]]] = {}
    for name, client in world.clients.items():
        if not _owning(client):
            continue
        group_id = client.config.group_id
        group = coordinator.groups.get(group_id) or coordinator.classic_groups.get(group_id)
        if group is not None and client.member_id in group.members:
            members.setdefault(group_id, []).append((name, client.owned))
    return members


def _shared_partitions(world: Any, owners: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    """single-owner within one group: each partition two owners share, by owner then partition."""
    if len(owners) < 2 or len(set().union(*(o for _, o in owners))) == sum(len(o) for _, o in owners):
        return []  # the common case, at C speed: nobody shares
    found = []
    seen: dict[TP, str] = {}
    for name, owned in sorted(owners, key=itemgetter(0)):
        for tp in sorted(owned):
            if tp in seen:
                found.append(_two_owners(world, tp, seen[tp], name))
            seen[tp] = name
    return found


def _two_owners(world: Any, tp: TP, before: str, name: str) -> tuple[str, str]:
    return ("single-owner", f"{world.partition_name(tp)} is owned by {before} and {name}")


def _named_by_records(batches: Iterable[Any]) -> dict[str, set[str]]:
    """The groups the records name, each with the members named (empty: group-level records only)."""
    named: dict[str, set[str]] = {}
    for batch in batches:
        for key, _ in batch:
            if type(key).__name__ in ALL_RECORDS:
                member_ids = named.setdefault(key.group_id, set())
                member_id = getattr(key, "member_id", None)  # None: a group-level record
                if member_id is not None:
                    member_ids.add(member_id)
    return named


def _in_group_order(groups: dict[str, Any], wanted: Set[str]) -> list[str]:
    """The ``wanted`` groups that exist, in the coordinator's order (the full check's)."""
    if len(wanted) > 1:
        return [gid for gid in groups if gid in wanted]
    return [gid for gid in wanted if gid in groups]


class _GroupFacts(Protocol):
    """What the group rules read of one consumer group, besides its epochs and state."""

    def client_assigned(self) -> bool:
        """Some member brings its own assignor (then the target is theirs to cover)."""

    def twice_and_uncovered(self) -> tuple[Collection[TP], Collection[TP]]:
        """The partitions the target gives out twice, and those the subscriptions want and nobody is given."""

    def not_converged(self) -> list[str]:
        """The members not at the group epoch with their target and nothing pending, sorted."""

    def ownership_differs(self) -> bool:
        """The partition epochs differ from what the members hold."""


def _group_rules(group: Any, facts: _GroupFacts, written: Set[str]) -> list[tuple[str, str]]:
    """The group invariants that hold or fail with the group's state, each written once: the full
    check reads their facts from a scan of the group, the incremental one from its view. A rule
    whose inputs no written record type can change is skipped, in both."""
    gid = group.group_id
    found = []
    current = bool(group.members) and group.group_epoch == group.assignment_epoch
    if written & TARGET_INPUTS and current and not facts.client_assigned():
        found += _target_finding(gid, *facts.twice_and_uncovered())
    if group.state is GroupState.STABLE:
        found += [_not_converged(gid, member_id) for member_id in facts.not_converged()]
    if written & OWNERSHIP_INPUTS and facts.ownership_differs():
        found.append(_partition_epochs_differ(gid))
    return found


def _target_finding(gid: str, twice: Collection[TP], missing: Collection[TP]) -> list[tuple[str, str]]:
    if not (twice or missing):  # before sorting: a set emptied by removals still walks its whole table
        return []
    first_twice, first_missing = sorted(twice)[:5], sorted(missing)[:5]
    return [("target-covers-subscriptions", f"group {gid}: assigned twice {first_twice}, unassigned {first_missing}")]


def _converged(group: Any, member_id: str, member: Any) -> bool:
    return (
        member.member_epoch == group.group_epoch
        and not member.pending_revocation
        and member.state is ReconciliationState.STABLE
        and member.assigned == group.target_of(member_id)
    )


def _not_converged(gid: str, member_id: str) -> tuple[str, str]:
    return ("stable-means-converged", f"group {gid} is Stable but {member_id} is not converged")


def _partition_epochs_differ(gid: str) -> tuple[str, str]:
    return ("partition-epochs-match-ownership", f"group {gid}: partition epochs differ from ownership")


class _GroupScan:
    """The group rules' facts read from the whole group at each check: the full check's, and the
    reference the views are tested against."""

    def __init__(self, group: Any) -> None:
        self.group = group

    def client_assigned(self) -> bool:
        return any(m.client_assignors for m in self.group.members.values())

    def twice_and_uncovered(self) -> tuple[Collection[TP], Collection[TP]]:
        group = self.group
        wanted = {(tid, p) for tid, n in group.subscription_metadata.values() for p in range(n)}
        targets = group.target
        flat = [(tid, p) for m in group.members for tid, parts in targets.get(m, {}).items() for p in parts]
        covered = set(flat)
        if len(covered) == len(flat) and wanted <= covered:
            return (), ()  # the common case: each once, all covered
        return [tp for tp, n in Counter(flat).items() if n > 1], wanted - covered

    def not_converged(self) -> list[str]:
        group = self.group
        return [m for m, member in sorted(group.members.items()) if not _converged(group, m, member)]

    def ownership_differs(self) -> bool:
        held: dict[str, dict[int, int]] = {}
        for member in self.group.members.values():
            for tid, parts in member.owned().items():
                held.setdefault(tid, {}).update(dict.fromkeys(parts, member.member_epoch))
        return held != self.group.partition_epochs


class _Owners:
    """Who owns which partition, as the clients see it, kept from the clients touched.

    A client counts while it is alive, not gone and owns something; whether the coordinator
    still has it as a member is asked only of partitions two or more clients own (a zombie
    keeps owning until it hears it was removed), so a check costs the clients touched plus
    the partitions shared."""

    def __init__(self) -> None:
        self.held: dict[str, tuple[str, frozenset[TP]]] = {}  # client name -> (group id, owned)
        self.owners: dict[str, dict[TP, set[str]]] = {}  # group id -> partition -> client names
        self.shared: dict[str, set[TP]] = {}  # group id -> partitions two or more clients own

    def update(self, name: str, client: Any) -> None:
        now = None
        if _owning(client):
            now = (client.config.group_id, frozenset(client.owned))
        before = self.held.get(name)
        if before == now:
            return
        if before is not None:
            gid, owned = before
            owners, shared = self.owners[gid], self.shared.get(gid)
            for tp in owned:
                names = owners[tp]
                names.discard(name)
                if not names:
                    del owners[tp]
                elif len(names) == 1 and shared is not None:
                    shared.discard(tp)
            del self.held[name]
        if now is not None:
            gid, owned = now
            owners = self.owners.setdefault(gid, {})
            for tp in owned:
                names = owners.setdefault(tp, set())
                names.add(name)
                if len(names) == 2:
                    self.shared.setdefault(gid, set()).add(tp)
            self.held[name] = now

    def findings(self, world: Any) -> list[tuple[str, str]]:
        """single-owner, in the full check's order: by group, then owner, then partition."""
        found = []
        coordinator = world.coordinator
        for gid in sorted(g for g, tps in self.shared.items() if tps):
            group = coordinator.groups.get(gid) or coordinator.classic_groups.get(gid)
            if group is None:
                continue
            pairs = []
            for tp in self.shared[gid]:
                names = sorted(n for n in self.owners[gid][tp] if world.clients[n].member_id in group.members)
                pairs += [(name, tp, before) for before, name in pairwise(names)]
            for name, tp, before in sorted(pairs):
                found.append(_two_owners(world, tp, before, name))
        return found


class _GroupView:
    """What the group checks read of one consumer group, kept from the members its records name.

    Built from the whole group once (a new group, or a coordinator that loaded it after a
    failover), then updated member by member: how often the target gives out each partition,
    which partitions the subscriptions want and nobody is given, the members whose assignment
    is not their target, and the partition epochs the members' ownership implies."""

    def __init__(self, group: Any) -> None:
        self.group = group
        self.diverged: set[str] = set()
        self.client_assigning: set[str] = set()
        self.targets: dict[str, tuple[TP, ...]] = {}
        self.counts: dict[TP, int] = {}
        self.twice: set[TP] = set()
        self.metadata: dict[str, tuple[str, int]] = {}
        self.wanted: set[TP] = set()
        self.uncovered: set[TP] = set()
        self.holdings: dict[str, dict[TP, int]] = {}  # member -> partition -> the epoch it holds it at
        self.holders: dict[TP, dict[str, int]] = {}
        self.mismatched: set[TP] = set()
        self.update(group.members.keys())

    def update(self, member_ids: Iterable[str]) -> None:
        group = self.group
        if group.subscription_metadata != self.metadata:
            self.metadata = dict(group.subscription_metadata)
            self.wanted = {(tid, p) for tid, n in self.metadata.values() for p in range(n)}
            self.uncovered = {tp for tp in self.wanted if not self.counts.get(tp)}
        changed_holdings: set[TP] = set()
        for member_id in member_ids:
            member = group.members.get(member_id)
            self._set_target(member_id, group.target.get(member_id, {}) if member is not None else {})
            changed_holdings |= self._set_holdings(member_id, member)
            if member is None:
                self.diverged.discard(member_id)
                self.client_assigning.discard(member_id)
                continue
            diverged = bool(member.pending_revocation) or member.assigned != group.target_of(member_id)
            _toggle(self.diverged, member_id, diverged)
            _toggle(self.client_assigning, member_id, bool(member.client_assignors))
        for tp in changed_holdings:
            topic, partition = tp
            _toggle(self.mismatched, tp, self._held_at(tp) != group.partition_epochs.get(topic, {}).get(partition))

    def _set_target(self, member_id: str, target: dict[str, tuple[int, ...]]) -> None:
        now = tuple((tid, p) for tid, parts in target.items() for p in parts)
        before = self.targets.pop(member_id, ())
        if now == before:
            if now:
                self.targets[member_id] = now
            return
        counts = self.counts
        for tp in before:
            n = counts[tp] - 1
            if n:
                counts[tp] = n
                if n == 1:
                    self.twice.discard(tp)
            else:
                del counts[tp]
                if tp in self.wanted:
                    self.uncovered.add(tp)
        for tp in now:
            n = counts.get(tp, 0) + 1
            counts[tp] = n
            if n == 1:
                self.uncovered.discard(tp)
            elif n == 2:
                self.twice.add(tp)
        if now:
            self.targets[member_id] = now

    def _set_holdings(self, member_id: str, member: Any) -> set[TP]:
        """Record what the member holds; returns the partitions to compare with the coordinator's epochs."""
        now: dict[TP, int] = {}
        if member is not None:
            epoch = member.member_epoch
            for tid, parts in member.owned().items():
                for p in parts:
                    now[(tid, p)] = epoch
        before = self.holdings.pop(member_id, {})
        if now == before:  # the same holdings: the coordinator's bookkeeping of them may still have moved
            if now:
                self.holdings[member_id] = now
            return set(now)
        for tp in before:
            holders = self.holders[tp]
            del holders[member_id]
            if not holders:
                del self.holders[tp]
        for tp, epoch in now.items():
            self.holders.setdefault(tp, {})[member_id] = epoch
        if now:
            self.holdings[member_id] = now
        return before.keys() | now.keys()

    def _held_at(self, tp: TP) -> int | None:
        """The epoch the members' ownership gives ``tp``: the last holder's, in member order."""
        holders = self.holders.get(tp)
        if not holders:
            return None
        if len(holders) == 1:
            return next(iter(holders.values()))
        last = [m for m in self.group.members if m in holders][-1]
        return holders[last]

    # the facts the group rules read (``_GroupFacts``)
    def client_assigned(self) -> bool:
        return bool(self.client_assigning)

    def twice_and_uncovered(self) -> tuple[Collection[TP], Collection[TP]]:
        return self.twice, self.uncovered

    def not_converged(self) -> list[str]:
        group = self.group
        if group.group_epoch != group.assignment_epoch:
            return sorted(group.members)  # nobody is at the group epoch with its target
        return sorted(self.diverged)

    def ownership_differs(self) -> bool:
        return bool(self.mismatched)

    def lasts(self) -> bool:
        """Whether some check would find a violation if its records were written: the group is
        looked at again at every group check until it would not."""
        group = self.group
        return group.assignment_epoch > group.group_epoch or bool(_group_rules(group, self, ALL_RECORDS))


def _toggle(members: set, item: Any, present: bool) -> None:
    if present:
        members.add(item)
    else:
        members.discard(item)
