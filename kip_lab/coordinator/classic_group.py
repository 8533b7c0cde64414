"""A classic group (JoinGroup/SyncGroup protocol) as the coordinator holds it.

Unlike a consumer group, a classic group is mostly *soft state*, exactly as in Apache Kafka:
members joining, the parked JoinGroup/SyncGroup requests, the pending-sync set and the timers
live in memory and are changed by the handlers directly. Only a completed rebalance is
persisted: the leader's SyncGroup writes one ``GroupMetadataValue`` holding the whole group
(generation, protocol, leader, members with their subscription and assignment), and a
deleted or converted group writes its tombstone. A coordinator that fails over rebuilds the
group from that record (Stable with members, Empty without) and loses whatever happened
since: a rebalance in progress restarts when the members' heartbeats fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kip_lab.assignors.java_hash_order import capacity_after_puts, string_key_order
from kip_lab.coordinator.member import fenced_instance_error
from kip_lab.machines import StateMachine
from kip_lab.protocol.classic_group import JoinGroupRequestProtocol, JoinGroupResponseMember
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.records import GroupMetadataKey, GroupMetadataValue, MemberMetadata
from kip_lab.runtime.log import Record


class ClassicGroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


REBALANCE_TRIGGER = "member joins, leaves, fails or changes its protocols"
UNLOAD_TRIGGER = "group deleted, converted or unloaded"

CLASSIC_GROUP_STATE_MACHINE = StateMachine.from_table(
    "classic group state",
    [s.value for s in ClassicGroupState],
    ClassicGroupState.EMPTY.value,
    [
        ("Empty", "first member joins", "PreparingRebalance"),
        ("PreparingRebalance", "join phase complete", "CompletingRebalance"),
        ("PreparingRebalance", "join phase complete, no member left", "Empty"),
        ("CompletingRebalance", "leader's SyncGroup stored", "Stable"),
        ("CompletingRebalance", REBALANCE_TRIGGER, "PreparingRebalance"),
        ("Stable", REBALANCE_TRIGGER, "PreparingRebalance"),
        ("Empty", UNLOAD_TRIGGER, "Dead"),
        ("PreparingRebalance", UNLOAD_TRIGGER, "Dead"),
        ("CompletingRebalance", UNLOAD_TRIGGER, "Dead"),
        ("Stable", UNLOAD_TRIGGER, "Dead"),
    ],
    description="Kafka's ClassicGroupState: a group-wide barrier per generation (join, then sync).",
)


@dataclass(frozen=True, slots=True)
class Parked:
    """A JoinGroup or SyncGroup the coordinator answers later; ``ref`` is the caller's handle."""

    ref: Hashable | None


