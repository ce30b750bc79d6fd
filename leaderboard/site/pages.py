"""The site's page templates (leaderboard/site/templates/): one base page (head, header, navigation) that every
page of the site fills and the claims page extends. Jinja2 with autoescaping on: a text from the store is
escaped unless the code marks it as already-built HTML (``Markup``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

TEMPLATES = Path(__file__).with_name("templates")
ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


#: a break opportunity inside a word that a browser takes without a hyphen being added: after a hyphen or a slash
INNER_BREAK = re.compile(r"[-/‐–—]")


def whole_words(text: str) -> Markup:
    """``text`` escaped, each word holding a hyphen or a slash (``PG-19``, ``allenai/ai2_arc``) in a ``nowrap``
    span: a table header wraps at its spaces only (site.css: never inside a word; issue 68 item 11)."""
    if isinstance(text, Markup):  # already HTML: as built
        return text
    words = re.split(r"(\s+)", str(text))
    return Markup("".join(f'<span class="nw">{escape(w)}</span>' if INNER_BREAK.search(w) else escape(w)
                          for w in words))  # fmt: skip


ENV.filters["whole_words"] = whole_words


def render(template: str, **context) -> str:
    """A template of leaderboard/site/templates/ filled with ``context`` (every value escaped unless ``Markup``)."""
    return ENV.get_template(template).render(**context)


# ----------------------------------------------------------------------------- the site's pages, in nav order
#: The one list that makes both the navigation (``nav``) and the build (leaderboard/site/build.py renders each
#: entry's module in this order). A page is a module of ``leaderboard.site`` with ``render(store) -> Page`` (a list
#: of pages for ``runs``; None when it has nothing to show, as the claims page without a claims table). Adding a
#: page: one module and one line here. (It lives beside the templates, not in the site package, so the claims
#: page, which the site package renders, reads the navigation without importing that package.)


@dataclass(frozen=True)
class Entry:
    """``module``: the page's module (``leaderboard.site.<module>``); ``href`` / ``text``: its navigation link
    (None: a page reached from other pages, as ``runs/<run_id>.html``)."""

    module: str
    href: str | None = None
    text: str = ""
    family: str | None = None  # a family's page drawn by the generic module: the family's name


def family_pages() -> tuple[Entry, ...]:
    """The pages the task families declare (``peeval.tasks.family.SitePage``: its own module, or the generic
    by-length page), in the families' order."""
    from peeval.tasks.family import families

    return tuple(Entry(p.module or "by_length", p.href, p.text, None if p.module else f.name)
                 for f in families() if (p := f.page) is not None)  # fmt: skip


PAGES = (
    Entry("index", "index.html", "Leaderboard"),
    *family_pages(),  # each task family's page, in the families' order after the leaderboard
    Entry("training", "training.html", "Training"),
    Entry("efficiency", "efficiency.html", "Efficiency"),
    Entry("runs"),
    Entry("claims", "claims.html", "Claims"),
    Entry("ladder", "ladder.html", "Sizes"),  # the claims' differences at each model size (issue 43)
    Entry("compare", "compare.html", "Compare"),
    Entry("data", "data.html", "Data"),  # it lists the tables every page before it showed
    Entry("glossary", "glossary.html", "Glossary"),  # the terms every page links to
)


def nav(claims: bool, hidden: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """The navigation's (href, text) links; the claims page's only when there is one, and none to a page the
    store has nothing for (``hidden``: a task family's page, such as RULER's, without runs)."""
    return [(e.href, e.text) for e in PAGES
            if e.href and (claims or e.href != "claims.html") and e.href not in hidden]  # fmt: skip


__all__ = ["ENV", "PAGES", "Entry", "Markup", "nav", "render", "whole_words"]
