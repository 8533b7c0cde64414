"""The delivery ledger: what happened to each group's records, per partition, from the trace alone.

A consumer tells the trace where it starts each partition and why (``PositionSet``), which
offsets its application processed (``RecordsProcessed``) and how each of its commits went
(``CommitResult``); a share consumer tells what it processed, and the share-partition leader
what it archived (``ShareStateWrite``). ``Ledger`` reads those events — never the Lab — so a
saved trace gives the same ledger. ``kip_lab.lab.metrics.compute_metrics`` reports its totals
(the definitions are that module's), ``ledger_frame`` its rows per partition, and the Lab
checks its three invariants after every step:

no-skip
    A consumer group member starts a partition (``PositionSet``) only at an offset every offset
    below which the group has processed, counting from where the group first started the
    partition. A ``seek`` is the application's explicit choice and is exempt; so is the first
    start of a partition (``auto.offset.reset`` on a partition the group never consumed).
commits-monotonic
    The offset a member's successful commit stores for a partition is never below the one the
    previous successful commit stored, unless it is an explicit reset: a commit made outside the
    group's membership (member epoch or generation below 0, as an admin tool or a consumer with
    manual assignment sends) or a ``seek``.
reprocessing-explained
    An offset a group member processes again lies between the last successful commit and what
    the group had processed, at the member's handover: at or above the offset the group's last
    successful commit (or seek) had stored when the member set its position. Re-reading from
    there is the uncommitted progress a crash, a fence, a failed commit or the auto-commit
    interval leaves behind — including what a fenced member went on processing before it
    learned of the fence; below it, a committed record comes back. And a member's ``continued``
    range starts where its previous one ended (a position never jumps back unseen). Share groups
    re-deliver by design (KIP-932) and are not checked.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kip_lab.events import (
    ActionApplied,
    AssignmentChanged,
    CallbackCompleted,
    CallbackInvoked,
    CommitResult,
    Event,
    EventKind,
    FaultInjected,
    HandlerResult,
    PositionSet,
    RecordsProcessed,
    ShareStateWrite,
    summarize,
)

TP = tuple[str, int]
PARTITION_METADATA_KEYS = frozenset({"ConsumerGroupPartitionMetadataKey", "ShareGroupPartitionMetadataKey"})
LEDGER_KINDS = frozenset({EventKind.POSITION_SET, EventKind.RECORDS_PROCESSED, EventKind.COMMIT_RESULT})
LEDGER_METRICS = (  # what ``Ledger.totals`` reports: run and group columns of ``compute_metrics``
    "records_processed",
    "records_reprocessed",
    "records_skipped",
    "commits_failed",
    "max_lag_records",
    "processing_pause_ms",
)

LEDGER_INVARIANTS: dict[str, str] = {
    "no-skip": "A consumer never starts a partition past what its group has processed, unless a seek says so.",
    "commits-monotonic": "A group's committed offset for a partition never moves backwards, except by an explicit "
    "reset.",
    "reprocessing-explained": "A record processed again lies between the group's last successful commit and what the "
    "previous owner had processed (uncommitted progress).",
}


class OffsetSet:
    """A set of offsets as sorted, disjoint ``[start, end)`` ranges (adjacent ones merged)."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def __getstate__(self) -> tuple[list[int], list[int]]:
        """Its two lists: a snapshot holds three sets for each partition a group reads, and a
        pair of lists pickles in about two thirds of the time of the slots' dict."""
        return self.starts, self.ends

    def __setstate__(self, state: tuple[list[int], list[int]]) -> None:
        self.starts, self.ends = state

    def add(self, start: int, end: int) -> list[tuple[int, int]]:
        """Add ``[start, end)``; returns the parts that were already in the set, in order."""
        if end <= start:
            return []
        starts, ends = self.starts, self.ends
        if not ends or start > ends[-1]:  # past everything (a first range, or a gap): the common cases
            starts.append(start)
            ends.append(end)
            return []
        if start == ends[-1]:  # where the last range ends: a consumer's next range
            ends[-1] = end
            return []
        first = bisect_right(self.ends, start - 1)  # the first range ending at or after start
        if first > 0 and self.ends[first - 1] == start:
            first -= 1  # adjacent on the left: merged
        last = first
        present = []
        while last < len(self.starts) and self.starts[last] <= end:
            lo, hi = max(start, self.starts[last]), min(end, self.ends[last])
            if lo < hi:
                present.append((lo, hi))
            last += 1
        if last > first:
            start, end = min(start, self.starts[first]), max(end, self.ends[last - 1])
        self.starts[first:last] = [start]
        self.ends[first:last] = [end]
        return present

    def covered_from(self, offset: int) -> int:
        """Where the run of offsets present from ``offset`` on ends (``offset`` itself when absent)."""
        i = bisect_right(self.starts, offset) - 1
        return self.ends[i] if i >= 0 and self.ends[i] > offset else offset

    def missing(self, start: int, end: int) -> int:
        """How many offsets of ``[start, end)`` are not in the set."""
        present = sum(max(0, min(end, e) - max(start, s)) for s, e in zip(self.starts, self.ends, strict=True))
        return max(0, end - start) - present

    def minus(self, other: OffsetSet) -> int:
        """How many offsets of this set are not in ``other``."""
        return sum(other.missing(s, e) for s, e in zip(self.starts, self.ends, strict=True))