@dataclass(slots=True)
class ClassicGroupMember:
    """Kafka's ``ClassicGroupMember``: mutable soft state, persisted only at a completed rebalance."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: tuple[JoinGroupRequestProtocol, ...]
    assignment: bytes = b""
    awaiting_join: Parked | None = None
    awaiting_sync: Parked | None = None
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [p.name for p in self.supported_protocols]

    def metadata(self, protocol_name: str) -> bytes:
        for protocol in self.supported_protocols:
            if protocol.name == protocol_name:
                return protocol.metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name!r}")

    def matches(self, protocols: Sequence[JoinGroupRequestProtocol]) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return tuple(protocols) == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name in self.protocol_names():
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass
class ClassicGroup:
    """Kafka's ``ClassicGroup``. ``members`` keeps insertion order; ``kafka_order`` gives the order of
    Kafka's member ``HashMap``, which decides leader election, protocol ties and record order."""

    group_id: str
    state: ClassicGroupState = ClassicGroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp: int = -1
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)  # MEMBER_ID_REQUIRED answered, not yet rejoined
    pending_sync_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    previous_state: ClassicGroupState = ClassicGroupState.EMPTY
    new_member_added: bool = False  # extends the initial rebalance delay
    protocol_counts: Counter[str] = field(default_factory=Counter)  # protocol -> members supporting it
    most_members: int = 0  # the largest the member map has been: its Java capacity

    def kafka_order(self) -> list[ClassicGroupMember]:
        """The members as Kafka's ``HashMap<String, ClassicGroupMember>`` iterates them."""
        capacity = capacity_after_puts(self.most_members)
        return [self.members[m] for m in string_key_order(self.members, capacity)]

    # -- state ----------------------------------------------------------------------
    def transition_to(self, target: ClassicGroupState, trigger: str, now_ms: int) -> None:
        CLASSIC_GROUP_STATE_MACHINE.require(self.state.value, trigger, target.value)
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.EMPTY)

    # -- membership -----------------------------------------------------------------
    def add(self, member: ClassicGroupMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.most_members = max(self.most_members, len(self.members))
        self.protocol_counts.update(member.protocol_names())
        self.pending_members.discard(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> None:
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._uncount(member)
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:  # Kafka: the first member its map iterates
            order = self.kafka_order()
            self.leader_id = order[0].member_id if order else None

    def set_protocols(self, member: ClassicGroupMember, protocols: tuple[JoinGroupRequestProtocol, ...]) -> None:
        self._uncount(member)
        member.supported_protocols = protocols
        self.protocol_counts.update(member.protocol_names())

    def _uncount(self, member: ClassicGroupMember) -> None:
        self.protocol_counts.subtract(member.protocol_names())
        for name in member.protocol_names():
            if self.protocol_counts[name] <= 0:
                del self.protocol_counts[name]

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> ClassicGroupMember:
        """KIP-345: a static member rejoining with a new member id takes over the old entry."""
        old = self.members.pop(old_member_id)
        old.member_id = new_member_id
        self.members[new_member_id] = old  # removed and put again: last in its bucket, as in Kafka
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.pending_sync_members.discard(old_member_id)
        return old

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join() and not self.pending_members

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
        return [m for _, m in sorted(self.members.items()) if m.awaiting_join is None]

    def validate_member(self, member_id: str, instance_id: str | None) -> ClassicGroupMember:
        """The member the request names, or the error Kafka answers (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID)."""
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:
                raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is not in group {self.group_id}.")
            if known != member_id:
                raise fenced_instance_error(member_id, instance_id, known)
        member = self.members.get(member_id)
        if member is None:
            raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not in group {self.group_id}.")
        return member

    def validate_generation_member(
        self, member_id: str, instance_id: str | None, generation_id: int
    ) -> ClassicGroupMember:
        """SyncGroup's and Heartbeat's common checks, in Kafka's order: a live group, a known member,
        the current generation."""
        if self.state is ClassicGroupState.DEAD:
            raise ApiError(Errors.COORDINATOR_NOT_AVAILABLE)
        member = self.validate_member(member_id, instance_id)
        if generation_id != self.generation_id:
            raise ApiError(Errors.ILLEGAL_GENERATION)
        return member

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation_id: int, api_version: int
    ) -> None:
        """Kafka ``ClassicGroup.validateOffsetCommit`` (not transactional), in its order: a Dead
        group is COORDINATOR_NOT_AVAILABLE; generation -1 to an Empty group is accepted (an admin
        client or a consumer assigning its own partitions: a *simple* group); a generation, a
        member id or an instance id must name a member (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) at
        the current generation (ILLEGAL_GENERATION); a request naming nobody is accepted only by
        an Empty group (UNKNOWN_MEMBER_ID); and nobody commits while the group waits for the
        leader's SyncGroup (REBALANCE_IN_PROGRESS: the member has its new generation but not yet
        its assignment). ``api_version`` is not looked at by a classic group."""
        if self.state is ClassicGroupState.DEAD:
            raise ApiError(Errors.COORDINATOR_NOT_AVAILABLE, f"Group {self.group_id} is dead.")
        if generation_id < 0 and self.state is ClassicGroupState.EMPTY:
            return
        if generation_id >= 0 or member_id or instance_id is not None:
            self.validate_member(member_id, instance_id)
            if generation_id != self.generation_id:
                raise ApiError(
                    Errors.ILLEGAL_GENERATION,
                    f"Generation {generation_id} is not the group's generation {self.generation_id}.",
                )
        elif self.state is not ClassicGroupState.EMPTY:
            raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Group {self.group_id} has members: a commit must name one.")
        if self.state is ClassicGroupState.COMPLETING_REBALANCE:
            raise ApiError(Errors.REBALANCE_IN_PROGRESS, f"Group {self.group_id} is completing a rebalance.")

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Kafka ``ClassicGroup.validateOffsetFetch``: only a Dead group refuses (as if it did not
        exist); the member is not checked (a classic consumer names none)."""
        if self.state is ClassicGroupState.DEAD:
            raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is in dead state.")

    # -- protocols ------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports (counted as members come and go, as Kafka does)."""
        return {name for name, n in self.protocol_counts.items() if n == len(self.members)}

    def supports_protocols(self, protocol_type: str, names: Sequence[str]) -> bool:
        """Whether a member with these protocols may join (Kafka's ``supportsProtocols``)."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins (Kafka ``selectProtocol``).

        A tie goes to the protocol Kafka's vote ``HashMap`` iterates first (docs/decisions.md C3):
        votes are counted in member-map order, and the first maximum is kept.
        """
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.kafka_order())
        order = string_key_order(votes, capacity_after_puts(len(votes)))
        return max(order, key=lambda name: votes[name])  # max keeps the first of equals, as Java's

    # -- generations ----------------------------------------------------------------
    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else the first rejoined member in Kafka's member-map order
        (Kafka ``maybeElectNewJoinedLeader``; docs/decisions.md C4). False when nobody rejoined."""
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if leader is None:
            return False
        if leader.awaiting_join is not None:
            return True
        joined = [m.member_id for m in self.kafka_order() if m.awaiting_join is not None]
        if joined:
            self.leader_id = joined[0]
        return bool(joined)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(ClassicGroupState.COMPLETING_REBALANCE, "join phase complete", now_ms)
        else:
            self.protocol_name = None
            self.transition_to(ClassicGroupState.EMPTY, "join phase complete, no member left", now_ms)
        self.pending_sync_members.clear()

    def members_for_leader(self) -> list[JoinGroupResponseMember]:
        """What the leader's JoinGroup response lists: every member's metadata for the chosen protocol."""
        assert self.protocol_name is not None
        return [
            JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata(self.protocol_name)
            )
            for m in self.kafka_order()
        ]

    # -- records --------------------------------------------------------------------
    def metadata_record(self, assignments: dict[str, bytes]) -> Record:
        """The ``GroupMetadataValue`` Kafka writes when a rebalance completes (members in its map order)."""
        members = [
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(self.protocol_name) if self.protocol_name else b"",
                assignment=assignments.get(m.member_id, b""),
            )
            for m in self.kafka_order()
        ]
        value = GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.current_state_timestamp,
            members=members,
        )
        return Record(GroupMetadataKey(group=self.group_id), value)

    def tombstone(self) -> Record:
        return Record(GroupMetadataKey(group=self.group_id), None)

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """Kafka's load of a ``GroupMetadataValue``: Stable with members, Empty without.

        Each member keeps only the selected protocol (the record stores nothing else), and a
        rebalance timeout of -1 falls back to the session timeout.
        """
        state = ClassicGroupState.STABLE if value.members else ClassicGroupState.EMPTY
        group = cls(
            group_id,
            state=state,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            current_state_timestamp=value.current_state_timestamp,
        )
        for m in value.members:
            protocols = (
                (JoinGroupRequestProtocol(name=value.protocol, metadata=m.subscription),) if value.protocol else ()
            )
            group.add(
                ClassicGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout if m.rebalance_timeout != -1 else m.session_timeout,
                    session_timeout_ms=m.session_timeout,
                    protocol_type=value.protocol_type,
                    supported_protocols=protocols,
                    assignment=m.assignment,
                )
            )
        group.leader_id = value.leader
        return group

    def rebalance_timeout_ms(self) -> int:
        """The group's join deadline: the largest rebalance timeout of its members (Kafka)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)


@dataclass
class ClassicOutbox:
    """What one classic handler or timer call produced besides its own response: the answers it
    released to parked requests and the record batches it wrote."""

    responses: list[tuple[Parked, str, Any]] = field(default_factory=list)
    batches: list[tuple[Record, ...]] = field(default_factory=list)  # classic records: appended, not replayed
    replayed: tuple[tuple[Record, ...], ...] = ()  # batches already applied with replay (a group deleted)
