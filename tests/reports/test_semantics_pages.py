"""The semantics pages (poolgrad/reports/semantics.py): every finding on its framework's page under
its own anchor and in one section of docs/SEMANTICS.md, links that resolve, table cells short
enough to read, and pages that fit a laptop's width in a real browser."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from poolgrad.knowledge import sources
from poolgrad.reports import semantics
from poolgrad.reports.finding_text import MAX_CELL, reported
from poolgrad.reports.sections import section_of

ROOT = Path(__file__).parents[2]
KB = sources.load()
PAGES = semantics.pages(KB)
CELL = re.compile(r"(?<!\\)\|")


def table_cells(text: str):
    """(line number, cell) of every cell of every Markdown table row."""
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("|") and line.rstrip().endswith("|"):
            for cell in CELL.split(line.strip()[1:-1]):
                yield n, cell.strip()


def test_the_committed_pages_are_generated_from_the_knowledge_base():
    for name, text in PAGES.items():
        assert (ROOT / "docs" / name).read_text() == text, f"docs/{name}: run python -m poolgrad.reports.semantics --write"
    committed = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs" / "frameworks").glob("*.md")}
    assert committed == {n for n in PAGES if n.startswith("frameworks/")}


@pytest.mark.parametrize("page", sorted(p.relative_to(ROOT).as_posix() for p in
                                        [*(ROOT / "docs").glob("*.md"), *(ROOT / "docs" / "frameworks").glob("*.md")]))
def test_no_table_cell_is_longer_than_300_characters(page):
    long = [(n, len(cell)) for n, cell in table_cells((ROOT / page).read_text()) if len(cell) > MAX_CELL]
    assert not long, f"{page}: cells over {MAX_CELL} characters at (line, length) {long}"


def test_every_finding_has_an_anchor_on_its_page_and_a_row_in_one_section():
    overview = PAGES["SEMANTICS.md"]
    for f in KB:
        page = PAGES[f"frameworks/{f.framework}.md"]
        assert page.count(f"\n## {f.id}\n") == 1 and f.title in page and f.source in page
        assert overview.count(f"](frameworks/{f.framework}.md#{f.id})") == 1, f.id
        # An unreported finding offers the draft of a report; a reported one does not.
        assert (f"python -m poolgrad.upstream {f.id}`" in page) != reported(f)
        if f.example is not None:
            assert f"`poolgrad --example {f.id} --frameworks {f.framework} " in page


def test_links_between_the_pages_resolve():
    anchors = {name: set(re.findall(r"^## (\S+)$", text, re.M)) for name, text in PAGES.items()}
    for name, text in PAGES.items():
        for target, anchor in re.findall(r"\]\(([\w/]*\.md)?#([\w-]+)\)", text):
            resolved = (Path(name).parent / target).as_posix() if target else name
            assert anchor in anchors[resolved], f"{name}: link to {target}#{anchor}"


def test_sections_take_findings_by_what_the_case_holds():
    by_id = {f.id: section_of(f).anchor for f in KB}
    assert by_id["torch-max-last-nan-wins"] == "nans"
    assert by_id["torch-compile-max-forward-last-zero"] == "signed-zeros"
    assert by_id["tf-cpu-subnormal-flushed"] == "subnormals"
    assert by_id["torch-cpu-max-grad-sums-in-dtype"] == "low-precision-sums"
    assert by_id["tf-cpu-maxpool3d-gradient-all-ties"] == "ties"
    assert by_id["torch-cpu-channels-last-3d-neginf-index"] == "infinities"


def test_the_command_writes_every_page_and_o_writes_the_overview(tmp_path):
    written = semantics.write(KB, tmp_path)
    (tmp_path / "frameworks" / "gone.md").write_text("a framework with no finding left")
    semantics.write(KB, tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == sorted(PAGES)
    assert not (tmp_path / "frameworks" / "gone.md").exists()
    assert semantics.main(["-o", str(tmp_path / "overview.md")]) == 0
    assert (tmp_path / "overview.md").read_text() == PAGES["SEMANTICS.md"]


def test_the_report_carries_the_pages_with_local_links():
    html = semantics.html_pages(KB)
    assert [p["id"] for p in html] == ["semantics", *(f"framework-{fw}" for fw in semantics.frameworks_with_findings(KB))]
    text = "".join(p["html"] for p in html)
    f = KB[0]
    assert f'<h2 id="{f.id}">' in text and f'href="#{f.id}"' in text and ".md#" not in text
    assert "<script" not in text and not re.search(r'href="(?!#)', text)
    assert "(https://github.com/" in text  # a web link as text: the report links nowhere else


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.mark.browser
def test_the_pages_read_without_scrolling_sideways_at_1280_px(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the Python package playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (./run.sh set-up installs it)")
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    files = []
    for name, text in PAGES.items():
        path = tmp_path / name.replace("/", "_").replace(".md", ".html")
        path.write_text(f"<!doctype html><meta charset='utf-8'><body>{md.render(text)}</body>")
        files.append(path)
    widths = {}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu",
                                                                    "--disable-background-networking", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for path in files:
            page.goto(path.as_uri())
            widths[path.name] = page.evaluate("document.documentElement.scrollWidth")
        browser.close()
    assert all(w <= 1280 for w in widths.values()), widths
