"""Issue 68 items 4 and 7 in Chromium, on the published cpu board: every chart's labels whole and unique at 1400 and
390 px (four SmolLM2 legend entries read "SmolLM2-135M-Instruct (…@cpu"; at 390 px the perplexity charts' text was
~6 px), and the compare page opening on TAPE vs RoPE with the board's interval over seeds."""

from pathlib import Path

import pytest
from conftest import REPO
from helpers.browser import CHROMIUM, CHROMIUM_FLAGS

from leaderboard.ingest import ingest
from leaderboard.site import build_site

#: per chart: its title, the smallest text as drawn on screen (px) and each legend entry as read (its lines joined)
CHARTS_JS = """() => Array.from(document.querySelectorAll('svg.chart')).map(svg => {
  const r = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal, k = vb && vb.width ? r.width / vb.width : 1;
  const px = Array.from(svg.querySelectorAll('text')).filter(t => t.textContent.trim())
    .map(t => parseFloat(getComputedStyle(t).fontSize) * k);
  const words = t => Array.from(t.childNodes).filter(n => n.nodeName !== 'title').map(n => n.textContent).join(' ');
  return {title: (svg.querySelector(':scope > title') || {}).textContent, px: Math.min(...px),
          legend: Array.from(svg.querySelectorAll('text.legend')).map(words),
          names: Array.from(svg.querySelectorAll('text.legend > title')).map(t => t.textContent)};
})"""


@pytest.fixture(scope="module")
def cpu_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("cpu")
    ingest([Path(REPO) / "leaderboard" / "published" / "cpu"], root / "s.duckdb", root=root)
    return build_site(root / "s.duckdb", root / "site").parent


def test_chart_labels_whole_unique_and_readable_at_1400_and_390(cpu_site):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    problems, seen = [], 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            for width in (1400, 390):
                page = browser.new_page(viewport={"width": width, "height": 900})
                for f in sorted(cpu_site.glob("*.html")):
                    page.goto(f.as_uri())
                    for c in page.evaluate(CHARTS_JS):
                        seen += 1
                        where = f"{f.name} at {width} px, {c['title'][:60]!r}"
                        if len(set(c["legend"])) != len(c["legend"]):
                            problems.append(f"{where}: legend entries read alike: {c['legend']}")
                        for shown, name in zip(c["legend"], c["names"]):
                            if "…" in shown or shown.replace(" ", "") != name.replace(" ", ""):
                                problems.append(f"{where}: legend {shown!r} is not the whole name {name!r}")
                        if c["px"] < 10:
                            problems.append(f"{where}: text {c['px']:.1f} px")
                    wide = page.evaluate("document.documentElement.scrollWidth")
                    if wide > width:
                        problems.append(f"{f.name} at {width} px scrolls sideways ({wide} px)")
                page.close()
        finally:
            browser.close()
    assert seen >= 2 * 20 and not problems, problems[:10]


def test_compare_opens_on_tape_vs_rope_with_the_seed_interval(cpu_site):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 390, "height": 900})
            page.goto((cpu_site / "compare.html").as_uri())
            page.wait_for_function("!document.getElementById('paired').textContent.includes('loading')")
            picked = [page.locator(f"{s} option:checked").inner_text() for s in ("#run-a", "#run-b")]
            assert picked[0].startswith("tape @cpu · ") and picked[1].startswith("rope @cpu · "), picked
            assert page.locator("#seeds th").all_inner_texts()[3] == "95 % interval over seeds"
            rows = [tr.locator("td").all_inner_texts() for tr in page.locator("#seeds tbody tr").all()]
            at = {r[0].rsplit("@", 1)[1]: r for r in rows}
            assert at["256"][1:] == ["3 vs 3", "×0.985", "×0.893 to ×1.09", "within noise"], at
            assert at["4096"][1:] == ["3 vs 3", "×1.31", "×0.925 to ×1.85", "within noise"], at
        finally:
            browser.close()
