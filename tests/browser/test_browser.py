"""The notebooks and the stepper in a real browser: JupyterLab, headless Chromium, a 1366 x 768 laptop.

A JupyterLab server is started on a free loopback port (with a token) in a temporary folder;
Debian's Chromium, driven by Playwright, opens pages at a laptop's size (1366 x 768) and checks
what a learner sees:

* every notebook of the course, opened **without running it** (untrusted, as after a clone or on
  Binder), draws every stored picture — static pictures as images, charts by JupyterLab's own
  Vega renderer, the stepper as the picture of its first view — opens unmodified, no output is
  wider than the page, and no diagram label is drawn smaller than ``MIN_LABEL_PX``;
* the course's steppers (00, 01, 05) after *Run All*: the cells after a stepper use the same
  Lab, yet **Step** moves its counter by one and the story line tells that step (checked
  against the kernel's own account of the stepper's run); at the end of the run **Next change**
  and **Step** leave the counter where it is and say so;
* the stepper (``tests/data/browser_stepper.ipynb``, run from the Run menu): its controls, step
  counter, "what just happened" line, step axis, timeline and diagram fit on one screen, the
  records and invariants do not cover the diagram, and Step / Next change / Back / Play-Pause
  move the counter, the step cursor and the highlighted state — each click's view updated
  within ``CLICK_MEDIAN_MS`` (median, measured in the page from the click to the change in the
  DOM).

Every request the page makes to anywhere but the local server is refused and reported: the
notebooks must work offline.

Chromium is Debian's (``apt-get install chromium``, see ``scripts/system-deps.sh``), not a
browser downloaded by Playwright; ``KIP_LAB_CHROMIUM`` points elsewhere. On failure the page
is saved as a screenshot and HTML next to the server log in pytest's temporary folder;
``KIP_LAB_BROWSER_SCREENSHOTS=/tmp/shots`` saves screenshots of every page on success too.
"""

from __future__ import annotations

import ast
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
from typing import Any

import pytest

pytestmark = pytest.mark.slow

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("jupyterlab", reason="JupyterLab is not installed")
pytest.importorskip("ipywidgets", reason="ipywidgets is not installed")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "tests" / "data" / "browser_stepper.ipynb"
COURSE = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LAPTOP = {"width": 1366, "height": 768}
CLICK_MEDIAN_MS = 150
MIN_LABEL_PX = 10  # the smallest diagram label a reader can read at 1366 px
STEPPERS = ("00_tour", "01_joins", "05_consumer_state_machine")  # the course's notebooks with a stepper
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
VEGA_LITE = "application/vnd.vegalite.v5+json"
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
    # every cell in the page (not only those scrolled into view), so the test can count pictures
    "@jupyterlab/notebook-extension/tracker": {"autoStartDefaultKernel": True, "windowingMode": "none"},
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


# Reads the stepper's view in the page: the counter, the step cursor and the highlighted state.
READ_VIEW = r"""() => {
    const counter = [...document.querySelectorAll('.widget-html-content')]
        .map(e => e.innerText).find(t => /step \d+\s+of \d+/.test(t)) || null;
    const cursor = document.querySelector('.kip-step-cursor');
    const lit = [...document.querySelectorAll('.widget-html-content svg g[id^="state:"]')]
        .find(g => g.querySelector('[fill="HIGHLIGHT"]'));
    return {counter, cursor: cursor && cursor.getAttribute('data-step'), state: lit ? lit.id : null};
}""".replace("HIGHLIGHT", HIGHLIGHT)

