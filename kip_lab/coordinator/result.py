"""What a handler or a timer produces: the response plus the record batches it wrote."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from kip_lab.runtime.log import Record

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class CoordinatorResult(Generic[R]):
    """Kafka's ``CoordinatorResult``: a response and the records to append.

    Records come in atomic batches, in the order the coordinator writes them (membership
    and group epoch, then a target assignment, then the member's current assignment). The
    batches are what a reader replays one at a time to see the seed's intermediate
    snapshots. ``origin`` says what produced the result (an RPC name or a timer).
    """

    response: R
    batches: tuple[tuple[Record, ...], ...] = ()
    origin: str = ""

    @property
    def records(self) -> list[Record]:
        return [record for batch in self.batches for record in batch]
