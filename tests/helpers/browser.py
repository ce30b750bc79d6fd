"""The site as a visitor sees it: headless Chromium through Playwright (used by the site and pipeline tests)."""

import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("PEEVAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def check_in_browser(
    index: Path, n_rows: int, screenshot: Path, diagnostics: bool = True, hostile: bool = False
) -> None:
    """Open the site from file:// in headless Chromium and check what a visitor sees."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (.ci/run installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
            page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
            page.goto(index.as_uri())
            page.evaluate("document.querySelectorAll('details.fold').forEach(d => d.open = true)")  # as a visitor
            rows = page.locator("#leaderboard tbody tr")
            assert rows.count() == n_rows
            names = lambda: page.locator("#leaderboard tbody tr td:first-child").all_inner_texts()  # noqa: E731
            before = names()
            ncols = page.locator("#leaderboard thead th").count()
            distinct = {i: len(set(page.locator(f"#leaderboard tbody tr td:nth-child({i + 1})").all_inner_texts()))
                        for i in range(1, ncols)}  # fmt: skip
            # a numeric column whose values all differ (ties keep their order); else the most varied one (RoPE's and
            # NoPE's untrained step-0 controls hold the same weights, so every column ties them)
            col = max(distinct, key=lambda i: (distinct[i] == n_rows, distinct[i]))
            header = page.locator("#leaderboard thead th").nth(col)
            header.click()
            asc = names()
            header.click()
            desc = names()
            assert asc != desc and (asc != before or desc != before)
            assert distinct[col] < n_rows or asc == desc[::-1]
            page.fill("input.filter[data-table=leaderboard]", before[0])
            assert page.locator("#leaderboard tbody tr:visible").count() < n_rows or n_rows == 1
            page.fill("input.filter[data-table=leaderboard]", "")
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
            for name in ("ppl.html", "passkey.html", "training.html", *(["diagnostics.html"] if diagnostics else [])):
                page.goto((index.parent / name).as_uri())
                charts = page.locator("svg.chart")
                assert charts.count() > 0, name
                for i in range(charts.count()):
                    marks = charts.nth(i).locator(".mark")
                    assert marks.count() > 0, f"{name}: chart {i} has no marks"
                    box = marks.first.bounding_box()
                    assert box and (box["width"] > 0 or box["height"] > 0), f"{name}: chart {i} drew nothing"
            for name in ("efficiency.html", "data.html"):
                page.goto((index.parent / name).as_uri())
            page.goto(index.as_uri())
            run = page.locator("#runs_list tbody tr", has_text="pretrain").first.locator("a").first
            page.goto((index.parent / run.get_attribute("href")).as_uri())
            assert page.locator("pre").count() > 0  # the run's samples
            if hostile:
                assert page.locator("pre", has_text="<script>alert(1)</script>").count() > 0  # shown as text
            assert page.evaluate("window.__pwned === undefined")
            run_page = page.url
            narrow = browser.new_page(viewport={"width": 390, "height": 844})  # a phone: no page scrolls sideways
            for url in [*(f.as_uri() for f in sorted(index.parent.glob("*.html"))), run_page]:
                narrow.goto(url)
                wide = narrow.evaluate("document.documentElement.scrollWidth")
                assert wide <= 390, f"{url} is {wide} px wide at 390 px (tables scroll inside their own box)"
        finally:
            browser.close()
    assert not errors, errors


#: run in a page: what a visitor at this width cannot read whole (issue 58's Done-when), as a list of problems
PAGE_PROBLEMS_JS = r"""
(width) => {
  const out = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > width + 1) out.push(`the page scrolls sideways: ${doc.scrollWidth} px wide`);
  // HTML text clipped by its own box (overflow hidden or an ellipsis); a box that scrolls is not a cut
  for (const e of document.body.querySelectorAll('*')) {
    if (e.closest('svg') || !e.textContent.trim()) continue;
    const s = getComputedStyle(e);
    const clips = ['hidden', 'clip'].includes(s.overflowX) || s.textOverflow === 'ellipsis';
    if (clips && e.scrollWidth > e.clientWidth + 1 && s.display !== 'none')
      out.push(`text cut: <${e.tagName.toLowerCase()}> "${e.textContent.trim().slice(0, 40)}"`);
    const cell = e.tagName === 'TD' || e.tagName === 'TH';
    if (cell && e.getBoundingClientRect().width < 24 && e.textContent.trim().length > 3)
      out.push(`a cell ${Math.round(e.getBoundingClientRect().width)} px wide: "${e.textContent.trim().slice(0, 30)}"`);
  }
  // every chart: a title and a legend drawn inside it, and no text outside its picture
  for (const svg of document.querySelectorAll('svg.chart, svg.forest')) {
    const name = (svg.querySelector(':scope > title') || {}).textContent || '(no title element)';
    if (!svg.querySelector(':scope > title')) out.push(`a chart without a <title>: ${name}`);
    if (!svg.querySelector('text.ctitle')) out.push(`a chart whose title is not drawn: ${name}`);
    if (!svg.querySelector('.legend')) out.push(`a chart without a legend: ${name}`);
    const box = svg.getBoundingClientRect();  // on screen: a rotated axis label measured as drawn
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim()) continue;
      const b = t.getBoundingClientRect();
      if (b.left < box.left - 1 || b.top < box.top - 1 || b.right > box.right + 1 || b.bottom > box.bottom + 1)
        out.push(`text outside its chart (${name.slice(0, 50)}): "${t.textContent.trim().slice(0, 40)}"`);
    }
  }
  return out;
}
"""


def page_problems(page, width: int) -> list[str]:
    """:data:`PAGE_PROBLEMS_JS` on the page open in ``page`` (a Playwright page at ``width`` px)."""
    return page.evaluate(PAGE_PROBLEMS_JS, width)
