"""A design review's report in a real browser: opened from disk in Chromium, offline, stepped, and checked.

``kip-lab compare`` writes the report of the library's rolling bounce with two variants and five
seeds; Debian's Chromium (Playwright) opens the file with every request that is not the file
itself refused and recorded, and checks that nothing was requested, nothing was logged as an
error, the charts were drawn, the players step with their buttons and the arrow keys (the
counter, the story and the swimlanes' cursor move together), Play plays and pauses, and the
table shows, for every outcome and variant, ``compute_metrics`` of the same runs made here.
``KIP_LAB_BROWSER_SCREENSHOTS=/tmp/shots`` keeps a screenshot of the page at 1366 px.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
from pathlib import Path

import pytest

from kip_lab import cli
from kip_lab.lab.metrics import compute_metrics
from kip_lab.review.compare import format_value
from kip_lab.scenarios import load_library_scenario, run_scenario

pytestmark = pytest.mark.slow

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("vl_convert")

CHROMIUM = os.environ.get("KIP_LAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
KEY = "lab.coordinator.assignment_interval_ms"
VALUES = (0, 1000)
SEEDS = 5
FRAME = re.compile(r"frame (\d+) of (\d+) · step (\d+) · ([\d,]+) ms")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("review")
    vary = f"{KEY}={','.join(map(str, VALUES))}"
    assert cli.main(["compare", "rolling_bounce", "--vary", vary, "--seeds", str(SEEDS), "--out", str(out)]) == 0
    return out / "report.html"


def expected_cells() -> dict[tuple[str, int], float]:
    """(outcome key, variant) -> the median over the seeds of compute_metrics, run here, from the first event."""
    base = load_library_scenario("rolling_bounce")
    cells = {}
    for index, value in enumerate(VALUES):
        coordinator = base.lab.coordinator.model_copy(update={"assignment_interval_ms": value})
        scenario = base.model_copy(update={"lab": base.lab.model_copy(update={"coordinator": coordinator})})
        runs = [
            compute_metrics(run_scenario(scenario.model_copy(update={"seed": seed})).trace, totals_before_ms=30_000)
            for seed in range(SEEDS)
        ]
        for key in runs[0]:
            values = [m[key] - m["totals_before"].get(key, 0) for m in runs if isinstance(m[key], int | float)]
            if len(values) == SEEDS and not isinstance(runs[0][key], bool):
                cells[(key, index)] = statistics.median(values)
    return cells


def frame(page: sync_api.Page, player: int) -> tuple[int, int, int, int, str]:
    """(frame, of, step, time) of the player's counter, and its swimlanes' cursor label."""
    text = page.locator(f"#player-{player} .counter").inner_text()
    match = FRAME.fullmatch(text)
    assert match is not None, text
    cursor = page.locator(f"#swimlanes-{player} g.cursor_marks line").get_attribute("aria-label")
    number, count, step, time_ms = match.groups()
    return int(number), int(count), int(step), int(time_ms.replace(",", "")), cursor or ""


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")
def test_the_report_opens_from_disk_offline_steps_and_shows_the_metrics(report: Path) -> None:
    refused: list[str] = []
    problems: list[str] = []

    def refuse(route: sync_api.Route) -> None:
        if route.request.url != report.as_uri():
            refused.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.route("**/*", refuse)
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
        page.goto(report.as_uri())
        page.wait_for_selector("body[data-ready]", timeout=60_000)
        assert page.evaluate("document.body.dataset.ready") == "true"
        assert page.locator("#outcomes-chart svg").count() == 1
        assert page.locator(".player .chart svg").count() == len(VALUES)

        # Buttons: Step, Step, Back; the counter, the story and the cursor follow.
        first = frame(page, 0)
        assert first[0] == 1 and first[4] == f"cursor: {first[3]}"
        player = page.locator("#player-0")
        for _ in range(3):
            player.locator("[data-action=step]").click()
        player.locator("[data-action=back]").click()
        now = frame(page, 0)
        assert now[0] == 3 and now[2] > first[2] and now[4] == f"cursor: {now[3]}"
        assert player.locator("ol.story li").count() >= 1

        # Arrow keys move the player last used; the other one stays where it is.
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowLeft")
        assert frame(page, 0)[0] == 4 and frame(page, 1)[0] == 1
        page.locator("#player-1 [data-action=step]").click()
        page.keyboard.press("ArrowRight")
        assert frame(page, 1)[0] == 3 and frame(page, 0)[0] == 4
        page.wait_for_function(
            "document.querySelector('#swimlanes-1 g.cursor_marks line').getAttribute"
            "('aria-label') === 'cursor: ' + document.querySelector('#player-1').dataset.timeMs"
        )

        # Play plays, and the same button pauses.
        play = page.locator("#player-1 [data-action=play]")
        play.click()
        page.wait_for_function("Number(document.querySelector('#player-1').dataset.frame) >= 5")
        play.click()
        paused = frame(page, 1)[0]
        page.wait_for_timeout(800)
        assert frame(page, 1)[0] == paused and "Play" in play.inner_text()

        # The table: every number is compute_metrics' of the same runs, shown as the report formats it.
        shown = page.evaluate(
            """Array.from(document.querySelectorAll('table.outcomes tbody tr')).flatMap(row =>
                 Array.from(row.querySelectorAll('td')).map(cell => [row.dataset.outcome, Number(cell.dataset.variant),
                   Number(cell.dataset.median), cell.querySelector('.median').textContent,
                   cell.classList.contains('best')]))"""
        )
        expected = expected_cells()
        assert shown and {(key, variant) for key, variant, *_ in shown} <= set(expected)
        for key, variant, median, text, _best in shown:
            assert median == expected[(key, variant)], (key, variant)
            assert text.replace(",", "").split(" ")[0] == format_value(median, "").replace(",", ""), (key, text)
        best = {(key, variant) for key, variant, _, _, is_best in shown if is_best}
        assert ("max_time_to_stable_ms", 0) in best  # batching waits for its interval before a new target

        if os.environ.get("KIP_LAB_BROWSER_SCREENSHOTS"):
            folder = Path(os.environ["KIP_LAB_BROWSER_SCREENSHOTS"])
            folder.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(folder / "review_report.png"), full_page=True)
        browser.close()

    assert refused == [], f"the report asked the network for {refused[:5]}"
    assert problems == [], problems
