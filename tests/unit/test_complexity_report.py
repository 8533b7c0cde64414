"""scripts/complexity_report.py: the functions over the length or complexity limit, and only those."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "complexity_report.py"


def _report(tmp_path: Path, source: str, *options: str) -> str:
    (tmp_path / "sample.py").write_text(source)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), *options], capture_output=True, text=True, check=True
    )
    return done.stdout


def test_lists_long_and_branchy_functions_and_nothing_else(tmp_path):
    long_body = "\n".join(f"    x{i} = {i}" for i in range(70))
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(20))
    source = (
        f"def long_one():\n{long_body}\n\n"
        f"def branchy(x):\n{branches}\n    return -1\n\n"
        "class Box:\n    def small(self):\n        return 1\n"
    )
    out = _report(tmp_path, source)
    assert "long_one" in out and "branchy" in out and "small" not in out
    assert "2 functions: 1 over 60 lines, 1 over complexity 15" in out
    branchy_row = next(line for line in out.splitlines() if line.endswith("branchy"))
    assert branchy_row.split()[1] == "21"  # one path plus twenty ifs


def test_limits_are_options(tmp_path):
    source = "class Box:\n    def method(self, a):\n        return 1 if a else 2\n"
    out = _report(tmp_path, source, "--max-complexity", "1")
    assert "Box.method" in out


def test_a_missing_folder_is_a_clear_error(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "nope")], capture_output=True, text=True, check=False
    )
    assert done.returncode != 0 and "no such file or folder" in done.stderr
