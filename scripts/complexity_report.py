"""List the functions that are too long or too branchy to change safely.

A function is listed when its body is over ``--max-lines`` lines (default 60) or its cyclomatic
complexity (radon's measure: one plus each branch, loop, boolean operator and ``except``) is over
``--max-complexity`` (default 15). Run it before and after a refactor to compare:

    python scripts/complexity_report.py kip_lab widgets
    python scripts/complexity_report.py kip_lab/share --max-lines 40

Needs radon (``pip install radon``). Exits 0 always: it is a report, not a gate.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

try:
    from radon.visitors import ComplexityVisitor, Function
except ImportError:  # pragma: no cover - a clear message instead of a traceback
    sys.exit("complexity_report needs radon: python -m pip install radon")


@dataclass(frozen=True)
class Finding:
    path: str
    name: str
    line: int
    lines: int
    complexity: int


def _functions(path: Path) -> list[Finding]:
    visitor = ComplexityVisitor.from_code(path.read_text(encoding="utf-8"))
    found: list[Finding] = []

    def add(block: Function, prefix: str = "") -> None:
        name = f"{prefix}{block.name}"
        found.append(Finding(str(path), name, block.lineno, block.endline - block.lineno + 1, block.complexity))
        for inner in block.closures:
            add(inner, f"{name}.")

    for function in visitor.functions:
        add(function)
    for cls in visitor.classes:
        for method in cls.methods:
            add(method, f"{cls.name}.")
    return found


def _python_files(roots: list[str]) -> list[Path]:
    files: list[Path] = []
    for root in roots:
        path = Path(root)
        if not path.exists():
            sys.exit(f"complexity_report: no such file or folder: {root}")
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["kip_lab", "widgets"], help="files or folders to scan")
    parser.add_argument("--max-lines", type=int, default=60, help="list functions longer than this (default 60)")
    parser.add_argument("--max-complexity", type=int, default=15, help="list functions above this (default 15)")
    args = parser.parse_args(argv)

    findings = [
        f
        for path in _python_files(args.paths)
        for f in _functions(path)
        if f.lines > args.max_lines or f.complexity > args.max_complexity
    ]
    findings.sort(key=lambda f: (-f.complexity, -f.lines, f.path, f.line))
    width = max((len(f"{f.path}:{f.line}") for f in findings), default=10)
    print(f"{'where':<{width}}  {'cc':>4}  {'lines':>5}  function")
    for f in findings:
        print(f"{f.path + ':' + str(f.line):<{width}}  {f.complexity:>4}  {f.lines:>5}  {f.name}")
    long_ = sum(f.lines > args.max_lines for f in findings)
    branchy = sum(f.complexity > args.max_complexity for f in findings)
    print(
        f"\n{len(findings)} functions: {long_} over {args.max_lines} lines, "
        f"{branchy} over complexity {args.max_complexity}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
