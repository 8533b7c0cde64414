"""The order in which Java's ``HashMap`` and ``HashSet`` hand out their keys, for the keys Kafka's group code uses.

Kafka's server-side assignors iterate hash maps and hash sets of member ids (``String``), topic ids
(Kafka's ``Uuid``) and partition indexes (``Integer``), and where they hand out partitions in that
order the assignment depends on it; Kafka's ``ClassicGroup`` iterates its member map (leader election,
record order) and its protocol vote map (ties). To give the same result as Kafka for the same ids,
the uniform assignor and the classic group ask this module for the order Kafka would see. Everything
about Java hashing is said here, once.

How ``java.util.HashMap`` (and ``HashSet``, which is a ``HashMap``) orders its keys:

* a key's bucket is ``spread(hashCode) & (capacity - 1)``, where ``spread(h) = h ^ (h >>> 16)``;
* iteration walks the buckets in index order;
* the capacity is a power of two; a map grows (doubles) when a put takes its size above 0.75 of its
  capacity, and never shrinks;
* within one bucket, keys come in insertion order (a resize keeps it); a ninth key in one bucket turns
  it into a tree in a table of 64 or more, and doubles a smaller table instead.

Member ids, protocol names and partitions that share a bucket come here in the order they are given,
which stands for Java's insertion order: a target record's partitions are read into their ``HashSet``
in the record's list order, and Kafka's coordinator puts members into its maps in its own member order. Topic ids that
share a bucket come in ``Uuid.compareTo`` order. Nine keys in one bucket are not modelled (neither the
tree nor the early doubling): that takes, say, nine partitions of one member equal modulo the table
size, which the partitions a uniform assignor hands out almost never are.

The capacities Kafka's code gives the collections it iterates:

* ``new HashMap<>()`` then puts (``capacity_after_puts``): 16, doubled until the keys fit under 0.75;
* ``new HashSet<>(collection)`` (``capacity_for_copy``): room for ``size / 0.75 + 1`` keys, at least 16.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Iterable
from functools import lru_cache

_INT_MASK = 0xFFFFFFFF
_DEFAULT_CAPACITY = 16
_LOAD_FACTOR = 0.75
_MAXIMUM_CAPACITY = 1 << 30
_FIBONACCI = -7046029254386353131  # Kafka ``BaseHashTable.findSlot``'s multiplier


# ---------------------------------------------------------------------------------------- hash codes
@lru_cache(maxsize=1 << 17)
def string_hash(text: str) -> int:
    """Java's ``String.hashCode`` as an unsigned 32-bit value: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 units.

    Cached, as Java's ``String`` caches its own hash: member ids outlive many assignments.
    """
    units = text.encode("utf-16-be")
    value = 0
    for unit in struct.unpack(f">{len(units) // 2}H", units):
        value = (value * 31 + unit) & _INT_MASK
    return value


@lru_cache(maxsize=1 << 14)
def uuid_bits(topic_id: str) -> tuple[int, int] | None:
    """The two signed 64-bit halves of a Kafka ``Uuid`` written as ``Uuid.toString`` writes it, else None.

    ``Uuid.toString`` is the 16 bytes in URL-safe base64 without padding: 22 characters. As Java's
    decoder, the unused low bits of the last character are ignored.
    """
    if len(topic_id) != 22:
        return None
    try:
        raw = base64.urlsafe_b64decode(topic_id + "==")
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 16:
        return None
    return struct.unpack(">qq", raw)


def topic_id_hash(topic_id: str) -> int:
    """``Uuid.hashCode`` (the two halves xored, then folded to 32 bits) for a Kafka topic id.

    A topic id that is not a Kafka ``Uuid`` (the client-side sticky assignors key topics by name)
    hashes as the ``String`` it is, as Kafka's client-side assignors' maps of topic names do.
    """
    bits = uuid_bits(topic_id)
    if bits is None:
        return string_hash(topic_id)
    folded = (bits[0] ^ bits[1]) & 0xFFFFFFFFFFFFFFFF
    return ((folded >> 32) ^ folded) & _INT_MASK


def topic_id_order(topic_id: str) -> tuple[int, int] | tuple[int, str]:
    """A sort key that orders topic ids as ``Uuid.compareTo`` does: signed high half, then signed low half.

    Ids that are not ``Uuid``s (topic names) sort after them, by name.
    """
    bits = uuid_bits(topic_id)
    return (0, *bits) if bits is not None else (1, topic_id)  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------- capacities
def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the least power of two at least ``capacity`` (1 for 0 or less)."""
    if capacity <= 1:
        return 1
    return min(1 << (capacity - 1).bit_length(), _MAXIMUM_CAPACITY)