# Clicks a button and resolves with the milliseconds until each part of the view changed.
TIME_CLICK = (
    "async ([label, waitMs]) => {\n    const read = "
    + READ_VIEW
    + r""";
    const before = read();
    const button = [...document.querySelectorAll('button.jupyter-button')].find(b => b.innerText.trim() === label);
    if (!button) throw new Error('no button ' + label);
    return await new Promise(resolve => {
        const changed = {};
        const t0 = performance.now();
        const check = () => {
            const now = read();
            for (const key of ['counter', 'cursor', 'state'])
                if (!(key in changed) && now[key] !== before[key]) changed[key] = performance.now() - t0;
            const all = 'counter' in changed && 'cursor' in changed && 'state' in changed;
            if (all || performance.now() - t0 > waitMs) {
                observer.disconnect();
                resolve({before, after: now, changed});
            }
        };
        const observer = new MutationObserver(check);
        observer.observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
        setTimeout(check, waitMs + 10);
        button.click();
    });
}"""
)


def shot(page: sync_api.Page, name: str) -> None:
    """A screenshot to look at, when KIP_LAB_BROWSER_SCREENSHOTS names a folder."""
    folder = os.environ.get("KIP_LAB_BROWSER_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


def overflowing_outputs(page: sync_api.Page) -> list[str]:
    """Outputs wider than the notebook's page at this window size (a scroll bar, or cut off)."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.jp-OutputArea-output')]
            .filter(o => o.scrollWidth > o.clientWidth + 2 || o.getBoundingClientRect().right
                         > document.querySelector('.jp-Notebook').getBoundingClientRect().right + 2)
            .map(o => (o.getAttribute('data-mime-type') || '') + ': ' + o.scrollWidth + ' > ' + o.clientWidth)"""
    )


def stored_diagrams(notebook: Path) -> list[tuple[int, float, float]]:
    """(index among the notebook's images, CSS width stored, smallest font in points) of each diagram picture."""
    images = []
    for cell in json.loads(notebook.read_text())["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data and VEGA_LITE not in data:
                images.append(output)
    diagrams = []
    for index, output in enumerate(images):
        if "".join(output["data"].get("text/plain", "")).startswith("diagram:"):
            svg = "".join(output["data"]["image/svg+xml"])
            sizes = [float(size) for size in re.findall(r'font-size="([\d.]+)"', svg)]
            width = output.get("metadata", {}).get("image/png", {}).get("width")
            diagrams.append((index, float(width), min(sizes)))
    return diagrams


def has_stepper(notebook: Path) -> bool:
    outputs = [o for c in json.loads(notebook.read_text())["cells"] for o in c.get("outputs", [])]
    return any(WIDGET_VIEW in o.get("data", {}) for o in outputs)


def stored_pictures(notebook: Path) -> tuple[int, int]:
    """(static pictures, Vega-Lite charts) among the notebook's stored outputs."""
    outputs = [o for c in json.loads(notebook.read_text())["cells"] for o in c.get("outputs", [])]
    charts = sum(1 for o in outputs if VEGA_LITE in o.get("data", {}))  # drawn by Vega (their PNG is for GitHub)
    images = sum(1 for o in outputs if "image/png" in o.get("data", {}) and VEGA_LITE not in o["data"])
    return images, charts


@contextlib.contextmanager
def browser(tmp_path: Path, refused: list[str]) -> Iterator[sync_api.BrowserContext]:
    def refuse(route: sync_api.Route) -> None:
        refused.append(route.request.url)
        route.abort()

    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=LAPTOP,
        )
        context.set_default_timeout(UI_TIMEOUT_MS)
        context.route(NOT_LOCAL, refuse)
        try:
            yield context
        finally:
            context.close()


def stop_kernels(base: str, token: str) -> None:
    """End every notebook session on the server (and its kernel)."""
    with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=5) as response:
        sessions = json.load(response)
    for session in sessions:
        request = urllib.request.Request(f"{base}/api/sessions/{session['id']}?token={token}", method="DELETE")
        urllib.request.urlopen(request, timeout=10).close()


def open_notebook(page: sync_api.Page, base: str, token: str, name: str) -> None:
    """Open one notebook in a fresh workspace (``reset``: no notebook opened before is restored)."""
    page.goto(f"{base}/lab/tree/{name}?reset&token={token}", wait_until="domcontentloaded")
    page.locator(".jp-NotebookPanel .jp-Notebook").first.wait_for()
    wait_for_kernel(page, base, token, name)  # the page says "idle" before it has a kernel
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for()


