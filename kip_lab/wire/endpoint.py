"""A real client as an actor of the Lab: its requests cross the Lab's network like any client's.

Each real client (told apart by the ``client.id`` in its request headers) is one actor in the
World, a ``WireClient``. The listener hands it a request as the Lab action ``WireRequest`` (a
``SendRequest`` of any API, to a chosen broker), so the request is a step of the run, in the
trace like a scripted client's: it is put on the Lab's network to the broker the client's connection reached, the
broker's handler (the group coordinator, a share-partition leader) answers, and the answer
crosses the network back. Latency, loss, dropped or delayed messages, a cut link and a
coordinator failover therefore apply to real clients exactly as to simulated ones.

The answers wait in ``responses`` until the listener takes them to the client's connection.
The actor holds no socket: it is plain data, so snapshots, time travel and forks copy it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from kip_lab.lab.actions import SendRequest
from kip_lab.lab.scripted import ScriptedClient


@dataclass
class WireClient(ScriptedClient):
    """The Lab's view of one real client: the requests it sent and the answers not yet sent back."""

    # (correlation id, api, response): a real client's answers carry the correlation id its
    # connection awaits them by, where a ScriptedClient's are (api, response); and World.scripted
    # makes only ScriptedClients.
    responses: list[tuple[int, str, Any]] = field(default_factory=list)  # type: ignore[assignment]
    last_correlation: int = 0

    def send(self, api: str, body: dict[str, Any]) -> None:
        """Put ``body["request"]`` (a kip_lab protocol model) on the network to ``body["broker"]``."""
        self.last_correlation = self.world.network.next_correlation(self.name)
        self.world.network.send(self.name, body["broker"], api, body["request"], self.last_correlation)

    def receive(self, envelope: Any) -> None:
        self.responses.append((envelope.correlation_id, envelope.api, envelope.payload))

    @property
    def last_response(self) -> Any:
        return self.responses[-1][2] if self.responses else None


class WireRequest(SendRequest):
    """A real client's request: ``body`` holds the broker its connection reached (``broker``)
    and the request as a kip_lab protocol model (``request``). Any API the Lab's brokers serve.
    The World makes the client's actor (a ``WireClient``) at its first request, in that step, so
    a seek replays it."""

    # World.perform carries out a client's request when it is a SendRequest, so a WireRequest is
    # one, with its own name in the trace and any API (SendRequest names the scripted ones):
    action: Literal["wire_request"] = "wire_request"  # type: ignore[assignment]  # named apart in the trace
    api: str  # type: ignore[assignment]  # any API a broker serves
    client_kind: ClassVar[type] = WireClient
