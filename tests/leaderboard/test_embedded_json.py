"""Issue 56, injection: JSON embedded in a page's <script> is escaped for `</script>` and `<!--` (a task named
`x<!--<script>` swallowed the rest of compare.html)."""

import json
import re

from leaderboard.site import compare as page

HOSTILE = {
    "pairs": {},
    "metrics": {"r1": {"x<!--<script>": {"acc": [1.0, None]}}},
    "examples": {"k": ["</script><b>bold</b> & more", "<!-- not a comment -->"]},
    "responses": {},
    "ppl_pairs": {},
    # the board's rows and their seed-level comparisons (compare_seeds.row_pairs), named by hostile rows too
    "rows": {"r1": "tape</script><!--"},
    "seeds": {
        "rope|tape</script><!--": [
            {
                "label": "x<!--<script>",
                "kind": "ppl",
                "value": 1.0,
                "lo": None,
                "hi": None,
                "a_seeds": 1,
                "b_seeds": 1,
                "outcome": "no interval",
            }
        ]
    },
}
SEEDS = {k: HOSTILE[k] for k in ("rows", "seeds")}


class _Store:
    """The little of a SiteStore that compare.render reads besides compare_data."""

    files: dict = {}
    claims_html = ""

    def view(self, *a, **k):
        return []

    def nav(self):
        return []


def test_hostile_names_stay_inside_the_compare_pages_json(monkeypatch):
    monkeypatch.setattr(page, "compare_data", lambda store: {k: v for k, v in HOSTILE.items() if k not in SEEDS})
    monkeypatch.setattr(page.compare_seeds, "row_pairs", lambda store: SEEDS)
    html = page.render(_Store()).html
    found = re.findall(r'<script type="application/json" id="compare-data">(.*?)</script>', html, re.S)
    embedded = {k: HOSTILE[k] for k in page.EMBEDDED}  # the rest is in the runs' scripts (compare/<run>.js)
    assert len(found) == 1 and json.loads(found[0]) == embedded  # read back whole, every string as it was
    assert "<" not in found[0] and ">" not in found[0]  # nothing a browser's HTML parser reads inside it
    assert html.count("<script") == html.count("</script>")