needs_browser = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"),
    pytest.mark.skipif(not shutil.which("dot"), reason="no graphviz `dot` for the diagrams (apt-get install graphviz)"),
]


@needs_browser[0]
@needs_browser[1]
def test_every_notebook_shows_its_pictures_on_opening_without_running(tmp_path: Path) -> None:
    """Untrusted, never run here: JupyterLab must still draw every stored picture, at a laptop's width."""
    started = time.monotonic()
    workdir = tmp_path / "notebooks"
    workdir.mkdir()
    for notebook in COURSE:
        shutil.copy(notebook, workdir / notebook.name)
    refused: list[str] = []
    problems: list[str] = []
    with jupyter_lab(workdir) as (base, token), browser(tmp_path, refused) as context:
        page = context.pages[0] if context.pages else context.new_page()
        try:
            for notebook in COURSE:
                images, charts = stored_pictures(notebook)
                open_notebook(page, base, token, notebook.name)
                panel = page.locator(".jp-NotebookPanel:visible")
                if images:
                    page.wait_for_function(
                        "n => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) "
                        ".jp-RenderedImage img')].filter(i => i.complete && i.naturalWidth > 0).length >= n",
                        arg=images,
                    )
                if charts:
                    page.wait_for_function(
                        "n => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) "
                        ".jp-RenderedVegaCommon5 .marks, .jp-NotebookPanel:not(.lm-mod-hidden) "
                        ".vega-embed canvas, .jp-NotebookPanel:not(.lm-mod-hidden) .vega-embed svg.marks').length >= n",
                        arg=charts,
                    )
                text = panel.inner_text()
                if "IPython.core.display" in text:
                    problems.append(f"{notebook.name}: an output shows as an object's repr, not a picture")
                if has_stepper(notebook):
                    problems += first_view_problems(page, notebook.name)
                problems += small_labels(page, notebook)
                if re.search(r"Error|error: ", panel.locator(".jp-RenderedVegaCommon5").all_inner_texts().__str__()):
                    problems.append(f"{notebook.name}: a chart failed to render")
                page.wait_for_timeout(300)  # JupyterLab updates the metadata from the kernel's info
                if page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count():
                    problems.append(f"{notebook.name}: opens modified (its stored metadata differs from the kernel's)")
                too_wide = overflowing_outputs(page)
                if too_wide:
                    problems.append(f"{notebook.name}: outputs wider than the page at 1366 px: {too_wide}")
                shot(page, f"open-{notebook.stem}")
                first_picture = panel.locator(".jp-RenderedImage img").first
                if images:
                    first_picture.scroll_into_view_if_needed()
                    shot(page, f"open-{notebook.stem}-picture")
                stop_kernels(base, token)  # one notebook at a time: the next page load forgets this one
        except Exception:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
    assert not problems, "\n".join(problems)
    assert not refused, f"the page tried to fetch from outside: {refused}"
    assert time.monotonic() - started < 240


