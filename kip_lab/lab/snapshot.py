"""Time-travel snapshots of a World: pickled, sharing what never changes.

A snapshot is the World (and the invariant checker's memory) at one step. Pickling is about
ten times faster than ``copy.deepcopy`` on a large world, and the pickle shares, instead of
copying, the objects nothing ever changes in place:

* frozen pydantic models: every request, response, record and config (protocol ``Message``
  is frozen); the copy holds the very same objects;
* frozen dataclasses the coordinator replaces rather than changes (a group's members);
* a group's committed offsets (``GroupOffsets``, a dict of frozen values): the snapshot keeps a
  shallow copy taken then, and each restore gets its own copy of that;
* the ``__consumer_offsets`` log, which is only ever appended to: the snapshot keeps the log
  object and its batch count, and a restore gets a new log cut back to that many batches,
  sharing the entries.

The scheduler copies itself (``Scheduler.__getstate__``: its live deadlines; its heap and
owner index are rebuilt on load), for a snapshot as for ``copy.deepcopy``. A consumer's ``Fetch`` per fetching
partition — thousands in a large group — pickles as its two numbers, and the ledger's offset sets
(three for each partition a group reads) as their two lists (``OffsetSet.__getstate__``). A world holding something
pickle cannot handle (a user's listener defined inside a function, say) falls back to
``copy.deepcopy`` for that snapshot.
"""

from __future__ import annotations

import copy
import io
import pickle
import threading
from typing import Any

from pydantic import BaseModel

from kip_lab.clients.application import Fetch
from kip_lab.coordinator.member import ConsumerGroupMember
from kip_lab.coordinator.offsets import GroupOffsets
from kip_lab.runtime.log import PartitionLog

_loading = threading.local()  # the shared objects of the snapshot being loaded


def _shared(index: int) -> Any:
    return _loading.shared[index]


def _copy_of_shared(cls: type, index: int) -> Any:
    return cls(_loading.shared[index])


def _log() -> PartitionLog:
    log, batches = _loading.log
    return log.truncated(batches)


def _frozen_models() -> list[type]:
    """Every frozen pydantic model class defined so far (requests, records, configs, actions)."""
    found: list[type] = []
    todo = [BaseModel]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls is not BaseModel and cls.model_config.get("frozen"):
            found.append(cls)
    return found


class _Pickler(pickle.Pickler):
    """Shares frozen models and the log; re-indexes the scheduler.

    Types are matched in a per-pickler ``dispatch_table`` rather than ``reducer_override``,
    so that the many other objects of a world pickle at C speed, with no Python call each.
    """

    _classes: tuple[int, list[type]] = (-1, [])

    def __init__(self, file: io.BytesIO, offsets_log: PartitionLog) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.shared: list[Any] = []
        index: dict[int, int] = {}
        shared = self.shared

        def share(obj: Any) -> tuple[Any, tuple[int]]:
            position = index.get(id(obj))
            if position is None:
                position = index[id(obj)] = len(shared)
                shared.append(obj)
            return _shared, (position,)

        def share_copy(obj: dict) -> tuple[Any, tuple[type, int]]:
            shared.append(dict(obj))  # its values are frozen: this shallow copy is the state now
            return _copy_of_shared, (type(obj), len(shared) - 1)

        table: dict[type, Any] = dict.fromkeys(_Pickler.frozen_models(), share)
        table[ConsumerGroupMember] = share
        table[GroupOffsets] = share_copy

        def log(obj: PartitionLog) -> Any:
            """``__consumer_offsets`` is shared, cut back on restore; another (``__share_group_state``) is copied."""
            return (_log, ()) if obj is offsets_log else obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)

        table[PartitionLog] = log
        table[Fetch] = lambda obj: (Fetch, (obj.since_ms, obj.offset, obj.reported, obj.start))
        self.dispatch_table = table

    @staticmethod
    def frozen_models() -> list[type]:
        count = len(BaseModel.__subclasses__())  # cheap: a new direct subclass redoes the walk (a miss only copies)
        cached_count, classes = _Pickler._classes
        if cached_count != count:
            classes = _frozen_models()
            _Pickler._classes = (count, classes)
        return classes


class Snapshot:
    """One saved state; ``restore()`` returns a fresh, independent copy every time."""

    __slots__ = ("_copy", "_data", "_log", "_shared", "size_bytes")
    _copy: tuple[Any, Any] | None  # a deep copy, when the state does not pickle
    _data: bytes | None
    _shared: list[Any] | None

    def __init__(self, world: Any, invariants: Any) -> None:
        self._log = (world.log, world.log.batch_count)  # append-only: that prefix never changes
        buffer = io.BytesIO()
        pickler = _Pickler(buffer, world.log)
        try:
            pickler.dump((world, invariants))
        except (pickle.PicklingError, TypeError, AttributeError):
            self._data = None
            self._shared = None
            self._copy = copy.deepcopy((world, invariants))
            self.size_bytes = 0  # unknown: the Lab takes the next one as soon as snapshot_every allows
        else:
            self._data = buffer.getvalue()
            self._shared = pickler.shared
            self._copy = None
            self.size_bytes = len(self._data)  # what it cost, roughly: the Lab spaces snapshots by it

    def restore(self) -> tuple[Any, Any]:
        if self._data is None:
            assert self._copy is not None, "a snapshot keeps its bytes or its copy"
            return copy.deepcopy(self._copy)
        _loading.shared, _loading.log = self._shared, self._log
        try:
            return pickle.loads(self._data)
        finally:
            _loading.shared = _loading.log = None
