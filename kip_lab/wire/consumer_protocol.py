"""The classic consumer protocol's embedded bytes, between Kafka's binary form and the Lab's.

A classic consumer's JoinGroup metadata (``ConsumerProtocolSubscription``) and the leader's
SyncGroup assignments (``ConsumerProtocolAssignment``) are opaque bytes to a broker. Real
clients write Kafka's binary form (an int16 version, then the schema of that version); the Lab
writes the same fields as readable JSON (``kip_lab.protocol.consumer_protocol``), which its
coordinator, invariants and views decode. The front door converts at the boundary — field for
field, version for version — so real and simulated members of a classic group are seen alike.
A version newer than the highest known is read as the highest (later versions only append
fields), as Kafka's ``ConsumerProtocol`` does.
"""

from __future__ import annotations

import io
import struct
from typing import Any

from kio.index import load_entity_schema
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from kip_lab.protocol.consumer_protocol import (
    HIGHEST_CONSUMER_PROTOCOL_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolError,
    ConsumerProtocolSubscription,
)

_VERSION = struct.Struct(">h")


def _schema(name: str, version: int) -> type[Any]:  # a kio class loaded by name: its fields are not declared
    return load_entity_schema(name, version, EntityType.data)


def _read(name: str, data: bytes) -> tuple[int, Any]:
    if len(data) < _VERSION.size:
        raise ConsumerProtocolError(f"{name}: {len(data)} bytes, no version")
    written = _VERSION.unpack_from(data)[0]
    if written < 0:
        raise ConsumerProtocolError(f"{name}: version {written}")
    version = min(written, HIGHEST_CONSUMER_PROTOCOL_VERSION)
    try:
        value, _ = entity_reader(_schema(name, version))(data, _VERSION.size)
    except Exception as error:
        raise ConsumerProtocolError(f"{name} v{version}: {type(error).__name__}: {error}") from None
    return version, value


def _write(name: str, version: int, fields: dict) -> bytes:
    schema = _schema(name, version)
    known = {f for f in schema.__dataclass_fields__}
    buffer = io.BytesIO()
    buffer.write(_VERSION.pack(version))
    entity_writer(schema)(buffer, schema(**{k: v for k, v in fields.items() if k in known}))
    return buffer.getvalue()


def _grouped(partitions: list[tuple[str, int]]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return by_topic


def subscription_to_lab(data: bytes) -> bytes:
    version, value = _read("consumer_protocol_subscription", data)
    owned = [(tp.topic, p) for tp in getattr(value, "owned_partitions", ()) for p in tp.partitions]
    return ConsumerProtocolSubscription(
        version=version,
        topics=list(value.topics),
        user_data=value.user_data,
        owned_partitions=owned,
        generation_id=getattr(value, "generation_id", -1),
        rack_id=getattr(value, "rack_id", None),
    ).encode()


def subscription_to_wire(data: bytes) -> bytes:
    lab = ConsumerProtocolSubscription.decode(data)
    topic_partition = _schema("consumer_protocol_subscription", lab.version).__dataclass_fields__.get(
        "owned_partitions"
    )
    fields = {
        "topics": tuple(lab.topics),
        "user_data": lab.user_data,
        "generation_id": lab.generation_id,
        "rack_id": lab.rack_id,
    }
    if topic_partition is not None:
        nested = _nested(topic_partition.type)
        fields["owned_partitions"] = tuple(
            nested(topic=t, partitions=tuple(ps)) for t, ps in _grouped(lab.owned_partitions).items()
        )
    return _write("consumer_protocol_subscription", lab.version, fields)


def assignment_to_lab(data: bytes) -> bytes:
    if not data:  # a member the leader gave nothing, or a follower's empty SyncGroup entry
        return data
    version, value = _read("consumer_protocol_assignment", data)
    assigned = [(tp.topic, p) for tp in value.assigned_partitions for p in tp.partitions]
    return ConsumerProtocolAssignment(version=version, assigned_partitions=assigned, user_data=value.user_data).encode()


def assignment_to_wire(data: bytes) -> bytes:
    if not data:
        return data
    lab = ConsumerProtocolAssignment.decode(data)
    schema = _schema("consumer_protocol_assignment", lab.version)
    nested = _nested(schema.__dataclass_fields__["assigned_partitions"].type)
    assigned = tuple(nested(topic=t, partitions=tuple(ps)) for t, ps in _grouped(lab.assigned_partitions).items())
    return _write(
        "consumer_protocol_assignment", lab.version, {"assigned_partitions": assigned, "user_data": lab.user_data}
    )


def _nested(field_type: object) -> type:
    import typing

    for arg in typing.get_args(field_type):
        if isinstance(arg, type):
            return arg
    raise TypeError(f"no nested schema in {field_type!r}")
