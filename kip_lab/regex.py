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
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        reason = re2j_description(str(detail))
        shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
        raise InvalidRegex(f"{shown!r} is not a valid RE2 regular expression: {reason}", reason) from None


# RE2's error texts (C++, which compiles the pattern here) and what RE2/J, which Kafka's coordinator uses,
# says for the same error (``com.google.re2j.Parser``'s ``ERR_*``, the ``PatternSyntaxException`` description).
# RE2/J answers an unmatched ")" with its internal error ("stack underflow" in ``parseRightParen``).
_RE2J_DESCRIPTION = {
    "unexpected error": "regexp/syntax: internal error",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "regexp/syntax: internal error",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid UTF-8": "invalid UTF-8",
    "invalid named capture group": "invalid named capture",
}


def re2j_description(detail: str) -> str:
    """RE2/J's description of the error RE2 reported as ``detail`` ("missing ]: [" -> "missing closing ]")."""
    code = detail.split(": ", 1)[0]
    return _RE2J_DESCRIPTION.get(code, code)


def matching_topics(pattern: str, topic_names: Iterable[str]) -> list[str]:
    """The topic names ``pattern`` fully matches, sorted."""
    compiled = compile_subscription(pattern)
    return sorted(name for name in topic_names if compiled.fullmatch(name) is not None)
