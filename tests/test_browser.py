"""The stepper in a real browser: JupyterLab, headless Chromium, one click on "Step ▶".

A JupyterLab server is started on a free loopback port (with a token) in a temporary folder
holding ``tests/data/browser_stepper.ipynb``; Debian's Chromium, driven by Playwright, opens the
notebook, runs all cells from the Run menu, reads the stepper's counter, clicks Step and
checks the page: the counter moved, the timeline was drawn again by JupyterLab's own Vega
renderer, the diagram is an SVG with the current state filled, and no widget failed to
display. Every request the page makes to anywhere but the local server is refused and
reported: the notebook must work offline.

Chromium is Debian's (``apt-get install chromium``, see ``scripts/system-deps.sh``), not a
browser downloaded by Playwright; ``KIP_LAB_CHROMIUM`` points elsewhere. On failure the page
is saved as a screenshot and HTML next to the server log in pytest's temporary folder;
``KIP_LAB_BROWSER_SCREENSHOT=/tmp/stepper.png`` saves one on success too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("jupyterlab", reason="JupyterLab is not installed")
pytest.importorskip("ipywidgets", reason="ipywidgets is not installed")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "tests" / "data" / "browser_stepper.ipynb"
CHROMIUM = os.environ.get("KIP_LAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_S = 60
UI_TIMEOUT_MS = 45_000
# every http(s) address but the local server's; matched by the browser side, so local requests are not slowed
NOT_LOCAL = re.compile(r"^(?!https?://(?:127\.0\.0\.1|localhost)[:/])https?://")
GUARD_PROBE = "http://kip-lab-offline-check.invalid/probe"
COUNTER = re.compile(r"step (\d+)\s+of (\d+)")
HIGHLIGHT = "#ffd54f"  # kip_lab.viz.dot.CURRENT_FILL
LAB_SETTINGS = {  # JupyterLab user settings: start the notebook's kernel without asking, never ask about news
    "@jupyterlab/notebook-extension/tracker": {"autoStartDefaultKernel": True},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false"},
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyter_lab(workdir: Path) -> Iterator[tuple[str, str]]:
    """A JupyterLab server on 127.0.0.1 serving ``workdir``: yields (base url, token); stopped after."""
    port, token = free_port(), secrets.token_hex(16)
    home = workdir.parent / "jupyter-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "IPYTHON"))}
    env.update(
        {
            # nothing from the user's Jupyter setup: config, kernels, settings, saved workspaces
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
            "IPYTHONDIR": str(home / "ipython"),
            "JUPYTER_PLATFORM_DIRS": "1",
            # the kernel imports kip_lab and widgets from this checkout, installed or not
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        }
    )
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.allow_root=True",  # CI runs as root
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={workdir}",
        # no announcements, update checks or extension manager: nothing is fetched from outside
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    for plugin, values in LAB_SETTINGS.items():
        path = home / "settings" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    log_path = workdir.parent / "jupyter-server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if server.poll() is not None:
                raise AssertionError(f"JupyterLab exited ({server.returncode}):\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"JupyterLab did not start in {SERVER_START_S} s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.25)
        yield base, token
    finally:
        # the server leads its own process group (start_new_session), its kernels included
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)


def wait_for_kernel(
    page: sync_api.Page, base: str, token: str, notebook: str, timeout_s: float = UI_TIMEOUT_MS / 1000
) -> None:
    """Until the server has an idle kernel for the notebook's session (JupyterLab starts it on opening)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=5) as response:
            sessions = json.load(response)
        if any(
            s.get("path", "").endswith(notebook) and (s.get("kernel") or {}).get("execution_state") == "idle"
            for s in sessions
        ):
            return
        assert time.monotonic() < deadline, f"no idle kernel for {notebook} after {timeout_s} s: {sessions}"
        page.wait_for_timeout(250)  # not time.sleep: Playwright handles the page's events meanwhile


def counter(page: sync_api.Page) -> tuple[int, int]:
    text = page.locator(".widget-html-content").filter(has_text=COUNTER).first.inner_text()
    match = COUNTER.search(text)
    assert match, text
    return int(match.group(1)), int(match.group(2))


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")
@pytest.mark.skipif(not shutil.which("dot"), reason="no graphviz `dot` to draw the diagram (apt-get install graphviz)")
def test_stepper_steps_in_jupyterlab(tmp_path: Path) -> None:
    started = time.monotonic()
    workdir = tmp_path / "notebooks"
    workdir.mkdir()
    shutil.copy(NOTEBOOK, workdir / NOTEBOOK.name)
    refused: list[str] = []

    def refuse(route: sync_api.Route) -> None:
        refused.append(route.request.url)
        route.abort()

    with jupyter_lab(workdir) as (base, token), sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
        )
        context.set_default_timeout(UI_TIMEOUT_MS)
        context.route(NOT_LOCAL, refuse)
        page = context.pages[0] if context.pages else context.new_page()
        try:
            page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?token={token}", wait_until="domcontentloaded")
            page.locator(".jp-NotebookPanel .jp-Notebook").first.wait_for()
            wait_for_kernel(page, base, token, NOTEBOOK.name)  # the page says "idle" before it has a kernel
            page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for()

            # Run → Run All Cells, as a reader would
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()

            step_button = page.locator("button.jupyter-button", has_text="Step ▶")
            step_button.wait_for()
            timeline = page.locator(".widget-output .vega-embed")
            timeline.locator("canvas, svg").first.wait_for()
            diagram = page.locator(".widget-html-content svg").filter(has=page.locator("g[id^='state:']")).first
            diagram.wait_for()

            before, horizon = counter(page)
            assert 0 < before < horizon, (before, horizon)
            assert timeline.count() == 1
            timeline.evaluate("el => el.setAttribute('data-kip-before-step', '')")

            step_button.click()

            page.wait_for_function(
                "([before]) => [...document.querySelectorAll('.widget-html-content')]"
                ".some(el => new RegExp(`step ${before + 1}\\\\s+of`).test(el.innerText))",
                arg=[before],
            )
            assert counter(page) == (before + 1, horizon)
            redrawn = page.locator(".widget-output .vega-embed:not([data-kip-before-step])")
            redrawn.locator("canvas, svg").first.wait_for()
            assert timeline.count() == 1, "the step replaced the chart instead of adding one"

            svg = diagram.inner_html()
            assert "state:" in svg and HIGHLIGHT in svg, "the diagram shows no current state"
            text = page.locator("body").inner_text()
            assert "Error displaying widget" not in text
            assert "Traceback" not in text, "a cell or a widget callback failed"
            assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
            assert not refused, f"the page tried to fetch from outside: {refused}"
            # and the guard works: a request to a reserved, never-resolving name is caught and refused
            page.evaluate(f"fetch('{GUARD_PROBE}').catch(() => null)")
            deadline = time.monotonic() + 5
            while not refused and time.monotonic() < deadline:
                page.wait_for_timeout(100)
            assert refused == [GUARD_PROBE], refused
            if os.environ.get("KIP_LAB_BROWSER_SCREENSHOT"):  # a picture to look at, when asked for
                page.screenshot(path=os.environ["KIP_LAB_BROWSER_SCREENSHOT"], full_page=True)
        except Exception:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
                (tmp_path / "failure.html").write_text(page.content())
            raise
        finally:
            context.close()
    assert time.monotonic() - started < 90, "the browser test should stay under 90 s"
