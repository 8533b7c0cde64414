"""``make lab`` sets up what the notebooks need and nothing for the tests; ``make test`` adds the
test tools and Chromium. Read from ``make -n`` (what make would run) in a copy of the Makefile."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_ONLY = {"pytest", "nbval", "playwright", "ruff", "mypy", "hypothesis", "pytest-xdist", "radon"}

pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")


def would_run(target: str, tmp_path: Path) -> list[str]:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    done = subprocess.run(["make", "-n", target], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.splitlines()


def extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_make_lab_installs_the_notebooks_needs_not_the_test_tools_or_chromium(tmp_path: Path) -> None:
    commands = would_run("lab", tmp_path)
    assert any(c.endswith('install -e ".[lab]"') for c in commands), commands
    assert not any("test" in c for c in commands if "pip" in c), commands
    system = [c for c in commands if "system-deps.sh" in c]
    assert system == ["bash scripts/system-deps.sh dot java"], system
    assert any("jupyter lab" in c for c in commands)
    lab = " ".join(extras()["lab"])
    assert not [tool for tool in TEST_ONLY if f'"{tool}' in lab or lab.startswith(tool)], lab


def test_make_test_adds_the_test_tools_and_chromium(tmp_path: Path) -> None:
    commands = would_run("test", tmp_path)
    assert any(c.endswith('install -e ".[lab,test]"') for c in commands), commands
    assert "bash scripts/system-deps.sh dot java chromium kcat node npm" in commands
