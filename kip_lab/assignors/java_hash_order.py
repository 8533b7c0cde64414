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
* within one bucket, keys come in insertion order (a resize keeps it), until a ninth key arrives: in
  a table of 64 or more the bucket becomes a red-black tree, iterated root first and each later key
  right after the tree node it was put under; a smaller table doubles instead.

``hash_order`` replays exactly that (``JavaHashMap``) for any keys, given their insertion order, so the
callers' job is to give the insertion order Kafka's code gives: which collection is built from which,
in which order (the uniform assignor's module docstring says it for each one it iterates).

The capacities Kafka's code gives the collections it iterates:

* ``new HashMap<>()`` then puts (``capacity_after_puts``): 16, doubled until the keys fit under 0.75;
* ``new HashSet<>(collection)`` (``hash_set_copy_capacity``, table ``capacity_for_copy``): room for
  ``size / 0.75 + 1`` keys, at least 16;
* ``new HashMap<>(n)``: the least power of two at least ``n`` (``table_size_for``), growing from there.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

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
def string_key_order(keys: Iterable[str], capacity: int | None = None) -> list[str]:
    """``String`` keys (``keys`` in insertion order) as a ``HashMap<String, ...>`` iterates them.

    ``capacity`` is the one its constructor asked for (``new HashMap<>(capacity)``); None for ``new HashMap<>()``.

    The member ids of the uniform assignor and of a classic group, and the protocol names of a classic group's vote.
    """
    ordered = list(dict.fromkeys(keys))
    spread = [_string_spread(key) for key in ordered]
    return _hash_order(ordered, spread, string_hash, _string_compare_key, capacity)


@lru_cache(maxsize=1 << 17)
def _string_spread(text: str) -> int:
    """A ``String`` key's hash as ``HashMap`` spreads it; cached, as member ids outlive many assignments."""
    return _spread(string_hash(text))


def _string_compare_key(text: str) -> bytes:
    """``String.compareTo``: UTF-16 code units, lexicographically."""
    return text.encode("utf-16-be")


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


def topic_order(topic_ids: Iterable[str], capacity: int | None = None) -> list[str]:
    """Topic ids (in insertion order) as a ``HashMap<Uuid, ...>`` / ``HashSet<Uuid>`` iterates them.

    ``capacity`` is the one its constructor asked for (``new HashMap<>(capacity)``); None for ``new HashMap<>()``.
    """
    return hash_order(topic_ids, topic_id_hash, topic_id_order, capacity)


def partition_order(partitions: Iterable[int], capacity: int | None = None) -> list[int]:
    """Partition indexes (in insertion order) as a ``HashSet<Integer>`` iterates them (the hash is the value)."""
    return hash_order(partitions, _integer_hash, _identity, capacity)


def _integer_hash(value: int) -> int:
    return value & _INT_MASK


def _identity(value: int) -> int:
    return value


def hash_set_copy_capacity(size: int) -> int:
    """The capacity ``new HashSet<>(collection)`` asks for: ``max((int) (size / .75f) + 1, 16)``."""
    return max(int(_float32(size / _LOAD_FACTOR)) + 1, _DEFAULT_CAPACITY)


def hash_order(
    keys: Iterable[K], hash_code: Callable[[K], int], compare_key: Callable[[K], Any], capacity: int | None = None
) -> list[K]:
    """``keys`` put, in this order, into ``new HashMap<>(capacity)`` (None: ``new HashMap<>()``), as it iterates them.

    ``hash_code`` is the key's ``hashCode`` (32 bits); ``compare_key`` orders keys as their ``compareTo``
    does, which only a tree bin looks at.
    """
    ordered = list(dict.fromkeys(keys))
    return _hash_order(ordered, [_spread(hash_code(key)) for key in ordered], hash_code, compare_key, capacity)


def _hash_order(
    ordered: list[K],
    spread: list[int],
    hash_code: Callable[[K], int],
    compare_key: Callable[[K], Any],
    capacity: int | None,
) -> list[K]:
    """``hash_order`` for distinct keys whose spread hashes are known."""
    if len(ordered) <= 1:
        return ordered
    sizes = _table_sizes(capacity, len(ordered))
    mask = sizes[-1][0] - 1
    buckets = [h & mask for h in spread]
    crowded = len(ordered) > _TREEIFY_THRESHOLD and (
        max(Counter(buckets).values()) > _TREEIFY_THRESHOLD or not _no_tree_bin(spread, sizes[:-1], 0, last=False)
    )
    if crowded:
        return hash_order_after(ordered, (), (), hash_code, compare_key, capacity)
    return [ordered[i] for i in sorted(range(len(ordered)), key=buckets.__getitem__)]


def hash_order_after(
    puts: Sequence[K],
    removed: Collection[K],
    more_puts: Sequence[K],
    hash_code: Callable[[K], int],
    compare_key: Callable[[K], Any],
    capacity: int | None = None,
) -> list[K]:
    """The keys of ``new HashMap<>(capacity)`` after ``puts``, then removing ``removed``, then ``more_puts``.

    When no bucket can ever hold nine keys (so no tree bin and no early doubling) the order is the
    buckets' at the final table size, insertion order within each, computed directly: the table size
    depends only on the most keys the map ever held. Otherwise ``JavaHashMap`` replays every operation.
    """
    seen = set(puts)
    added = [key for key in dict.fromkeys(more_puts) if key not in seen or key in removed]
    held_most = max(len(puts), len(puts) - len(removed) + len(added))
    sizes = _table_sizes(capacity, held_most)
    every = list(puts) + [key for key in added if key not in seen]
    spread = {key: _spread(hash_code(key)) for key in every}
    if len(every) <= _TREEIFY_THRESHOLD or _no_tree_bin([spread[key] for key in every], sizes, len(removed)):
        mask = sizes[-1][0] - 1 if sizes else 0
        kept = [key for key in puts if key not in removed or key in added] if removed else list(puts)
        kept += [key for key in added if key not in seen]
        return sorted(kept, key=lambda key: spread[key] & mask)  # stable: insertion order within a bucket
    table = JavaHashMap(compare_key, capacity)
    for key in puts:
        table.put(key, spread[key])
    for key in removed:
        table.remove(key, spread[key])
    for key in added:
        table.put(key, spread[key])
    return table.in_order()


@lru_cache(maxsize=1 << 17)
def _spread(hash_code: int) -> int:
    """``HashMap.hash``: ``h ^ (h >>> 16)``, as the signed 32-bit int Java compares in a tree bin."""
    spread = (hash_code ^ (hash_code >> 16)) & _INT_MASK
    return spread - (1 << 32) if spread >= 1 << 31 else spread


def _no_tree_bin(spread: list[int], sizes: list[tuple[int, int]], removals: int, last: bool = True) -> bool:
    """Whether no bucket ever reaches nine keys (``spread``: every key's hash, in insertion order): at each
    table size but the last, among the keys that can have been put while the table had it (its threshold
    and one more, plus as many as were removed); at the last (unless ``last`` is False), among them all."""
    for number, (size, threshold) in enumerate(sizes):
        hashes = spread if last and number == len(sizes) - 1 else spread[: threshold + 1 + removals]
        mask = size - 1
        if max(Counter([h & mask for h in hashes]).values(), default=0) > _TREEIFY_THRESHOLD:
            return False
    return True


def _table_sizes(capacity: int | None, held_most: int) -> list[tuple[int, int]]:
    """Each (table size, threshold) a ``HashMap`` takes on its way to holding ``held_most`` keys (no tree bins).

    ``resize``'s arithmetic: the first put makes the table (16, or the constructor's power of two);
    a put that takes the size above the threshold doubles it.
    """
    if held_most <= 0:
        return []
    sizes = [_grow(0, 0 if capacity is None else table_size_for(capacity))]
    while held_most > sizes[-1][1]:
        sizes.append(_grow(*sizes[-1]))
    return sizes


def _grow(old_size: int, old_threshold: int) -> tuple[int, int]:
    """``HashMap.resize``'s arithmetic: the next (table size, threshold)."""
    new_threshold = 0
    if old_size > 0:
        new_size = old_size << 1
        if old_size >= _DEFAULT_CAPACITY:
            new_threshold = old_threshold << 1
    elif old_threshold > 0:
        new_size = old_threshold
    else:
        new_size, new_threshold = _DEFAULT_CAPACITY, int(_DEFAULT_CAPACITY * _LOAD_FACTOR)
    return new_size, new_threshold or int(new_size * _LOAD_FACTOR)


_TREEIFY_THRESHOLD = 8  # a bucket's ninth key makes it a tree ...
_MIN_TREEIFY_CAPACITY = 64  # ... in a table this large; a smaller table doubles instead
_UNTREEIFY_THRESHOLD = 6  # a tree split by a resize down to this many keys is a list again

K = TypeVar("K")


class _Node:
    """A ``HashMap.Node``, and the ``TreeNode`` fields it gets in a tree bin."""

    __slots__ = ("hash", "key", "left", "next", "parent", "prev", "red", "right", "tree")

    def __init__(self, hashed: int, key: Any, following: _Node | None = None) -> None:
        self.hash = hashed
        self.key = key
        self.next = following
        self.prev: _Node | None = None
        self.parent: _Node | None = None
        self.left: _Node | None = None
        self.right: _Node | None = None
        self.red = False
        self.tree = False


class JavaHashMap:
    """``java.util.HashMap`` (JDK 8 and later) as far as it decides iteration order: puts, resizes and tree bins.

    Each method follows the ``HashMap`` method of the same name: ``putVal``, ``resize``, ``treeifyBin``,
    and ``TreeNode``'s ``putTreeVal``, ``treeify``, ``untreeify``, ``split``, ``balanceInsertion``,
    ``rotateLeft``/``rotateRight`` and ``moveRootToFront``. Iteration walks the buckets in order and each
    bucket along its ``next`` links: a list bin in insertion order; a tree bin with its root first and
    every other key right after the tree node it was inserted under. Keys are put with their spread hash.
    """

    def __init__(self, compare_key: Callable[[Any], Any], capacity: int | None = None) -> None:
        self.compare_key = compare_key
        self.table: list[_Node | None] = []
        self.threshold = 0 if capacity is None else table_size_for(capacity)
        self.size = 0

    def in_order(self) -> list[Any]:
        out = []
        for node in self.table:
            while node is not None:
                out.append(node.key)
                node = node.next
        return out

    def put(self, key: Any, hashed: int) -> None:
        """``putVal`` for a key not yet in the map (a key already there changes nothing)."""
        if not self.table:
            self.resize()
        index = hashed & (len(self.table) - 1)
        first = self.table[index]
        if first is None:
            self.table[index] = _Node(hashed, key)
        elif first.hash == hashed and first.key == key:
            return
        elif first.tree:
            if not self._put_tree_val(first, hashed, key):
                return
        else:
            node, bin_count = first, 0
            while node.next is not None:
                if node.next.hash == hashed and node.next.key == key:
                    return
                node, bin_count = node.next, bin_count + 1
            node.next = _Node(hashed, key)
            if bin_count >= _TREEIFY_THRESHOLD - 1:
                self._treeify_bin(hashed)
        self.size += 1
        if self.size > self.threshold:
            self.resize()

    def remove(self, key: Any, hashed: int) -> None:
        """``removeNode``: the key leaves its bin's list. In a tree bin Java also rebalances the tree and
        may move another node to the front (``removeTreeNode``); that is not modelled: the other keys
        keep their order."""
        index = hashed & (len(self.table) - 1) if self.table else 0
        node = self.table[index] if self.table else None
        previous = None
        while node is not None and not (node.hash == hashed and node.key == key):
            previous, node = node, node.next
        if node is None:
            return
        if previous is None:
            self.table[index] = node.next
        else:
            previous.next = node.next
        if node.next is not None:
            node.next.prev = previous
        self.size -= 1

    def resize(self) -> None:
        old = self.table
        new_size, self.threshold = _grow(len(self.table), self.threshold)
        new: list[_Node | None] = [None] * new_size
        bit = len(old)
        for index, node in enumerate(old):
            if node is None:
                continue
            if node.next is None:
                new[node.hash & (len(new) - 1)] = node
            elif node.tree:
                self._split(new, index, bit, node)
            else:
                low, high = _split_list(node, bit)
                new[index], new[index + bit] = low[0], high[0]
        self.table = new

    def _treeify_bin(self, hashed: int) -> None:
        if len(self.table) < _MIN_TREEIFY_CAPACITY:
            self.resize()
            return
        index = hashed & (len(self.table) - 1)
        previous = None
        node = self.table[index]
        while node is not None:
            node.tree, node.prev, previous = True, previous, node
            node = node.next
        self._treeify(self.table, self.table[index])

    def _compare(self, hashed: int, key: Any, other: _Node) -> int:
        """The direction ``treeify``/``putTreeVal`` take at ``other``: by hash, then ``compareTo``."""
        if other.hash != hashed:
            return -1 if other.hash > hashed else 1
        mine, theirs = self.compare_key(key), self.compare_key(other.key)
        if mine == theirs:  # Java's tieBreakOrder: identity hash codes, which no model can give
            raise ValueError(f"keys {key!r} and {other.key!r} compare equal but are not equal")
        return -1 if mine < theirs else 1

    def _treeify(self, table: list[_Node | None], head: _Node | None) -> None:
        root: _Node | None = None
        node = head
        while node is not None:
            following = node.next
            node.left = node.right = None
            if root is None:
                node.parent, node.red, root = None, False, node
            else:
                parent = root
                while True:
                    direction = self._compare(node.hash, node.key, parent)
                    child = parent.left if direction <= 0 else parent.right
                    if child is None:
                        node.parent = parent
                        if direction <= 0:
                            parent.left = node
                        else:
                            parent.right = node
                        root = _balance_insertion(root, node)
                        break
                    parent = child
            node = following
        assert root is not None
        _move_root_to_front(table, root)

    def _put_tree_val(self, first: _Node, hashed: int, key: Any) -> bool:
        """``putTreeVal``: the new node goes under its tree parent and right after it in the bin's list."""
        root = first
        while root.parent is not None:
            root = root.parent
        parent = root
        while True:
            if parent.hash == hashed and parent.key == key:
                return False
            direction = self._compare(hashed, key, parent)
            child = parent.left if direction <= 0 else parent.right
            if child is None:
                break
            parent = child
        following = parent.next
        node = _Node(hashed, key, following)
        node.tree = True
        if direction <= 0:
            parent.left = node
        else:
            parent.right = node
        parent.next = node
        node.parent = node.prev = parent
        if following is not None:
            following.prev = node
        _move_root_to_front(self.table, _balance_insertion(root, node))
        return True

    def _split(self, table: list[_Node | None], index: int, bit: int, first: _Node) -> None:
        """``TreeNode.split``: a tree bin's keys into the low and high bins, each a list or a tree again."""
        (low, low_count), (high, high_count) = _split_list(first, bit, counted=True)
        for head, count, other, at in ((low, low_count, high, index), (high, high_count, low, index + bit)):
            if head is None:
                continue
            if count <= _UNTREEIFY_THRESHOLD:
                _untreeify(head)
                table[at] = head
            else:
                table[at] = head
                if other is not None:
                    self._treeify(table, head)


def _split_list(first: _Node, bit: int, counted: bool = False) -> tuple[tuple[Any, int], tuple[Any, int]]:
    """A bin's nodes (in ``next`` order) into those staying at its index and those moving up by ``bit``."""
    heads: list[_Node | None] = [None, None]
    tails: list[_Node | None] = [None, None]
    counts = [0, 0]
    node: _Node | None = first
    while node is not None:
        following, node.next = node.next, None
        side = 1 if node.hash & bit else 0
        node.prev = tails[side]
        tail = tails[side]
        if tail is None:
            heads[side] = node
        else:
            tail.next = node
        tails[side] = node
        counts[side] += 1
        node = following
    return (heads[0], counts[0]), (heads[1], counts[1])


def _untreeify(head: _Node) -> None:
    node: _Node | None = head
    while node is not None:
        node.tree, node.prev, node.parent, node.left, node.right = False, None, None, None, None
        node = node.next


def _move_root_to_front(table: list[_Node | None], root: _Node) -> None:
    index = root.hash & (len(table) - 1)
    first = table[index]
    if root is first:
        return
    following, previous = root.next, root.prev
    table[index] = root
    if following is not None:
        following.prev = previous
    if previous is not None:
        previous.next = following
    if first is not None:
        first.prev = root
    root.next, root.prev = first, None


def _balance_insertion(root: _Node, node: _Node) -> _Node:
    """``TreeNode.balanceInsertion``; its two mirrored halves are one here, by the side the parent hangs on."""
    node.red = True
    while True:
        parent = node.parent
        if parent is None:
            node.red = False
            return node
        grand = parent.parent
        if not parent.red or grand is None:
            return root
        near, far = ("left", "right") if parent is grand.left else ("right", "left")
        uncle = getattr(grand, far)
        if uncle is not None and uncle.red:
            uncle.red = parent.red = False
            grand.red = True
            node = grand
            continue
        if node is getattr(parent, far):
            node = parent
            root = _rotate(root, node, rising=far, sinking=near)
            parent = node.parent
            grand = parent.parent if parent is not None else None
        if parent is not None:
            parent.red = False
            if grand is not None:
                grand.red = True
                root = _rotate(root, grand, rising=near, sinking=far)


def _rotate(root: _Node, node: _Node, rising: str, sinking: str) -> _Node:
    """``TreeNode.rotateLeft`` (the right child rises) or ``rotateRight`` (the left one): the child takes
    ``node``'s place, ``node`` becomes its ``sinking`` child; returns the (possibly new) root."""
    child = getattr(node, rising)
    if child is None:
        return root
    inner = getattr(child, sinking)
    setattr(node, rising, inner)
    if inner is not None:
        inner.parent = node
    child.parent = node.parent
    if node.parent is None:
        root = child
        child.red = False
    elif node.parent.left is node:
        node.parent.left = child
    else:
        node.parent.right = child
    setattr(child, sinking, node)
    node.parent = child
    return root