@dataclass
class PartitionLedger:
    """One group's ledger of one partition."""

    processed: OffsetSet = field(default_factory=OffsetSet)
    records_processed: int = 0
    records_reprocessed: int = 0
    first_start: int | None = None  # where the group first started the partition (consumer groups)
    sought: OffsetSet = field(default_factory=OffsetSet)  # offsets a seek jumped over: owed to nobody
    furthest: int = 0  # the end of the furthest range processed: the group's position
    last_commit: int | None = None  # the offset the last successful commit (or seek) stored
    last_committer: str | None = None
    commits_failed: int = 0  # partition offsets a commit did not store
    processed_by: dict[str, int] = field(default_factory=dict)  # actor -> the end of its last range
    handover_commit: dict[str, int | None] = field(default_factory=dict)  # actor -> last_commit at its start
    reported_ms: dict[str, int] = field(default_factory=dict)  # actor -> when its last range (or start) was told
    archived: OffsetSet = field(default_factory=OffsetSet)  # share groups: records archived
    max_lag: int = 0
    pause_ms: int = 0
    pause_since: int | None = None  # nobody has been processing it since
    lag: list[tuple[int, int]] = field(default_factory=list)  # (time, records behind the log end)

    def owed_until(self) -> int:
        """Where the run of offsets the group processed (or a seek excused) from its first start ends."""
        at = self.first_start or 0
        while True:
            nxt = max(self.processed.covered_from(at), self.sought.covered_from(at))
            if nxt == at:
                return at
            at = nxt

    @property
    def records_skipped(self) -> int:
        """Consumer groups: offsets from the first start up to the group's position that nobody processed (and
        no seek jumped over); share groups: records archived that nobody processed."""
        if self.first_start is None:
            return self.archived.minus(self.processed)
        covered = OffsetSet()
        for offsets in (self.processed, self.sought):
            for start, end in zip(offsets.starts, offsets.ends, strict=True):
                covered.add(start, end)
        return covered.missing(self.first_start, self.furthest)


@dataclass
class _Client:
    """What the ledger knows of a consumer process: its group, and whether it is processing."""

    group: str
    fetching: frozenset[TP] = frozenset()
    alive: bool = True
    paused: bool = False
    in_callback: int = 0

    def processing(self) -> frozenset[TP]:
        return self.fetching if self.alive and not self.paused and not self.in_callback else frozenset()


