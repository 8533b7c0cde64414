"""Which clients a run touched since someone last asked (the incremental checks' input)."""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter
from typing import Any

actor_of = attrgetter("actor")  # TraceEvent.actor


class Touched:
    """The clients a run touched since someone last asked: the actors of its events, the
    owners of client timers, the members actions name — or everyone, after an action that
    names no member (a topic created, a failover, time advanced in one go)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.everyone = True

    def events(self, events: Iterable[Any]) -> None:
        self.names.update(map(actor_of, events))

    def timer_fired(self, owner: Any) -> None:
        name = getattr(owner, "name", None)
        if name is not None:
            self.names.add(name)
        elif getattr(owner, "performs_actions", False):
            self.everyone = True

    def action_applied(self, action: Any) -> None:
        member = getattr(action, "member", None)
        if member is not None:
            self.names.add(member)
        else:
            self.everyone = True

    def drain(self, clients: dict[str, Any]) -> list[str]:
        """The touched clients that exist, in no particular order; forgets them."""
        touched = list(clients) if self.everyone else [n for n in self.names if n in clients]
        self.names.clear()
        self.everyone = False
        return touched
