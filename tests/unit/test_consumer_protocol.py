"""The consumer protocol's embedded subscription and assignment formats."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from kip_lab.protocol.consumer_protocol import (
    HIGHEST_CONSUMER_PROTOCOL_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolError,
    ConsumerProtocolSubscription,
)

FULL = ConsumerProtocolSubscription(
    version=3,
    topics=["orders", "clicks"],
    user_data=b"\x00\xffsticky",
    owned_partitions=[("orders", 2), ("clicks", 0), ("orders", 0)],
    generation_id=7,
    rack_id="rack-a",
)


def at_version(version: int) -> ConsumerProtocolSubscription:
    return ConsumerProtocolSubscription.model_validate(FULL.model_dump() | {"version": version})


def test_lists_are_sorted_and_deduplicated_so_equal_contents_encode_equally() -> None:
    assert FULL.topics == ["clicks", "orders"]
    assert FULL.owned_partitions == [("clicks", 0), ("orders", 0), ("orders", 2)]
    shuffled = ConsumerProtocolSubscription.model_validate(
        FULL.model_dump()
        | {"topics": ["orders", "clicks", "orders"], "owned_partitions": list(reversed(FULL.owned_partitions))}
    )
    assert shuffled.encode() == FULL.encode()


def test_the_encoding_is_readable_json_of_the_version_fields() -> None:
    assert json.loads(FULL.encode()) == {
        "version": 3,
        "topics": ["clicks", "orders"],
        "user_data": "AP9zdGlja3k=",
        "owned_partitions": {"clicks": [0], "orders": [0, 2]},
        "generation_id": 7,
        "rack_id": "rack-a",
    }


@pytest.mark.parametrize(
    ("version", "keys"),
    [
        (0, ["version", "topics", "user_data"]),
        (1, ["version", "topics", "user_data", "owned_partitions"]),
        (2, ["version", "topics", "user_data", "owned_partitions", "generation_id"]),
        (3, ["version", "topics", "user_data", "owned_partitions", "generation_id", "rack_id"]),
    ],
)
def test_each_version_carries_only_its_fields(version: int, keys: list[str]) -> None:
    assert list(json.loads(at_version(version).encode())) == keys


def test_a_v0_member_loses_its_owned_partitions_on_the_way_to_the_leader() -> None:
    """KIP-429's upgrade hazard: the old format has nowhere to put what the member owns."""
    decoded = ConsumerProtocolSubscription.decode(at_version(0).encode())
    assert decoded.owned_partitions == []
    assert decoded.generation_id == -1
    assert decoded.rack_id is None
    assert decoded.topics == FULL.topics and decoded.user_data == FULL.user_data
    v1 = ConsumerProtocolSubscription.decode(at_version(1).encode())
    assert v1.owned_partitions == FULL.owned_partitions and v1.generation_id == -1


def test_assignment_round_trips_at_every_version() -> None:
    for version in range(HIGHEST_CONSUMER_PROTOCOL_VERSION + 1):
        assignment = ConsumerProtocolAssignment(
            version=version, assigned_partitions=[("b", 1), ("a", 3), ("a", 0)], user_data=None
        )
        assert assignment.assigned_partitions == [("a", 0), ("a", 3), ("b", 1)]
        assert json.loads(assignment.encode()) == {
            "version": version,
            "assigned_partitions": {"a": [0, 3], "b": [1]},
            "user_data": None,
        }
        assert ConsumerProtocolAssignment.decode(assignment.encode()) == assignment


def test_a_newer_version_is_read_as_the_highest_known_one() -> None:
    body = json.loads(FULL.encode()) | {"version": 9, "added_in_v9": [1, 2]}
    decoded = ConsumerProtocolSubscription.decode(json.dumps(body).encode())
    assert decoded == FULL


