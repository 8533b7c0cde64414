"""The Binder setup (``binder/``), checked as closely as can be done offline.

mybinder builds an image with repo2docker: the Debian/Ubuntu packages of ``apt.txt``, Python of
``runtime.txt``, ``pip install -r requirements.txt``, then ``postBuild``. The fast tests read
those files; the slow one does what repo2docker does for Python — a clean virtualenv (no system
site-packages), the pinned requirements from the package registry, postBuild's install, then
executes ``tests/data/binder_smoke.ipynb`` (the engine, frames, Parquet, an offline chart, a
diagram, the widgets) with ``jupyter nbconvert --execute`` in that virtualenv. It is skipped
only when the registry cannot be reached.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"
SMOKE_NOTEBOOK = ROOT / "tests" / "data" / "binder_smoke.ipynb"
# the extra a Binder user needs: the notebooks (it takes in the pictures, notebook 14's Spark and
# notebook 17's wire-protocol front door)
BINDER_EXTRAS = ("lab",)
NOTEBOOK_SCRIPTS = ROOT / "notebooks" / ".scripts"  # the notebooks' code, as py:percent scripts
ALSO_PINNED = ("pyarrow",)  # trace export to Parquet (the `spark` and `test` extras)


def pins() -> dict[str, Requirement]:
    found = {}
    for line in (BINDER / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            found[canonicalize_name(requirement.name)] = requirement
    return found


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def needed() -> dict[str, Requirement]:
    """The project's own requirements plus those of the Binder extras (self-references expanded)."""
    meta = project()
    extras = meta["optional-dependencies"]
    wanted: dict[str, Requirement] = {}
    todo = list(meta["dependencies"]) + [r for extra in BINDER_EXTRAS for r in extras[extra]]
    while todo:
        requirement = Requirement(todo.pop())
        name = canonicalize_name(requirement.name)
        if name == canonicalize_name(meta["name"]):
            todo += [r for extra in requirement.extras for r in extras[extra]]
            continue
        if name in wanted:
            requirement.specifier &= wanted[name].specifier
        wanted[name] = requirement
    return wanted


# ------------------------------------------------------------------------------ the files
def test_requirements_pin_every_dependency_of_the_binder_extras() -> None:
    pinned = pins()
    for name, requirement in pinned.items():
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"{name}: pin an exact version, not {requirement.specifier}"
    missing = set(needed()) - set(pinned)
    assert not missing, f"binder/requirements.txt does not pin {sorted(missing)}"
    for name in ALSO_PINNED:
        assert canonicalize_name(name) in pinned


def test_pins_satisfy_the_projects_own_ranges() -> None:
    pinned = pins()
    for name, requirement in needed().items():
        version = next(iter(pinned[name].specifier)).version
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{name}=={version} is outside pyproject's {requirement.specifier}"
        )


def notebook_imports() -> set[str]:
    """The top-level modules the notebooks import, but the standard library's and kip_lab's own."""
    import ast

    found: set[str] = set()
    for script in NOTEBOOK_SCRIPTS.glob("*.py"):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name not in ("kip_lab", "widgets")}


def test_binder_pins_every_package_the_notebooks_import() -> None:
    """A notebook that imports a package Binder does not install fails there (17 did, without `wire`)."""
    import importlib.metadata

    provided_by = importlib.metadata.packages_distributions()
    imports = notebook_imports()
    assert {"pandas", "altair", "IPython", "confluent_kafka"} <= imports
    pinned = pins()
    missing = {
        module: provided_by.get(module)
        for module in imports
        if not any(canonicalize_name(d) in pinned for d in provided_by.get(module, [module]))
    }
    assert not missing, f"binder/requirements.txt does not pin what the notebooks import: {missing}"


def test_the_lab_extra_takes_in_everything_the_notebooks_run() -> None:
    """kip_lab's own modules the notebooks use need extras: Spark (14), the wire codec (17)."""
    names = set(needed())
    assert {"pyspark", "kio", "confluent-kafka", "jupyterlab", "graphviz"} <= names


def test_package_is_installed_by_postbuild() -> None:
    post_build = BINDER / "postBuild"
    assert os.access(post_build, os.X_OK), "repo2docker runs postBuild only when it is executable"
    text = post_build.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    assert re.search(r"pip install .*--no-deps.* -e \.", text)


def test_apt_packages() -> None:
    lines = [line.split("#", 1)[0].strip() for line in (BINDER / "apt.txt").read_text().splitlines()]
    packages = {line for line in lines if line}
    assert packages == {"graphviz", "openjdk-17-jre-headless"}


