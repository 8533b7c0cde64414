"""The consumer protocol's embedded formats: what travels as opaque bytes in JoinGroup/SyncGroup.

A classic group's coordinator never reads these bytes; only the consumers (and the leader's
assignor) do. Kafka serialises ``ConsumerProtocolSubscription`` (versions 0-3) and
``ConsumerProtocolAssignment`` (versions 0-3) with a version prefix; the Lab writes a compact,
readable JSON object instead, holding exactly the fields the version carries. Encoding at an old
version therefore drops the newer fields, which is how an old member "loses" its owned partitions
(KIP-429's upgrade hazard): a v0 subscription cannot tell the leader what the member owns.

Partitions are named by topic *name* here (the classic protocol predates topic ids). Lists are
kept sorted and free of duplicates so that equal contents always encode to equal bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
from abc import abstractmethod
from typing import Any, ClassVar, Self

from pydantic import ConfigDict, Field, ValidationError, field_validator

from kip_lab.errors import KipLabError
from kip_lab.protocol.common import Message

LOWEST_CONSUMER_PROTOCOL_VERSION = 0
HIGHEST_CONSUMER_PROTOCOL_VERSION = 3

TopicPartition = tuple[str, int]


class ConsumerProtocolError(KipLabError, ValueError):
    """Bytes that are not a valid embedded subscription or assignment."""


def _sorted_partitions(value: list[TopicPartition]) -> list[TopicPartition]:
    for topic, partition in value:
        if not topic:
            raise ValueError("a topic name must not be empty")
        if partition < 0:
            raise ValueError(f"partition {topic}-{partition} must not be negative")
    return sorted(set(value))


def partitions_to_json(partitions: list[TopicPartition]) -> dict[str, list[int]]:
    """``[(topic, partition)]`` -> ``{topic: [partitions]}``, the compact form on the wire."""
    grouped: dict[str, list[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, []).append(partition)
    return grouped


def partitions_from_json(name: str, field: str, value: Any) -> list[TopicPartition]:
    """The inverse of :func:`partitions_to_json`; ``name`` and ``field`` label the error."""
    if not isinstance(value, dict) or not all(
        isinstance(parts, list) and all(type(p) is int for p in parts) for parts in value.values()
    ):
        raise ConsumerProtocolError(f"{name}: {field} must map topic names to lists of integers, got {value!r}")
    return [(topic, partition) for topic, parts in value.items() for partition in parts]


def _user_data_to_json(user_data: bytes | None) -> str | None:
    return None if user_data is None else base64.b64encode(user_data).decode("ascii")


def _user_data_from_json(name: str, value: Any) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConsumerProtocolError(f"{name}: user_data must be base64 text or null, got {value!r}")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as error:
        raise ConsumerProtocolError(f"{name}: user_data is not valid base64: {error}") from None


class _EmbeddedMessage(Message):
    """Shared version handling and JSON framing of the two embedded formats."""

    model_config = ConfigDict(strict=True)

    # field name -> first version that carries it; subclasses fill it in.
    FIELDS_SINCE: ClassVar[dict[str, int]]

    version: int = Field(ge=LOWEST_CONSUMER_PROTOCOL_VERSION, le=HIGHEST_CONSUMER_PROTOCOL_VERSION)

    def encode(self) -> bytes:
        """The fields this version carries, as compact JSON (newer fields are dropped)."""
        fields = self._fields_to_json()
        body = {"version": self.version} | {k: v for k, v in fields.items() if self.FIELDS_SINCE[k] <= self.version}
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """Parse bytes written by :meth:`encode`.

        A version newer than this code knows is read as the highest known one, ignoring fields
        it does not know (Kafka's ``ConsumerProtocol`` does the same: newer versions may only
        append fields). Fields a version does not carry take their defaults.
        """
        name = cls.__name__
        if not isinstance(data, bytes | bytearray):
            raise ConsumerProtocolError(f"{name}: expected bytes, got {type(data).__name__}")
        try:
            body = json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ConsumerProtocolError(f"{name}: not a JSON document: {error}") from None
        if not isinstance(body, dict):
            raise ConsumerProtocolError(f"{name}: expected a JSON object, got {type(body).__name__}")
        written_version = body.pop("version", None)
        if type(written_version) is not int:
            raise ConsumerProtocolError(f"{name}: missing or non-integer version: {written_version!r}")
        if written_version < LOWEST_CONSUMER_PROTOCOL_VERSION:
            raise ConsumerProtocolError(f"{name}: unsupported version {written_version}")
        version = min(written_version, HIGHEST_CONSUMER_PROTOCOL_VERSION)
        carried = {k for k, since in cls.FIELDS_SINCE.items() if since <= version}
        unexpected = sorted(body.keys() - carried)
        if unexpected and written_version == version:
            raise ConsumerProtocolError(f"{name}: version {version} does not carry {', '.join(unexpected)}")
        missing = sorted(carried - body.keys())
        if missing:
            raise ConsumerProtocolError(f"{name}: version {version} requires {', '.join(missing)}")
        try:
            return cls(version=version, **cls._fields_from_json({k: body[k] for k in carried}))
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise ConsumerProtocolError(f"{name}: {problems}") from None

    @abstractmethod
    def _fields_to_json(self) -> dict[str, Any]:
        """Every field but the version, JSON-ready."""

    @classmethod
    @abstractmethod
    def _fields_from_json(cls, body: dict[str, Any]) -> dict[str, Any]:
        """Model arguments from the carried fields of a parsed body."""


class ConsumerProtocolSubscription(_EmbeddedMessage):
    """A member's JoinGroup protocol metadata: what it subscribes to and, from v1, what it owns.

    ``generation_id`` (v2+) is the generation in which the member last owned
    ``owned_partitions``: the sticky assignors use it to prefer the fresher of two claims.
    """

    FIELDS_SINCE: ClassVar[dict[str, int]] = {
        "topics": 0,
        "user_data": 0,
        "owned_partitions": 1,
        "generation_id": 2,
        "rack_id": 3,
    }

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = Field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None

    @field_validator("topics")
    @classmethod
    def _sorted_topics(cls, value: list[str]) -> list[str]:
        if any(not topic for topic in value):
            raise ValueError("a topic name must not be empty")
        return sorted(set(value))

    @field_validator("owned_partitions")
    @classmethod
    def _sorted_owned(cls, value: list[TopicPartition]) -> list[TopicPartition]:
        return _sorted_partitions(value)

    @field_validator("rack_id")
    @classmethod
    def _empty_rack_is_none(cls, value: str | None) -> str | None:
        return value or None  # Kafka reads an empty rack id as no rack.

    def _fields_to_json(self) -> dict[str, Any]:
        return {
            "topics": self.topics,
            "user_data": _user_data_to_json(self.user_data),
            "owned_partitions": partitions_to_json(self.owned_partitions),
            "generation_id": self.generation_id,
            "rack_id": self.rack_id,
        }

    @classmethod
    def _fields_from_json(cls, body: dict[str, Any]) -> dict[str, Any]:
        name = cls.__name__
        fields = dict(body)
        fields["user_data"] = _user_data_from_json(name, body["user_data"])
        if "owned_partitions" in body:
            fields["owned_partitions"] = partitions_from_json(name, "owned_partitions", body["owned_partitions"])
        return fields


class ConsumerProtocolAssignment(_EmbeddedMessage):
    """The leader's SyncGroup assignment for one member (the same fields in versions 0-3)."""

    FIELDS_SINCE: ClassVar[dict[str, int]] = {"assigned_partitions": 0, "user_data": 0}

    assigned_partitions: list[TopicPartition] = Field(default_factory=list)
    user_data: bytes | None = None

    @field_validator("assigned_partitions")
    @classmethod
    def _sorted_assigned(cls, value: list[TopicPartition]) -> list[TopicPartition]:
        return _sorted_partitions(value)

    def _fields_to_json(self) -> dict[str, Any]:
        return {
            "assigned_partitions": partitions_to_json(self.assigned_partitions),
            "user_data": _user_data_to_json(self.user_data),
        }

    @classmethod
    def _fields_from_json(cls, body: dict[str, Any]) -> dict[str, Any]:
        name = cls.__name__
        return {
            "assigned_partitions": partitions_from_json(name, "assigned_partitions", body["assigned_partitions"]),
            "user_data": _user_data_from_json(name, body["user_data"]),
        }