def test_an_empty_rack_id_means_no_rack() -> None:
    assert ConsumerProtocolSubscription(version=3, topics=["a"], rack_id="").rack_id is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe", "not a JSON document"),
        (b"{not json", "not a JSON document"),
        (b"[1, 2]", "expected a JSON object, got list"),
        (b'{"topics": []}', "missing or non-integer version"),
        (b'{"version": "1"}', "missing or non-integer version"),
        (b'{"version": -1, "topics": [], "user_data": null}', "unsupported version -1"),
        (b'{"version": 1, "topics": []}', "version 1 requires owned_partitions, user_data"),
        (b'{"version": 0, "topics": [], "user_data": null, "rack_id": "r"}', "version 0 does not carry rack_id"),
        (b'{"version": 0, "topics": [3], "user_data": null}', "topics.0: Input should be a valid string"),
        (b'{"version": 0, "topics": [""], "user_data": null}', "a topic name must not be empty"),
        (b'{"version": 0, "topics": [], "user_data": "!!"}', "user_data is not valid base64"),
        (b'{"version": 0, "topics": [], "user_data": 5}', "user_data must be base64 text or null"),
        (b'{"version": 1, "topics": [], "user_data": null, "owned_partitions": [1]}', "owned_partitions must map"),
        (
            b'{"version": 1, "topics": [], "user_data": null, "owned_partitions": {"a": [-1]}}',
            "partition a--1 must not be negative",
        ),
        (
            b'{"version": 2, "topics": [], "user_data": null, "owned_partitions": {}, "generation_id": "3"}',
            "generation_id: Input should be a valid integer",
        ),
    ],
)
def test_bad_subscription_bytes_get_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(ConsumerProtocolError, match=r"^ConsumerProtocolSubscription: ") as raised:
        ConsumerProtocolSubscription.decode(data)
    assert message in str(raised.value)


def test_bad_assignment_bytes_get_a_clear_error() -> None:
    with pytest.raises(ConsumerProtocolError, match="assigned_partitions must map topic names to lists of integers"):
        ConsumerProtocolAssignment.decode(b'{"version": 0, "assigned_partitions": {"a": ["0"]}, "user_data": null}')
    with pytest.raises(ConsumerProtocolError, match="expected bytes, got str"):
        ConsumerProtocolAssignment.decode("{}")  # type: ignore[arg-type]


def test_constructing_an_unknown_version_is_refused() -> None:
    with pytest.raises(ValidationError, match="version"):
        ConsumerProtocolAssignment(version=4)


def test_the_models_are_frozen() -> None:
    with pytest.raises(ValidationError):
        FULL.topics = ["x"]  # type: ignore[misc]


topic_names = st.text(alphabet="abcxyz-._é", min_size=1, max_size=6)
partitions = st.lists(st.tuples(topic_names, st.integers(0, 50)), max_size=8)


@given(
    version=st.integers(0, HIGHEST_CONSUMER_PROTOCOL_VERSION),
    topics=st.lists(topic_names, max_size=5),
    user_data=st.none() | st.binary(max_size=20),
    owned=partitions,
    generation_id=st.integers(-1, 2**31 - 1),
    rack_id=st.none() | topic_names,
)
def test_subscriptions_round_trip_through_the_fields_of_their_version(
    version: int,
    topics: list[str],
    user_data: bytes | None,
    owned: list[tuple[str, int]],
    generation_id: int,
    rack_id: str | None,
) -> None:
    sent = ConsumerProtocolSubscription(
        version=version,
        topics=topics,
        user_data=user_data,
        owned_partitions=owned,
        generation_id=generation_id,
        rack_id=rack_id,
    )
    received = ConsumerProtocolSubscription.decode(sent.encode())
    assert received.encode() == sent.encode()
    assert received.topics == sorted(set(topics)) and received.user_data == user_data
    assert received.owned_partitions == (sorted(set(owned)) if version >= 1 else [])
    assert received.generation_id == (generation_id if version >= 2 else -1)
    assert received.rack_id == (rack_id if version >= 3 else None)