def test_runtime_python_meets_requires_python() -> None:
    runtime = (BINDER / "runtime.txt").read_text().strip()
    match = re.fullmatch(r"python-(\d+\.\d+)", runtime)
    assert match, runtime
    assert SpecifierSet(project()["requires-python"]).contains(Version(match.group(1) + ".0"))


# ------------------------------------------------------------------------------ a Binder-like build
def index_url() -> str:
    """The index pip would use here: PIP_INDEX_URL, pip's own configuration, or pip's default."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    configured = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.index-url"], capture_output=True, text=True
    )
    if configured.returncode == 0 and configured.stdout.strip():
        return configured.stdout.strip()
    from pip._internal.models.index import PyPI

    return PyPI.simple_url


def registry_unreachable() -> str | None:
    """Why the package registry cannot be used, or None when it answers."""
    url = index_url().rstrip("/") + "/pip/"
    cafile = os.environ.get("PIP_CERT") or None
    context = ssl.create_default_context(cafile=cafile if cafile and Path(cafile).exists() else None)
    try:
        with urllib.request.urlopen(url, timeout=15, context=context) as response:
            response.read(1)
    except OSError as error:  # URLError, timeouts, refused connections
        return f"the package registry cannot be reached ({url}: {error})"
    return None


def run(command: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command)} failed ({done.returncode}):\n{output[-4000:]}"
    return output


def repo_copy(target: Path) -> Path:
    """The repository as repo2docker sees it: the files, without the local venv, caches or builds."""
    shutil.copytree(
        ROOT,
        target,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", "*.egg-info", ".pytest_cache", ".ruff_cache", ".hypothesis", "build", "dist"
        ),
    )
    return target


@pytest.mark.slow
def test_binder_environment_runs_a_notebook(tmp_path: Path) -> None:
    why = registry_unreachable()
    if why:
        pytest.skip(why)
    repo = repo_copy(tmp_path / "repo")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_dir = venv / "bin"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX") and not k.startswith("JUPYTER")
    }
    outer_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([str(bin_dir)] + [p for p in env.get("PATH", "").split(os.pathsep) if p != outer_bin])
    env["VIRTUAL_ENV"] = str(venv)
    home = tmp_path / "jupyter-home"  # nothing from this machine's Jupyter setup
    env.update(
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        IPYTHONDIR=str(home / "ipython"),
        JUPYTER_PLATFORM_DIRS="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    python = str(bin_dir / "python")

    # repo2docker: pip install -r binder/requirements.txt (no byte-compiling: only the test's time)
    run(
        [python, "-m", "pip", "install", "-q", "--no-compile", "-r", "binder/requirements.txt"],
        cwd=repo,
        env=env,
        timeout=400,
    )
    # repo2docker: binder/postBuild, from the repository root, with the environment's pip first on PATH
    post_build = run(["bash", "binder/postBuild"], cwd=repo, env=env, timeout=300)
    assert "postBuild: kip_lab" in post_build
    run([python, "-m", "pip", "check"], cwd=repo, env=env, timeout=120)
    frozen = run([python, "-m", "pip", "freeze"], cwd=repo, env=env, timeout=120)
    installed = {
        canonicalize_name(name): version
        for name, version in re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)$", frozen, flags=re.M)
    }
    for name, requirement in pins().items():
        assert installed.get(name) == next(iter(requirement.specifier)).version, f"{name} not installed as pinned"

    workdir = tmp_path / "run"
    workdir.mkdir()
    shutil.copy(repo / "tests" / "data" / SMOKE_NOTEBOOK.name, workdir)
    run(
        [
            str(bin_dir / "jupyter"),
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--ExecutePreprocessor.timeout=240",
            "--ExecutePreprocessor.kernel_name=python3",
            "--output",
            "executed.ipynb",
            SMOKE_NOTEBOOK.name,
        ],
        cwd=workdir,
        env=env,
        timeout=300,
    )
    executed = json.loads((workdir / "executed.ipynb").read_text())
    text = "".join("".join(out.get("text", "")) for cell in executed["cells"] for out in cell.get("outputs", []))
    assert f"prefix: {venv}" in text, "the notebook ran in another Python environment"
    assert f"kip_lab: {repo / 'kip_lab'}" in text, "kip_lab was not the copy postBuild installed"
    assert "basic:" in text and "parquet round trip:" in text and "chart svg:" in text
    errors = [out for cell in executed["cells"] for out in cell.get("outputs", []) if out["output_type"] == "error"]
    assert not errors
    last = executed["cells"][-1]["outputs"]
    assert any("application/vnd.jupyter.widget-view+json" in out.get("data", {}) for out in last)
