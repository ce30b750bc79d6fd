"""The site's tables (leaderboard/site/templates/table.html): sortable, filterable, each with its CSV / JSON download;
and the chart pages' layout (templates/charts.html: charts above the table they are drawn from)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from leaderboard.site import pages
from leaderboard.site.context import Page, SiteStore, fmt, jsonable

#: a table longer than this many rows is folded (a <details> closed by default): the page leads with its answer,
#: and a 240-row list of runs made the front page 59 screens tall (issue 68 item 11)
FOLD_ROWS = 12


@dataclass
class Cell:
    """A table cell: shown text, the value sorting uses, an optional link and css class; under the text its
    standard error (``se``), a win / loss word (``outcome``), a line of support (``sub``) and the claims that used
    its runs (``claims``: (claim_id, verdict), linked to the claims page)."""

    text: str
    sort: Any = None
    href: str | None = None
    cls: str = ""
    se: str | None = None
    outcome: str | None = None
    sub: str | None = None
    claims: list[tuple[str, str]] = field(default_factory=list)


def _cell(c: Any) -> Cell:
    """A value as a cell (a number: right-aligned, sorted as a number); a Cell as it is."""
    if isinstance(c, Cell):
        return c
    num = isinstance(c, (int, float)) and not isinstance(c, bool)
    return Cell(fmt(c), c if num else None, cls="num" if num else "")


def table(
    store: SiteStore,
    tid: str,
    headers: list[str],
    rows: list[list[Any]],
    *,
    prefix: str = "",
    filt: bool = True,
    table_cls: str = "",
    wide: bool = False,
    download: bool = True,
    fold: int | None = FOLD_ROWS,
) -> pages.Markup:
    """A sortable, filterable table plus its CSV / JSON downloads (``data/<tid>.csv|json``, the sort values);
    ``wide``: in a box that scrolls sideways on its own (the page never does); ``download=False``: rows a store
    table's download already holds (a run page's metrics), not written a second time; more rows than ``fold``
    (None: never) and it is folded, its summary saying how many rows and columns it holds."""
    assert tid not in store.table_ids, tid
    if download:
        store.table_ids.add(tid)
        plain = [[c.sort if isinstance(c, Cell) and c.sort is not None else (c.text if isinstance(c, Cell) else c)
                  for c in r] for r in rows]  # fmt: skip
        store.data_files(tid, headers, plain)
    cells = [[_cell(c) for c in r] for r in rows]
    shown = [[{**c.__dict__, "sort": None if c.sort is None else str(jsonable(c.sort)),
               "claims": c.claims if store.claims_html else []} for c in r] for r in cells]  # fmt: skip
    html = pages.render("table.html", tid=tid, headers=headers, rows=shown, prefix=prefix, filt=filt, wide=wide,
                        tcls=f"sortable {table_cls}".strip(), download=download,
                        folded=fold is not None and len(rows) > fold, n_rows=len(rows))  # fmt: skip
    return pages.Markup(html)


def page(store: SiteStore, path: str, title: str, template: str, **context) -> Page:
    """A page of the site: ``template`` (it extends base.html) with the navigation and the prefix of ``path``."""
    return Page(path, title, pages.render(template, title=title, prefix="../" * path.count("/"),
                                          links=store.nav(), **context))  # fmt: skip


def chart_page(store: SiteStore, path: str, title: str, charts: list[str], *, note: str = "", empty: str, tid: str,
               headers: list[str], rows: list[dict], template: str = "charts.html") -> Page:  # fmt: skip
    """A page of charts (or the line ``empty`` when there are none) above the table of the rows they are drawn
    from."""
    shown = table(store, tid, headers, [list(r.values()) for r in rows])
    return page(store, path, title, template, note=note, empty=empty, table=shown,
                charts=[pages.Markup(c) for c in charts])  # fmt: skip
