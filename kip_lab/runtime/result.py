"""What a coordinator's handler or timer produces: the response plus the record batches it wrote
(the group and the share coordinator alike, as Kafka's coordinator runtime has one ``CoordinatorResult``)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kip_lab.runtime.log import Record

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class DeferredResponse:
    """A response to a request parked earlier (a classic JoinGroup or SyncGroup).

    ``ref`` is the handle the caller passed with that request (the Lab passes the client's
    name and the correlation id); ``api`` names the RPC the response answers.
    """

    ref: Hashable | None
    api: str
    response: Any


@dataclass(frozen=True, slots=True)
class CoordinatorResult(Generic[R]):
    """Kafka's ``CoordinatorResult``: a response and the records to append.

    Records come in atomic batches, in the order the coordinator writes them (membership
    and group epoch, then a target assignment, then the member's current assignment). The
    batches are what a reader replays one at a time to see the KIP's intermediate
    snapshots. ``origin`` says what produced the result (an RPC name or a timer).

    Classic groups add two things, as Kafka's classic coordinator does: ``response`` is
    ``None`` when the request is parked, and ``deferred`` carries the responses this result
    completes for requests parked earlier (the rebalance barrier). ``replay_records=False``
    marks records that persist soft state the handler already changed (a classic group's
    ``GroupMetadataValue``): they are appended to the log but not replayed live, only on load.
    """

    response: R
    batches: tuple[tuple[Record, ...], ...] = ()
    origin: str = ""
    deferred: tuple[DeferredResponse, ...] = ()
    replay_records: bool = True

    @property
    def records(self) -> list[Record]:
        return [record for batch in self.batches for record in batch]
