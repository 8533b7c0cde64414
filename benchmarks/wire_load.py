"""The front door's load generator, run in a process of its own (``python -m benchmarks.wire_load``).

``python -m benchmarks.wire_load PORT CONNECTIONS SECONDS API`` opens CONNECTIONS connections to
a front door on 127.0.0.1:PORT and has each send ``API`` requests back to back (the next once
the answer is read, as a client does) for SECONDS (whole seconds); it prints one JSON line: the
answers read, the seconds measured, the answers read in each second, and the errors seen. API
is ``heartbeats`` (each connection a KIP-848 member of the group ``load``: it joins at epoch 0,
then heartbeats at the epoch it was given) or ``metadata``. Requests are encoded once per member
and epoch; answers are read with kio.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import struct
import sys
import time
from typing import Any

from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader
from kio.static.primitive import i32

from kip_lab.wire import codec

TOPIC = "bench"
GROUP = "load"


def frame(body: Any, client_id: str) -> bytes:
    header = RequestHeader(
        request_api_key=body.__api_key__,
        request_api_version=body.__version__,
        correlation_id=i32(1),
        client_id=client_id,
    )
    return codec.encode_frame(header, body)


def heartbeat(member_id: str, epoch: int, owned: tuple | None = None) -> ConsumerGroupHeartbeatRequest:
    """A join (epoch 0), or a heartbeat that acknowledges ``owned`` (the assignment last given,
    as a client does once it has reconciled), or a plain one (``owned`` None: unchanged)."""
    joining = epoch == 0
    return ConsumerGroupHeartbeatRequest(
        group_id=GROUP,
        member_id=member_id,
        member_epoch=i32(epoch),
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=(TOPIC,) if joining else None,
        topic_partitions=() if joining else owned,
    )


def _owned(assigned: Any) -> Any:
    from kio.schema.consumer_group_heartbeat.v1.request import TopicPartitions

    return TopicPartitions(topic_id=assigned.topic_id, partitions=assigned.partitions)


async def member(index: int, port: int, api: str, started: float, counts: list[int], errors: list[str]) -> None:
    """One connection sending ``api`` requests back to back from ``started`` until the run's
    last second; ``counts[s]`` counts the answers read in second ``s`` of the run."""
    stop_at = started + len(counts) - 1
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client_id = f"load-{index}"
    member_id = f"member-{index:05d}-abcdefghij"
    read_heartbeat = entity_reader(codec.response_class(68, 1))
    epoch = 0
    acknowledging = False
    if api == "metadata":
        metadata = MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        request = frame(metadata, client_id)
    else:
        request = frame(heartbeat(member_id, epoch), client_id)
    try:
        while time.monotonic() < stop_at:
            writer.write(request)
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            answer = await reader.readexactly(size)
            if api == "heartbeats":
                response = read_heartbeat(answer, 5)[0]  # after the correlation id and the header's tags
                if int(response.error_code):
                    errors.append(f"{member_id}: {response.error_code.name}")
                    return
                if response.assignment is not None:  # acknowledge it in the next heartbeat, then go quiet
                    epoch = response.member_epoch
                    owned = tuple(_owned(t) for t in response.assignment.topic_partitions)
                    request = frame(heartbeat(member_id, epoch, owned), client_id)
                elif response.member_epoch != epoch or acknowledging:
                    epoch = response.member_epoch
                    request = frame(heartbeat(member_id, epoch), client_id)
                acknowledging = response.assignment is not None
            counts[min(int(time.monotonic() - started), len(counts) - 1)] += 1
    finally:
        writer.close()


async def load(port: int, connections: int, seconds: int, api: str) -> dict[str, Any]:
    counts = [0] * (seconds + 1)  # the last: answers read after the end, to requests sent before it
    errors: list[str] = []
    started = time.monotonic()
    await asyncio.gather(*(member(i, port, api, started, counts, errors) for i in range(connections)))
    return {
        "answers": sum(counts),
        "seconds": time.monotonic() - started,
        "per_second": counts[:seconds],
        "errors": errors[:5],
    }


def main() -> None:
    port, connections, seconds, api = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    print(json.dumps(asyncio.run(load(port, connections, seconds, api))), flush=True)


if __name__ == "__main__":
    main()
