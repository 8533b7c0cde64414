"""The KIP's client-side assignor mode, which Kafka never shipped (ShouldComputeAssignment,
ConsumerGroupPrepareAssignment, ConsumerGroupInstallAssignment).

One member is chosen to compute the target; it fetches the group with Prepare and installs
its result with Install, which the coordinator validates against the metadata the member was
given. The round (who computes, what it saw) lives in memory only, as the KIP says; a
coordinator that fails over starts a new round as a load duty.
"""

from __future__ import annotations

from typing import Any

from kip_lab.contract import checked
from kip_lab.coordinator.group import (
    AssignmentRound,
    ConsumerGroup,
    SubscriptionCounts,
    TargetPartitions,
    subscribed_topic_ids,
)
from kip_lab.coordinator.host import CoordinatorHost
from kip_lab.coordinator.member import ConsumerGroupMember
from kip_lab.coordinator.timers import timer_key
from kip_lab.protocol.common import TopicPartitions
from kip_lab.protocol.consumer_group import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
    InstalledMemberAssignment,
    PreparedAssignorMetadata,
    PreparedMember,
    PreparedTopic,
)
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.runtime.result import CoordinatorResult


class ClientSideAssignment(CoordinatorHost):
    """Mixed into ``GroupCoordinator``; uses its groups, cluster, scheduler and ``_apply``."""

    @staticmethod
    def _client_side_assignor(subscriptions: SubscriptionCounts) -> str | None:
        """The client-side assignor the group (its members' ``subscriptions``) uses, or None in
        server-side mode.

        A client-side assignor is used as soon as one member names one, and it must be
        supported by every member (raises UNSUPPORTED_ASSIGNOR otherwise). Among those all
        support, the members' priorities decide: the lowest total list position wins, ties
        by name (the KIP gives precedence to the members' order without saying how to combine
        several members' orders).
        """
        if not subscriptions.client_assignor_members:
            return None
        common = [name for name, listed in subscriptions.client_assignors.items() if listed == subscriptions.members]
        if not common:
            raise ApiError(Errors.UNSUPPORTED_ASSIGNOR, "No client-side assignor is supported by every member.")
        return min(sorted(common), key=lambda name: subscriptions.client_assignor_positions[name])

    def _start_round(self, group_id: str, members: dict[str, ConsumerGroupMember]) -> AssignmentRound:
        round_ = self._rounds.get(group_id)
        if round_ is None or round_.member_id not in members:
            round_ = AssignmentRound(member_id="")
            self._rounds[group_id] = round_
            self._choose_computing_member(group_id, members, round_)
        return round_

    def _choose_computing_member(
        self, group_id: str, members: dict[str, ConsumerGroupMember], round_: AssignmentRound
    ) -> None:
        """The member with the highest maximum version of the selected assignor, then lowest id.

        The KIP elides its selection rule; a member that missed its deadline is skipped
        until every member has had a turn.
        """
        name = self._client_side_assignor(SubscriptionCounts.of(members.values()))
        live = {m: members[m] for m in members if members[m].member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH}
        candidates = [m for m in live if m not in round_.excluded] or list(live)
        if not candidates:
            del self._rounds[group_id]
            return
        if set(candidates) == set(live):
            round_.excluded.clear()

        def version(member_id: str) -> int:
            return max((a.maximum_version for a in live[member_id].client_assignors if a.name == name), default=-1)

        round_.member_id = min(candidates, key=lambda m: (-version(m), m))
        round_.notified = False
        self.scheduler.cancel(self, timer_key("assignment", group_id, round_.member_id))

    def _should_compute(self, group_id: str, member_id: str, member: ConsumerGroupMember) -> bool:
        round_ = self._rounds.get(group_id)
        if round_ is None or round_.member_id != member_id:
            return False
        if not round_.notified:
            round_.notified = True
            timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else self.config.session_timeout_ms
            self.scheduler.schedule(self, timer_key("assignment", group_id, member_id), timeout)
        return True

    def _computing_member(self, group_id: str, member_id: str, member_epoch: int) -> tuple[ConsumerGroup, Any]:
        if not group_id:
            raise ApiError(Errors.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id:
            raise ApiError(Errors.INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch < 0:
            raise ApiError(Errors.INVALID_REQUEST, "MemberEpoch must be >= 0.")
        group = self.groups.get(group_id)
        if group is None:
            raise ApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        group.member_at_epoch(member_id, member_epoch)
        round_ = self._rounds.get(group_id)
        if round_ is None or round_.member_id != member_id:
            raise ApiError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} was not chosen to compute the assignment.")
        return group, round_

    @checked
    def consumer_group_prepare_assignment(
        self, request: ConsumerGroupPrepareAssignmentRequest
    ) -> CoordinatorResult[ConsumerGroupPrepareAssignmentResponse]:
        """The chosen member fetches what its client-side assignor needs (the group as of now)."""
        try:
            group, round_ = self._computing_member(request.group_id, request.member_id, request.member_epoch)
        except ApiError as error:
            return CoordinatorResult(
                ConsumerGroupPrepareAssignmentResponse(error_code=error.error, error_message=error.message),
                origin="ConsumerGroupPrepareAssignment",
            )
        assignor_name = self._client_side_assignor(group.subscriptions) or ""
        metadata = group.subscription_metadata
        members = []
        subscriptions: dict[str, frozenset[str]] = {}
        for member_id in sorted(group.members):
            member = group.members[member_id]
            topic_ids = sorted(subscribed_topic_ids(member, metadata))
            subscriptions[member_id] = frozenset(topic_ids)
            own = next((a for a in member.client_assignors if a.name == assignor_name), None)
            members.append(
                PreparedMember(
                    member_id=member_id,
                    member_epoch=member.member_epoch,
                    instance_id=member.instance_id,
                    rack_id=member.rack_id,
                    subscribed_topic_ids=topic_ids,
                    assignor=PreparedAssignorMetadata(
                        reason=own.reason if own else 0,
                        metadata_version=own.metadata_version if own else 0,
                        metadata_bytes=own.metadata_bytes if own else b"",
                    ),
                    topic_partitions=[
                        TopicPartitions(topic_id=t, partitions=list(p))
                        for t, p in sorted(group.target.get(member_id, {}).items())
                    ],
                )
            )
        topics = [
            PreparedTopic(topic_id=tid, topic_name=name, num_partitions=n)
            for name, (tid, n) in sorted(metadata.items())
        ]
        round_.prepared[group.group_epoch] = {
            "subscriptions": subscriptions,
            "partitions": {tid: n for _, (tid, n) in metadata.items()},
        }
        response = ConsumerGroupPrepareAssignmentResponse(
            group_epoch=group.group_epoch, assignor_name=assignor_name, members=members, topics=topics
        )
        return CoordinatorResult(response, origin="ConsumerGroupPrepareAssignment")

    @checked
    def consumer_group_install_assignment(
        self, request: ConsumerGroupInstallAssignmentRequest
    ) -> CoordinatorResult[ConsumerGroupInstallAssignmentResponse]:
        """Validate and install a client-computed target; TE := the request's group epoch."""
        try:
            group, round_ = self._computing_member(request.group_id, request.member_id, request.member_epoch)
            snapshot = round_.prepared.get(request.group_epoch)
            if snapshot is None:
                raise ApiError(
                    Errors.INVALID_ASSIGNMENT,
                    f"No ConsumerGroupPrepareAssignment was served for group epoch {request.group_epoch}.",
                )
            if request.group_epoch <= group.assignment_epoch:
                raise ApiError(
                    Errors.INVALID_ASSIGNMENT,
                    f"Group epoch {request.group_epoch} is not newer than the installed target "
                    f"({group.assignment_epoch}).",
                )
            new_target = self._validated_install(request, snapshot)
        except ApiError as error:
            return CoordinatorResult(
                ConsumerGroupInstallAssignmentResponse(error_code=error.error, error_message=error.message),
                origin="ConsumerGroupInstallAssignment",
            )
        batch = self._target_batch(group.group_id, group.target, new_target, request.group_epoch)
        self.scheduler.cancel(self, timer_key("assignment", group.group_id, request.member_id))
        del self._rounds[group.group_id]
        result = self._apply(
            CoordinatorResult(
                ConsumerGroupInstallAssignmentResponse(), (batch,), origin="ConsumerGroupInstallAssignment"
            )
        )
        if group.group_epoch > group.assignment_epoch:  # the group moved on meanwhile: compute again
            self._start_round(group.group_id, group.members)
        return result

    @staticmethod
    def _validated_install(
        request: ConsumerGroupInstallAssignmentRequest, snapshot: dict[str, Any]
    ) -> dict[str, TargetPartitions]:
        """The KIP's checks, against the metadata the assignment was computed from."""
        subscriptions: dict[str, frozenset[str]] = snapshot["subscriptions"]
        partitions: dict[str, int] = snapshot["partitions"]
        seen: dict[tuple[str, int], str] = {}
        new_target: dict[str, TargetPartitions] = {}
        for entry in request.members:
            if entry.member_id not in subscriptions:
                raise ApiError(Errors.INVALID_ASSIGNMENT, f"Member {entry.member_id} is not a member of the group.")
            if entry.member_id in new_target:
                raise ApiError(Errors.INVALID_ASSIGNMENT, f"Member {entry.member_id} is listed twice.")
            new_target[entry.member_id] = _validated_member_target(entry, partitions, seen)
        subscribed = set().union(*subscriptions.values()) if subscriptions else set()
        missing = [(t, p) for t in sorted(subscribed) for p in range(partitions[t]) if (t, p) not in seen]
        if missing:
            t, p = missing[0]
            raise ApiError(
                Errors.INVALID_ASSIGNMENT, f"{len(missing)} partition(s) are not assigned, the first being {t}-{p}."
            )
        for member_id in subscriptions:
            new_target.setdefault(member_id, {})
        return new_target


def _validated_member_target(
    entry: InstalledMemberAssignment, partitions: dict[str, int], seen: dict[tuple[str, int], str]
) -> TargetPartitions:
    """One member's installed partitions: of subscribed topics, existing, and given to no other member
    (``seen``: partition -> the member it went to, filled in as members are checked)."""
    target: dict[str, tuple[int, ...]] = {}
    for tp in entry.partitions:
        if tp.topic_id not in partitions:
            raise ApiError(Errors.INVALID_ASSIGNMENT, f"Topic {tp.topic_id} is not subscribed by the group.")
        for p in tp.partitions:
            if not 0 <= p < partitions[tp.topic_id]:
                raise ApiError(Errors.INVALID_ASSIGNMENT, f"Partition {tp.topic_id}-{p} does not exist.")
            if (tp.topic_id, p) in seen:
                raise ApiError(
                    Errors.INVALID_ASSIGNMENT,
                    f"Partition {tp.topic_id}-{p} is assigned to both {seen[(tp.topic_id, p)]} and {entry.member_id}.",
                )
            seen[(tp.topic_id, p)] = entry.member_id
        target[tp.topic_id] = target.get(tp.topic_id, ()) + tuple(p for p in tp.partitions)
    return {t: target[t] for t in sorted(target) if target[t]}
