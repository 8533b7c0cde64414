"""The deterministic engine: a manual clock with a timer heap, append-only logs, and what a
coordinator's handler returns (``result``).

Nothing here knows about Kafka groups; the group and share coordinators are both built on top
of it, as Kafka's are on its shared coordinator runtime.
"""

from kip_lab.runtime.log import LogEntry, PartitionLog, Record
from kip_lab.runtime.scheduler import Scheduler, TimerOwner

__all__ = ["LogEntry", "PartitionLog", "Record", "Scheduler", "TimerOwner"]
