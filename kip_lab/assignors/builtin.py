"""The built-in server assignors by name, as Kafka's ``group.consumer.assignors`` lists them.

Since Kafka 4.0 that broker config takes the built-in assignors' names (``uniform``,
``range``) besides class names; the first listed is the default, used for a group whose
members name no server assignor. A config lists names; a coordinator holds the objects.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Sequence

from kip_lab.assignors.range import RANGE_ASSIGNOR_NAME, RangeAssignor
from kip_lab.assignors.spec import PartitionAssignor
from kip_lab.assignors.uniform import UNIFORM_ASSIGNOR_NAME, UniformAssignor

BUILTIN_ASSIGNORS: dict[str, Callable[[], PartitionAssignor]] = {
    UNIFORM_ASSIGNOR_NAME: UniformAssignor,
    RANGE_ASSIGNOR_NAME: RangeAssignor,
}
DEFAULT_ASSIGNORS = tuple(BUILTIN_ASSIGNORS)  # Kafka's default: every built-in assignor, in this order


def assignor_names_problem(names: Sequence[str]) -> str | None:
    """Why ``names`` cannot be a coordinator's server assignors, else None: there must be one at
    least (the default), and no name twice (members and groups name the assignor they want)."""
    if not names:
        return "at least one server-side assignor is required"
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return f"assignor names must be distinct: {reprlib.repr(name)} is listed twice"
        seen.add(name)
    return None


def unknown_assignor_problem(names: Sequence[str]) -> str | None:
    """The first of ``names`` that is no built-in assignor, named with those that are, else None."""
    unknown = next((name for name in names if name not in BUILTIN_ASSIGNORS), None)
    if unknown is None:
        return None
    known = ", ".join(BUILTIN_ASSIGNORS)
    return f"{reprlib.repr(unknown)} is not a built-in server assignor; the built-in ones are {known}"


def builtin_assignors(names: Sequence[str]) -> list[PartitionAssignor]:
    """New assignor objects for the built-in ``names``, in their order (the first is the default)."""
    return [BUILTIN_ASSIGNORS[name]() for name in names]
