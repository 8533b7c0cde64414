"""The group coordinator's share-group configuration (KIP-932 broker and group configs), snake_case."""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from kip_lab.contract import Model


class ShareGroupConfig(Model):
    """``group.share.*`` settings the group coordinator uses for membership.

    The record-lock, delivery-count and offset-reset settings belong to the share-partition
    leader (``kip_lab.share.config.SharePartitionConfig``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_timeout_ms: int = Field(45_000, gt=0, description="group.share.session.timeout.ms")
    heartbeat_interval_ms: int = Field(5_000, gt=0, description="group.share.heartbeat.interval.ms")
    max_size: int = Field(200, ge=1, description="group.share.max.size (members per group)")

    @model_validator(mode="after")
    def _interval_below_timeout(self) -> ShareGroupConfig:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be smaller than session_timeout_ms")
        return self
