"""The teaching notebooks: paired with their py:percent scripts, stored with small outputs, and
re-run by nbval, which checks every cell marked ``# NBVAL_CHECK_OUTPUT`` (each notebook's closing
summary and its step-by-step case-study cells) against the stored output.

Needs the notebook tooling (jupytext, nbval, ipykernel, ipywidgets, pandas, altair, vl-convert,
graphviz): the tests skip, naming what is missing, where it is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
SANITIZE = ROOT / "nbval_sanitize.cfg"
CHECK = "# NBVAL_CHECK_OUTPUT"
MAX_BYTES = 1_500_000
NBVAL_TIMEOUT_S = 1500


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _code_cells(notebook: dict) -> list[dict]:
    return [c for c in notebook["cells"] if c["cell_type"] == "code"]


def _source(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def test_the_notebooks_are_there() -> None:
    names = [p.stem for p in NOTEBOOKS]
    assert names == [
        "00_tour",
        "01_joins",
        "02_failures",
        "03_partitions_and_topics",
        "04_static_membership",
        "05_consumer_state_machine",
        "06_assignors",
        "07_eager_cooperative_848",
        "08_online_migration",
        "09_upgrade_path",
        "10_share_groups_basics",
        "11_share_state_writes",
        "12_poison_messages",
        "13_share_coordinator_failover",
        "14_protocol_comparison_at_scale",
        "15_kafka_vs_kip",
    ]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_and_its_py_percent_script_are_in_sync(notebook: Path) -> None:
    jupytext = pytest.importorskip("jupytext")
    script = notebook.with_suffix(".py")
    assert script.exists(), f"{script.name} is missing: run `jupytext --sync {notebook.relative_to(ROOT)}`"
    from_ipynb = [(c.cell_type, c.source) for c in jupytext.read(notebook).cells]
    from_py = [(c.cell_type, c.source) for c in jupytext.read(script, fmt="py:percent").cells]
    assert from_py == from_ipynb, f"{notebook.name} and {script.name} differ: run `jupytext --sync`"


def test_every_script_in_notebooks_is_a_pair() -> None:
    scripts = sorted(NOTEBOOK_DIR.glob("*.py"))
    assert [s.stem for s in scripts] == [n.stem for n in NOTEBOOKS]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_stored_executed_small_and_offline(notebook: Path) -> None:
    nb = _load(notebook)
    cells = _code_cells(nb)
    # Charts render offline: JupyterLab draws Vega-Lite v5 itself (no CDN) with the mimetype renderer.
    first = _source(cells[0])
    assert "import altair as alt" in first and 'alt.renderers.enable("mimetype")' in first
    # Committed with outputs, none of them an error, in order.
    counts = [c["execution_count"] for c in cells]
    assert all(counts), f"{notebook.name} has cells that were not executed"
    assert counts == list(range(1, len(cells) + 1)), f"{notebook.name} was not run top to bottom"
    errors = [o for c in cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, f"{notebook.name} stores an error: {errors[0].get('ename')}"
    # At least one static picture GitHub can show.
    svgs = [o for c in cells for o in c.get("outputs", []) if "image/svg+xml" in o.get("data", {})]
    assert svgs, f"{notebook.name} stores no static SVG"
    assert notebook.stat().st_size < MAX_BYTES, f"{notebook.name} is {notebook.stat().st_size} bytes"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_ends_with_a_checked_plain_text_summary(notebook: Path) -> None:
    last = _code_cells(_load(notebook))[-1]
    assert _source(last).startswith(CHECK), f"{notebook.name}: the last code cell must start with {CHECK}"
    outputs = last.get("outputs", [])
    assert outputs and all(o["output_type"] == "stream" and o["name"] == "stdout" for o in outputs)


def test_readme_lists_every_notebook() -> None:
    readme = (NOTEBOOK_DIR / "README.md").read_text(encoding="utf-8")
    for notebook in NOTEBOOKS:
        assert f"({notebook.name})" in readme, f"notebooks/README.md does not link {notebook.name}"


@pytest.mark.slow
def test_notebooks_pass_nbval() -> None:
    """Re-run every notebook in a fresh kernel; checked cells must reproduce their stored output."""
    for module in ("nbval", "ipykernel", "ipywidgets", "jupytext", "pandas", "altair", "vl_convert", "graphviz"):
        pytest.importorskip(module)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--nbval-lax",
        "--nbval-sanitize-with",
        str(SANITIZE.relative_to(ROOT)),
        "-p",
        "no:cacheprovider",
        "-q",
        *[str(n.relative_to(ROOT)) for n in NOTEBOOKS],
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    started = time.monotonic()
    run = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=NBVAL_TIMEOUT_S, check=False
    )
    elapsed = time.monotonic() - started
    print(f"nbval over {len(NOTEBOOKS)} notebooks: {elapsed:.1f} s")
    assert run.returncode == 0, f"nbval failed after {elapsed:.1f} s:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
