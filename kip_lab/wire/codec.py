"""Kafka's wire format, by way of kio's generated encoders and decoders.

A frame is a 4-byte big-endian size and that many bytes: a request header (v1, or v2 for the
flexible versions of an API) and the request body; a response is a response header (v0, or
v1 for flexible versions; ApiVersions always answers with v0) and the body. kio has a typed
dataclass for every header and every version of every message; this module only picks the
class for an (API key, version), reads and writes frames, and moves values between kio's
dataclasses and kip_lab's protocol models (``to_lab``, ``build``), which name fields after the
same Kafka schemas (kip_lab adds ``_ms`` to durations, kio makes them ``timedelta``s).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import io
import struct
import types
import typing
import uuid
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.index import UnknownEntity, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.constants import uuid_zero
from kio.static.primitive import i32
from pydantic import BaseModel

from kip_lab.errors import KipLabError

API_VERSIONS_KEY = 18
SIZE = struct.Struct(">i")
PREFIX = struct.Struct(">hh")  # every request header starts with the API key and version


class MalformedRequest(KipLabError, ValueError):
    """Bytes that are not a request of the API and version their header names."""


def api_name(api_key: int) -> str:
    """kio's snake_case name of an API key ("consumer_group_heartbeat"), or ``KeyError``."""
    return api_key_map[api_key]


@cache
def request_class(api_key: int, version: int) -> type[Any]:  # kio's class for it, loaded by key
    return load_request_schema(api_key, version)


@cache
def response_class(api_key: int, version: int) -> type[Any]:
    return load_response_schema(api_key, version)


def has_schema(api_key: int, version: int) -> bool:
    try:
        request_class(api_key, version)
    except (KeyError, UnknownEntity, ImportError):
        return False
    return True


def read_prefix(frame: bytes) -> tuple[int, int]:
    """The API key and version a request frame names (its first four bytes)."""
    if len(frame) < PREFIX.size:
        raise MalformedRequest(f"a request of {len(frame)} bytes has no header")
    return PREFIX.unpack_from(frame)


def read_request(frame: bytes) -> tuple[Any, Any]:
    """(header, body) of a request frame whose API and version kio knows."""
    api_key, version = read_prefix(frame)
    body_class = request_class(api_key, version)
    header_class = RequestHeaderV2 if body_class.__flexible__ else RequestHeaderV1
    try:
        header, used = entity_reader(header_class)(frame, 0)
        body, _ = entity_reader(body_class)(frame, used)
    except Exception as error:  # kio raises its own errors, ValueError, UnicodeDecodeError...
        raise MalformedRequest(f"{api_key_map[api_key]} v{version}: {type(error).__name__}: {error}") from error
    # Bytes after the body are ignored, as Kafka's request parser does (librdkafka's Metadata
    # requests carry a few).
    return header, body


def read_correlation_id(frame: bytes) -> int | None:
    """The correlation id of any request frame (bytes 4-8), to answer one kio cannot decode."""
    return SIZE.unpack_from(frame, 4)[0] if len(frame) >= 8 else None


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A whole response frame: size, header and ``body`` (a kio response of that API and
    version, or one already encoded by ``encode_body``)."""
    flexible_header = response_class(api_key, version).__flexible__ and api_key != API_VERSIONS_KEY
    header = (ResponseHeaderV1 if flexible_header else ResponseHeaderV0)(correlation_id=i32(correlation_id))
    return encode_frame(header, body)


def encode_frame(header: Any, body: Any) -> bytes:
    """A frame: its size, then ``header`` and ``body`` (requests from the tests' own client, and
    responses); ``body`` may be already encoded (``encode_body``)."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(type(header))(buffer, header)
    buffer.write(body if isinstance(body, bytes) else encode_body(body))
    frame = buffer.getbuffer()
    SIZE.pack_into(frame, 0, len(frame) - SIZE.size)
    return bytes(frame)


def encode_body(body: Any) -> bytes:
    """A kio request or response body's bytes, to send in a frame: an answer sent many times
    over is encoded once."""
    buffer = io.BytesIO()
    entity_writer(type(body))(buffer, body)
    return buffer.getvalue()


# ---------------------------------------------------------------------- topic ids
def topic_uuid(topic_id: str | None) -> uuid.UUID:
    """kip_lab's topic id (22 characters of URL-safe base64, as Kafka prints them) as a UUID."""
    if not topic_id:
        return uuid_zero
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))


def lab_topic_id(value: uuid.UUID | None) -> str:
    """A UUID from the wire as kip_lab's topic id string ("" for the zero UUID)."""
    if value is None or value == uuid_zero:
        return ""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


