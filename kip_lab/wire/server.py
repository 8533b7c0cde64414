"""The front door: Kafka's wire protocol on loopback ports, in front of a Lab on a real-time clock.

Each of the Lab's brokers listens on a port of its own (``broker-0`` on the bootstrap port), so
a request arrives at the broker the client meant — after a coordinator failover, the old
coordinator answers NOT_COORDINATOR and the client looks the group up again, as against a real
cluster. One thread runs an asyncio loop that owns the Lab: it reads frames, answers the APIs
the Lab serves (``handlers``), and steps the Lab's timers as wall time passes (``clock``).

Like a broker, a connection is served one request at a time (the next is read once the answer
is written). A frame larger than ``max_frame_bytes``, bytes that do not decode, an API the front
door does not serve or a reader too slow to take its answer close the connection, with the
reason logged; an ApiVersions request of a version it does not serve is answered with
UNSUPPORTED_VERSION and the versions it does serve, which is how clients pick a version.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kip_lab.lab.lab import Lab
from kip_lab.wire import codec
from kip_lab.wire.clock import RealTimeClock
from kip_lab.wire.connection import Connection
from kip_lab.wire.endpoint import WireClient, WireRequest
from kip_lab.wire.handlers import SUPPORTED, Handlers, WireError, node_id

log = logging.getLogger("kip_lab.wire")

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
IDLE_TICK_S = 0.2  # the longest the driver sleeps when no timer is due sooner
NO_ANSWER_TIMEOUT_S = 330.0  # longer than any rebalance a parked request may wait for
ABANDONED_CHECK_S = 0.5  # how often the driver looks for requests whose client has gone
NOT_STARTED = "the wire server has not started: serve(lab) starts one"


@dataclass
class ServerStats:
    """What the front door has served: connections, requests, and why connections were closed."""

    connections: int = 0
    requests: int = 0
    closed: dict[str, int] = field(default_factory=dict)  # kind of reason -> connections closed for it
    reasons: deque[str] = field(default_factory=lambda: deque(maxlen=100))  # the latest reasons, in full


@dataclass
class Awaiting:
    """A request in the Lab, awaited by the connection that sent it."""

    answer: asyncio.Future
    connection: Connection
    api: str
    deadline: float  # the event loop's time after which it is given up

    def abandoned(self, now: float) -> str | None:
        """Why nobody should wait for this answer any longer, or None while it may still come."""
        if self.connection.reader.at_eof():
            return f"the client closed the connection while its {self.api} had no answer"
        if now > self.deadline:
            return f"no answer to {self.api} within {NO_ANSWER_TIMEOUT_S} s"
        return None


@dataclass
class Running:
    """What exists only while the front door serves, made as it starts on the loop's own thread:
    the code that runs while it serves reads these, never a half-started server."""

    thread: threading.Thread  # runs ``loop``, which owns the Lab
    loop: asyncio.AbstractEventLoop
    clock: RealTimeClock
    wake: asyncio.Event  # set when the driver must look at the Lab's timers again
    stopping: asyncio.Event  # set by ``stop``


class WireServer:
    """A running front door; ``serve`` (in ``kip_lab.wire``) starts one."""

    def __init__(
        self,
        lab: Lab,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        write_timeout_s: float = 30.0,
    ) -> None:
        self.lab = lab
        self.host = host
        self.requested_port = port
        self.max_frame_bytes = max_frame_bytes
        self.write_timeout_s = write_timeout_s
        self.ports: dict[str, int] = {}  # broker -> port
        self.stats = ServerStats()
        self.handlers = Handlers(self)
        self._running: Running | None = None  # from start to stop
        self._started = False  # a server serves once
        self._connections: dict[int, Connection] = {}
        self._tasks: set[asyncio.Task] = set()  # one per connection being served
        self._pending: dict[tuple[str, int], Awaiting] = {}  # by (actor, the Lab's correlation id)
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    # ------------------------------------------------------------------ life cycle
    @property
    def port(self) -> int:
        """The bootstrap port (broker-0's)."""
        if not self.ports:
            raise RuntimeError(NOT_STARTED)
        return self.ports[self.broker_names[0]]

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def broker_names(self) -> list[str]:
        return sorted(self.lab.world.brokers, key=node_id)

    @property
    def clock(self) -> RealTimeClock:
        """The clock that moves the Lab with the wall clock while the server serves."""
        return self._serving().clock

    def _serving(self) -> Running:
        """The running state, for what only a serving front door can do."""
        if self._running is None:
            raise RuntimeError(NOT_STARTED if not self._started else "the wire server has stopped")
        return self._running

    def start(self) -> WireServer:
        if self._started:
            raise RuntimeError("a wire server serves once: serve(lab) starts a new one")
        self._started = True
        threading.Thread(target=self._run_loop, name="kip-lab-wire", daemon=True).start()
        self._ready.wait(30)
        if self._startup_error is not None:
            self._running = None
            raise self._startup_error
        if not self._ready.is_set():
            raise TimeoutError("the wire listener did not start within 30 s")
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Close every connection and listener and stop the clock; the Lab keeps its trace."""
        running = self._running
        if running is None:
            return
        if running.loop.is_running():
            running.loop.call_soon_threadsafe(running.stopping.set)
        running.thread.join(timeout_s)
        self._running = None

    def __enter__(self) -> WireServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def call(self, function: Callable[[Lab], Any], timeout_s: float = 30.0) -> Any:
        """Run ``function(lab)`` on the thread that owns the Lab (the safe way to read or change
        it while it serves: add a simulated consumer, inject a fault, read the trace). Before
        ``start`` and after ``stop`` nothing else uses the Lab, and ``function`` runs at once."""
        running = self._running
        if running is None:
            return function(self.lab)
        if not running.thread.is_alive():
            raise RuntimeError("the wire listener has stopped (see the kip_lab.wire log); stop() it and serve again")

        async def run() -> Any:
            running.clock.catch_up()
            result = function(self.lab)
            self._deliver()
            running.wake.set()
            return result

        return asyncio.run_coroutine_threadsafe(run(), running.loop).result(timeout_s)

    def _run_loop(self) -> None:
        loop = _new_event_loop()
        try:
            loop.run_until_complete(self._main())
        except BaseException as error:  # reported to start(), or logged if it happens later
            if not self._ready.is_set():
                self._startup_error = error
                self._ready.set()
            else:
                log.exception("the wire listener stopped on an error")
        finally:
            loop.close()

    async def _main(self) -> None:
        running = self._running = Running(
            thread=threading.current_thread(),
            loop=asyncio.get_running_loop(),
            clock=RealTimeClock(self.lab),
            wake=asyncio.Event(),
            stopping=asyncio.Event(),
        )
        servers = await self._listen()
        driver = asyncio.create_task(self._drive(running))
        self._ready.set()
        await running.stopping.wait()
        running.clock.advance()  # the Lab's clock ends where the wall clock is
        driver.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await driver
        for server in servers:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)
        for server in servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        for awaiting in self._pending.values():
            awaiting.answer.cancel()

    async def _listen(self) -> list[asyncio.Server]:
        """A listener for each broker, on its port (recorded in ``ports``)."""
        servers: list[asyncio.Server] = []
        for number, broker in enumerate(self.broker_names):
            port = self.requested_port + number if self.requested_port else 0

            async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, broker: str = broker) -> None:
                task = asyncio.current_task()
                assert task is not None  # asyncio serves each accepted connection in a task of its own
                self._tasks.add(task)
                try:
                    await self._serve_connection(broker, reader, writer)
                finally:
                    self._tasks.discard(task)

            try:
                server = await asyncio.start_server(accept, self.host, port)
            except OSError:
                for started in servers:  # a port taken: release the ones already bound
                    started.close()
                raise
            servers.append(server)
            self.ports[broker] = server.sockets[0].getsockname()[1]
        return servers

    # ------------------------------------------------------------------ the clock
    async def _drive(self, running: Running) -> None:
        """Step the Lab's timers as they come due, send the answers they complete, and give up
        the requests whose client has gone."""
        next_check = running.loop.time() + ABANDONED_CHECK_S
        while True:
            try:
                running.clock.catch_up()
                self._deliver()
            except Exception:  # a Lab error must not stop the clock for every connection
                log.exception("stepping the Lab failed")
            if running.loop.time() >= next_check:
                self._give_up_abandoned(running.loop.time())
                next_check = running.loop.time() + ABANDONED_CHECK_S
            running.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(running.wake.wait(), running.clock.seconds_to_next_timer(IDLE_TICK_S))

    def _deliver(self) -> None:
        """Hand each answer the Lab's network delivered to a real client to the request awaiting it."""
        for name, client in self.lab.world.clients.items():
            if not isinstance(client, WireClient) or not client.answers:
                continue
            for correlation_id, response in client.answers:
                awaiting = self._pending.pop((name, correlation_id), None)
                if awaiting is not None and not awaiting.answer.done():
                    awaiting.answer.set_result(response)
            client.answers.clear()

    def _give_up_abandoned(self, now: float) -> None:
        """End the wait of each request whose client closed its connection or whose answer is
        overdue: the Lab's network lost it, or a fault holds it (one sweep for all requests,
        rather than a timer for each)."""
        for key, awaiting in list(self._pending.items()):
            reason = awaiting.abandoned(now)
            if reason is not None:
                del self._pending[key]
                if not awaiting.answer.done():
                    awaiting.answer.set_exception(WireError(reason))

    def submit(self, actor: str, connection: Connection, api: str, request: Any) -> asyncio.Future:
        """Apply ``request`` (a kip_lab protocol model) as ``actor``'s request to the broker
        ``connection`` reached; the future is answered when the Lab's network brings the
        response back, or fails with a ``WireError`` once nobody waits for it."""
        running = self._serving()
        running.clock.advance()
        broker = connection.broker
        self.lab._apply(WireRequest(member=actor, api=api, body={"broker": broker, "request": request}))
        client = self.lab.world.clients[actor]
        answer = running.loop.create_future()
        deadline = running.loop.time() + NO_ANSWER_TIMEOUT_S
        self._pending[(actor, client.last_correlation)] = Awaiting(answer, connection, api, deadline)
        running.wake.set()  # the driver hands over the answers once this loop turn's requests are in
        return answer

    def kill_connections(self, client_id: str | None = None) -> int:
        """Close the connections of the client with ``client_id`` (every connection if None), as a
        broker restart or a network reset would; returns how many were closed. Safe from any thread."""

        def kill() -> int:
            killed = 0
            for connection in list(self._connections.values()):
                if client_id is None or connection.client_id == client_id:
                    connection.closed_reason = "killed: a kill_connections fault"
                    connection.writer.transport.abort()
                    killed += 1
            return killed

        running = self._running
        if running is None:
            return 0
        return asyncio.run_coroutine_threadsafe(_call(kill), running.loop).result(10)

    # ------------------------------------------------------------------ connections
    async def _serve_connection(self, broker: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        peer = writer.get_extra_info("peername")
        connection = Connection(self.stats.connections, broker, f"{peer[0]}:{peer[1]}" if peer else "?", writer, reader)
        self._connections[connection.number] = connection
        try:
            reason = await self._serve_requests(connection, reader, writer)
            connection.closed_reason = connection.closed_reason or reason
        except asyncio.IncompleteReadError:
            connection.closed_reason = connection.closed_reason or "client closed the connection"
        except (ConnectionError, OSError) as error:
            connection.closed_reason = connection.closed_reason or f"connection error: {error}"
        except asyncio.CancelledError:
            connection.closed_reason = "server stopped"
        except Exception as error:
            log.exception("connection %d to %s failed", connection.number, broker)
            connection.closed_reason = f"internal error: {type(error).__name__}"
        finally:
            reason = connection.closed_reason or "closed"
            kind = reason.split(":")[0]
            self.stats.closed[kind] = self.stats.closed.get(kind, 0) + 1
            self.stats.reasons.append(reason)
            log.info("connection %d (%s -> %s) closed: %s", connection.number, connection.peer, broker, reason)
            self._connections.pop(connection.number, None)
            writer.close()

    async def _serve_requests(
        self, connection: Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> str:
        """Read, answer and write requests one at a time; returns why the connection ends."""
        while True:
            size = codec.SIZE.unpack(await reader.readexactly(codec.SIZE.size))[0]
            if size < 0 or size > self.max_frame_bytes:
                return f"frame too large: {size} bytes (max {self.max_frame_bytes})"
            frame = await reader.readexactly(size)
            answer = await self._answer(connection, frame)
            if isinstance(answer, str):
                return answer
            if not answer:
                continue
            writer.write(answer)
            if writer.transport.get_write_buffer_size():  # not all sent at once: wait for the reader
                try:
                    await asyncio.wait_for(writer.drain(), self.write_timeout_s)
                except TimeoutError:
                    return f"slow reader: an answer not taken within {self.write_timeout_s} s"

    async def _answer(self, connection: Connection, frame: bytes) -> bytes | str:
        """The response frame to one request, or why the connection must close instead."""
        try:
            api_key, version = codec.read_prefix(frame)
        except codec.MalformedRequest as error:
            return f"malformed request: {error}"
        supported = SUPPORTED.get(api_key)
        if supported is None or not supported[0] <= version <= supported[1]:
            if api_key == codec.API_VERSIONS_KEY:
                correlation_id = codec.read_correlation_id(frame)
                if correlation_id is None:
                    return "malformed request: ApiVersions without a correlation id"
                return self.handlers.unsupported_api_versions(correlation_id)
            name = codec.api_key_map.get(api_key, "unknown API")
            return f"unsupported request: {name} (key {api_key}) v{version}"
        try:
            header, request = codec.read_request(frame)
        except codec.MalformedRequest as error:
            return f"malformed request: {error}"
        connection.requests += 1
        connection.client_id = header.client_id
        self.stats.requests += 1
        log.debug("connection %d (%s): %s v%d", connection.number, header.client_id, codec.api_name(api_key), version)
        try:
            body = await self.handlers.handle(connection, header, request)
        except WireError as error:
            return f"refused request: {error}"
        if body is None:  # a Produce with acks=0: no answer
            return b""
        return codec.encode_response(api_key, version, header.correlation_id, body)


def serve(lab: Lab, port: int = 0, *, host: str = "127.0.0.1", **settings: Any) -> WireServer:
    """Start a Kafka wire-protocol front door for ``lab`` and return its handle.

    ``port`` is the bootstrap port (broker-0's); broker-N listens on ``port + N``, or on free
    ports when ``port`` is 0. The handle's ``bootstrap_servers`` goes into a client's config;
    ``call(fn)`` runs ``fn(lab)`` safely while it serves; ``stop()`` ends it. From then on the
    Lab's clock follows the wall clock. ``settings``: ``max_frame_bytes``, ``write_timeout_s``.
    """
    return WireServer(lab, host=host, port=port, **settings).start()


def _new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop when it is installed (the ``wire`` extra): its sockets and callbacks
    cost less CPU per request than asyncio's own loop; asyncio's otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


async def _call(function: Callable[[], Any]) -> Any:
    return function()
