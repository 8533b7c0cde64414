"""Values built once per key, kept by the object that uses them.

A steady group asks for the same frozen values over and over (a heartbeat's unchanged answer, a
commit's answer, a member's unchanged heartbeat request). A ``Memo`` builds each once. It is held
by its owner (a coordinator, a client), never at module level: snapshots and copies then carry it
with the state that references its values, and two Labs in one process never share a value, so a
run's objects, and the size of its snapshots, do not depend on what ran before it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class Memo(Generic[V]):
    """``memo(*key)`` is ``build(*key)``, built once per key; cleared whole at ``limit`` values."""

    def __init__(self, build: Callable[..., V], limit: int) -> None:
        self.build = build  # a module-level function: a memo pickles with its owner
        self.limit = limit
        self.values: dict[tuple[Hashable, ...], V] = {}

    def __call__(self, *key: Hashable) -> V:
        value = self.values.get(key)
        if value is None:
            if len(self.values) >= self.limit:
                self.values.clear()
            value = self.values[key] = self.build(*key)
        return value