def capacity_after_puts(size: int) -> int:
    """The table size of a ``new HashMap<>()`` after ``size`` distinct keys were put into it."""
    capacity = _DEFAULT_CAPACITY
    while size > capacity * _LOAD_FACTOR:
        capacity *= 2
    return capacity


def capacity_for_copy(size: int) -> int:
    """The table size of ``new HashSet<>(collection)`` for a collection of ``size`` elements.

    The constructor asks for ``max((int) (size / .75f) + 1, 16)``; the division is in float.
    """
    return table_size_for(max(int(_float32(size / _LOAD_FACTOR)) + 1, _DEFAULT_CAPACITY))


def bucket(hash_code: int, capacity: int) -> int:
    """The bucket ``HashMap`` puts a key with this (32-bit) hash code in."""
    return (hash_code ^ (hash_code >> 16)) & (capacity - 1)


# ---------------------------------------------------------------------------------------- orders
def string_key_order(keys: Iterable[str], capacity: int) -> list[str]:
    """``String`` keys (``keys`` in insertion order) as a ``HashMap<String, ...>`` of that capacity iterates them.

    By bucket, then insertion order within a bucket: the member ids of the uniform assignor and of a
    classic group, and the protocol names of a classic group's vote.
    """
    ids = list(keys)
    mask = capacity - 1
    buckets = [spread & mask for spread in map(_spread_string_hash, ids)]
    return [ids[i] for i in sorted(range(len(ids)), key=buckets.__getitem__)]


@lru_cache(maxsize=1 << 17)
def _spread_string_hash(text: str) -> int:
    hash_code = string_hash(text)
    return hash_code ^ (hash_code >> 16)


def timeline_hash_map_order(keys: Iterable[str]) -> list[str]:
    """``String`` keys put, in this order, into a new Kafka ``TimelineHashMap``, as it iterates them.

    Kafka's coordinator keeps a group's members in a ``TimelineHashMap`` (``BaseHashTable``): a key's slot
    is the top bits of ``hashCode * -7046029254386353131`` (Fibonacci hashing, in 64-bit arithmetic), the
    table starts at 2 slots and doubles before a put would take it above 0.75 full; iteration walks the
    slots in order and each slot's keys from the last put to the first. Only puts are modelled: the keys
    given are all the map ever held.
    """
    ordered = list(keys)
    capacity = 2
    for size in range(len(ordered)):
        if (size + 1) * _LOAD_FACTOR > capacity:
            capacity *= 2
    shift = 64 - (capacity.bit_length() - 1)

    def slot(key: str) -> int:
        signed = string_hash(key) - (1 << 32) if string_hash(key) >= 1 << 31 else string_hash(key)
        return ((signed * _FIBONACCI) & 0xFFFFFFFFFFFFFFFF) >> shift

    return [key for _, key in sorted(enumerate(ordered), key=lambda item: (slot(item[1]), -item[0]))]


def topic_order(topic_ids: Iterable[str], capacity: int) -> list[str]:
    """Topic ids as a ``HashMap<Uuid, ...>`` / ``HashSet<Uuid>`` of that capacity iterates them.

    Topics sharing a bucket come in ``Uuid.compareTo`` order: the topic sets Kafka iterates are built
    from other hash sets, whose order a Python ``frozenset`` does not keep.
    """
    return sorted(topic_ids, key=lambda topic_id: (bucket(topic_id_hash(topic_id), capacity), topic_id_order(topic_id)))


def partition_order(partitions: Iterable[int], capacity: int) -> list[int]:
    """Partition indexes as a ``HashSet<Integer>`` of that capacity iterates them (the hash is the value)."""
    mask = capacity - 1
    return sorted(partitions, key=lambda p: (p ^ (p >> 16)) & mask)
