"""The site's pages in the navigation's order: the one list that makes both the navigation (``nav``) and the
build (leaderboard/site/build.py renders each entry's module in this order). A page is a module of
``leaderboard.site`` with ``render(store) -> Page`` (a list of pages for ``runs``; None when it has nothing to
show, as the claims page without a claims table). Adding a page: one module and one line here; a task family's
page comes from its declaration (``peeval.tasks.family.SitePage``: its own module, or the generic by-length page),
in the families' order after the leaderboard."""

from __future__ import annotations

from dataclasses import dataclass

from peeval.tasks.family import families


@dataclass(frozen=True)
class Entry:
    """``module``: the page's module (``leaderboard.site.<module>``); ``href`` / ``text``: its navigation link
    (None: a page reached from other pages, as ``runs/<run_id>.html``)."""

    module: str
    href: str | None = None
    text: str = ""
    family: str | None = None  # a family's page drawn by the generic module: the family's name


def family_pages() -> tuple[Entry, ...]:
    """The pages the task families declare, in the families' order."""
    return tuple(Entry(p.module or "by_length", p.href, p.text, None if p.module else f.name)
                 for f in families() if (p := f.page) is not None)  # fmt: skip


PAGES = (
    Entry("index", "index.html", "Leaderboard"),
    *family_pages(),
    Entry("training", "training.html", "Training"),
    Entry("efficiency", "efficiency.html", "Efficiency"),
    Entry("runs"),
    Entry("claims", "claims.html", "Claims"),
    Entry("compare", "compare.html", "Compare"),
    Entry("data", "data.html", "Data"),  # last: it lists the tables every page before it showed
)


def nav(claims: bool) -> list[tuple[str, str]]:
    """The navigation's (href, text) links; the claims page's only when there is one."""
    return [(e.href, e.text) for e in PAGES if e.href and (claims or e.href != "claims.html")]
