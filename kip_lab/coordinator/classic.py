"""The classic group protocol on the group coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Follows Apache Kafka's ``GroupMetadataManager`` (``classicGroupJoin`` and friends). A classic
rebalance is a group-wide barrier: every member's JoinGroup is *parked* until all members have
rejoined (or the rebalance timeout passes), then all are answered at once with the new
generation, the leader receiving every member's metadata; followers' SyncGroup requests are
parked until the leader's SyncGroup brings the assignment. Parked requests are answered in a
later result's ``deferred`` responses, addressed by the ``ref`` the caller passed.

Classic groups are soft state changed by these handlers directly (see ``classic_group``); the
records they write (a ``GroupMetadataValue`` per completed rebalance) are appended without a
live replay and rebuild the group on failover. When the group id names a consumer group with
members, the requests are served by the consumer-group engine instead (``migration``).
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from typing import Any

from kip_lab.coordinator.classic_group import (
    REBALANCE_TRIGGER,
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
    ClassicOutbox,
    Parked,
)
from kip_lab.coordinator.host import CoordinatorHost
from kip_lab.coordinator.timers import TimerKey, timer_key
from kip_lab.protocol.classic_group import (
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveGroupResponseMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.runtime.result import CoordinatorResult, DeferredResponse

Ref = Hashable | None


class ClassicGroupHandlers(CoordinatorHost):
    """Mixed into ``GroupCoordinator``; uses its config, scheduler, log, groups and ``classic_groups``."""

    classic_groups: dict[str, ClassicGroup]

    # ------------------------------------------------------------------ result plumbing
    @staticmethod
    def _split_responses(
        out: ClassicOutbox, parked: Parked | None, response: Any
    ) -> tuple[Any, tuple[DeferredResponse, ...]]:
        """The caller's own response (immediate, or completed in this call) and the deferred rest."""
        deferred = []
        for waiter, api, answer in out.responses:
            if parked is not None and waiter is parked:
                response = answer
            else:
                deferred.append(DeferredResponse(waiter.ref, api, answer))
        return response, tuple(deferred)

    def _classic_result(self, out: ClassicOutbox, origin: str, parked: Parked | None = None, response: Any = None):
        """Append the classic records (no live replay) and assemble the result."""
        response, deferred = self._split_responses(out, parked, response)
        self._apply(CoordinatorResult(response, tuple(out.batches), origin, deferred, replay_records=False))
        return CoordinatorResult(response, out.replayed + tuple(out.batches), origin, deferred, replay_records=False)

    @staticmethod
    def _complete_join(out: ClassicOutbox, member: ClassicGroupMember, response: JoinGroupResponse) -> None:
        if member.awaiting_join is not None:
            out.responses.append((member.awaiting_join, "JoinGroup", response))
            member.awaiting_join = None

    @staticmethod
    def _complete_sync(out: ClassicOutbox, member: ClassicGroupMember, response: SyncGroupResponse) -> bool:
        if member.awaiting_sync is None:
            return False
        out.responses.append((member.awaiting_sync, "SyncGroup", response))
        member.awaiting_sync = None
        return True

    def classic_state_snapshot(self) -> dict[str, Any]:
        """What a classic group's record persists, as plain sorted data (failover reproduces it
        for a group at rest; a rebalance in progress is soft state and is not in the log)."""
        out = {}
        for group_id, g in sorted(self.classic_groups.items()):
            out[group_id] = {
                "state": g.state.value,
                "generation": g.generation_id,
                "protocol_type": g.protocol_type,
                "protocol_name": g.protocol_name,
                "leader": g.leader_id,
                "members": {
                    m: (
                        v.group_instance_id,
                        v.client_id,
                        v.client_host,
                        v.rebalance_timeout_ms,
                        v.session_timeout_ms,
                        v.metadata(g.protocol_name) if g.protocol_name else b"",
                        v.assignment,
                    )
                    for m, v in sorted(g.members.items())
                },
            }
        return out

    # ------------------------------------------------------------------ timers
    def _schedule_classic_session(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        self.scheduler.schedule(self, timer_key("classic session", group.group_id, member_id), timeout_ms)

    def _keep_classic_session(self, group: ClassicGroup, member_id: str) -> None:
        """A request that counts as a heartbeat re-arms the member's session (Kafka
        ``GroupMetadataManager.rescheduleClassicGroupMemberHeartbeat``)."""
        self._schedule_classic_session(group, member_id, group.members[member_id].session_timeout_ms)

    def _cancel_classic_timers(self, group_id: str) -> None:
        group = self.classic_groups.get(group_id)
        for member_id in sorted(set(group.members) | group.pending_members) if group else ():
            self.scheduler.cancel(self, timer_key("classic session", group_id, member_id))
        for kind in ("classic join", "classic initial", "classic sync"):
            self.scheduler.cancel(self, timer_key(kind, group_id))
        self._initial_delays.pop(group_id, None)

    def _fire_classic_timer(self, key: TimerKey) -> CoordinatorResult:
        """A classic group's timer: a member's session, the initial delay, the end of the join or sync phase."""
        kind, group_id, member_id = key
        out = ClassicOutbox()
        origin = f"{kind} timeout {group_id}" + (f"/{member_id}" if member_id else "")
        group = self.classic_groups.get(group_id)
        if group is None or group.state is ClassicGroupState.DEAD:
            return CoordinatorResult(None, origin=origin)
        if kind == "classic session":
            self._expire_classic_heartbeat(out, group, member_id)
        elif kind == "classic initial":
            self._try_complete_initial_rebalance(out, group)
        elif kind == "classic join":
            self._complete_join_phase(out, group)
        else:
            self._expire_pending_sync(out, group)
        return self._classic_result(out, origin)

    def _expire_classic_heartbeat(self, out: ClassicOutbox, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_members:
            group.remove(member_id)
            if group.state is ClassicGroupState.PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join_phase(out, group)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        # Members parked in a rebalance satisfy the heartbeat, except new ones (their join may be stale).
        if not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None):
            return
        self._remove_classic_member(out, group, member)

    def _remove_classic_member(self, out: ClassicOutbox, group: ClassicGroup, member: ClassicGroupMember) -> None:
        """Session expiry: drop the member, then rebalance the rest."""
        self._drop_member(out, group, member)
        if group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(out, group)
        elif group.state is ClassicGroupState.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join_phase(out, group)

    def _expire_pending_sync(self, out: ClassicOutbox, group: ClassicGroup) -> None:
        """Members that did not send SyncGroup within the rebalance timeout are removed."""
        if group.state not in (ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.STABLE):
            return
        if not group.pending_sync_members:
            return
        for member_id in sorted(group.pending_sync_members):
            group.remove(member_id)
            self.scheduler.cancel(self, timer_key("classic session", group.group_id, member_id))
        self._prepare_rebalance(out, group)

    # ------------------------------------------------------------------ the rebalance barrier
    def _maybe_prepare_rebalance_or_complete_join(self, out: ClassicOutbox, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(out, group)
        else:
            self._maybe_complete_join_phase(out, group)

    def _prepare_rebalance(self, out: ClassicOutbox, group: ClassicGroup) -> None:
        if group.state is ClassicGroupState.COMPLETING_REBALANCE:
            # Followers waiting for an assignment that will not come: tell them to rejoin.
            for _, member in sorted(group.members.items()):
                member.assignment = b""
                self._complete_sync(out, member, SyncGroupResponse(error_code=Errors.REBALANCE_IN_PROGRESS))
        group.pending_sync_members.clear()
        self.scheduler.cancel(self, timer_key("classic sync", group.group_id))
        initial = group.state is ClassicGroupState.EMPTY
        trigger = "first member joins" if initial else REBALANCE_TRIGGER
        group.transition_to(ClassicGroupState.PREPARING_REBALANCE, trigger, self.now_ms)
        if initial:
            # A new group waits group.initial.rebalance.delay.ms (extended while members keep coming).
            delay = self.config.initial_rebalance_delay_ms
            self._initial_delays[group.group_id] = (delay, max(group.rebalance_timeout_ms() - delay, 0))
            self.scheduler.schedule(self, timer_key("classic initial", group.group_id), delay)
            return
        if group.has_all_members_joined():
            self._complete_join_phase(out, group)
        else:
            self.scheduler.schedule(self, timer_key("classic join", group.group_id), group.rebalance_timeout_ms())

    def _try_complete_initial_rebalance(self, out: ClassicOutbox, group: ClassicGroup) -> None:
        delay, remaining = self._initial_delays.pop(group.group_id, (0, 0))
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            self._initial_delays[group.group_id] = (next_delay, max(remaining - delay, 0))
            self.scheduler.schedule(self, timer_key("classic initial", group.group_id), next_delay)
            return
        self._complete_join_phase(out, group)

    def _maybe_complete_join_phase(self, out: ClassicOutbox, group: ClassicGroup) -> None:
        if (
            group.state is ClassicGroupState.PREPARING_REBALANCE
            and group.previous_state is not ClassicGroupState.EMPTY  # the initial delay decides
            and group.has_all_members_joined()
        ):
            self._complete_join_phase(out, group)

    def _complete_join_phase(self, out: ClassicOutbox, group: ClassicGroup) -> None:
        """Close the join barrier: drop dynamic members that did not rejoin, start the next generation."""
        gid = group.group_id
        for kind in ("classic join", "classic initial"):
            self.scheduler.cancel(self, timer_key(kind, gid))
        self._initial_delays.pop(gid, None)
        for member in group.not_yet_rejoined():
            if not member.is_static:
                group.remove(member.member_id)
                self.scheduler.cancel(self, timer_key("classic session", gid, member.member_id))
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined (only static members left): wait for their sessions to expire.
            self.scheduler.schedule(self, timer_key("classic join", gid), group.rebalance_timeout_ms())
            return
        group.init_next_generation(self.now_ms)
        if group.state is ClassicGroupState.EMPTY:
            out.batches.append((group.metadata_record({}),))
            return
        for member_id, member in sorted(group.members.items()):
            self._complete_join(
                out,
                member,
                _generation_response(group, member_id, leader_view=group.is_leader(member_id)),
            )
            self._schedule_classic_session(group, member_id, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member_id)
        self.scheduler.schedule(self, timer_key("classic sync", gid), group.rebalance_timeout_ms())

    # ------------------------------------------------------------------ JoinGroup
    def join_group(self, request: JoinGroupRequest, ref: Ref = None) -> CoordinatorResult[JoinGroupResponse | None]:
        """JoinGroup. The response is ``None`` when the request is parked until the join phase completes."""
        r = request
        out = ClassicOutbox()
        parked = Parked(ref)

        def answer(error: Errors, member_id: str = r.member_id) -> CoordinatorResult:
            return self._classic_result(
                out, "JoinGroup", response=JoinGroupResponse(error_code=error, member_id=member_id)
            )

        if not r.group_id:
            return answer(Errors.INVALID_GROUP_ID)
        if (
            not self.config.classic_min_session_timeout_ms
            <= r.session_timeout_ms
            <= self.config.classic_max_session_timeout_ms
        ):
            return answer(Errors.INVALID_SESSION_TIMEOUT)
        if r.group_id in self.share_groups:  # the id names a group of another kind (Kafka)
            return answer(Errors.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID)
        consumer_group = self.groups.get(r.group_id)
        if consumer_group is not None and consumer_group.members:
            return self._classic_join_to_consumer_group(consumer_group, r)
        if consumer_group is not None:
            # An empty consumer group is deleted and the id reused by a classic group (Kafka).
            deletion = CoordinatorResult(None, (tuple(self._consumer_group_tombstones(consumer_group)),))
            out.replayed = self._apply(deletion).batches
        if r.rebalance_timeout_ms == -1:
            r = r.model_copy(update={"rebalance_timeout_ms": r.session_timeout_ms})
        is_unknown = r.member_id == UNKNOWN_MEMBER_ID
        group = self.classic_groups.get(r.group_id)
        new_group = group is None
        if group is None:
            if not is_unknown:
                return answer(Errors.UNKNOWN_MEMBER_ID)
            group = self.classic_groups[r.group_id] = ClassicGroup(r.group_id)
        response: JoinGroupResponse | None
        if not self._accept_joining_member(group, r.member_id):
            group.remove(r.member_id)
            response = JoinGroupResponse(error_code=Errors.GROUP_MAX_SIZE_REACHED, member_id=UNKNOWN_MEMBER_ID)
            return self._classic_result(out, "JoinGroup", response=response)
        try:
            if is_unknown:
                response = self._join_new_member(out, group, r, parked)
            else:
                response = self._join_existing_member(out, group, r, parked)
        except ApiError as error:
            response = JoinGroupResponse(error_code=error.error, member_id=r.member_id)
        if new_group and not out.batches:
            # Kafka writes the new, empty group so that it exists in the log.
            out.batches.append((group.metadata_record({}),))
        return self._classic_result(out, "JoinGroup", parked, response)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """group.max.size (Kafka's ``acceptJoiningMember``)."""
        limit = self.config.classic_max_size
        if group.state in (ClassicGroupState.EMPTY, ClassicGroupState.DEAD):
            return True
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join is not None) or group.num_awaiting_join() < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(
        self, out: ClassicOutbox, group: ClassicGroup, r: JoinGroupRequest, parked: Parked
    ) -> JoinGroupResponse | None:
        if group.state is ClassicGroupState.DEAD:
            raise ApiError(Errors.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(r.protocol_type, [p.name for p in r.protocols]):
            return JoinGroupResponse(error_code=Errors.INCONSISTENT_GROUP_PROTOCOL, member_id=UNKNOWN_MEMBER_ID)
        new_id = self._new_classic_member_id(r)
        if r.group_instance_id is not None:
            existing = group.static_members.get(r.group_instance_id)
            if existing is not None:
                return self._replace_static_member(out, group, r, r.group_instance_id, existing, new_id, parked)
            self._add_member(out, group, r, new_id, parked)
            return None
        if not r.require_known_member_id:  # JoinGroup v0-3: the member joins with the id it is given
            self._add_member(out, group, r, new_id, parked)
            return None
        # JoinGroup v4+ (KIP-394): hand out the id and have the member join again with it.
        group.pending_members.add(new_id)
        self._schedule_classic_session(group, new_id, r.session_timeout_ms)
        return JoinGroupResponse(error_code=Errors.MEMBER_ID_REQUIRED, member_id=new_id)

    def _new_classic_member_id(self, r: JoinGroupRequest) -> str:
        """Kafka ``ClassicGroup.generateMemberId``: the instance id, else the client id (maybe empty),
        a dash and a random ``java.util.UUID`` (drawn from the coordinator's seeded generator)."""
        prefix = r.group_instance_id if r.group_instance_id is not None else r.client_id
        return f"{prefix}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"

    def _join_existing_member(
        self, out: ClassicOutbox, group: ClassicGroup, r: JoinGroupRequest, parked: Parked
    ) -> JoinGroupResponse | None:
        if group.state is ClassicGroupState.DEAD:
            raise ApiError(Errors.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(r.protocol_type, [p.name for p in r.protocols]):
            raise ApiError(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if r.member_id in group.pending_members:
            self._add_member(out, group, r, r.member_id, parked)
            return None
        member = group.validate_member(r.member_id, r.group_instance_id)
        state = group.state
        unchanged = member.matches(r.protocols)
        if state is ClassicGroupState.PREPARING_REBALANCE or (
            state in (ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.STABLE)
            and (not unchanged or (state is ClassicGroupState.STABLE and group.is_leader(member.member_id)))
        ):
            # A changed member (or the leader, which may see metadata the others do not) forces a rebalance.
            self._update_member(out, group, member, r, parked)
            self._maybe_prepare_rebalance_or_complete_join(out, group)
            return None
        if state in (ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.STABLE):
            # Nothing changed: the current generation again (a lost JoinGroup response, say).
            leader_view = state is ClassicGroupState.COMPLETING_REBALANCE and group.is_leader(member.member_id)
            return _generation_response(group, member.member_id, leader_view)
        raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Group {group.group_id} is {state.value}.")

    def _update_member(
        self, out: ClassicOutbox, group: ClassicGroup, member: ClassicGroupMember, r: JoinGroupRequest, parked: Parked
    ) -> None:
        # A JoinGroup already parked for this member is replaced and never answered (Kafka
        # ``ClassicGroup.updateMember``: its client's request times out; docs/decisions.md C9).
        group.set_protocols(member, tuple(r.protocols))
        member.rebalance_timeout_ms = r.rebalance_timeout_ms
        member.session_timeout_ms = r.session_timeout_ms
        member.awaiting_join = parked

    def _add_member(
        self, out: ClassicOutbox, group: ClassicGroup, r: JoinGroupRequest, member_id: str, parked: Parked
    ) -> None:
        member = ClassicGroupMember(
            member_id=member_id,
            group_instance_id=r.group_instance_id,
            client_id=r.client_id,
            client_host=r.client_host,
            rebalance_timeout_ms=r.rebalance_timeout_ms,
            session_timeout_ms=r.session_timeout_ms,
            protocol_type=r.protocol_type,
            supported_protocols=tuple(r.protocols),
            awaiting_join=parked,
            is_new=True,
        )
        if group.state is ClassicGroupState.PREPARING_REBALANCE and group.previous_state is ClassicGroupState.EMPTY:
            group.new_member_added = True
        group.add(member)
        # A parked new member cannot heartbeat: its join is bounded by the new-member join timeout.
        self._schedule_classic_session(group, member_id, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(out, group)

    def _replace_static_member(
        self,
        out: ClassicOutbox,
        group: ClassicGroup,
        r: JoinGroupRequest,
        instance_id: str,
        old_id: str,
        new_id: str,
        parked: Parked,
    ) -> JoinGroupResponse | None:
        """KIP-345: a known instance id with an unknown member id takes over the old member's place.

        In a Stable group whose selected protocol would not change this is no rebalance: the
        group is persisted with the new member id and the member gets the current generation
        (the leader is told to skip the assignment). Otherwise the group rebalances.
        """
        old_member = group.members[old_id]
        self.scheduler.cancel(self, timer_key("classic session", group.group_id, old_id))
        self._complete_join(out, old_member, JoinGroupResponse(error_code=Errors.FENCED_INSTANCE_ID, member_id=old_id))
        self._complete_sync(out, old_member, SyncGroupResponse(error_code=Errors.FENCED_INSTANCE_ID))
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_classic_session(group, new_id, r.session_timeout_ms)
        self._update_member(out, group, member, r, parked)
        if group.state is ClassicGroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                assignments = {m.member_id: m.assignment for m in group.members.values()}
                out.batches.append((group.metadata_record(assignments),))
                is_leader = group.is_leader(new_id)
                self._complete_join(
                    out, member, _generation_response(group, new_id, leader_view=is_leader, skip_assignment=is_leader)
                )
                return None
            self._maybe_prepare_rebalance_or_complete_join(out, group)
        elif group.state is ClassicGroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(out, group)
        else:
            self._maybe_complete_join_phase(out, group)
        return None

    # ------------------------------------------------------------------ SyncGroup
    def sync_group(self, request: SyncGroupRequest, ref: Ref = None) -> CoordinatorResult[SyncGroupResponse | None]:
        """SyncGroup. A follower's request is parked until the leader's brings the assignment."""
        r = request
        out = ClassicOutbox()
        parked = Parked(ref)
        consumer_group = self.groups.get(r.group_id)
        if consumer_group is not None and consumer_group.members:
            return self._classic_sync_to_consumer_group(consumer_group, r)
        group = self.classic_groups.get(r.group_id)
        try:
            if group is None or not group.members:
                raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Group {r.group_id} has no member {r.member_id}.")
            response = self._sync(out, group, r, parked)
        except ApiError as error:
            response = SyncGroupResponse(error_code=error.error)
        return self._classic_result(out, "SyncGroup", parked, response)

    def _sync(
        self, out: ClassicOutbox, group: ClassicGroup, r: SyncGroupRequest, parked: Parked
    ) -> SyncGroupResponse | None:
        member = group.validate_generation_member(r.member_id, r.group_instance_id, r.generation_id)
        if _inconsistent(r.protocol_type, group.protocol_type) or _inconsistent(r.protocol_name, group.protocol_name):
            raise ApiError(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            raise ApiError(Errors.REBALANCE_IN_PROGRESS)
        group.pending_sync_members.discard(member.member_id)
        if not group.pending_sync_members:
            self.scheduler.cancel(self, timer_key("classic sync", group.group_id))
        if group.state is ClassicGroupState.STABLE:
            return SyncGroupResponse(
                protocol_type=group.protocol_type, protocol_name=group.protocol_name, assignment=member.assignment
            )
        member.awaiting_sync = parked
        if not group.is_leader(member.member_id):
            return None
        # The leader's assignment: persist the group, then hand every member its part.
        given = {a.member_id: a.assignment for a in r.assignments}
        assignments = {m: given.get(m, b"") for m in group.members}
        out.batches.append((group.metadata_record(assignments),))
        for member_id, m in sorted(group.members.items()):
            m.assignment = assignments[member_id]
            answered = self._complete_sync(
                out,
                m,
                SyncGroupResponse(
                    protocol_type=group.protocol_type, protocol_name=group.protocol_name, assignment=m.assignment
                ),
            )
            if answered:
                self._schedule_classic_session(group, member_id, m.session_timeout_ms)
        group.transition_to(ClassicGroupState.STABLE, "leader's SyncGroup stored", self.now_ms)
        return None

    # ------------------------------------------------------------------ Heartbeat
    def heartbeat(self, request: HeartbeatRequest) -> CoordinatorResult[HeartbeatResponse]:
        """Heartbeat: keeps the session; REBALANCE_IN_PROGRESS tells the member to rejoin."""
        r = request
        consumer_group = self.groups.get(r.group_id)
        try:
            if consumer_group is not None and consumer_group.members:
                return self._classic_heartbeat_to_consumer_group(consumer_group, r)
            group = self.classic_groups.get(r.group_id)
            if group is None:
                raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Group {r.group_id} not found.")
            member = group.validate_generation_member(r.member_id, r.group_instance_id, r.generation_id)
            if group.state is ClassicGroupState.EMPTY:
                raise ApiError(Errors.UNKNOWN_MEMBER_ID)
            self._keep_classic_session(group, member.member_id)
            error = (
                Errors.REBALANCE_IN_PROGRESS if group.state is ClassicGroupState.PREPARING_REBALANCE else Errors.NONE
            )
            response = HeartbeatResponse(error_code=error)
        except ApiError as exc:
            response = HeartbeatResponse(error_code=exc.error)
        return CoordinatorResult(response, origin="Heartbeat")

    # ------------------------------------------------------------------ LeaveGroup
    def leave_group(self, request: LeaveGroupRequest) -> CoordinatorResult[LeaveGroupResponse]:
        """LeaveGroup: each listed member (by member id, or by instance id alone) leaves; per-member errors."""
        r = request
        consumer_group = self.groups.get(r.group_id)
        if consumer_group is not None and consumer_group.members:
            return self._classic_leave_to_consumer_group(consumer_group, r)
        out = ClassicOutbox()
        group = self.classic_groups.get(r.group_id)
        if group is None:
            response = LeaveGroupResponse(error_code=Errors.UNKNOWN_MEMBER_ID)
            return self._classic_result(out, "LeaveGroup", response=response)
        if group.state is ClassicGroupState.DEAD:
            return self._classic_result(
                out, "LeaveGroup", response=LeaveGroupResponse(error_code=Errors.COORDINATOR_NOT_AVAILABLE)
            )
        answers = []
        left = False
        for identity in r.members:
            error = Errors.NONE
            try:
                if identity.member_id == UNKNOWN_MEMBER_ID:
                    known = group.static_members.get(identity.group_instance_id) if identity.group_instance_id else None
                    if known is None:
                        raise ApiError(Errors.UNKNOWN_MEMBER_ID)
                    self._drop_member(out, group, group.members[known])
                elif identity.member_id in group.pending_members:
                    group.remove(identity.member_id)
                    self.scheduler.cancel(self, timer_key("classic session", group.group_id, identity.member_id))
                else:
                    member = group.validate_member(identity.member_id, identity.group_instance_id)
                    self._drop_member(out, group, member)
                left = True
            except ApiError as exc:
                error = exc.error
            answers.append(
                LeaveGroupResponseMember(
                    member_id=identity.member_id, group_instance_id=identity.group_instance_id, error_code=error
                )
            )
        if left:
            if group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(out, group)
            elif group.state is ClassicGroupState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(out, group)
        return self._classic_result(out, "LeaveGroup", response=LeaveGroupResponse(members=answers))

    def _drop_member(self, out: ClassicOutbox, group: ClassicGroup, member: ClassicGroupMember) -> None:
        """Answer the member's parked JoinGroup (UNKNOWN_MEMBER_ID, so a live client rejoins) and remove it."""
        self.scheduler.cancel(self, timer_key("classic session", group.group_id, member.member_id))
        self._complete_join(
            out, member, JoinGroupResponse(error_code=Errors.UNKNOWN_MEMBER_ID, member_id=UNKNOWN_MEMBER_ID)
        )
        group.remove(member.member_id)


def _generation_response(
    group: ClassicGroup, member_id: str, leader_view: bool, skip_assignment: bool = False
) -> JoinGroupResponse:
    """The JoinGroup answer for the group's current generation; only the leader's view lists the members."""
    return JoinGroupResponse(
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=group.leader_id or "",
        skip_assignment=skip_assignment,
        member_id=member_id,
        members=group.members_for_leader() if leader_view else [],
    )


def _inconsistent(requested: str | None, current: str | None) -> bool:
    """A SyncGroup may omit the protocol type and name (old versions); if it names them they must match."""
    return requested is not None and requested != current
