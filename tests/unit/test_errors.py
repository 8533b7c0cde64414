"""kip_lab has one error hierarchy: every exception class it defines is a ``KipLabError``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import kip_lab
from kip_lab import KipLabError
from kip_lab.regex import InvalidRegex, compile_subscription
from kip_lab.scenarios.loading import ScenarioError, scenario_from_yaml


def _kip_lab_exception_classes() -> list[type[BaseException]]:
    classes = []
    for module_info in pkgutil.walk_packages(kip_lab.__path__, "kip_lab."):
        module = importlib.import_module(module_info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.__name__:
                classes.append(value)
    return classes


def test_every_exception_kip_lab_defines_is_a_kip_lab_error() -> None:
    classes = _kip_lab_exception_classes()
    assert len(classes) >= 15  # the walk found the package's errors
    assert [c.__qualname__ for c in classes if not issubclass(c, KipLabError)] == []


def test_a_kip_lab_error_keeps_the_builtin_base_callers_catch() -> None:
    """Bad input is still a ValueError, so code written against the built-in base keeps working."""
    with pytest.raises(ValueError) as caught:
        compile_subscription("(")
    assert isinstance(caught.value, InvalidRegex) and isinstance(caught.value, KipLabError)


def test_one_except_clause_catches_what_kip_lab_reports() -> None:
    with pytest.raises(KipLabError) as caught:
        scenario_from_yaml("name: [unclosed")
    assert isinstance(caught.value, ScenarioError)
