"""A bare Kafka wire client: one connection, kio-encoded requests or raw bytes.

Tests use it to send exactly the bytes they mean (a malformed body, an oversized frame, an
unknown API) and read the answer; the benchmark uses it to load the front door.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader
from kio.static.primitive import i32

from kip_lab.wire import codec

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
            correlation_id=i32(self.correlation_id),
            client_id=self.client_id,
        )
        self.send_raw(codec.encode_frame(header, body))
        return self.read_response(body.__api_key__, body.__version__)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def read_response(self, api_key: int, version: int) -> Any:
        frame = self.read_frame()
        response_class = codec.response_class(api_key, version)
        flexible_header = response_class.__flexible__ and api_key != codec.API_VERSIONS_KEY
        used = 4 + (1 if flexible_header else 0)  # correlation id, then the header's tagged fields
        correlation_id = struct.unpack_from(">i", frame)[0]
        if correlation_id != self.correlation_id:
            raise ValueError(f"answer to correlation id {correlation_id}, expected {self.correlation_id}")
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
