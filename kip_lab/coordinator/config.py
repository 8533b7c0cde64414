"""The group coordinator's configuration: KIP-848's broker configs with their defaults."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

INT32_MAX = 2**31 - 1


class CoordinatorConfig(BaseModel):
    """``group.consumer.*`` broker configs (KIP-848 "Broker Configurations"), snake_case.

    ``group.consumer.assignors`` is not a field: the coordinator takes the assignor objects
    themselves (``GroupCoordinator(..., assignors=[...])``), the first being the default.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_timeout_ms: int = Field(45_000, gt=0, description="group.consumer.session.timeout.ms")
    min_session_timeout_ms: int = Field(45_000, gt=0, description="group.consumer.min.session.timeout.ms")
    max_session_timeout_ms: int = Field(60_000, gt=0, description="group.consumer.max.session.timeout.ms")
    heartbeat_interval_ms: int = Field(5_000, gt=0, description="group.consumer.heartbeat.interval.ms")
    min_heartbeat_interval_ms: int = Field(5_000, gt=0, description="group.consumer.min.heartbeat.interval.ms")
    max_heartbeat_interval_ms: int = Field(15_000, gt=0, description="group.consumer.max.heartbeat.interval.ms")
    max_size: int = Field(INT32_MAX, gt=0, description="group.consumer.max.size")
    accept_previous_epoch: bool = Field(
        True,
        description="Accept a heartbeat at the member's previous epoch when its owned partitions are a subset "
        "of its assignment (the KIP's optional lost-response rule, as Kafka implements it).",
    )

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
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be smaller than session_timeout_ms")
        return self
