"""Regular expressions with RE2 semantics: regex subscriptions (KIP-848: the coordinator uses
Google RE2/J) and every other pattern a user supplies (a share consumer's failure rule).

RE2 matches in linear time, so no pattern can stall a run, and it rejects constructs
(backreferences, lookaround) that need backtracking — exactly the patterns the KIP says the
coordinator must refuse. A pattern is at most ``MAX_PATTERN_LENGTH`` characters and its
compiled program at most RE2's default memory budget (8 MiB); longer or larger ones are
refused as invalid. Matching is a *full* match of the topic
name, as Java's ``Matcher.matches()``. ``re2`` is imported on first use so that
``import kip_lab`` needs pydantic alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from kip_lab.errors import KipLabError

MAX_PATTERN_LENGTH = 10_000


class InvalidRegex(KipLabError, ValueError):
    """The pattern is not a valid RE2 expression (or is too long); ``reason`` is what is wrong with it."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@lru_cache(maxsize=1024)
def compile_subscription(pattern: str):
    """Compile ``pattern`` with RE2, or raise InvalidRegex naming the problem."""
    import re2  # google-re2

    if not pattern:
        raise InvalidRegex("the regular expression is empty", "empty pattern")
    if len(pattern) > MAX_PATTERN_LENGTH:
        reason = f"{len(pattern):,} characters long; at most {MAX_PATTERN_LENGTH:,} are allowed"
        raise InvalidRegex(f"the regular expression is {reason}", reason)
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
        raise InvalidRegex(f"{shown!r} is not a valid RE2 regular expression: {reason}", str(reason)) from None


def matching_topics(pattern: str, topic_names: Iterable[str]) -> list[str]:
    """The topic names ``pattern`` fully matches, sorted."""
    compiled = compile_subscription(pattern)
    return sorted(name for name in topic_names if compiled.fullmatch(name) is not None)
