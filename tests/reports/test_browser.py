"""The report in a real headless browser (Debian's chromium via Playwright), opened from disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from poolgrad.reports import html
from reports_recorded import XSS_ID, run_records

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOT = Path(__file__).resolve().parents[2] / "out" / "report-screenshot.png"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.browser


@pytest.fixture
def page():
    sync_api = pytest.importorskip("playwright.sync_api", reason="the Python package playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser.new_page(viewport={"width": 1400, "height": 1000})
        browser.close()


def test_report_in_a_browser(page, tmp_path):
    out = tmp_path / "report.html"
    html.write_html(run_records(), out)
    problems = []
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("request", lambda r: problems.append(f"request {r.url}") if not r.url.startswith("file:") else None)
    page.goto(out.as_uri())
    divergences = page.locator("details.div")
    assert divergences.count() == 5
    assert page.locator("#shown").inner_text() == "5"

    page.select_option("select[data-filter=framework]", "tensorflow")
    assert page.locator("details.div:visible").count() == 2
    assert page.locator("#shown").inner_text() == "2"
    assert page.locator("th.col:visible").count() == 2   # the matrix keeps only tensorflow columns
    page.fill("#search", "xla")
    assert page.locator("details.div:visible").count() == 1

    first = page.locator("details.div:visible").first
    first.locator("summary").click()
    assert first.evaluate("d => d.open")
    assert first.locator("td.mark").count() >= 4           # differing cells marked in input and gradients
    assert "tf.function(forward_backward, jit_compile=True)" in first.locator("pre.repro").inner_text()

    page.select_option("select[data-filter=framework]", "")
    page.fill("#search", "onerror")
    xss = page.locator("details.div:visible")
    assert xss.count() == 1
    assert xss.locator("code.case-id").inner_text() == XSS_ID  # the markup shows as text
    assert page.locator("img").count() == 0
    xss.locator("summary").click()
    page.fill("#search", "")
    page.select_option("select[data-filter=framework]", "tensorflow")
    page.locator("details.div:visible").first.locator("summary").click()
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert not problems, problems


def test_report_with_its_semantics_pages_fits_1280_px(page, tmp_path):
    out = tmp_path / "report.html"
    html.write_html(run_records(), out)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(out.as_uri() + "#torch-max-last-nan-wins")
    # A link to a finding opens the semantics page that holds it.
    assert page.evaluate("document.getElementById('torch-max-last-nan-wins').closest('details').open")
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
