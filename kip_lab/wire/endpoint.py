"""A real client as an actor of the Lab: its requests cross the Lab's network like any client's.

Each real client (told apart by the ``client.id`` in its request headers) is one actor in the
World, a ``WireClient``. The listener hands it a request as the Lab action ``WireRequest`` (a
``ClientRequest`` of any API, to a chosen broker), so the request is a step of the run, in the
trace like a scripted client's: it is put on the Lab's network to the broker the client's connection reached, the
broker's handler (the group coordinator, a share-partition leader) answers, and the answer
crosses the network back. Latency, loss, dropped or delayed messages, a cut link and a
coordinator failover therefore apply to real clients exactly as to simulated ones.

The answers wait in ``answers`` until the listener takes them to the client's connection.
The actor holds no socket: it is plain data, so snapshots, time travel and forks copy it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from kip_lab.lab.actions import ClientRequest
from kip_lab.lab.observed import ObservingClient


@dataclass
class WireClient(ObservingClient):
    """The Lab's view of one real client: the requests it sent, the answers not yet sent back,
    and its group membership as they show it (``ObservingClient``)."""

    # (correlation id, response): the connection awaits each answer by its correlation id.
    answers: list[tuple[int, Any]] = field(default_factory=list)
    last_correlation: int = 0

    def send(self, api: str, body: dict[str, Any]) -> None:
        """Put ``body["request"]`` (a kip_lab protocol model) on the network to ``body["broker"]``;
        a Fetch the front door answered (``WireFetched``) is only observed."""
        if api == "Fetch":
            self.observe_fetch([tuple(row) for row in body["fetched"]])
            return
        self.last_correlation = self.world.network.next_correlation(self.name)
        self.world.network.send(self.name, body["broker"], api, body["request"], self.last_correlation)
        self.observe_request(self.last_correlation, api, body["request"])

    def receive(self, envelope: Any) -> None:
        self.observe_response(envelope.correlation_id, envelope.payload)
        self.answers.append((envelope.correlation_id, envelope.payload))

    @property
    def last_response(self) -> Any:
        return self.answers[-1][1] if self.answers else None


class WireRequest(ClientRequest):
    """A real client's request: ``body`` holds the broker its connection reached (``broker``)
    and the request as a kip_lab protocol model (``request``). Any API the Lab's brokers serve.
    The World makes the client's actor (a ``WireClient``) at its first request, in that step, so
    a seek replays it."""

    action: Literal["wire_request"] = "wire_request"
    client_kind: ClassVar[type] = WireClient


class WireFetched(ClientRequest):
    """What the front door's answer to a real client's Fetch sent it: ``body["fetched"]`` holds
    ``(topic id, partition, fetch offset, end)`` rows, ``end`` past the last record sent. The front
    door answers Fetch from its own record store, so this step is how the ledger hears of it, in
    order with the client's other requests (``ObservingClient.observe_fetch``)."""

    action: Literal["wire_fetched"] = "wire_fetched"
    api: Literal["Fetch"] = "Fetch"
    client_kind: ClassVar[type] = WireClient
