"""Real Kafka clients in the Lab: a wire-protocol front door (``serve``).

``serve(lab, port=0)`` starts Kafka's wire protocol on loopback in front of ``lab``, whose clock
from then on follows the wall clock; real consumers, producers and admin clients (librdkafka,
the Java client) connect to ``handle.bootstrap_servers`` and appear in the Lab's trace like its
simulated clients. See docs/real-clients.md. Needs the ``wire`` extra (kio).
"""

from __future__ import annotations

try:
    import kio  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("kip_lab.wire needs kio, the Kafka wire codec: pip install 'kip-lab[wire]'") from error

from kip_lab.wire.clock import RealTimeClock
from kip_lab.wire.consumer_process import ConsumerProcess
from kip_lab.wire.groups import settled_assignment
from kip_lab.wire.server import WireServer, serve

__all__ = ["ConsumerProcess", "RealTimeClock", "WireServer", "serve", "settled_assignment"]
