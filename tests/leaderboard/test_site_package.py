"""The site as a package of pages (issue 41 item 3): one registry makes both the navigation and the build, the
SQL is in named views (leaderboard/site/views.sql), the HTML in templates, and the views combine seeds as the
metric registry says."""

import ast
import re
import sys
import types
from pathlib import Path

import pytest
from test_site import make_store

from leaderboard.site import Page, build_site
from leaderboard.site import pages as registry  # the site's pages in nav order (leaderboard.site.pages.PAGES)
from leaderboard.site.context import VIEWS, view_sections
from peeval.records import METRICS

SITE = Path(__file__).resolve().parents[2] / "leaderboard" / "site"
#: what the site's pages use, moved into the package by issue 59 and checked as before it (not page modules): the
#: templates, the inline-SVG charts (their marks), the front page's and the compare page's numbers, the claims page
HELPERS = {"pages.py", "charts.py", "front.py", "compare_numbers.py", "claims_page.py"}


def test_one_registry_line_adds_a_page_to_the_nav_and_the_build(tmp_path, monkeypatch):
    page = types.ModuleType("leaderboard.site.extra_page")
    page.render = lambda store: Page("extra.html", "extra", "<p>extra page</p>")
    monkeypatch.setitem(sys.modules, "leaderboard.site.extra_page", page)
    pages = (*registry.PAGES[:-1], registry.Entry("extra_page", "extra.html", "Extra"), registry.PAGES[-1])
    monkeypatch.setattr(registry, "PAGES", pages)
    index = build_site(make_store(tmp_path / "store"), tmp_path / "site")
    assert (index.parent / "extra.html").read_text() == "<p>extra page</p>"
    for html in (index, index.parent / "ppl.html", next((index.parent / "runs").glob("*.html"))):
        nav = re.search(r"<nav>(.*?)</nav>", html.read_text())[1]
        hrefs = [h.removeprefix("../") for h in re.findall(r'href="([^"]+)"', nav)]
        # the registry's order, claims included; a by-length family page (RULER) only with runs: none here
        assert hrefs == [e.href for e in pages if e.href and e.family is None], html.name
    claims = ("claims.html", "Claims")
    assert claims in registry.nav(True) and claims not in registry.nav(False)  # no claims page: no link


def _code_strings(py: Path) -> list[str]:
    """The string literals of a module's code (its docstrings left out: they may name a file like data/<t>.csv)."""
    tree = ast.parse(py.read_text(encoding="utf-8"))
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]  # fmt: skip


def test_sql_only_in_named_views_and_html_only_in_templates():
    """No module of the site writes a query other than ``SELECT * FROM site_<name>`` or an HTML tag."""
    for py in sorted(p for p in SITE.glob("*.py") if p.name not in HELPERS):
        text = "\n".join(_code_strings(py))
        for q in re.findall(r"\b(?:select|SELECT)\b[^\"\n]*", text):
            # an f-string's parts: "SELECT * FROM " then the view's name (context.SiteStore.view, "site_<name>")
            assert q.startswith("SELECT * FROM site_") or q == "SELECT * FROM " and py.name == "context.py", q
        assert not re.findall(r"\b(?:join|JOIN|group by|GROUP BY)\b", text), py.name
        assert not re.findall(r"<(?:p|div|table|tr|td|th|a|span|pre|h2|ul|li)[ >]", text), py.name
    sections = view_sections(VIEWS.read_text(encoding="utf-8"))
    names = [st.name for views in sections.values() for st in views]
    assert len(names) == len(set(names)) and set(sections) == {"any", "store", "labelled", "claims"}


def test_view_sections_tell_views_from_macros_by_their_statement():
    """A macro is never registered as a page's view, whatever its name; anything else is refused."""
    text = "CREATE TEMP MACRO site_twice(x) AS 2 * x;\n-- @section store\nCREATE TEMP VIEW site_a AS\nSELECT 1;\n"
    got = view_sections(text)
    assert [(st.kind, st.name) for st in got["any"]] == [("macro", "site_twice")]
    view = ("view", "site_a", "CREATE TEMP VIEW site_a AS\nSELECT 1")
    assert [(st.kind, st.name, st.sql) for st in got["store"]] == [view]
    with pytest.raises(ValueError, match="not a named view"):
        view_sections("CREATE TEMP VIEW a AS SELECT 1;")


def test_views_combine_seeds_as_the_metric_registry_says(tmp_path):
    """The per-cell views average a metric over the runs of one name and add up a count
    (``peeval.records.METRICS``: ``seeds``; a column the registry does not know is a count). Issue 60: measured
    on a store of two seeds with values chosen by hand, not read off the views' SQL text; the same runs in any
    insertion order give the same bits."""
    from leaderboard.site.context import SiteStore
    from leaderboard.store import connect, insert_rows

    seeds = {  # run -> (ppl, bpb, tokens, windows, passkey acc, its n, diagnostic acc, its n)
        "a1": (10.0, 1.0, 100, 2, 0.2, 10, 0.5, 4),
        "a2": (20.0, 3.0, 200, 3, 0.6, 30, 1.0, 6),
    }

    def store(order):
        con = connect(tmp_path / f"{''.join(order)}.duckdb")
        insert_rows(con, "runs", [{"run_id": r, "name": "rope", "kind": "pretrain", "source": "local"} for r in order])
        rows = []
        for r in order:
            ppl, bpb, tok, win, pk, pk_n, dg, dg_n = seeds[r]
            for metric, v in (("ppl@64", ppl), ("bpb@64", bpb), ("tokens@64", tok), ("windows@64", win)):
                rows.append({"run_id": r, "task": "peeval_ppl_pg19", "metric": metric, "filter": "none", "value": v})
            rows.append({"run_id": r, "task": "peeval_passkey", "metric": "acc@64@0.5", "filter": "none",
                         "value": pk, "n": pk_n})  # fmt: skip
            rows.append({"run_id": r, "task": "peeval_diag_addition_test", "metric": "acc@1x2", "filter": "none",
                         "value": dg, "n": dg_n})  # fmt: skip
        insert_rows(con, "metrics", rows)
        return SiteStore(con)

    def combined(col, values):
        spec = METRICS.get(col)
        return sum(values) / len(values) if spec is not None and spec.seeds == "mean" else sum(values)

    a, b = seeds["a1"], seeds["a2"]
    for order in (["a1", "a2"], ["a2", "a1"]):
        s = store(order)
        (ppl,) = s.view("ppl_by_length")
        want = [combined(c, [a[i], b[i]]) for i, c in enumerate(("ppl", "bpb", "tokens", "windows"))]
        assert [ppl["ppl"], ppl["bpb"], ppl["tokens"], ppl["windows"]] == want == [15.0, 2.0, 300, 5]  # by hand
        assert ppl["runs"] == 2
        (pk,) = s.view("passkey")
        assert (pk["acc"], pk["n"]) == (combined("acc", [a[4], b[4]]), combined("n", [a[5], b[5]])) == (0.4, 40)
        (dg,) = s.view("diagnostics", where="cell = '1x2'")
        assert (dg["acc"], dg["n"]) == (combined("acc", [a[6], b[6]]), combined("n", [a[7], b[7]])) == (0.75, 10)
        s.con.close()