def first_view_problems(page: sync_api.Page, name: str) -> list[str]:
    """The stepper's stored first view, drawn in place of the widget before any kernel runs."""
    views = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedHTMLCommon").filter(
        has_text="A picture of the stepper as it opens"
    )
    if not views.count():
        return [f"{name}: the stepper shows no picture of its first view"]
    view = views.first
    view.scroll_into_view_if_needed()
    page.wait_for_function(
        "el => [...el.querySelectorAll('img')].length >= 3"
        " && [...el.querySelectorAll('img')].every(i => i.complete && i.naturalWidth > 0)",
        arg=view.element_handle(),
    )
    shot(page, f"open-{Path(name).stem}-stepper-first-view")
    text = view.inner_text()
    problems = []
    if not COUNTER.search(text) or "what just happened" not in text:
        problems.append(f"{name}: the stepper's first view has no counter or story line: {text[:200]!r}")
    if re.search(r"VBox\(children|Stepper\(", page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").inner_text()):
        problems.append(f"{name}: the stepper shows as a line of Python")
    return problems


def small_labels(page: sync_api.Page, notebook: Path) -> list[str]:
    """Diagram pictures whose smallest label is drawn under ``MIN_LABEL_PX`` (stored at 1 pt = 1 px,
    scaled down to the page)."""
    drawn = page.evaluate(
        "() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedImage img')]"
        ".map(i => i.getBoundingClientRect().width)"
    )
    problems = []
    for index, stored_width, smallest_pt in stored_diagrams(notebook):
        shown_px = smallest_pt * drawn[index] / stored_width
        if shown_px < MIN_LABEL_PX:
            problems.append(f"{notebook.name}: diagram #{index} draws {smallest_pt:g} pt labels at {shown_px:.1f} px")
    return problems


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


@needs_browser[0]
@needs_browser[1]
def test_stepper_in_jupyterlab_on_a_laptop_screen(tmp_path: Path) -> None:
    started = time.monotonic()
    workdir = tmp_path / "notebooks"
    workdir.mkdir()
    shutil.copy(NOTEBOOK, workdir / NOTEBOOK.name)
    refused: list[str] = []
    with jupyter_lab(workdir) as (base, token), browser(tmp_path, refused) as context:
        page = context.pages[0] if context.pages else context.new_page()
        try:
            open_notebook(page, base, token, NOTEBOOK.name)
            # Run → Run All Cells, as a reader would
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()

            step_button = page.locator("button.jupyter-button", has_text="Step ▶")
            step_button.wait_for()
            timeline = page.locator(".widget-output .vega-embed")
            timeline.locator("canvas, svg").first.wait_for()
            diagram = page.locator(".widget-html-content svg").filter(has=page.locator("g[id^='state:']")).first
            diagram.wait_for()
            assert counter(page)[0] == 0, "the stepper opens at step 0"
            horizon = counter(page)[1]

            # One screen: scroll the stepper to the top of the notebook and measure what is visible.
            page.locator(".widget-play").first.evaluate("el => el.closest('.jp-OutputArea').scrollIntoView()")
            page.wait_for_timeout(300)
            boxes = page.evaluate(
                """() => {
                    const box = el => {
                        const r = el.getBoundingClientRect();
                        return [r.left, r.top, r.right, r.bottom];
                    };
                    const html = t => [...document.querySelectorAll('.widget-html-content')]
                        .find(e => e.innerText.includes(t));
                    const svgs = [...document.querySelectorAll('.widget-html-content svg')];
                    const page = '.jp-NotebookPanel:not(.lm-mod-hidden) ';
                    return {
                        controls: box(document.querySelector('.widget-play')),
                        counter: box(html('step ')), happened: box(html('what just happened')),
                        axis: box(document.querySelector('.kip-step-axis')),
                        timeline: box(document.querySelector('.widget-output .vega-embed')),
                        diagram: box(svgs.find(s => s.querySelector('g[id^="state:"]'))),
                        records: box(html('records written at this step').closest('.widget-vbox')),
                        invariants: box(html('invariants of this run').closest('.widget-vbox')),
                        notebook: box(document.querySelector(page + '.jp-WindowedPanel-outer')
                                      || document.querySelector(page + '.jp-Notebook')),
                    };
                }"""
            )
            shot(page, "stepper-1366x768")
            view_top, view_bottom = max(boxes["notebook"][1], 0), min(boxes["notebook"][3], LAPTOP["height"])
            for part in ("controls", "counter", "happened", "axis", "timeline", "diagram"):
                _left, top, right, bottom = boxes[part]
                assert top >= view_top - 1 and bottom <= view_bottom + 1, f"{part} is off the screen: {boxes}"
                assert right <= boxes["notebook"][2] + 1, f"{part} is wider than the page: {boxes}"
            for covering in ("records", "invariants", "timeline"):
                a, b = boxes[covering], boxes["diagram"]
                overlap = min(a[2], b[2]) - max(a[0], b[0]) > 1 and min(a[3], b[3]) - max(a[1], b[1]) > 1
                assert not overlap, f"{covering} lies on the diagram: {boxes}"

            cut = page.evaluate(
                "() => [...document.querySelectorAll('button.jupyter-button')]"
                ".filter(b => b.innerText.trim() && b.scrollWidth > b.clientWidth + 1).map(b => b.innerText)"
            )
            assert not cut, f"button labels cut: {cut}"

            # Step: one step each click; the counter and the step cursor move every time
            step_times: list[float] = []
            for expected in range(1, 9):
                result = page.evaluate(TIME_CLICK, ["Step ▶", 1500])
                assert counter(page)[0] == expected, result
                assert result["after"]["cursor"] == str(expected), result
                step_times.append(max(result["changed"]["counter"], result["changed"]["cursor"]))
            # Next change: the highlighted state (member A's) changes, among other things
            state_times: list[float] = []
            for _ in range(8):
                here = counter(page)[0]
                result = page.evaluate(TIME_CLICK, ["Next change ▶▶", 1500])
                assert counter(page)[0] > here, result
                step_times.append(max(result["changed"]["counter"], result["changed"]["cursor"]))
                if "state" in result["changed"]:
                    state_times.append(result["changed"]["state"])
            assert state_times, "Next change never changed the highlighted state"
            shot(page, "stepper-after-next-change")
            # Back: one step back
            here = counter(page)[0]
            result = page.evaluate(TIME_CLICK, ["◀ Back", 1500])
            assert counter(page)[0] == here - 1 and result["after"]["cursor"] == str(here - 1), result
            step_times.append(max(result["changed"]["counter"], result["changed"]["cursor"]))
            assert median(step_times) <= CLICK_MEDIAN_MS, f"click to updated view, ms: {sorted(step_times)}"
            assert median(state_times) <= CLICK_MEDIAN_MS, f"click to highlighted state, ms: {sorted(state_times)}"

            # Play runs on by itself; Pause stops it at once
            play_pause = page.locator(".widget-play button").first  # one button: play, then pause
            before = counter(page)[0]
            play_pause.click()
            page.wait_for_function(
                "([n]) => [...document.querySelectorAll('.widget-html-content')]"
                ".some(el => { const m = /step (\\d+)\\s+of/.exec(el.innerText); return m && +m[1] >= n; })",
                arg=[before + 3],
            )
            play_pause.click()
            page.wait_for_timeout(300)
            stopped = counter(page)[0]
            page.wait_for_timeout(2000)
            assert counter(page)[0] == stopped, "Play ran on after Pause"
            assert counter(page)[1] >= horizon

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
            print(
                f"stepper click to view, ms: median {median(step_times):.0f} of {len(step_times)};"
                f" highlighted state: median {median(state_times):.0f} of {len(state_times)}"
            )
        except Exception:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
                (tmp_path / "failure.html").write_text(page.content())
            raise
    assert time.monotonic() - started < 120, "the stepper's browser test should stay under 120 s"


# ------------------------------------------------------------------------------ the course's steppers
KERNEL_STEPPER = """
import json, html
from widgets import Explorer
from widgets.stepper import describe_step
shown = [o for o in Out.values() if isinstance(o, Explorer)]
stepper = shown[-1].stepper
"""


def kernel_client(base: str, token: str, home: Path, notebook: str) -> Any:
    """A second client of the notebook's kernel (JupyterLab is the first), to ask it about its stepper."""
    from jupyter_client import BlockingKernelClient

    with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=5) as response:
        (kernel_id,) = [s["kernel"]["id"] for s in json.load(response) if s.get("path", "").endswith(notebook)]
    client = BlockingKernelClient(connection_file=str(home / "runtime" / f"kernel-{kernel_id}.json"))
    client.load_connection_file()
    client.start_channels()
    client.wait_for_ready(timeout=30)
    return client


