"""``kip_lab.assignors.java_hash_order``: Java's hash codes, table sizes and iteration orders."""

from __future__ import annotations

import base64

import pytest

from kip_lab.assignors.java_hash_order import (
    bucket,
    capacity_after_puts,
    capacity_for_copy,
    partition_order,
    string_hash,
    string_key_order,
    table_size_for,
    timeline_hash_map_order,
    topic_id_hash,
    topic_id_order,
    topic_order,
    uuid_bits,
)
from kip_lab.cluster import ClusterMetadata


@pytest.mark.parametrize(
    ("text", "java_hash_code"),
    [("", 0), ("A", 65), ("hello", 99162322), ("polygenelubricants", -(2**31))],
)
def test_string_hash_is_java_string_hash_code(text: str, java_hash_code: int) -> None:
    """Java ``String.hashCode`` (as an unsigned 32-bit value): s[0]*31^(n-1) + ... + s[n-1], wrapping."""
    assert string_hash(text) == java_hash_code & 0xFFFFFFFF


def test_string_hash_counts_utf16_units() -> None:
    """Java ``String.hashCode`` runs over UTF-16 code units: a character beyond U+FFFF is two."""
    high, low = 0xD83D, 0xDE00  # U+1F600
    assert string_hash("\U0001f600") == (high * 31 + low)


def test_uuid_bits_hash_and_order_follow_kafka_uuid() -> None:
    """Kafka ``Uuid.fromString``, ``Uuid.hashCode`` and ``Uuid.compareTo`` (signed halves)."""
    most, least = 0x0123456789ABCDEF, -0x0123456789ABCDF0
    text = base64.urlsafe_b64encode(most.to_bytes(8, "big") + least.to_bytes(8, "big", signed=True)).decode()[:22]
    assert uuid_bits(text) == (most, least)
    folded = (most ^ least) & 0xFFFFFFFFFFFFFFFF
    assert topic_id_hash(text) == ((folded >> 32) ^ folded) & 0xFFFFFFFF
    negative = base64.urlsafe_b64encode(b"\xff" * 16).decode()[:22]  # (-1, -1) sorts before any positive
    assert topic_id_order(negative) < topic_id_order(text)
    assert uuid_bits("not-a-uuid") is None and topic_id_hash("not-a-uuid") == string_hash("not-a-uuid")


@pytest.mark.parametrize(
    ("size", "after_puts", "for_copy"), [(0, 16, 16), (12, 16, 32), (13, 32, 32), (24, 32, 64), (25, 64, 64)]
)
def test_capacities_follow_java_util_hash_map(size: int, after_puts: int, for_copy: int) -> None:
    """``HashMap.resize`` at 0.75 load; ``HashSet(Collection)`` sizes for ``size / .75f + 1`` (at least 16)."""
    assert capacity_after_puts(size) == after_puts
    assert capacity_for_copy(size) == for_copy


def test_table_size_for_is_the_least_power_of_two_at_least_the_request() -> None:
    """``HashMap.tableSizeFor``."""
    assert [table_size_for(n) for n in (0, 1, 2, 3, 16, 17)] == [1, 1, 2, 4, 16, 32]


def test_orders_walk_buckets_then_keep_insertion_order() -> None:
    """``HashMap`` iteration: bucket ``spread(hash) & (capacity - 1)`` ascending; keys sharing one as inserted."""
    assert partition_order([3, 17, 16, 0, 33], 16) == [16, 0, 17, 33, 3]
    assert partition_order([3, 17, 16, 0, 33], 64) == [0, 3, 16, 17, 33]
    assert bucket(0x10000, 16) == 1  # the high half is folded in: 0x10000 ^ 0x1
    members = ["b", "BB", "Aa", "a"]  # "Aa" and "BB" share the hash 2112 (bucket 0); "a" is 97, "b" 98
    assert string_key_order(members, 16) == ["BB", "Aa", "a", "b"]
    assert string_key_order(["Aa", "BB"], 16) == ["Aa", "BB"]  # one bucket: insertion order, not natural order
    assert string_key_order(["range", "sticky"], 16) == ["sticky", "range"]  # buckets 9 and 8


def test_topic_order_of_kafka_test_ids() -> None:
    """Kafka ``OptimizedUniformAssignmentBuilderTest``'s topic ids: topic 3 before topic 1 in a ``HashSet`` of 16."""
    t1, t3 = "T1-A4s3VTwiI5CTbEp6POw", "T3-CU8fVTLCz5YMkLoDQsa"
    assert topic_order([t1, t3], 16) == [t3, t1]


def test_cluster_topic_ids_are_random_version_4_uuids_from_the_seed() -> None:
    """Kafka ``Uuid.randomUuid``: version 4, IETF variant, never starting with "-"; same seed, same ids."""
    first, second = ClusterMetadata(seed=7), ClusterMetadata(seed=7)
    ids = [first.create_topic(f"t{k}", 1) for k in range(50)]
    assert ids == [second.create_topic(f"t{k}", 1) for k in range(50)]
    assert ids != [ClusterMetadata(seed=8).create_topic(f"t{k}", 1) for k in range(50)]
    for topic_id in ids:
        raw = base64.urlsafe_b64decode(topic_id + "==")
        assert len(topic_id) == 22 and not topic_id.startswith("-")
        assert raw[6] >> 4 == 4 and raw[8] >> 6 == 0b10
    recreated = first.recreate_topic("t0")
    assert recreated != ids[0] and first.topic_id("t0") == recreated


def test_timeline_hash_map_order_follows_kafka_base_hash_table() -> None:
    """Kafka ``BaseHashTable.findSlot`` (the top bits of ``hashCode * -7046029254386353131``), ``baseAddOrReplace``
    (2 slots, doubled past 0.75) and ``SnapshottableHashTable.CurrentIterator`` (slots in order, each from its
    last key back)."""
    # "a", "b", "c" hash to 97, 98, 99; three keys make a table of 4 slots, so the slot is the top 2 bits.
    top_two_bits = {key: ((ord(key) * -7046029254386353131) & (2**64 - 1)) >> 62 for key in "abc"}
    assert timeline_hash_map_order("abc") == sorted("abc", key=top_two_bits.__getitem__) == ["c", "b", "a"]
    # One slot: the keys come back last put first. "Aa" and "BB" share the hash 2112, so the slot too.
    assert timeline_hash_map_order(["Aa", "BB"]) == ["BB", "Aa"]
    assert timeline_hash_map_order([]) == []
