"""The deterministic engine: a manual clock with a timer heap, and append-only logs.

Nothing here knows about Kafka groups; the coordinators are built on top of it.
"""

from kip_lab.runtime.log import LogEntry, PartitionLog, Record
from kip_lab.runtime.scheduler import Scheduler, TimerOwner

__all__ = ["LogEntry", "PartitionLog", "Record", "Scheduler", "TimerOwner"]
