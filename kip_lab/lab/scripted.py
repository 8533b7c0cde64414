"""A scripted client: sends exactly the requests a scenario or a reviewer writes down.

It has no state machine and no timers: it is how KIP-848's case studies are replayed
message by message ("at step 5, m2 heartbeats with epoch 10 and owned [foo-3]").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from kip_lab.protocol import consumer_group as rpc

REQUESTS: dict[str, type[BaseModel]] = {
    "ConsumerGroupHeartbeat": rpc.ConsumerGroupHeartbeatRequest,
    "ConsumerGroupDescribe": rpc.ConsumerGroupDescribeRequest,
    "ConsumerGroupPrepareAssignment": rpc.ConsumerGroupPrepareAssignmentRequest,
    "ConsumerGroupInstallAssignment": rpc.ConsumerGroupInstallAssignmentRequest,
    "OffsetCommit": rpc.OffsetCommitRequest,
    "OffsetFetch": rpc.OffsetFetchRequest,
}


@dataclass
class RequestingClient:
    """A client the Lab does not simulate: it sends the requests it is handed and keeps the answers."""

    name: str
    world: Any
    alive: bool = True

    def send(self, api: str, body: dict[str, Any]) -> None:
        raise NotImplementedError

    def receive(self, envelope: Any) -> None:
        raise NotImplementedError

    def fire_timer(self, key: Any) -> None:  # never schedules any
        raise ValueError(f"{self.name}: a scripted client has no timers ({key!r})")


@dataclass
class ScriptedClient(RequestingClient):
    """Sends the requests a scenario or a notebook writes down; keeps each answer as (api, response)."""

    responses: list[tuple[str, Any]] = field(default_factory=list)

    def send(self, api: str, body: dict[str, Any]) -> None:
        request = REQUESTS[api].model_validate(body)
        broker = self.world.coordinator_broker(getattr(request, "group_id", ""))
        self.world.network.send(self.name, broker, api, request, self.world.network.next_correlation(self.name))

    def receive(self, envelope: Any) -> None:
        self.responses.append((envelope.api, envelope.payload))

    @property
    def last_response(self) -> Any:
        return self.responses[-1][1] if self.responses else None