class Ledger:
    """Per (group, partition), the ledger the module docstring describes; ``apply`` each event in order.

    Invariant violations found along the way collect in ``found`` (``(rule, explanation)``);
    the reader takes them (``take_found``). ``reprocessed`` lists each re-processed range with
    who had processed it before and the last commit then, for the story and the charts.
    """

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, TP], PartitionLedger] = {}
        self.commits_failed: dict[str, int] = {}  # group -> commits with a partition not stored
        self.reprocessed: list[dict[str, Any]] = []
        self.found: list[tuple[str, str]] = []
        self.names: dict[str, str] = {}  # topic id -> name, as records and classic clients tell it
        self.rates: dict[str, float] = {}  # topic name -> records per ms per partition
        self.clients: dict[str, _Client] = {}
        self.namer: Callable[[TP], str] | None = None  # names a partition the events have not named (set while used)

    # -- reading ----------------------------------------------------------------------------
    def apply(self, event: Any) -> None:
        """Apply one ``TraceEvent`` (events the ledger does not read change nothing)."""
        reader = _READS.get(type(event.body))
        if reader is not None:
            reader(self, event.actor, event.body, event.time_ms)

    def take_found(self) -> list[tuple[str, str]]:
        found, self.found = self.found, []
        return found

    def partition_name(self, tp: TP) -> str:
        name = self.names.get(tp[0])
        if name is None and self.namer is not None:
            return self.namer(tp)
        return f"{name or tp[0]}-{tp[1]}"

    def log_end(self, tp: TP, time_ms: int) -> int | None:
        """The log end offset of ``tp`` at ``time_ms`` (None when the topic's producer is unknown)."""
        rate = self.rates.get(self.names.get(tp[0], ""))
        return None if rate is None else int(rate * time_ms)

    def _partition(self, group: str, tp: TP) -> PartitionLedger:
        ledger = self.partitions.get((group, tp))
        if ledger is None:
            ledger = self.partitions[(group, tp)] = PartitionLedger()
        return ledger

    # -- the consumers' own events ---------------------------------------------------------------
    def on_position_set(self, actor: str, event: PositionSet, now: int) -> None:
        tp = (event.topic_id, event.partition)
        ledger = self._partition(event.group_id, tp)
        self.clients.setdefault(actor, _Client(event.group_id)).group = event.group_id
        start = event.offset
        ledger.processed_by.pop(actor, None)  # a new run: its first range starts here, not where the last ended
        if event.reason == "seek":
            ledger.sought.add(ledger.owed_until(), start)
            ledger.last_commit, ledger.last_committer = start, f"{actor}'s seek"
        elif ledger.first_start is None:
            ledger.first_start = ledger.furthest = start
        else:
            owed = ledger.owed_until()
            if start > owed:
                self.found.append(("no-skip", self._skip_explanation(actor, event, ledger, owed)))
        ledger.handover_commit[actor] = ledger.last_commit
        ledger.reported_ms[actor] = now
        self._sample_lag(tp, ledger, now, start)

    def _skip_explanation(self, actor: str, event: PositionSet, ledger: PartitionLedger, owed: int) -> str:
        name = self.partition_name((event.topic_id, event.partition))
        why = {
            "latest": "auto.offset.reset=latest found no committed offset: were the group's commits refused?",
            "earliest": "auto.offset.reset=earliest",
            "committed": f"the committed offset is past what the group processed (last successful commit: "
            f"{ledger.last_commit})",
        }.get(event.reason, event.reason)
        return (
            f"{actor} starts {name} at {event.offset} ({event.reason}), but group {event.group_id} has processed "
            f"{name} only up to {owed}: offsets {owed}..{event.offset - 1} are never processed ({why})"
        )

    def on_records_processed(self, actor: str, event: RecordsProcessed, now: int) -> None:
        group = event.group_id
        sampled = bool(self.rates)  # the Lab's own checks know no producer: no lag to sample
        for topic_id, partition, first, end, start in event.ranges:
            tp = (topic_id, partition)
            ledger = self._partition(group, tp)
            if sampled:  # the member's position at its last report (or start), and now
                self._sample_lag(tp, ledger, ledger.reported_ms.get(actor, now), first)
                self._sample_lag(tp, ledger, now, end)
            if start == "continued":
                was_at = ledger.processed_by.get(actor)
                if was_at is not None and first != was_at:
                    name = self.partition_name(tp)
                    self.found.append(
                        (
                            "reprocessing-explained",
                            f"{actor}'s position for {name} moved from {was_at} to {first} unseen",
                        )
                    )
            again = ledger.processed.add(first, end)
            ledger.records_processed += end - first
            if again:
                self._processed_again(actor, event, tp, (first, end, start), again, ledger, now)
            if end > ledger.furthest:
                ledger.furthest = end
            ledger.processed_by[actor] = end
            ledger.reported_ms[actor] = now

    def _processed_again(
        self,
        actor: str,
        event: RecordsProcessed,
        tp: TP,
        processed: tuple[int, int, str],
        again: list[tuple[int, int]],
        ledger: PartitionLedger,
        now: int,
    ) -> None:
        """Count and list the parts of a range processed before, and check each is explained."""
        first, end, start = processed
        before = self._previous_owner(actor, ledger)
        since = ledger.reported_ms.get(actor, now)
        floor = ledger.handover_commit.get(actor, ledger.last_commit)
        for lo, hi in again:
            ledger.records_reprocessed += hi - lo
            self.reprocessed.append(
                {
                    "group_id": event.group_id,
                    "member": actor,
                    "topic_id": tp[0],
                    "partition_index": tp[1],
                    "partition": self.partition_name(tp),
                    "first": lo,
                    "end": hi,
                    "records": hi - lo,
                    # when: the range's records spread evenly over the time since the member's last report
                    "start_ms": since + (now - since) * (lo - first) // (end - first),
                    "end_ms": since + (now - since) * (hi - first) // (end - first),
                    "previous": before,
                    "last_commit": ledger.last_commit,
                }
            )
            if start != "acquired" and floor is not None and lo < floor:
                self.found.append(("reprocessing-explained", self._reprocess_explanation(actor, tp, lo, hi, floor)))

    def handover(self, actor: str, event: PositionSet) -> tuple[str | None, int]:
        """Before ``event`` is applied: who had processed its partition furthest, other than ``actor``, and
        how far the group had processed it (0 when nobody has)."""
        ledger = self.partitions.get((event.group_id, (event.topic_id, event.partition)))
        if ledger is None:
            return None, 0
        return self._previous_owner(actor, ledger), ledger.furthest

    @staticmethod
    def _previous_owner(actor: str, ledger: PartitionLedger) -> str | None:
        """Who processed the partition furthest before ``actor`` (itself when nobody else did)."""
        others = {a: end for a, end in ledger.processed_by.items() if a != actor}
        return max(others, key=lambda a: (others[a], a)) if others else (actor if ledger.processed_by else None)

    def _reprocess_explanation(self, actor: str, tp: TP, lo: int, hi: int, floor: int) -> str:
        name = self.partition_name(tp)
        return (
            f"{actor} processed {name} {lo}..{hi - 1} again, below {floor}, the offset the group's last successful "
            f"commit was acknowledged at when {actor} took {name} over: committed records came back"
        )

    def on_commit_result(self, actor: str, event: CommitResult, now: int) -> None:
        group = event.group_id
        if event.failed:
            self.commits_failed[group] = self.commits_failed.get(group, 0) + 1
        for topic_id, partition, offset, error in event.offsets:
            ledger = self._partition(group, (topic_id, partition))
            if error is not None:
                ledger.commits_failed += 1
                continue
            before = ledger.last_commit
            if event.member_epoch >= 0 and before is not None and offset < before:
                name = self.partition_name((topic_id, partition))
                self.found.append(
                    (
                        "commits-monotonic",
                        f"{actor}'s commit moved group {group}'s offset for {name} back from {before} "
                        f"(committed by {ledger.last_committer}) to {offset}",
                    )
                )
            ledger.last_commit, ledger.last_committer = offset, actor

    # -- what else the metrics read: names, producers, who is processing, share archives -------------
    def on_action(self, actor: str, event: ActionApplied, now: int) -> None:
        fields = event.fields
        name = event.name
        if name in ("create_topic", "recreate_topic") and "produce_rate_per_s" in fields:
            self.rates[fields["topic"]] = fields["produce_rate_per_s"] / 1000.0
        elif name == "add_consumer":
            self.clients[fields["member"]] = _Client(fields["config"]["group_id"])
        elif name in ("crash", "restart", "pause", "resume") and fields.get("member") in self.clients:
            client = self.clients[fields["member"]]
            if name == "restart":
                config = fields.get("config") or {}
                self.clients[fields["member"]] = _Client(config.get("group_id", client.group))
            else:
                before = client.processing()
                if name == "crash":
                    client.alive = False
                else:
                    client.paused = name == "pause"
                self._changed(client, before, now)

    def on_assignment_changed(self, actor: str, event: AssignmentChanged, now: int) -> None:
        self.names.update(event.topic_names or {})
        client = self.clients.get(actor)
        if client is None or event.share_assigned is not None:
            return
        before = client.processing()
        client.fetching = frozenset(event.fetching or ())
        self._changed(client, before, now)

    def on_callback(self, actor: str, event: CallbackInvoked | CallbackCompleted, now: int) -> None:
        client = self.clients.get(actor)
        if client is None or event.callback == "on_assignment":  # a classic leader's assignor: instant
            return
        before = client.processing()
        client.in_callback += 1 if isinstance(event, CallbackInvoked) else -1
        self._changed(client, before, now)

    def on_handler_result(self, actor: str, event: HandlerResult, now: int) -> None:
        """Topic names, from the groups' partition metadata records (only those are summarised)."""
        for record in event.written or ():
            if isinstance(record, dict):  # read back from a file
                kind, value = record["key"].get("type"), record.get("value")
            else:
                kind, value = type(record.key).__name__, record.value
            if kind in PARTITION_METADATA_KEYS and value is not None:
                for topic in summarize(value).get("topics", ()):
                    self.names[topic["topic_id"]] = topic["topic_name"]

    def on_share_state_write(self, actor: str, event: ShareStateWrite, now: int) -> None:
        if event.error is None:
            ledger = self._partition(event.group_id, (event.topic_id, event.partition))
            for first, last, _, target in event.transitions:
                if target == "Archived":
                    ledger.archived.add(first, last + 1)

    # -- processing pauses and lag ------------------------------------------------------------------
    def _processing(self, group: str, tp: TP) -> bool:
        return any(c.group == group and tp in c.processing() for c in self.clients.values())

    def _changed(self, client: _Client, before: frozenset[TP], now: int) -> None:
        """``client`` was processing ``before``: open or close the pause windows of the partitions it stopped or
        started."""
        for tp in sorted(before ^ client.processing()):
            ledger = self.partitions.get((client.group, tp))
            if ledger is None or ledger.first_start is None:
                continue  # not started by the group yet: no pause to count
            busy = self._processing(client.group, tp)
            if not busy and ledger.pause_since is None:
                ledger.pause_since = now
            elif busy and ledger.pause_since is not None:
                self._close_pause(tp, ledger, now)

    def _close_pause(self, tp: TP, ledger: PartitionLedger, now: int) -> None:
        since, ledger.pause_since = ledger.pause_since, None
        end = self.log_end(tp, now)
        if since is not None and (end is None or end > ledger.furthest):
            ledger.pause_ms += now - since

    def _sample_lag(self, tp: TP, ledger: PartitionLedger, time_ms: int, position: int) -> None:
        """How far ``position`` was behind the log end at ``time_ms``."""
        end = self.log_end(tp, time_ms)
        if end is None:
            return
        behind = max(0, end - position)
        ledger.max_lag = max(ledger.max_lag, behind)
        ledger.lag.append((time_ms, behind))

    def finish(self, end_ms: int) -> None:
        """Close what is still open at the end of the trace: pauses, with a last lag sample (nobody processes)."""
        for (_, tp), ledger in sorted(self.partitions.items()):
            if ledger.first_start is not None and ledger.pause_since is not None:
                self._sample_lag(tp, ledger, end_ms, ledger.furthest)
                self._close_pause(tp, ledger, end_ms)

    # -- totals ---------------------------------------------------------------------------------
    def totals(self, group: str | None = None) -> dict[str, int]:
        """The ledger's numbers for one group, or the whole run (``max_lag_records`` is a maximum, the rest sums)."""
        rows = [p for (g, _), p in self.partitions.items() if group is None or g == group]
        commits = self.commits_failed if group is None else {group: self.commits_failed.get(group, 0)}
        return {
            "records_processed": sum(p.records_processed for p in rows),
            "records_reprocessed": sum(p.records_reprocessed for p in rows),
            "records_skipped": sum(p.records_skipped for p in rows),
            "commits_failed": sum(commits.values()),
            "max_lag_records": max((p.max_lag for p in rows), default=0),
            "processing_pause_ms": sum(p.pause_ms for p in rows),
        }

    def groups(self) -> list[str]:
        return sorted({g for g, _ in self.partitions} | set(self.commits_failed))


_READS: dict[type[Event], Callable[[Ledger, str, Any, int], None]] = {
    PositionSet: Ledger.on_position_set,
    RecordsProcessed: Ledger.on_records_processed,
    CommitResult: Ledger.on_commit_result,
    ActionApplied: Ledger.on_action,
    FaultInjected: Ledger.on_action,
    AssignmentChanged: Ledger.on_assignment_changed,
    CallbackInvoked: Ledger.on_callback,
    CallbackCompleted: Ledger.on_callback,
    HandlerResult: Ledger.on_handler_result,
    ShareStateWrite: Ledger.on_share_state_write,
}


def build_ledger(trace: Iterable[Any], end_ms: int | None = None) -> Ledger:
    """The ledger of a whole trace, its pauses closed at ``end_ms`` (default: the last event's time)."""
    ledger = Ledger()
    last = 0
    for event in trace:
        ledger.apply(event)
        last = event.time_ms
    ledger.finish(last if end_ms is None else end_ms)
    return ledger
