"""Run every benchmark: ``python -m benchmarks`` (``--quick`` for a smoke run).

Exits non-zero when any benchmark misses one of its targets.
"""

from __future__ import annotations

import importlib
import sys

# In the order they run; each is ``benchmarks.<name>`` with a ``main(argv) -> exit status``.
BENCHMARKS = tuple(
    importlib.import_module(f"benchmarks.{name}")
    for name in (
        "bench_assignors",
        "bench_client_assignors",
        "bench_classic",
        "bench_classic_lab",
        "bench_coordinator",
        "bench_lab",
        "bench_pipeline",
        "bench_review",
        "bench_scaling",
        "bench_share",
        "bench_share_lab",
        "bench_widgets",
        "bench_wire",
    )
)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    status = 0
    for bench in BENCHMARKS:
        print(f"\n## {bench.__name__}")
        status |= bench.main(args)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
