"""Build the static leaderboard site from the DuckDB store: plain HTML + inline SVG + one small
script (sorting, filtering), so ``leaderboard/public/index.html`` opens from file:// offline.

The site is a package of pages: one module per page, each ``render(store) -> Page`` (path, title, html), listed
in nav order by ``leaderboard.site.pages.PAGES``, which makes both the navigation and the build (``build.py``). The
HTML is in leaderboard/site/templates/ (Jinja, autoescaping: every text from the store is escaped), the SQL in
``views.sql`` (named views ``site_<name>``, created on the read-only connection at build time; ``context.SiteStore``
reads them). Pages: ``index.html`` (``index.py``: the training length and budget, the papers with the claims page's
verdicts, each encoding against RoPE with its interval (``leaderboard/site/front.py``), encodings x task groups, context
extension, all runs), ``ppl.html``, ``passkey.html``, ``diagnostics.html``, ``training.html``,
``efficiency.html``, ``runs/<run_id>.html`` (provenance + metrics + samples), ``claims.html``
(``leaderboard/site/claims_page.py``, from the claims stage's leaderboard/claims.duckdb when there is one, else from
the store's claims tables) when there is a claims table, ``ladder.html`` (``ladder.py``: each encoding ÷ RoPE at
every model size a source trained, issue 43's ladder), ``compare.html`` and ``data.html`` with
``data/<table>.csv|json`` for every store table and every table shown.

    python -m leaderboard.site --db leaderboard/peeval.duckdb [--claims-db leaderboard/claims.duckdb]
                               --out leaderboard/public

The package owns every page and what renders one: the page modules above, the page registry and templates
(``pages.py``, ``templates/``), the inline-SVG charts (``charts.py``), the front page's comparisons against RoPE
(``front.py``), the compare page's numbers (``compare_numbers.py``), the claims page (``claims_page.py``) and the
DVC plot template (``ppl_vs_length.vl.json``). Row 8 of leaderboard's column (docs/design.md): may import
``leaderboard.claims``, ``leaderboard.store``, ``leaderboard._cli`` and peeval's library (rows 0-5).
"""

from leaderboard.site.build import DEFAULT_OUT, build_site, main
from leaderboard.site.context import Page, SiteStore, fmt
from leaderboard.site.output import MARKER, SiteOutError
from leaderboard.site.stats import leaderboard_stats

__all__ = ["DEFAULT_OUT", "MARKER", "Page", "SiteOutError", "SiteStore", "build_site", "fmt", "leaderboard_stats",
           "main"]  # fmt: skip
