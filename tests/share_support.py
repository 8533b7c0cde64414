"""A share-partition wired to a share coordinator through the persister, for the share tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kip_lab.protocol.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    InitializeShareGroupStateRequest,
    InitializeStateData,
    InitializeStatePartition,
)
from kip_lab.runtime.scheduler import Scheduler
from kip_lab.share.config import ShareCoordinatorConfig, SharePartitionConfig
from kip_lab.share.coordinator import ShareCoordinator
from kip_lab.share.partition import SharePartition
from kip_lab.share.persister import CoordinatorPersister
from kip_lab.share.state_batches import Span
from kip_lab.share.topic_log import TopicLog

GROUP, TOPIC = "G1", "topic_uuid"


def initialize(
    coordinator: ShareCoordinator,
    partition: int = 0,
    state_epoch: int = 0,
    start_offset: int = -1,
    group_id: str = GROUP,
):
    return coordinator.initialize_share_group_state(
        InitializeShareGroupStateRequest(
            group_id=group_id,
            topics=[
                InitializeStateData(
                    topic_id=TOPIC,
                    partitions=[
                        InitializeStatePartition(
                            partition=partition, state_epoch=state_epoch, start_offset=start_offset
                        )
                    ],
                )
            ],
        )
    )


def ack(first: int, last: int, *types: AcknowledgeType) -> AcknowledgementBatch:
    return AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=list(types))


@dataclass
class Rig:
    """One share-partition (group G1, topic_uuid:0), its log, clock, persister and share coordinator."""

    log: TopicLog
    scheduler: Scheduler
    coordinators: list[ShareCoordinator]  # every share coordinator so far; the persister uses the last
    persister: CoordinatorPersister
    sp: SharePartition

    @property
    def coordinator(self) -> ShareCoordinator:
        return self.coordinators[-1]

    def last_write(self) -> tuple[int, list[Span]]:
        """(StartOffset, [(first, last, DeliveryState, DeliveryCount)]) of the last WriteShareGroupState sent."""
        data = self.persister.sent[-1].request.topics[0].partitions[0]
        return data.start_offset, [
            (b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count) for b in data.state_batches
        ]

    def stored(self) -> tuple[int, list[Span]]:
        state = self.coordinator.state(GROUP, TOPIC, 0)
        assert state is not None
        return state.start_offset, list(state.spans)

    def rebuilt(self, start_offset: int = 0) -> ShareCoordinator:
        return ShareCoordinator.from_log(self.coordinator.log, self.coordinator.config, start_offset=start_offset)

    def fail_over_coordinator(self) -> None:
        """A new share coordinator replays the state partition; the persister talks to it from now on."""
        self.coordinators.append(self.rebuilt())


def make_rig(
    produced: int = 0,
    *,
    config: SharePartitionConfig | None = None,
    deferred: bool = False,
    start_offset: int = -1,
    coordinator_config: ShareCoordinatorConfig | None = None,
    fidelity: Literal["kafka", "kip"] = "kafka",
) -> Rig:
    """``fidelity`` applies to both the share-partition and the share coordinator."""
    config = (config or SharePartitionConfig()).model_copy(update={"fidelity": fidelity})
    coordinator_config = (coordinator_config or ShareCoordinatorConfig()).model_copy(update={"fidelity": fidelity})
    log = TopicLog(TOPIC, 0)
    if produced:
        log.append(produced)
    scheduler = Scheduler()
    coordinator = ShareCoordinator(coordinator_config)
    initialize(coordinator, start_offset=start_offset)
    coordinators = [coordinator]
    persister = CoordinatorPersister(lambda group, topic, partition: coordinators[-1], deferred=deferred)
    sp = SharePartition.load(GROUP, TOPIC, 0, log, config=config, scheduler=scheduler, persister=persister)
    return Rig(log, scheduler, coordinators, persister, sp)
