"""How many examples the property tests try: a few in the ordinary suite, many in the long profile.

``KIP_LAB_PROPERTIES=long`` selects Hypothesis's ``long`` profile: every property test and state
machine tries at least ``LONG_EXAMPLES`` examples (hours on a laptop; never in CI). The tests
give their quick counts through ``examples(n)``, because a count written into a test's own
settings would override any profile.
"""

from __future__ import annotations

import os

from hypothesis import settings

LONG_EXAMPLES = 10_000
settings.register_profile("long", max_examples=LONG_EXAMPLES, deadline=None, print_blob=True)
# CI runs the same examples every time (Hypothesis' advice for CI): a failure there is reproducible
# and is not a coin toss; bugs are hunted with random examples locally and with the long profile.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
DEFAULT = "ci" if os.environ.get("CI", "").lower() == "true" else "default"
PROFILE = os.environ.get("KIP_LAB_PROPERTIES", DEFAULT)
if PROFILE not in ("default", "ci", "long"):
    raise ValueError(f"KIP_LAB_PROPERTIES={PROFILE!r}: expected 'default', 'ci' or 'long'")
settings.load_profile(PROFILE)


def examples(quick: int) -> int:
    """``quick`` examples, or ``LONG_EXAMPLES`` under the long profile."""
    return LONG_EXAMPLES if PROFILE == "long" else quick