def ask(client: Any, code: str, expression: str) -> Any:
    """Run ``code`` in the kernel and return the JSON value of ``expression`` there."""
    client.execute(code, user_expressions={"value": f"json.dumps({expression})"}, silent=True)
    while True:
        reply = client.get_shell_msg(timeout=60)
        if reply["parent_header"].get("msg_type") == "execute_request":
            break
    content = reply["content"]
    assert content["status"] == "ok", content
    value = content["user_expressions"]["value"]
    assert value["status"] == "ok", value
    return json.loads(ast.literal_eval(value["data"]["text/plain"]))


def story(page: sync_api.Page) -> str:
    return page.locator(".widget-html-content").filter(has_text="what just happened").first.inner_text()


def run_all(page: sync_api.Page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


@needs_browser[0]
@needs_browser[1]
def test_the_course_steppers_step_by_one_after_run_all(tmp_path: Path) -> None:
    """Run All, then Step: one step, told in the story line — the later cells did not move the stepper."""
    workdir = tmp_path / "notebooks"
    workdir.mkdir()
    for name in STEPPERS:
        shutil.copy(ROOT / "notebooks" / f"{name}.ipynb", workdir)
    refused: list[str] = []
    home = tmp_path / "jupyter-home"
    with jupyter_lab(workdir) as (base, token), browser(tmp_path, refused) as context:
        page = context.pages[0] if context.pages else context.new_page()
        try:
            for name in STEPPERS:
                open_notebook(page, base, token, f"{name}.ipynb")
                run_all(page)
                page.locator("button.jupyter-button", has_text="Step ▶").first.wait_for(timeout=180_000)
                page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=180_000)
                wait_for_kernel(page, base, token, f"{name}.ipynb", timeout_s=180)
                client = kernel_client(base, token, home, f"{name}.ipynb")
                try:
                    start, horizon = counter(page)
                    kernel = ask(
                        client,
                        KERNEL_STEPPER,
                        "[stepper.lab.step_count, stepper.lab.horizon,"
                        " describe_step(list(stepper._full.at_step(stepper.lab.step_count + 1)), stepper._topic_name)]",
                    )
                    assert kernel[:2] == [start, horizon], (name, kernel, start, horizon)
                    page.locator(".widget-play").first.evaluate("el => el.closest('.jp-OutputArea').scrollIntoView()")
                    page.locator("button.jupyter-button", has_text="Step ▶").first.click()
                    page.wait_for_function(
                        "n => [...document.querySelectorAll('.widget-html-content')]"
                        ".some(el => { const m = /step (\\d+)\\s+of/.exec(el.innerText); return m && +m[1] === n; })",
                        arg=start + 1,
                    )
                    assert counter(page) == (start + 1, horizon), name
                    told = story(page)
                    assert told == f"what just happened: {kernel[2]}", (name, told, kernel[2])
                    assert "nothing visible happened" not in told, (name, told)
                    shot(page, f"run-all-{name}-step")
                    # the end of the run: Next change and Step stay there and say so
                    ask(client, KERNEL_STEPPER + "stepper.go(stepper.lab.horizon)", "stepper.lab.step_count")
                    page.wait_for_function(
                        "n => [...document.querySelectorAll('.widget-html-content')]"
                        ".some(el => { const m = /step (\\d+)\\s+of/.exec(el.innerText); return m && +m[1] === n; })",
                        arg=horizon,
                    )
                    for label in ("Next change ▶▶", "Step ▶"):
                        page.locator("button.jupyter-button", has_text=label).first.click()
                        page.wait_for_function(
                            "() => [...document.querySelectorAll('.widget-html-content')]"
                            ".some(el => el.innerText.includes('the end of the run'))"
                        )
                        assert counter(page) == (horizon, horizon), (name, label)
                        ask(client, "", "0")  # the kernel has handled the click
                        assert counter(page) == (horizon, horizon), (name, label)
                    shot(page, f"run-all-{name}-end")
                finally:
                    client.stop_channels()
                text = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").inner_text()
                assert "Traceback" not in text, f"{name}: a cell or a widget callback failed"
                stop_kernels(base, token)
        except Exception:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
    assert not refused, f"the page tried to fetch from outside: {refused}"
