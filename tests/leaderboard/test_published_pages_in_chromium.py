"""Issue 58's browser check of both published boards (`make site`): every page at 1400 and 390 px scrolls no page
sideways, every chart has its title and its text inside the picture (no title, legend or tick label cut), a line
chart has a legend, and the front page's first screen holds the picture. Slow: it builds both sites (minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.browser import CHROMIUM, CHROMIUM_FLAGS
from helpers.published_site import published_site

#: every text of every chart against its svg's box on screen, and what each chart holds
CHECK_CHARTS = """() => Array.from(document.querySelectorAll('svg.chart')).map((svg, i) => {
  const box = svg.getBoundingClientRect(), out = [];  // on screen: rotated axis labels and scaling included
  svg.querySelectorAll('text').forEach(t => {
    const b = t.getBoundingClientRect();
    const outX = b.left < box.left - 1 || b.right > box.right + 1;
    const outY = b.top < box.top - 1 || b.bottom > box.bottom + 1;
    if (b.width && (outX || outY))
      out.push(t.textContent);
  });
  return {i, title: svg.querySelectorAll('text.ctitle').length, lines: svg.querySelectorAll('path.line').length,
          legend: svg.querySelectorAll('text.legend').length, cut: out};
})"""


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["cpu", "cpu-claims"])
def test_every_page_of_a_published_board_reads_at_1400_and_390_px(tmp_path, profile):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (docs/testing.md: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    site = published_site(tmp_path, profile)
    pages = [*sorted(site.glob("*.html")), *sorted((site / "runs").glob("*.html"))[:3]]
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            for width, height in ((1400, 900), (390, 844)):
                page = browser.new_page(viewport={"width": width, "height": height})
                page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
                for f in pages:
                    page.goto(f.as_uri())
                    wide = page.evaluate("document.documentElement.scrollWidth")
                    if wide > width:
                        problems.append(f"{f.name} @{width}: the page is {wide} px wide")
                    for c in page.evaluate(CHECK_CHARTS):
                        if not c["title"]:
                            problems.append(f"{f.name} chart {c['i']}: no title")
                        if c["lines"] and not c["legend"]:
                            problems.append(f"{f.name} chart {c['i']}: lines without a legend")
                        if c["cut"]:
                            problems.append(f"{f.name} chart {c['i']}: text outside the picture {c['cut'][:3]}")
                page.goto((site / "index.html").as_uri())
                pic = page.locator("#picture svg.chart").first.bounding_box()
                if not pic or pic["y"] > height / 2:
                    problems.append(f"index.html @{width}: the picture does not open the first screen ({pic})")
                page.close()
        finally:
            browser.close()
    assert problems == [], problems[:20]
