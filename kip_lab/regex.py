"""Regex subscriptions with RE2 semantics (KIP-848: the coordinator uses Google RE2/J).

RE2 matches in linear time, so no subscriber's pattern can stall the coordinator, and it
rejects constructs (backreferences, lookaround) that need backtracking — exactly the
patterns the KIP says the coordinator must refuse. Matching is a *full* match of the topic
name, as Java's ``Matcher.matches()``. ``re2`` is imported on first use so that
``import kip_lab`` needs pydantic alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache


class InvalidRegex(ValueError):
    """The pattern is not a valid RE2 expression; ``reason`` is RE2's description of the problem."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@lru_cache(maxsize=1024)
def compile_subscription(pattern: str):
    """Compile ``pattern`` with RE2, or raise InvalidRegex naming the problem."""
    import re2  # google-re2

    if not pattern:
        raise InvalidRegex("the regular expression is empty", "empty pattern")
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise InvalidRegex(f"{pattern!r} is not a valid RE2 regular expression: {reason}", str(reason)) from None


def matching_topics(pattern: str, topic_names: Iterable[str]) -> list[str]:
    """The topic names ``pattern`` fully matches, sorted."""
    compiled = compile_subscription(pattern)
    return sorted(name for name in topic_names if compiled.fullmatch(name) is not None)
