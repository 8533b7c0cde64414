"""Simulated Kafka clients that run inside the Lab."""

from kip_lab.clients.consumer import CallbackConfig, Consumer, ConsumerConfig, TimedListener
from kip_lab.clients.member_state import CONSUMER_MEMBER_MACHINE, MemberState

__all__ = ["CONSUMER_MEMBER_MACHINE", "CallbackConfig", "Consumer", "ConsumerConfig", "MemberState", "TimedListener"]
