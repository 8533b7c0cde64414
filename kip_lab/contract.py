"""The public API's one contract: arguments are checked where they come in, and refused with a KipLabError.

Two tools, used at every edge of the API (docs/api.md):

* ``Model``, the base of kip_lab's pydantic models (configs, actions, requests): building one
  from bad values raises ``InvalidArgument`` — still a pydantic ``ValidationError`` (so
  ``.errors()`` and ``except ValidationError`` work), and also a ``KipLabError``.
* ``@checked`` on a function or method: its annotations are enforced in pydantic's strict mode
  (no silent coercion: ``"10"`` is not an int, ``True`` is not a count, a dict is not a
  ``LabConfig``), its ``Annotated[..., Field(...)]`` bounds too, and a refusal is the same
  ``InvalidArgument`` naming the call, the argument and what it allows.

Checks that need the object's state (a member that does not exist, a step past the run) raise
``ArgumentError`` (``kip_lab.errors``) directly. The bounds every count, size and time shares
with the scenario files are the constants below.
"""

from __future__ import annotations

import functools
import inspect
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, validate_call

from kip_lab.errors import ArgumentError

LONG_MAX = 2**63 - 1  # seeds, times and counts are Java longs in Kafka, int64 in saved traces
MAX_BROKERS = 100
MAX_PARTITIONS = 100_000  # of one topic, and added at once: a bound that keeps a Lab in memory
MAX_TOTAL_PARTITIONS = 100_000  # of every topic at any moment
MAX_STEPS = 100_000_000  # steps one call may take (a scenario's run.max_steps at most)
MAX_LATENCY_MS = 86_400_000  # a day: a link's latency (a run's default time budget)

F = TypeVar("F", bound=Callable[..., Any])

_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict, _REPR.maxlevel = 40, 40, 4, 4, 2


class InvalidArgument(ValidationError, ArgumentError):
    """Arguments a call or a model refuses: one line per argument, naming it, what it allows and what it got."""

    def __str__(self) -> str:
        return "\n".join(f"{self.title}: {line}" for line in _error_lines(self.errors()))


def _error_lines(errors: list[Any]) -> list[str]:
    lines = []
    for error in errors:
        where = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        got = "" if error["type"] in ("missing", "value_error") else f", got {_REPR.repr(error['input'])}"
        lines.append(f"{where}: {message}{got}" if where else f"{message}{got}")
    return lines


def invalid(title: str, exc: ValidationError, names: list[str] | None = None) -> InvalidArgument:
    """``exc`` as an InvalidArgument titled ``title``; positional indexes become parameter ``names``."""
    errors = []
    for error in exc.errors():
        loc = error["loc"]
        if names is not None and loc and isinstance(loc[0], int) and loc[0] < len(names):
            error = {**error, "loc": (names[loc[0]], *loc[1:])}
        errors.append(error)
    try:
        return InvalidArgument.from_exception_data(title, errors)  # type: ignore[arg-type]
    except (TypeError, ValueError, KeyError):  # an error kind pydantic cannot rebuild: keep its words
        text = "; ".join(_error_lines(errors))
        return InvalidArgument.from_exception_data(
            title, [{"type": "value_error", "loc": (), "input": None, "ctx": {"error": ValueError(text)}}]
        )


class Model(BaseModel):
    """Base of kip_lab's pydantic models: a refused construction is an ``InvalidArgument``."""

    def __init__(self, /, *args: Any, **data: Any) -> None:
        if args:
            fields = ", ".join(type(self).model_fields)
            raise refuse(type(self).__name__, "arguments", f"fields are given by name ({fields}), not by position")
        try:
            super().__init__(**data)
        except InvalidArgument:
            raise
        except ValidationError as exc:
            raise invalid(type(self).__name__, exc) from None

    # Validation of a model nested in another never calls this __init__ (pydantic calls a subclass's own
    # __init__ during validation unless it is marked as the base one): nothing is validated twice.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except InvalidArgument:
            raise
        except ValidationError as exc:
            raise invalid(cls.__name__, exc) from None


_STRICT = ConfigDict(strict=True, arbitrary_types_allowed=True)


def checked(func: F) -> F:
    """Enforce ``func``'s annotations strictly at the call; refusals are ``InvalidArgument``.

    The validator is built at the first call, when every name the annotations use (the class
    being defined, for a method returning one) exists."""
    names = list(inspect.signature(func).parameters)
    title = func.__qualname__
    validated: Callable[..., Any] | None = None

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal validated
        if validated is None:
            validated = validate_call(config=_STRICT)(func)
        try:
            return validated(*args, **kwargs)
        except InvalidArgument:
            raise
        except ValidationError as exc:
            if exc.title not in (func.__name__, title):  # raised inside the call, not by its arguments
                raise
            raise invalid(title, exc, names) from None

    return call  # type: ignore[return-value]


def refuse(call: str, argument: str, message: str) -> ArgumentError:
    """An ArgumentError for a check that needs state: ``Lab.crash: member: no member named 'x'; members: A, B``."""
    return ArgumentError(f"{call}: {argument}: {message}")


def known(call: str, argument: str, value: Any, names: Any) -> None:
    """Refuse ``value`` unless it is one of ``names`` (which the message lists)."""
    if value not in names:
        listed = ", ".join(sorted(map(str, names))) or "none yet"
        raise refuse(call, argument, f"no {argument} named {value!r}; have: {listed}")
