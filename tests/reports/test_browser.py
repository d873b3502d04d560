"""The report in a real headless browser (Debian's chromium via Playwright), opened from disk."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest

from poolgrad.reports import html
from reports_recorded import TIE_ID, VERSIONS, XSS_ID, run_records

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "out"
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
    # 3 unexplained failures (JAX's tie=all on eager and jit, the injected id), 1 finding's example
    divergences = page.locator("details.div")
    assert divergences.count() == 4
    assert page.locator("#shown").inner_text() == "4"

    page.select_option("select[data-filter=framework]", "jax")
    assert page.locator("details.div:visible").count() == 3
    assert page.locator("#shown").inner_text() == "3"
    assert page.locator("th.col:visible").count() == 2   # the matrix keeps only jax columns
    assert page.locator("table.matrix tr:visible").first.locator("td:visible, th:visible").count() == 2 + 2
    assert page.locator("table.matrix tr:nth-child(2) td.cell:visible").count() == 2
    page.fill("#search", "jit")
    assert page.locator("details.div:visible").count() == 1

    first = page.locator("details.div:visible").first
    first.locator("summary").click()
    assert first.evaluate("d => d.open")
    assert first.locator("td.mark").count() >= 4           # differing cells marked in input and gradients
    assert "jax.jit" in first.locator("pre.repro").inner_text()

    # A matrix cell with divergences filters the details to its target and row.
    page.select_option("select[data-filter=framework]", "")
    page.fill("#search", "")
    tf_column = page.locator("table.matrix th.col").all_inner_texts().index("tensorflow-eager-cpu 2.21.0")
    page.locator("table.matrix tr.f").filter(has=page.locator("td.go")).first.locator("td").nth(2 + tf_column).click()
    assert page.locator("details.div:visible").count() == 1
    assert page.locator("details.div:visible code.case-id").inner_text() == TIE_ID

    page.select_option("select[data-filter=framework]", "")
    page.select_option("select[data-filter=variant]", "")
    page.select_option("select[data-filter=device]", "")
    page.select_option("select[data-filter=op]", "")
    page.fill("#search", "onerror")
    xss = page.locator("details.div:visible")
    assert xss.count() == 1
    assert xss.locator("code.case-id").inner_text() == XSS_ID  # the markup shows as text
    assert page.locator("img").count() == 0
    xss.locator("summary").click()
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "report-screenshot.png"), full_page=True)
    assert not problems, problems


# What a screenshot holds, decoded by the browser itself (a canvas in a blank page: the report's
# CSP forbids images): its size, its dark pixels (text) and the pixel rows that hold any.
INK = """async (b64) => {
  const img = new Image();
  img.src = 'data:image/png;base64,' + b64;
  await img.decode();
  const c = document.createElement('canvas');
  c.width = img.width; c.height = img.height;
  const ctx = c.getContext('2d');
  ctx.drawImage(img, 0, 0);
  const d = ctx.getImageData(0, 0, c.width, c.height).data;
  let dark = 0, rows = 0;
  for (let y = 0; y < c.height; y++) {
    let inRow = 0;
    for (let x = 0; x < c.width; x++) {
      const i = 4 * (y * c.width + x);
      if (d[i] + d[i + 1] + d[i + 2] < 3 * 110) { inRow++; }
    }
    dark += inRow; rows += inRow > 0;
  }
  return {width: c.width, height: c.height, dark: dark, rows: rows};
}"""
SECTIONS = ("summary", "findings", "unexplained", "matrix", "examples", "interop", "fingerprints", "environment",
            "semantics", "changes")


def test_every_section_renders_at_1280_px(page, tmp_path):
    """Screenshots of the first screen and of each section, looked at: text drawn, within 1280 px."""
    out = tmp_path / "report.html"
    html.write_html(run_records(), out, baseline=run_records("base", versions={**VERSIONS, "jax": "0.9.2"}))
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(out.as_uri())
    assert page.evaluate("document.body.innerText").startswith("3 unexplained failures\n")
    canvas = page.context.browser.new_page()
    SCREENSHOTS.mkdir(exist_ok=True)

    def ink(png: bytes) -> dict:
        return canvas.evaluate(INK, base64.b64encode(png).decode())

    first = ink(page.screenshot(path=str(SCREENSHOTS / "report-first-screen.png")))
    assert (first["width"], first["height"]) == (1280, 800)
    # The count, the summary table and the findings table: many lines of text on the first screen.
    assert first["rows"] > 300 and first["dark"] > 20_000, first
    verdict = page.locator("p.verdict").bounding_box()
    assert verdict["y"] < 60 and verdict["height"] > 30      # the count comes first, in large type
    top = ink(page.screenshot(clip={"x": 0, "y": verdict["y"], "width": 1280, "height": verdict["height"]}))
    assert top["dark"] > 500   # drawn: its red is dark enough to count

    for section in SECTIONS:
        box = page.locator(f"section#{section}").bounding_box()
        assert box and box["height"] > 20 and box["x"] >= 0 and box["x"] + box["width"] <= 1280, (section, box)
        # its first 800 px: the semantics pages run long, and what is below is more of the same
        clip = {"x": box["x"], "y": box["y"], "width": box["width"], "height": min(box["height"], 800)}
        shot = ink(page.screenshot(path=str(SCREENSHOTS / f"report-{section}.png"), full_page=True, clip=clip))
        assert shot["rows"] > 15 and shot["dark"] > 1000, (section, shot)   # a heading and text, not blank
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280


def test_report_with_its_semantics_pages_fits_1280_px(page, tmp_path):
    out = tmp_path / "report.html"
    html.write_html(run_records(), out)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(out.as_uri() + "#torch-max-last-nan-wins")
    # A link to a finding opens the semantics page that holds it.
    assert page.evaluate("document.getElementById('torch-max-last-nan-wins').closest('details').open")
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
