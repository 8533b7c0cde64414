"""Helpers for the wire front door's tests: a bare-socket Kafka client and trace queries.

``RawClient`` speaks the wire protocol with kio's encoders, so a test can send exactly the
bytes it means (a malformed body, an oversized frame, an unknown API) and read the answer.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import pytest

kio = pytest.importorskip("kio", reason="the wire front door needs kio (pip install 'kip-lab[wire]')")

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1  # noqa: E402
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2  # noqa: E402
from kio.serial import entity_reader  # noqa: E402

from kip_lab.lab.trace import EventKind  # noqa: E402
from kip_lab.wire import codec  # noqa: E402

SOCKET_TIMEOUT_S = 10.0


class RawClient:
    """One connection to a broker port: send requests (kio objects or raw bytes), read answers."""

    def __init__(self, port: int, host: str = "127.0.0.1", client_id: str = "raw") -> None:
        self.sock = socket.create_connection((host, port), timeout=SOCKET_TIMEOUT_S)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, body: Any) -> Any:
        """Send a kio request; return the decoded kio response."""
        self.correlation_id += 1
        header_class = RequestHeaderV2 if body.__flexible__ else RequestHeaderV1
        header = header_class(
            request_api_key=body.__api_key__,
            request_api_version=body.__version__,
            correlation_id=self.correlation_id,
            client_id=self.client_id,
        )
        self.send_raw(codec.encode_request(header, body))
        return self.read_response(body.__api_key__, body.__version__)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def read_response(self, api_key: int, version: int) -> Any:
        frame = self.read_frame()
        response_class = codec.response_class(api_key, version)
        flexible_header = response_class.__flexible__ and api_key != codec.API_VERSIONS_KEY
        used = 4 + (1 if flexible_header else 0)  # correlation id, then the header's tagged fields
        assert struct.unpack_from(">i", frame)[0] == self.correlation_id
        return entity_reader(response_class)(frame, used)[0]

    def is_closed_by_server(self) -> bool:
        """True once the server has closed this connection (reads end of stream)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True

    def _read(self, count: int) -> bytes:
        chunks = []
        while count:
            chunk = self.sock.recv(count)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.05) -> Any:
    """Poll ``condition`` until it is truthy; fail the test naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(every_s)


def handler_records(lab: Any, api: str | None = None) -> list[dict[str, Any]]:
    """The coordinator records of every handler result in the trace (optionally of one API's)."""
    out = []
    for event in lab.trace:
        if event.kind is EventKind.HANDLER_RESULT and (api is None or event.payload.get("origin") == api):
            out.extend(event.payload.get("records", []))
    return out


def messages(lab: Any, kind: EventKind, actor: str | None = None, api: str | None = None) -> list[Any]:
    """Message events of ``kind`` (sent/delivered/dropped), optionally from ``actor`` and of ``api``."""
    return [
        e
        for e in lab.trace
        if e.kind is kind
        and (actor is None or e.payload.get("from") == actor)
        and (api is None or e.payload.get("api") == api)
    ]


class ConsumerProcess:
    """A real confluent-kafka consumer in a child process (``wire_consumer_process.py``): its
    events arrive as dicts in ``events``; ``close()`` leaves the group, ``kill()`` crashes it."""

    SCRIPT = __file__.replace("wire_support.py", "wire_consumer_process.py")

    def __init__(self, config: dict[str, Any], topics: list[str]) -> None:
        import json
        import subprocess
        import sys
        import threading

        self.name = config.get("client.id", "consumer")
        self.events: list[dict[str, Any]] = []
        self.process = subprocess.Popen(
            [sys.executable, self.SCRIPT, json.dumps(config), *topics],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        import json

        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def records(self) -> set[tuple[str, int, int]]:
        return {(e["topic"], e["partition"], e["offset"]) for e in list(self.events) if e["event"] == "record"}

    def close(self, timeout_s: float = 20.0) -> None:
        """Stop polling and close the consumer (which leaves the group); wait for the process."""
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout_s)
            except Exception:
                self.process.kill()
                self.process.wait(5)

    def kill(self) -> None:
        """SIGKILL: the process dies without leaving the group."""
        self.process.kill()
        self.process.wait(5)


def group_members(lab: Any, group_id: str) -> dict[str, Any]:
    """client id -> the coordinator's member (KIP-848 group) right now."""
    group = lab.coordinator.groups.get(group_id)
    return {m.client_id: m for m in group.members.values()} if group else {}


def coordinator_assignment_history(lab: Any) -> list[dict[str, set[tuple[str, int]]]]:
    """The coordinator's view of who owns what, after each CurrentMemberAssignment record, in log
    order (member id -> set of (topic id, partition)); a tombstone removes the member."""
    owned: dict[str, set[tuple[str, int]]] = {}
    history = []
    for event in lab.trace:
        if event.kind is not EventKind.HANDLER_RESULT:
            continue
        for record in event.payload.get("records", []):
            if record["key"]["type"] != "ConsumerGroupCurrentMemberAssignmentKey":
                continue
            member = record["key"]["member_id"]
            if record["value"] is None:
                owned.pop(member, None)
            else:
                owned[member] = {
                    (tp["topic_id"], p) for tp in record["value"].get("topic_partitions", []) for p in tp["partitions"]
                }
            history.append({m: set(v) for m, v in owned.items()})
    return history


def classic_generations(lab: Any, group_id: str) -> list[tuple[int, dict[str, set[tuple[str, int]]]]]:
    """Each generation the classic group stored (its GroupMetadata record), in log order, with
    client id -> the partitions the leader's SyncGroup assigned that member."""
    import json

    out = []
    for record in handler_records(lab):
        if record["key"]["type"] != "GroupMetadataKey" or record["key"].get("group") != group_id or not record["value"]:
            continue
        value = record["value"]
        members = {}
        for member in value.get("members", []):
            assignment = member.get("assignment") or ""
            parsed = json.loads(assignment) if assignment else {"assigned_partitions": {}}
            members[member.get("client_id", "")] = {
                (topic, p) for topic, parts in parsed["assigned_partitions"].items() for p in parts
            }
        out.append((value["generation"], members))
    return out
