"""Counts kept on replay (how many members name a topic, an assignor, ...): one rule for moving them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable


def add_count(counter: Counter, key: Hashable, delta: int) -> None:
    """Add ``delta`` to ``counter[key]``, leaving no zero entry behind: a name nobody counts is absent,
    so two counters of the same members are equal whatever changes led to them."""
    value = counter[key] + delta
    if value:
        counter[key] = value
    else:
        del counter[key]