# ---------------------------------------------------------------------- field types
def _class_in(annotation: Any, is_wanted: Callable[[type], bool]) -> Any:
    """The class a field holds (alone, in a list or tuple, or optional) if it ``is_wanted``, else None."""
    if isinstance(annotation, type) and is_wanted(annotation):
        return annotation
    for arg in typing.get_args(annotation):
        found = _class_in(arg, is_wanted)
        if found is not None:
            return found
    return None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The kip_lab model (pydantic) a field of a kip_lab model holds, if any."""
    return _class_in(annotation, lambda cls: issubclass(cls, BaseModel))


def _nested_class(field_type: Any) -> type | None:
    """The kio entity (a dataclass) a field of a kio entity holds, if any."""
    return _class_in(field_type, dataclasses.is_dataclass)


# ---------------------------------------------------------------------- kio -> kip_lab


def _lab_value(value: Any, model: type[BaseModel] | None) -> Any:
    """A kio value as the kip_lab field holding it takes it (``model``: the kip_lab model the
    field holds, for a nested kio entity)."""
    if isinstance(value, tuple):
        return [_lab_value(v, model) for v in value]
    if dataclasses.is_dataclass(value):
        return value if model is None else to_lab(value, model)
    if isinstance(value, uuid.UUID):
        return lab_topic_id(value)
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, enum.IntEnum):
        return int(value)
    return value


@cache
def _lab_plan(entity_class: type, model: type[BaseModel]) -> tuple[tuple[str, str, type[BaseModel] | None], ...]:
    """For each field of ``model`` that the kio class has: (its name, kio's name, the kip_lab
    model it holds). Worked out once per pair of classes: requests are converted per message."""
    kio_names = {f.name for f in dataclasses.fields(entity_class)}
    plan = []
    for name, info in model.model_fields.items():
        source = name if name in kio_names else name.removesuffix("_ms")
        if source in kio_names:
            plan.append((name, source, _model_in(info.annotation)))
    return tuple(plan)


def to_lab(entity: Any, model: type[BaseModel], **extra: Any) -> Any:
    """The kip_lab ``model`` for a kio request (or a nested part of one): fields are matched by
    name (``rebalance_timeout_ms`` is kio's ``rebalance_timeout``); fields kio has not got keep
    the model's defaults; ``extra`` sets the rest (the client id from the request header)."""
    kio_class: type = entity.__class__
    values = {name: _lab_value(getattr(entity, source), nested) for name, source, nested in _lab_plan(kio_class, model)}
    values.update(extra)
    return model.model_validate(values)


# ---------------------------------------------------------------------- kip_lab -> kio
def _is_optional(field_type: Any) -> bool:
    return isinstance(field_type, types.UnionType) and type(None) in typing.get_args(field_type)


_ZERO = {"string": "", "bool": False, "uuid": uuid_zero, "bytes": b"", "records": None}


@dataclasses.dataclass(frozen=True)
class _FieldPlan:
    """What ``build`` needs to know of one field of a kio class, worked out once per class."""

    name: str
    millis_name: str  # "name_ms": the kip_lab name of a duration
    kafka_type: str
    nested: type | None  # the kio entity the field holds (alone or in an array), if any
    has_default: bool
    zero: Callable[[], Any]  # the zero of its type, for a field with no default that is not given


@cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    return tuple(
        _FieldPlan(
            name=field.name,
            millis_name=f"{field.name}_ms",
            kafka_type=field.metadata.get("kafka_type", ""),
            nested=_nested_class(field.type),
            has_default=field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING,
            zero=_zero_of(field),
        )
        for field in dataclasses.fields(cls)
    )


def _zero_of(field: dataclasses.Field) -> Callable[[], Any]:
    kafka_type = field.metadata.get("kafka_type", "")
    if _is_optional(field.type):
        return lambda: None
    if kafka_type == "error_code":
        return lambda: ErrorCode.none
    if kafka_type.startswith("timedelta"):
        return lambda: datetime.timedelta(0)
    if typing.get_origin(field.type) is tuple:
        return tuple
    nested = _nested_class(field.type)
    if nested is not None:
        return lambda: build(nested)
    zero = _ZERO.get(kafka_type, 0)
    return lambda: zero


def _wire_value(value: Any, field: _FieldPlan) -> Any:
    if value is None:
        return None
    kafka_type, nested = field.kafka_type, field.nested
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if nested is not None and kafka_type == "":
        if isinstance(value, list | tuple):
            return tuple(v if dataclasses.is_dataclass(v) else build(nested, v) for v in value)
        return value if dataclasses.is_dataclass(value) else build(nested, value)
    if isinstance(value, list | tuple):
        return tuple(_wire_scalar(v, kafka_type) for v in value)
    return _wire_scalar(value, kafka_type)


def _wire_scalar(value: Any, kafka_type: str) -> Any:
    if kafka_type == "error_code":
        return ErrorCode(int(value))
    if kafka_type.startswith("timedelta") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "uuid" and isinstance(value, str):
        return topic_uuid(value)
    if isinstance(value, enum.Enum):
        return value.value
    return value


def build(cls: type, values: dict[str, Any] | BaseModel | None = None, **more: Any) -> Any:
    """A kio message of ``cls`` from ``values`` (a dict, or a kip_lab model) and ``more``.

    Fields the version has not got are ignored, so one handler serves every version; a field
    given as ``name_ms`` fills kio's duration ``name``; absent fields take kio's default, or
    else the zero of their type (an empty string, 0, no error)."""
    if isinstance(values, BaseModel):
        values = values.model_dump()
    given = {**values, **more} if values else more
    kwargs: dict[str, Any] = {}
    for field in _plan(cls):
        name = field.name
        if name in given:
            kwargs[name] = _wire_value(given[name], field)
        elif field.millis_name in given:
            kwargs[name] = _wire_value(given[field.millis_name], field)
        elif not field.has_default:
            kwargs[name] = field.zero()
    return cls(**kwargs)
