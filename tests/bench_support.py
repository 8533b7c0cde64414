"""Importing a benchmark module in a test: ``benchmarks`` is not an installed package."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def import_benchmark(name: str) -> ModuleType:
    """``benchmarks.<name>``, imported from the repository root."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"benchmarks.{name}")
