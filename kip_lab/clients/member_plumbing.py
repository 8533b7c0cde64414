"""What every kind of consumer (new, classic, share) does the same way: its clock and timers,
moving its member state machine with a trace event, and matching a response or a timeout to the
request it answers.

A base without fields: each client is a dataclass with its own fields, and all this needs is
the attributes declared (not defined) at the top of ``MemberPlumbing``.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

from kip_lab.events import Note, StateTransition
from kip_lab.machines import StateMachine


class MemberPlumbing:
    MEMBER_MACHINE: ClassVar[StateMachine]  # the table the client's ``state`` moves in

    # What each client's dataclass provides: declared here for the type checker, defined there.
    name: str
    world: Any  # the Lab's world: clock (``scheduler``), ``network`` and trace (``emit``)
    state: Enum  # a member of the client's own state enum, moved in ``MEMBER_MACHINE``
    member_id: str
    alive: bool
    _pending: dict[int, tuple[str, Any]]  # correlation id -> (api, context) of each request out
    if TYPE_CHECKING:

        @property
        def member_epoch(self) -> int:
            """A field of most clients; the classic consumer derives it from its generation."""
            ...

    @property
    def now(self) -> int:
        return self.world.scheduler.now_ms

    def _timer(self, key: Any, delay_ms: int) -> None:
        self.world.scheduler.schedule(self, key, delay_ms if delay_ms > 0 else 0)

    def _cancel(self, key: Any) -> None:
        self.world.scheduler.cancel(self, key)

    def _note(self, text: str, **details: Any) -> None:
        """A ``Note`` trace event: what the client did or saw, in words, with any details."""
        self.world.emit(self.name, Note(text, details))

    def _transition_details(self) -> dict[str, Any]:
        """What a client adds to its ``state_transition`` events beyond the member id and epoch."""
        return {}

    def _transition(self, target: Enum, trigger: str) -> None:
        """Move to ``target`` if the machine declares the edge (else raise), tracing the move."""
        machine = self.MEMBER_MACHINE
        machine.require(self.state.value, trigger, target.value)
        self.world.emit(
            self.name,
            StateTransition(
                machine.name,
                self.state.value,
                target.value,
                trigger,
                self.member_id,
                self.member_epoch,
                **self._transition_details(),
            ),
        )
        self.state = target

    def _send_to(self, broker: str, api: str, request: Any, context: Any = None) -> int:
        """Send ``request`` to ``broker``, remembering (api, context) under a new correlation id
        (numbered by the network, so that no id of an earlier incarnation comes back)."""
        correlation = self.world.network.next_correlation(self.name)
        self._pending[correlation] = (api, context)
        self.world.network.send(self.name, broker, api, request, correlation)
        return correlation

    def _answered_request(self, envelope: Any) -> tuple[str, Any] | None:
        """The (api, context) of the request ``envelope`` answers, its timeout cancelled; None when
        the client is dead or gave up on that request (a late response is dropped)."""
        if not self.alive:
            return None
        pending = self._pending.pop(envelope.correlation_id, None)
        if pending is None:
            return None
        self._cancel(("request_timeout", envelope.correlation_id))
        return pending

    def _timed_out_request(self, correlation: int) -> tuple[str, Any] | None:
        """The (api, context) of a request whose timeout fired, noted in the trace; None when it was answered."""
        pending = self._pending.pop(correlation, None)
        if pending is not None:
            self._note(f"{pending[0]} request {correlation} timed out")
            self.world.network.close_connection(self.name, correlation)
        return pending
