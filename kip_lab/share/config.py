"""Settings of the share-partition leader and the share coordinator (KIP-932 configs, snake_case)."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, ConfigDict, Field

from kip_lab.contract import Model


class SharePartitionConfig(Model):
    """The ``group.share.*`` settings a share-partition leader applies to one group's partitions.

    Ranges are the KIP's broker limits; ``delivery_count_limit`` is the KIP's
    ``group.share.delivery.count.limit`` (its diagram calls it ``...delivery.attempt.limit``).
    ``partition_max_record_locks`` limits the in-flight window (docs/decisions.md SP4: how
    depends on ``fidelity``). ``auto_offset_reset`` resolves a start offset of -1 read from
    the share coordinator.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    record_lock_duration_ms: int = Field(30_000, ge=1, description="group.share.record.lock.duration.ms")
    delivery_count_limit: int = Field(
        5,
        ge=2,
        le=10,
        validation_alias=AliasChoices("delivery_count_limit", "delivery_attempt_limit"),
        description="group.share.delivery.count.limit (alias: the diagram's group.share.delivery.attempt.limit)",
    )
    partition_max_record_locks: int = Field(
        200, ge=1, description="group.share.partition.max.record.locks (KIP range 100..10000; smaller for teaching)"
    )
    isolation_level: Literal["read_uncommitted", "read_committed"] = Field(
        "read_uncommitted", description="group.share.isolation.level"
    )
    auto_offset_reset: Literal["latest", "earliest"] = Field("latest", description="group.share.auto.offset.reset")
    fidelity: Literal["kafka", "kip"] = Field(
        "kafka",
        description="kafka: Apache Kafka's SharePartition; kip: KIP-932's text and examples (docs/decisions.md SP)",
    )


class ShareCoordinatorConfig(Model):
    """``share.coordinator.*`` broker settings the share coordinator uses."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    snapshot_update_records_per_snapshot: int = Field(
        500, ge=0, description="share.coordinator.snapshot.update.records.per.snapshot"
    )
    fidelity: Literal["kafka", "kip"] = Field(
        "kafka",
        description="kafka: Apache Kafka's ShareCoordinatorShard; kip: KIP-932's text (docs/decisions.md SP rows)",
    )
