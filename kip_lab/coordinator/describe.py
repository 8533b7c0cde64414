"""ConsumerGroupDescribe: the group as an operator sees it (state, epochs, assignor, members)."""

from __future__ import annotations

from collections.abc import Iterable

from kip_lab.coordinator.group import ConsumerGroup
from kip_lab.coordinator.result import CoordinatorResult
from kip_lab.protocol.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedAssignment,
    DescribedGroup,
    DescribedMember,
    DescribedTopicPartitions,
)
from kip_lab.protocol.errors import ApiError, Errors


class DescribeHandler:
    """Mixed into ``GroupCoordinator``; uses its groups, cluster, scheduler and ``_apply``."""

    def consumer_group_describe(
        self, request: ConsumerGroupDescribeRequest
    ) -> CoordinatorResult[ConsumerGroupDescribeResponse]:
        groups = [self._describe(group_id) for group_id in request.group_ids]
        return CoordinatorResult(ConsumerGroupDescribeResponse(groups=groups), origin="ConsumerGroupDescribe")

    def _describe(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(
                group_id=group_id, error_code=Errors.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found."
            )

        def described(assignment: dict[str, Iterable[int]]) -> DescribedAssignment:
            return DescribedAssignment(
                topic_partitions=[
                    DescribedTopicPartitions(
                        topic_id=t, topic_name=self._topic_name(group, t) or "", partitions=sorted(p)
                    )
                    for t, p in sorted(assignment.items())
                    if p
                ]
            )

        try:
            assignor = self._client_side_assignor(group.members) or self._server_assignor(group.members).name
        except ApiError:
            assignor = ""
        members = [
            DescribedMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=described(m.assigned),
                target_assignment=described(group.target.get(m.member_id, {})),
            )
            for _, m in sorted(group.members.items())
        ]
        return DescribedGroup(
            group_id=group_id,
            group_state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=assignor,
            members=members,
        )

    def _topic_name(self, group: ConsumerGroup, topic_id: str) -> str | None:
        topic = self.cluster.topic_by_id(topic_id)
        return topic.name if topic else group.topic_name_of(topic_id)
