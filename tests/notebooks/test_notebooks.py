"""The teaching notebooks: a course in order, paired with their py:percent scripts (kept in
``notebooks/.scripts``, out of the learner's file browser), stored with small outputs whose
pictures show before anything runs, citing only what a reader can follow, and re-run by nbval,
which checks every cell tagged ``nbval-check-output`` (each notebook's closing summary and its
step-by-step case-study cells) against the stored output. Tags live in the cell's metadata, out
of the learner's code (JupyterLab shows them in the property inspector).

Every number the notebooks' words state is produced by a cell or asserted by one
(``test_every_number_in_the_words_is_produced_or_asserted``): a sentence is either formatted
from the run (``display(Markdown(...))``) or followed by a collapsed cell tagged ``claims``
that asserts it, so an engine change that makes a sentence false fails nbval.

Needs the notebook tooling (jupytext, nbval, ipykernel, ipywidgets, pandas, altair, vl-convert,
graphviz): the tests skip, naming what is missing, where it is not installed.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
SCRIPT_DIR = NOTEBOOK_DIR / ".scripts"  # jupytext pairs (see [tool.jupytext] in pyproject.toml)
TOUR = NOTEBOOK_DIR / "00_tour.ipynb"
SANITIZE = ROOT / "nbval_sanitize.cfg"
CHECK = "nbval-check-output"  # nbval's cell tag: compare this cell's output with the stored one
CLAIMS = "claims"  # a cell asserting what the words before it state; collapsed in JupyterLab
MAX_BYTES = 1_800_000  # a notebook with a stepper also stores its first view (80-90 kB of SVG images)
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


def course() -> list[str]:
    """The course's order: the notebooks the tour's table links, top to bottom."""
    tour = "".join(_source(c) for c in _load(TOUR)["cells"] if c["cell_type"] == "markdown")
    return re.findall(r"^\| \[(\d\d_\w+)\]\(\1\.ipynb\) \|", tour, re.M)


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
        "16_scale_and_batching",
        "17_real_clients",
        "18_design_review",
    ]


def test_the_tour_links_every_notebook_in_order() -> None:
    """Adding a notebook to the course is a row in the tour's table (and the previous one's Next:)."""
    assert course() == [p.stem for p in NOTEBOOKS]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_notebook_ends_with_next(notebook: Path) -> None:
    order = course()
    following = order[order.index(notebook.stem) + 1] if notebook.stem != order[-1] else order[0]
    last = _load(notebook)["cells"][-1]
    text = _source(last)
    assert last["cell_type"] == "markdown" and text.startswith("**Next:**"), f"{notebook.name} must end with Next:"
    assert f"]({following}.ipynb)" in text, f"{notebook.name}'s Next: should link {following}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_and_its_py_percent_script_are_in_sync(notebook: Path) -> None:
    jupytext = pytest.importorskip("jupytext")
    script = SCRIPT_DIR / f"{notebook.stem}.py"
    assert script.exists(), f"{script.name} is missing: run `jupytext --sync {notebook.relative_to(ROOT)}`"
    from_ipynb = [(c.cell_type, c.source) for c in jupytext.read(notebook).cells]
    from_py = [(c.cell_type, c.source) for c in jupytext.read(script, fmt="py:percent").cells]
    assert from_py == from_ipynb, f"{notebook.name} and {script.name} differ: run `jupytext --sync`"


def test_every_script_is_a_pair_and_none_is_in_the_learners_view() -> None:
    scripts = sorted(SCRIPT_DIR.glob("*.py"))
    assert [s.stem for s in scripts] == [n.stem for n in NOTEBOOKS]
    assert not list(NOTEBOOK_DIR.glob("*.py")), "scripts belong in notebooks/.scripts, out of the file browser"
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'formats = "ipynb,.scripts//py:percent"' in config


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_stored_executed_small_and_offline(notebook: Path) -> None:
    nb = _load(notebook)
    cells = _code_cells(nb)
    # Charts render offline: JupyterLab draws Vega-Lite v5 itself (no CDN); kip_lab's renderer adds a
    # PNG to each, for GitHub and so that JupyterLab does not add one (and mark the notebook modified).
    first = _source(cells[0])
    assert "import altair as alt" in first and "notebook_charts()" in first
    charts = [o for c in cells for o in c.get("outputs", []) if "application/vnd.vegalite.v5+json" in o.get("data", {})]
    assert all("image/png" in o["data"] for o in charts), f"{notebook.name} stores a chart without its PNG"
    # Committed with outputs, none of them an error, in order.
    counts = [c["execution_count"] for c in cells]
    assert all(counts), f"{notebook.name} has cells that were not executed"
    assert counts == list(range(1, len(cells) + 1)), f"{notebook.name} was not run top to bottom"
    errors = [o for c in cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, f"{notebook.name} stores an error: {errors[0].get('ename')}"
    # At least one static picture, and every one stored as a PNG beside its SVG: JupyterLab draws
    # no SVG in a notebook it does not trust (a clone, Binder), GitHub draws both.
    outputs = [o for c in cells for o in c.get("outputs", [])]
    pictures = [o for o in outputs if "image/svg+xml" in o.get("data", {}) or "image/png" in o.get("data", {})]
    assert pictures, f"{notebook.name} stores no static picture"
    svg_only = [o for o in pictures if "image/png" not in o["data"]]
    assert not svg_only, f"{notebook.name} stores {len(svg_only)} SVG without a PNG (use kip_lab.viz.picture)"
    assert not [o for o in outputs if "IPython.core.display.SVG object" in str(o.get("data", {}).get("text/plain"))]
    assert notebook.stat().st_size < MAX_BYTES, f"{notebook.name} is {notebook.stat().st_size} bytes"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_opens_unmodified_in_this_kernel(notebook: Path) -> None:
    """JupyterLab rewrites kernelspec and language_info from the kernel on opening: stored equal, nothing changes."""
    metadata = _load(notebook)["metadata"]
    assert metadata["kernelspec"] == {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    info = metadata["language_info"]
    assert info["name"] == "python" and info["version"] == platform.python_version(), (
        f"{notebook.name} was stored by Python {info['version']}; re-execute it with this kernel "
        f"({platform.python_version()})"
    )


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_ends_with_a_checked_plain_text_summary(notebook: Path) -> None:
    last = _code_cells(_load(notebook))[-1]
    assert CHECK in _tags(last), f"{notebook.name}: the last code cell must be tagged {CHECK}"
    outputs = last.get("outputs", [])
    assert outputs and all(o["output_type"] == "stream" and o["name"] == "stdout" for o in outputs)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_test_markers_in_the_learners_code(notebook: Path) -> None:
    """nbval and the claims are told by cell tags, never by comments in the code a learner reads."""
    for cell in _code_cells(_load(notebook)):
        assert "NBVAL_" not in _source(cell), f"{notebook.name}: use the cell tag, not a NBVAL_ comment"
        if CLAIMS in _tags(cell):
            assert cell["metadata"].get("jupyter", {}).get("source_hidden"), "a claims cell is collapsed"
            assert "assert " in _source(cell) and not cell.get("outputs"), "a claims cell asserts, silently"


# ------------------------------------------------------------------------------ claims are code
# A number in a notebook's words: digits standing alone (not part of a name such as KIP-848, RC3,
# foo-2 or 00_tour), with thousands separated by commas or thin spaces (10,010 or 10 011).
NUMBER = re.compile(r"(?<![\w.\-/#])\d{1,3}(?:[,\u2009\u202f ]\d{3})+(?![\w\-])|(?<![\w.\-/#])\d+(?:\.\d+)?(?![\w\-])")
# What is not a claim about a run: code and links, numbered headings and lists, notebook
# numbers (02, "notebook 15"), Kafka versions, dates, and quotations (*"..."*: a KIP's own example).
NOT_CLAIMS = re.compile(
    r"```.*?```|`[^`]*`|\]\([^)]*\)|https?://\S+|^\s*#*\s*\d+\s*[.·]\s|\b0\d\b|notebooks? \d\d\b"
    r"|Kafka \d+\.\d+(?: to \d+\.\d+)?|\bKIP-\d+|[A-Z][a-z]+ \d{4}\b|\*\"[^\"]*\"\*",
    re.S | re.M,
)


def _number(text: str) -> str:
    return re.sub(r"[,_\u2009\u202f ]", "", text)


def _numbers(text: str) -> set[str]:
    found = {_number(n) for n in NUMBER.findall(re.sub(r"(?<=\d)_(?=\d)", "", text))}
    # milliseconds are spoken as seconds: 45000 in the code is "45 s" in the words
    seconds = {f"{int(n) / 1000:g}" for n in found if n.isdigit() and int(n) >= 1000 and int(n) % 100 == 0}
    return found | seconds


def _outputs_text(cell: dict) -> str:
    parts = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        for value in (output.get("text"), data.get("text/plain"), data.get("text/markdown"), data.get("text/html")):
            parts.append(value if isinstance(value, str) else "".join(value or []))
    return "\n".join(parts)


def unbacked_numbers(notebook: dict) -> list[str]:
    """The numbers the markdown states that no code cell sets, produces (output) or asserts."""
    backed: set[str] = set()
    for cell in _code_cells(notebook):
        backed |= _numbers(_source(cell)) | _numbers(_outputs_text(cell))
    missing = []
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            words = NOT_CLAIMS.sub(" ", _source(cell))
            for match in NUMBER.finditer(words):
                if _number(match.group()) not in backed:
                    missing.append(" ".join(words[max(0, match.start() - 50) : match.end() + 15].split()))
    return missing


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_number_in_the_words_is_produced_or_asserted(notebook: Path) -> None:
    missing = unbacked_numbers(_load(notebook))
    assert not missing, (
        f"{notebook.name} states numbers no cell produces or asserts (format the sentence from the run, or "
        f"assert it in a collapsed cell tagged {CLAIMS!r}):\n" + "\n".join(missing)
    )


def test_a_claim_the_cells_do_not_back_fails() -> None:
    cells = [
        {"cell_type": "code", "source": "lab.create_topic('foo', 3)", "metadata": {}, "outputs": []},
        {"cell_type": "markdown", "source": "foo has 3 partitions; A gets foo-2 at 10,010 ms (notebook 02)."},
    ]
    (missing,) = unbacked_numbers({"cells": cells})
    assert "10,010 ms" in missing
    cells.append({"cell_type": "code", "source": "assert got_at == 10_010", "metadata": {}, "outputs": []})
    assert unbacked_numbers({"cells": cells}) == []
    cells[0]["source"] = "lab.create_topic('foo', 4)"
    (missing,) = unbacked_numbers({"cells": cells})
    assert missing.startswith("foo has 3 partitions")


def test_readme_says_where_to_start() -> None:
    readme = (NOTEBOOK_DIR / "README.md").read_text(encoding="utf-8")
    assert "(00_tour.ipynb)" in readme


REAL_CLIENTS = NOTEBOOK_DIR / "17_real_clients.ipynb"


def nbval_notebooks() -> list[Path]:
    """Every notebook, but the real-clients one only where its clients can run (it prints a skip
    message instead of its checked facts without confluent-kafka and the wire codec kio)."""
    import importlib.util

    real = all(importlib.util.find_spec(name) for name in ("confluent_kafka", "kio"))
    return [n for n in NOTEBOOKS if real or n != REAL_CLIENTS]


@pytest.mark.slow
def test_notebooks_pass_nbval() -> None:
    """Re-run every notebook in a fresh kernel; checked cells must reproduce their stored output."""
    for module in ("nbval", "ipykernel", "ipywidgets", "jupytext", "pandas", "altair", "vl_convert", "graphviz"):
        pytest.importorskip(module)
    notebooks = nbval_notebooks()
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
        *[str(n.relative_to(ROOT)) for n in notebooks],
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    started = time.monotonic()
    run = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=NBVAL_TIMEOUT_S, check=False
    )
    elapsed = time.monotonic() - started
    print(f"nbval over {len(notebooks)} notebooks: {elapsed:.1f} s")
    assert run.returncode == 0, f"nbval failed after {elapsed:.1f} s:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"


# ------------------------------------------------------------------------------ references
# What a reader cannot follow: line numbers and section numbers of private working notes, and
# the words for those notes. ("seed" alone is fine: it is also the RNG's seed.)
PRIVATE = re.compile(r"\bseed (?:L\d|0\d\d\b)|(?<![.\w])dige" + r"st\b(?!\()|invent" + r"ory|\u00a7", re.IGNORECASE)
# Rule names of the forms the project uses (RC3, SM1, SC-12a, R-SL-02, D-01, SP-2, A22); each must
# be defined in docs/rules.md or docs/decisions.md (first column of their tables).
RULE_ID = re.compile(r"\b(RC\d{1,2}|SM\d{1,2}|R-[A-Z]{2}-\d{2}|[A-Z]{1,3}-\d{2}[a-z]?|[A-Z]{2,3}-\d[a-z]?|A\d{2})\b")
NOT_RULES = re.compile(r"^(KIP|UTF|CRC|SHA|JDK|ISO|RFC)-")
REFERENCE_SOURCES = ("kip_lab", "widgets", "notebooks", "docs", "tests", "benchmarks", "binder", "scripts")


def reference_files() -> list[Path]:
    found = [ROOT / "README.md"]
    for folder in REFERENCE_SOURCES:
        found += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.is_file() and p.suffix in (".py", ".md", ".yaml", ".ipynb", ".txt") and "__pycache__" not in p.parts
        ]
    return sorted(p for p in found if p != Path(__file__).resolve())


def readable_text(path: Path) -> str:
    """What a reader reads in a file: for a notebook its cells and text outputs (not image data)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        return text
    parts = []
    for cell in json.loads(text)["cells"]:
        parts.append(_source(cell))
        for output in cell.get("outputs", []):
            for value in (output.get("text"), output.get("data", {}).get("text/plain")):
                parts.append(value if isinstance(value, str) else "".join(value or []))
    return "\n".join(parts)


