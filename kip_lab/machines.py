"""State machines declared as data, in the style of pytransitions' markup.

Each machine is one table of ``(source, trigger, target)``. The engine asks the table
before it records a change (``require``), and the diagrams are drawn from the same table,
so the picture and the code cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kip_lab.errors import KipLabError


class IllegalTransition(KipLabError, RuntimeError):
    """A component tried to move along an edge its machine does not declare."""


@dataclass(frozen=True, slots=True)
class Transition:
    source: str
    trigger: str
    target: str


@dataclass(frozen=True)
class StateMachine:
    """A named table of transitions over a fixed set of states."""

    name: str
    states: tuple[str, ...]
    initial: str
    transitions: tuple[Transition, ...]
    description: str = ""
    _index: dict[tuple[str, str], str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        known = set(self.states)
        if self.initial not in known:
            raise ValueError(f"{self.name}: initial state {self.initial!r} is not a state")
        index: dict[tuple[str, str], str] = {}
        for t in self.transitions:
            for state in (t.source, t.target):
                if state not in known:
                    raise ValueError(f"{self.name}: {t} names unknown state {state!r}")
            if (t.source, t.trigger) in index:
                raise ValueError(f"{self.name}: two transitions from {t.source!r} on {t.trigger!r}")
            index[(t.source, t.trigger)] = t.target
        object.__setattr__(self, "_index", index)

    @classmethod
    def from_table(
        cls,
        name: str,
        states: Iterable[str],
        initial: str,
        table: Iterable[tuple[str, str, str]],
        description: str = "",
    ) -> StateMachine:
        return cls(name, tuple(states), initial, tuple(Transition(*row) for row in table), description)

    def next_state(self, source: str, trigger: str) -> str:
        """Where ``trigger`` takes ``source``; raises IllegalTransition if undeclared."""
        try:
            return self._index[(source, trigger)]
        except KeyError:
            raise IllegalTransition(f"{self.name}: no transition from {source} on {trigger!r}") from None

    def require(self, source: str, trigger: str, target: str) -> None:
        """Check that ``source --trigger--> target`` is declared."""
        declared = self.next_state(source, trigger)
        if declared != target:
            raise IllegalTransition(
                f"{self.name}: {source} --{trigger}--> {target} is not declared (it leads to {declared})"
            )

    def require_edge(self, source: str, target: str) -> None:
        """Check that some declared trigger leads from ``source`` to ``target``.

        For machines whose state is derived (the group state), the engine knows where it
        went but not by which named trigger; the table still decides whether that is legal.
        """
        if not any(t.source == source and t.target == target for t in self.transitions):
            raise IllegalTransition(f"{self.name}: {source} -> {target} is not declared")
