"""ConsumerGroupDescribe: the group as an operator sees it (state, epochs, assignor, members);
DescribeGroups and ListGroups: the classic admin view, which also covers consumer groups."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator.classic_group import ClassicGroup, ClassicGroupState
from kip_lab.coordinator.group import ConsumerGroup, SubscriptionCounts
from kip_lab.coordinator.member import Assignment
from kip_lab.protocol.classic_group import (
    CONSUMER_PROTOCOL_TYPE,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeGroupsResponseGroup,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kip_lab.protocol.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedAssignment,
    DescribedGroup,
    DescribedMember,
    DescribedTopicPartitions,
)
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.runtime.result import CoordinatorResult
from kip_lab.share.group import ShareGroup


class GroupDescriber:
    """The read-only admin view of one shard's groups: ConsumerGroupDescribe, ListGroups, DescribeGroups.

    It reads, never writes: the consumer, classic and share groups it describes, the cluster that
    names topics, and three rules the coordinator owns, given as callables: the client-side
    assignor a group uses (None in server-side mode), the server-side assignor its members prefer,
    and an assignment as sorted (topic name, partition) pairs.
    """

    def __init__(
        self,
        *,
        groups: Mapping[str, ConsumerGroup],
        classic_groups: Mapping[str, ClassicGroup],
        share_groups: Mapping[str, ShareGroup],
        cluster: ClusterMetadata,
        client_side_assignor: Callable[[SubscriptionCounts], str | None],
        preferred_server_assignor: Callable[[SubscriptionCounts], str],
        partitions_by_name: Callable[[Assignment], list[tuple[str, int]]],
    ) -> None:
        self.groups = groups
        self.classic_groups = classic_groups
        self.share_groups = share_groups
        self.cluster = cluster
        self.client_side_assignor = client_side_assignor
        self.preferred_server_assignor = preferred_server_assignor
        self.partitions_by_name = partitions_by_name

    def consumer_group_describe(
        self, request: ConsumerGroupDescribeRequest
    ) -> CoordinatorResult[ConsumerGroupDescribeResponse]:
        groups = [self._describe(group_id) for group_id in request.group_ids]
        return CoordinatorResult(ConsumerGroupDescribeResponse(groups=groups), origin="ConsumerGroupDescribe")

    def _describe(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None:  # the error code alone (Kafka ``GroupMetadataManager.consumerGroupDescribe``)
            return DescribedGroup(group_id=group_id, error_code=Errors.GROUP_ID_NOT_FOUND)

        def described(assignment: Mapping[str, Iterable[int]]) -> DescribedAssignment:
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
            subscriptions = group.subscriptions
            assignor = self.client_side_assignor(subscriptions) or self.preferred_server_assignor(subscriptions)
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

    # ------------------------------------------------------------------ classic admin view
    def list_groups(self, request: ListGroupsRequest) -> CoordinatorResult[ListGroupsResponse]:
        """ListGroups v5: every group on this shard of the wanted types and states, sorted by id."""
        listed = [
            ListedGroup(
                group_id=g, protocol_type=CONSUMER_PROTOCOL_TYPE, group_state=v.state.value, group_type="consumer"
            )
            for g, v in self.groups.items()
        ]
        listed += [
            ListedGroup(
                group_id=g, protocol_type=v.protocol_type or "", group_state=v.state.value, group_type="classic"
            )
            for g, v in self.classic_groups.items()
        ]
        listed += [
            ListedGroup(group_id=g, protocol_type="share", group_state=v.state.value, group_type="share")
            for g, v in self.share_groups.items()
        ]
        states = {s.lower() for s in request.states_filter}
        types = {t.lower() for t in request.types_filter}
        groups = [
            g
            for g in sorted(listed, key=lambda g: g.group_id)
            if (not states or g.group_state.lower() in states) and (not types or g.group_type in types)
        ]
        return CoordinatorResult(ListGroupsResponse(groups=groups), origin="ListGroups")

    def describe_groups(self, request: DescribeGroupsRequest) -> CoordinatorResult[DescribeGroupsResponse]:
        """DescribeGroups: a classic group as Kafka describes it (metadata and assignments once
        Stable); a consumer group in the same terms (assignments in the embedded protocol); an
        unknown id as Dead, as Kafka answers."""
        groups = [self._describe_classic_view(group_id) for group_id in request.groups]
        return CoordinatorResult(DescribeGroupsResponse(groups=groups), origin="DescribeGroups")

    def _describe_classic_view(self, group_id: str) -> DescribeGroupsResponseGroup:
        classic = self.classic_groups.get(group_id)
        if classic is not None:
            stable = classic.state is ClassicGroupState.STABLE
            members = [
                DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata(classic.protocol_name) if stable and classic.protocol_name else b"",
                    member_assignment=m.assignment if stable else b"",
                )
                for _, m in sorted(classic.members.items())
            ]
            return DescribeGroupsResponseGroup(
                group_id=group_id,
                group_state=classic.state.value,
                protocol_type=classic.protocol_type or "",
                protocol_data=(classic.protocol_name or "") if stable else "",
                members=members,
            )
        group = self.groups.get(group_id)
        if group is None:
            return DescribeGroupsResponseGroup(group_id=group_id, group_state=ClassicGroupState.DEAD.value)
        members = []
        for _, m in sorted(group.members.items()):
            classic_meta = m.classic_member_metadata
            metadata = (
                classic_meta.supported_protocols[0].metadata
                if classic_meta is not None
                else ConsumerProtocolSubscription(version=3, topics=list(m.subscribed_topic_names)).encode()
            )
            assignment = ConsumerProtocolAssignment(version=3, assigned_partitions=self.partitions_by_name(m.assigned))
            members.append(
                DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=metadata,
                    member_assignment=assignment.encode(),
                )
            )
        return DescribeGroupsResponseGroup(
            group_id=group_id, group_state=group.state.value, protocol_type=CONSUMER_PROTOCOL_TYPE, members=members
        )
