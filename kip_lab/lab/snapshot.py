"""Time-travel snapshots of a World: pickled, sharing what never changes.

A snapshot is the World (and the invariant checker's memory) at one step. Pickling is about
ten times faster than ``copy.deepcopy`` on a large world, and the pickle shares, instead of
copying, the objects nothing ever changes in place:

* frozen pydantic models: every request, response, record and config (protocol ``Message``
  is frozen); the copy holds the very same objects;
* the ``__consumer_offsets`` log, whose records are immutable: the copy gets a log cut back
  to the batches it had, sharing the entries.

The scheduler indexes its timer owners by ``id()``, which a copy changes; it is rebuilt on
load. A world holding something pickle cannot handle (a user's listener defined inside a
function, say) falls back to ``copy.deepcopy`` for that snapshot.
"""

from __future__ import annotations

import copy
import io
import pickle
import threading
from typing import Any

from pydantic import BaseModel

from kip_lab.runtime.log import PartitionLog
from kip_lab.runtime.scheduler import Scheduler

_loading = threading.local()  # the shared objects of the snapshot being loaded


def _shared(index: int) -> Any:
    return _loading.shared[index]


def _log() -> PartitionLog:
    log = _loading.log
    return log.truncated(log.batch_count)


def _new_scheduler() -> Scheduler:
    return Scheduler.__new__(Scheduler)


def _set_scheduler_state(scheduler: Scheduler, state: dict[str, Any]) -> None:
    scheduler.__dict__.update(state)
    scheduler._owner_ids = {id(owner): number for number, owner in scheduler._owners.items()}


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, log: PartitionLog) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.log = log
        self.shared: list[Any] = []
        self._index: dict[int, int] = {}

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, BaseModel):
            if not obj.model_config.get("frozen"):
                return NotImplemented
            index = self._index.get(id(obj))
            if index is None:
                index = self._index[id(obj)] = len(self.shared)
                self.shared.append(obj)
            return _shared, (index,)
        if obj is self.log:
            return _log, ()
        if type(obj) is Scheduler:
            state = {k: v for k, v in obj.__dict__.items() if k != "_owner_ids"}
            return _new_scheduler, (), state, None, None, _set_scheduler_state
        return NotImplemented


class Snapshot:
    """One saved state; ``restore()`` returns a fresh, independent copy every time."""

    __slots__ = ("_copy", "_data", "_log", "_shared")

    def __init__(self, world: Any, invariants: Any) -> None:
        self._log = world.log.truncated(world.log.batch_count)
        buffer = io.BytesIO()
        pickler = _Pickler(buffer, world.log)
        try:
            pickler.dump((world, invariants))
        except (pickle.PicklingError, TypeError, AttributeError):
            self._data = None
            self._shared = None
            self._copy = copy.deepcopy((world, invariants))
            return
        self._data = buffer.getvalue()
        self._shared = pickler.shared
        self._copy = None

    @property
    def size(self) -> int:
        """Bytes of pickle (0 for a deep-copied snapshot): what a restore costs, roughly."""
        return len(self._data) if self._data is not None else 0

    def restore(self) -> tuple[Any, Any]:
        if self._data is None:
            return copy.deepcopy(self._copy)
        _loading.shared, _loading.log = self._shared, self._log
        try:
            return pickle.loads(self._data)
        finally:
            _loading.shared = _loading.log = None
