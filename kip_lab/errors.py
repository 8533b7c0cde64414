"""kip_lab's one error hierarchy: every error kip_lab raises on purpose is a ``KipLabError``.

``except KipLabError`` catches what kip_lab reports (a bad scenario file, a request Kafka would
refuse, an invariant a run broke, a sweep that cannot write its output); anything else is a bug.
Each error also keeps the built-in base its callers may already catch (``ValueError`` for bad
input, ``RuntimeError`` for a misused object), so ``except ValueError`` goes on working. Kafka's
own error codes are ``kip_lab.protocol.Errors``, carried by ``ApiError``.
"""

from __future__ import annotations


class KipLabError(Exception):
    """Base of every error kip_lab raises on purpose."""
