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

from leaderboard import pages as registry  # the site's pages in nav order (leaderboard.pages.PAGES)
from leaderboard.site import Page, build_site
from leaderboard.site.context import VIEWS, view_sections
from peeval.records import METRICS

SITE = Path(__file__).resolve().parents[2] / "leaderboard" / "site"


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
        assert hrefs == [e.href for e in pages if e.href], html.name  # the registry's order, claims included
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
    for py in sorted(SITE.glob("*.py")):
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


def test_views_combine_seeds_as_the_metric_registry_says():
    """The per-cell views average a metric over the runs of one name and add up a count
    (``peeval.records.METRICS``: ``seeds``; a column the registry does not know is a count)."""
    sql = {st.name: st.sql for views in view_sections(VIEWS.read_text(encoding="utf-8")).values() for st in views}
    checked = 0
    for name in ("site_ppl_by_length", "site_passkey", "site_diagnostics"):
        # a mean is seed_mean: the runs' values added up in run-id order (the same runs in any ingest order: one mean)
        mean = r"\bseed_mean\(v\.(\w+), v\.run_id\) \1\b"
        for fn, col in [("avg", c) for c in re.findall(mean, sql[name])] + [
            ("sum", c) for c in re.findall(r"\bsum\(v\.(\w+)\) \1\b", sql[name])
        ]:
            want = "avg" if col in METRICS and METRICS[col].seeds == "mean" else "sum"
            assert fn == want, (name, col)
            checked += 1
        assert not re.search(r"\bavg\(", sql[name]), name  # avg() adds in scan order
    assert checked == 8
    macro = "CREATE TEMP MACRO seed_mean(x, run_id) AS list_avg(list(x ORDER BY run_id) FILTER (WHERE x IS NOT NULL))"
    assert sql["seed_mean"] == macro
