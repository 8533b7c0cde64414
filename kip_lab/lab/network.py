"""The simulated network: every RPC between a client and a broker crosses it.

A link is the pair (client, broker), in either direction. Each link has a latency model and
a drop probability, drawn from the Lab's one seeded RNG; faults can drop or delay the next N
messages on a link, or cut it for a while. Delivery is a scheduler timer owned by the
network, so in-flight messages are part of the state that snapshots copy.

A response finds its request by the client's name and the request's correlation id. In Kafka a
restarted client is a new ``NetworkClient`` on new connections, so an answer to a request of the
process that died is lost with its connection and never reaches the new one. Here every
incarnation of a client shares its name, so the network numbers each client's requests, across
incarnations, without repeating an id: an answer to the old process's request matches nothing
the new one sent, and the new one drops it as a late response.

A connection keeps its order, as Kafka's do: each is a TCP stream (``NetworkClient`` holds one per
broker) and a broker handles one request of a connection at a time, in order. So a message never
arrives before one sent earlier from the same source to the same destination: its delivery is due
at its own latency or at the previous one's delivery, whichever is later, and a delayed message
holds back those behind it. Different clients, and the two directions, are separate streams. A
client that gives up on a request closes its connection, as Kafka's ``NetworkClient`` does on a
request timeout: what is still on the way over it is lost, and what it sends next goes over a new
connection, behind nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from pydantic import ConfigDict, Field, model_validator

from kip_lab.contract import MAX_LATENCY_MS, Model
from kip_lab.events import MessageDelivered, MessageDropped, MessageSent


class LatencyModel(Model):
    """One-way latency in milliseconds: fixed, uniform in [low, high], or normal (clipped at 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    kind: Literal["fixed", "uniform", "normal"] = "fixed"
    ms: float = Field(1.0, ge=0, le=MAX_LATENCY_MS, description="fixed latency, or the mean for 'normal'")
    low: float = Field(0.0, ge=0, le=MAX_LATENCY_MS)
    high: float = Field(0.0, ge=0, le=MAX_LATENCY_MS)
    stddev: float = Field(0.0, ge=0, le=MAX_LATENCY_MS)

    @model_validator(mode="after")
    def _range(self) -> LatencyModel:
        if self.kind == "uniform" and self.high < self.low:
            raise ValueError(f"uniform latency needs low <= high, got low={self.low}, high={self.high}")
        return self

    def sample(self, rng) -> int:
        if self.kind == "fixed":
            return round(self.ms)
        if self.kind == "uniform":
            return round(rng.uniform(self.low, self.high))
        return max(0, round(rng.gauss(self.ms, self.stddev)))


class LinkConfig(Model):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    latency: LatencyModel = LatencyModel()
    drop_probability: float = Field(0.0, ge=0.0, le=1.0)


class Envelope(NamedTuple):
    """A message in flight: ``payload`` is a request or response model. A NamedTuple: one is built
    for every message sent, and snapshots pickle it at C speed."""

    message_id: int
    source: str
    destination: str
    api: str
    payload: Any
    correlation_id: int
    sent_ms: int


@dataclass
class LinkFaults:
    drop_next: int = 0
    delay_next: int = 0
    delay_ms: int = 0
    down_until_ms: int = -1


@dataclass
class Network:
    """Owner of delivery timers. ``world`` provides the clock, RNG, trace and endpoints."""

    default_link: LinkConfig = field(default_factory=LinkConfig)
    links: dict[frozenset[str], LinkConfig] = field(default_factory=dict)
    faults: dict[frozenset[str], LinkFaults] = field(default_factory=dict)
    in_flight: dict[int, Envelope] = field(default_factory=dict)
    next_id: int = 0
    last_correlation: dict[str, int] = field(default_factory=dict)  # client name -> its latest request's id
    last_due: dict[tuple[str, str], int] = field(default_factory=dict)  # (source, destination) -> latest delivery time
    world: Any = None

    def configure(self, a: str, b: str, config: LinkConfig) -> None:
        self.links[frozenset((a, b))] = config

    def link_faults(self, a: str, b: str) -> LinkFaults:
        return self.faults.setdefault(frozenset((a, b)), LinkFaults())

    def next_correlation(self, client: str) -> int:
        """A new correlation id for a request of ``client``: 1, 2, ... and on across its restarts."""
        correlation = self.last_correlation[client] = self.last_correlation.get(client, 0) + 1
        return correlation

    def send(self, source: str, destination: str, api: str, payload: Any, correlation_id: int) -> int:
        """Put a message on the wire; returns its id (it may still be dropped)."""
        world = self.world
        scheduler = world.scheduler
        now = scheduler.now_ms
        message_id = self.next_id = self.next_id + 1
        if self.links or self.faults:  # most runs configure no link: no key to build for them
            link = frozenset((source, destination))
            config = self.links.get(link, self.default_link)
            faults = self.faults.get(link)
        else:
            config, faults = self.default_link, None
        reason = None
        extra = 0
        if faults is not None:
            if faults.down_until_ms > now:
                reason = "link partitioned"
            elif faults.drop_next > 0:
                faults.drop_next -= 1
                reason = "dropped by fault"
            elif faults.delay_next > 0:
                faults.delay_next -= 1
                extra = faults.delay_ms
        if reason is None and config.drop_probability and world.rng.random() < config.drop_probability:
            reason = "random loss"
        envelope = Envelope(message_id, source, destination, api, payload, correlation_id, now)
        if reason is not None:
            world.emit("network", MessageDropped(*_ends(envelope), reason, envelope.payload))
            return message_id
        latency = self._in_order(source, destination, now, config.latency.sample(world.rng) + extra)
        self.in_flight[message_id] = envelope
        scheduler.schedule(self, message_id, latency)
        world.emit(source, MessageSent(*_ends(envelope), latency, envelope.payload))
        return message_id

    def _in_order(self, source: str, destination: str, now: int, latency: int) -> int:
        """The latency that keeps the connection's order: no sooner than the message sent before it
        (the scheduler fires timers due at once in the order they were set)."""
        stream = (source, destination)
        due = max(now + latency, self.last_due.get(stream, now))
        self.last_due[stream] = due
        return due - now

    def close_connection(self, client: str, correlation_id: int) -> None:
        """``client`` gave up on its request ``correlation_id`` (Kafka ``NetworkClient.handleTimedOutRequests``
        disconnects): the messages in flight between it and that request's broker, either way, are
        dropped and the connection's order starts afresh. Nothing to close when neither the request
        nor its answer is on the way (the broker holds it)."""
        ends = next(
            (
                (e.source, e.destination)
                for e in self.in_flight.values()
                if e.correlation_id == correlation_id and client in (e.source, e.destination)
            ),
            None,
        )
        if ends is None:
            return
        connection = {ends, ends[::-1]}
        for message_id, envelope in list(self.in_flight.items()):
            if (envelope.source, envelope.destination) in connection:
                del self.in_flight[message_id]
                self.world.scheduler.cancel(self, message_id)
                self.world.emit("network", MessageDropped(*_ends(envelope), "connection closed"))
        for stream in connection:
            self.last_due.pop(stream, None)

    def fire_timer(self, key: int) -> None:
        envelope = self.in_flight.pop(key)
        world = self.world
        faults = self.faults.get(frozenset((envelope.source, envelope.destination))) if self.faults else None
        if faults is not None and faults.down_until_ms > world.scheduler.now_ms:
            world.emit("network", MessageDropped(*_ends(envelope), "link partitioned"))
            return
        world.emit(envelope.destination, MessageDelivered(*_ends(envelope)))
        world.endpoint(envelope.destination).receive(envelope)


def _ends(envelope: Envelope) -> tuple[int, str, str, str, int]:
    """What every message event names: the message's id, ends, API and correlation id."""
    return envelope.message_id, envelope.source, envelope.destination, envelope.api, envelope.correlation_id
