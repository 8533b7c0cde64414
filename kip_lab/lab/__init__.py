"""The Lab: clients, network and time around the coordinators; trace, invariants, time travel."""

from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.lab.network import LatencyModel, LinkConfig
from kip_lab.lab.trace import EventKind, Trace, TraceEvent, TraceFileError

__all__ = ["EventKind", "Lab", "LabConfig", "LatencyModel", "LinkConfig", "Trace", "TraceEvent", "TraceFileError"]
