"""Simulated Kafka clients that run inside the Lab."""

from kip_lab.clients.classic_consumer import ClassicConsumer, ClassicConsumerConfig
from kip_lab.clients.classic_member_state import CLASSIC_MEMBER_MACHINE, ClassicMemberState
from kip_lab.clients.consumer import CallbackConfig, Consumer, ConsumerConfig, TimedListener
from kip_lab.clients.member_state import CONSUMER_MEMBER_MACHINE, MemberState
from kip_lab.clients.share_consumer import FailureRule, ShareConsumer, ShareConsumerConfig

__all__ = [
    "CLASSIC_MEMBER_MACHINE",
    "CONSUMER_MEMBER_MACHINE",
    "CallbackConfig",
    "ClassicConsumer",
    "ClassicConsumerConfig",
    "ClassicMemberState",
    "Consumer",
    "ConsumerConfig",
    "FailureRule",
    "MemberState",
    "ShareConsumer",
    "ShareConsumerConfig",
    "TimedListener",
]
