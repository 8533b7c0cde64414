"""The group coordinator's configuration: KIP-848's broker configs with their defaults."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from kip_lab.assignors.builtin import (
    BUILTIN_ASSIGNORS,
    DEFAULT_ASSIGNORS,
    assignor_names_problem,
    unknown_assignor_problem,
)
from kip_lab.contract import Model
from kip_lab.share.group_config import ShareGroupConfig

INT32_MAX = 2**31 - 1


class ConsumerGroupMigrationPolicy(StrEnum):
    """``group.consumer.migration.policy``: which online conversions between group types are allowed."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"  # classic -> consumer when the first consumer-protocol member joins
    DOWNGRADE = "downgrade"  # consumer -> classic when the last consumer-protocol member leaves
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (ConsumerGroupMigrationPolicy.UPGRADE, ConsumerGroupMigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (ConsumerGroupMigrationPolicy.DOWNGRADE, ConsumerGroupMigrationPolicy.BIDIRECTIONAL)


class CoordinatorConfig(Model):
    """Every group coordinator setting: ``group.consumer.*`` broker configs (KIP-848 "Broker Configurations"),
    the classic ``group.*`` ones, share groups' ``group.share.*`` (``share``), snake_case, and the fidelity profile.

    ``assignors`` (``group.consumer.assignors``) names the built-in server assignors the
    coordinator offers, the first being the default for members that name none. Assignor
    objects given to ``GroupCoordinator(..., assignors=[...])`` (a custom assignor) replace it.

    ``fidelity`` picks the profile: ``"kafka"`` (default) behaves as Apache Kafka's group
    coordinator does; ``"kip"`` follows the KIP text where Kafka departs from it (each such
    reading is a ``kip`` row of docs/decisions.md).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    fidelity: Literal["kafka", "kip"] = "kafka"
    session_timeout_ms: int = Field(45_000, gt=0, description="group.consumer.session.timeout.ms")
    min_session_timeout_ms: int = Field(45_000, gt=0, description="group.consumer.min.session.timeout.ms")
    max_session_timeout_ms: int = Field(60_000, gt=0, description="group.consumer.max.session.timeout.ms")
    heartbeat_interval_ms: int = Field(5_000, gt=0, description="group.consumer.heartbeat.interval.ms")
    min_heartbeat_interval_ms: int = Field(5_000, gt=0, description="group.consumer.min.heartbeat.interval.ms")
    max_heartbeat_interval_ms: int = Field(15_000, gt=0, description="group.consumer.max.heartbeat.interval.ms")
    max_size: int = Field(INT32_MAX, gt=0, description="group.consumer.max.size")
    assignors: tuple[str, ...] = Field(
        DEFAULT_ASSIGNORS,
        description="group.consumer.assignors: the server assignors offered, by name "
        f"({', '.join(BUILTIN_ASSIGNORS)}); the first is the default for a member that names none",
        json_schema_extra={"items": {"type": "string", "enum": list(BUILTIN_ASSIGNORS)}},
    )
    offset_metadata_max_bytes: int = Field(4096, ge=0, description="offset.metadata.max.bytes")
    # Assignment batching (Kafka 4.3, KIP-1263): a new target at most once per interval. Kafka's
    # default is 1,000 ms; here 0 (off), the behaviour of the reference commit this Lab follows.
    assignment_interval_ms: int = Field(
        0,
        ge=0,
        description="group.consumer.assignment.interval.ms: the least time between two target computations "
        "of a group (0: at every group epoch bump). Kafka 4.3 defaults to 1000.",
    )
    min_assignment_interval_ms: int = Field(0, ge=0, description="group.consumer.min.assignment.interval.ms")
    max_assignment_interval_ms: int = Field(15_000, ge=0, description="group.consumer.max.assignment.interval.ms")
    share_assignment_interval_ms: int = Field(
        0, ge=0, description="group.share.assignment.interval.ms: the same for share groups (Kafka 4.3: 1000)"
    )
    share_min_assignment_interval_ms: int = Field(0, ge=0, description="group.share.min.assignment.interval.ms")
    share_max_assignment_interval_ms: int = Field(15_000, ge=0, description="group.share.max.assignment.interval.ms")
    accept_previous_epoch: bool = Field(
        True,
        description="Accept a heartbeat at the member's previous epoch when its owned partitions are a subset "
        "of its assignment (the KIP's optional lost-response rule, as Kafka implements it).",
    )

    # Classic groups (Kafka's group.* broker configs) and online migration.
    classic_min_session_timeout_ms: int = Field(6_000, gt=0, description="group.min.session.timeout.ms")
    classic_max_session_timeout_ms: int = Field(1_800_000, gt=0, description="group.max.session.timeout.ms")
    classic_max_size: int = Field(INT32_MAX, gt=0, description="group.max.size")
    initial_rebalance_delay_ms: int = Field(3_000, ge=0, description="group.initial.rebalance.delay.ms")
    new_member_join_timeout_ms: int = Field(
        300_000, gt=0, description="How long a new classic member's parked JoinGroup may wait (Kafka: 5 min)."
    )
    migration_policy: ConsumerGroupMigrationPolicy = Field(
        ConsumerGroupMigrationPolicy.BIDIRECTIONAL, description="group.consumer.migration.policy"
    )

    # Share groups (KIP-932): membership settings; the record-lock and delivery settings belong
    # to the share-partition leader (``LabConfig.share``).
    share: ShareGroupConfig = Field(default_factory=ShareGroupConfig, description="group.share.* membership configs")

    @field_validator("assignors", mode="before")
    @classmethod
    def _comma_separated(cls, names: Any) -> Any:
        """A text lists names as Kafka's list configs do: ``range,uniform`` (spaces around commas ignored)."""
        if isinstance(names, str):
            return [name.strip() for name in names.split(",")] if names.strip() else []
        return names

    @field_validator("assignors")
    @classmethod
    def _known_distinct_assignors(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        problem = unknown_assignor_problem(names) or assignor_names_problem(names)
        if problem is not None:
            raise ValueError(problem)
        return names

    @model_validator(mode="after")
    def _bounds(self) -> CoordinatorConfig:
        if not self.min_session_timeout_ms <= self.session_timeout_ms <= self.max_session_timeout_ms:
            raise ValueError(
                f"session_timeout_ms={self.session_timeout_ms} must lie in "
                f"[{self.min_session_timeout_ms}, {self.max_session_timeout_ms}]"
            )
        if not self.min_heartbeat_interval_ms <= self.heartbeat_interval_ms <= self.max_heartbeat_interval_ms:
            raise ValueError(
                f"heartbeat_interval_ms={self.heartbeat_interval_ms} must lie in "
                f"[{self.min_heartbeat_interval_ms}, {self.max_heartbeat_interval_ms}]"
            )
        if not self.min_assignment_interval_ms <= self.assignment_interval_ms <= self.max_assignment_interval_ms:
            raise ValueError(
                f"assignment_interval_ms={self.assignment_interval_ms} must lie in "
                f"[{self.min_assignment_interval_ms}, {self.max_assignment_interval_ms}]"
            )
        share = (self.share_min_assignment_interval_ms, self.share_max_assignment_interval_ms)
        if not share[0] <= self.share_assignment_interval_ms <= share[1]:
            raise ValueError(
                f"share_assignment_interval_ms={self.share_assignment_interval_ms} must lie in [{share[0]}, {share[1]}]"
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be smaller than session_timeout_ms")
        if self.classic_min_session_timeout_ms > self.classic_max_session_timeout_ms:
            raise ValueError("classic_min_session_timeout_ms must not exceed classic_max_session_timeout_ms")
        return self


def lift_fidelity(data: Any) -> Any:
    """Read ``fidelity`` given beside ``coordinator`` as ``coordinator.fidelity`` (a shorthand for Lab configs).

    For a ``model_validator(mode="before")`` of a model with a ``coordinator: CoordinatorConfig``
    field. Naming the profile in both places with different values is an error.
    """
    if not isinstance(data, dict) or "fidelity" not in data:
        return data
    data = dict(data)
    fidelity = data.pop("fidelity")
    coordinator = data.get("coordinator", {})
    if isinstance(coordinator, CoordinatorConfig):
        coordinator = coordinator.model_dump(exclude_unset=True)
    elif not isinstance(coordinator, dict):
        return {**data, "fidelity": fidelity}  # let the field's own validation name the problem
    if coordinator.get("fidelity", fidelity) != fidelity:
        raise ValueError(
            f"fidelity={fidelity!r} contradicts coordinator.fidelity={coordinator['fidelity']!r}; give it once"
        )
    data["coordinator"] = {**coordinator, "fidelity": fidelity}
    return data
