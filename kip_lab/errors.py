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


class ArgumentError(KipLabError, ValueError):
    """A public call given an argument it cannot take; the message names the call, the argument and
    what it allows. ``kip_lab.contract.InvalidArgument`` (a refused type or bound) is one too."""


class UnknownName(ArgumentError, KeyError):
    """A member, topic or broker named that does not exist; the message lists those that do.
    Also a ``KeyError``, as a lookup that fails."""

    __str__ = Exception.__str__  # the message, not KeyError's quoted repr of it


class RunOver(KipLabError, IndexError):
    """``Lab.step()`` with nothing left to do: no timer armed and no action applied at the next step."""