def defined_rules() -> set[str]:
    names: set[str] = set()
    for doc in ("docs/rules.md", "docs/decisions.md"):
        names |= set(re.findall(r"^\| ([A-Z]{1,3}\d{1,2}[a-z]?) \|", (ROOT / doc).read_text(encoding="utf-8"), re.M))
    return names


def test_rules_and_decisions_are_defined_once() -> None:
    text = (ROOT / "docs/rules.md").read_text(encoding="utf-8")
    rules = re.findall(r"^\| ([A-Z]{1,3}\d{1,2}[a-z]?) \|", text, re.M)
    assert len(rules) == len(set(rules)) and {"RC1", "RC13", "SM5", "T9", "F6", "R5"} <= set(rules)
    for rule in rules:  # each quotes the KIP by section, or says where Kafka decides instead
        rows = (ROOT / "docs/rules.md").read_text(encoding="utf-8").splitlines()
        row = next(line for line in rows if line.startswith(f"| {rule} |"))
        assert "*" in row or "Kafka `" in row, f"{rule} cites no KIP section and no Kafka method"


def test_no_reference_a_reader_cannot_follow() -> None:
    """No notebook, doc, docstring, test or scenario points at private notes or at an undefined rule name."""
    defined = defined_rules()
    problems = []
    for path in reference_files():
        text = readable_text(path)
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{number}"
            if PRIVATE.search(line):
                problems.append(f"{where}: {PRIVATE.search(line).group(0)!r}")
            for name in RULE_ID.findall(line):
                if not NOT_RULES.match(name) and name not in defined:
                    problems.append(f"{where}: rule name {name!r} is not defined in docs/rules.md or docs/decisions.md")
    assert not problems, "\n".join(problems[:40]) + (f"\n... {len(problems) - 40} more" if len(problems) > 40 else "")

