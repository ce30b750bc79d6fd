"""The data page: every table of the store and of the claims stage, and every table the other pages show, as
downloads: a store table once, as gzip'd CSV (``data/<table>.csv.gz``), a table a page shows as CSV and JSON
(``data/<table>.csv|json``). Built after the pages: it lists the tables they showed."""

from __future__ import annotations

from leaderboard.site.context import Page, SiteStore
from leaderboard.site.tables import page
from leaderboard.store import CLAIM_TABLES, TABLE_COLUMNS

#: every table of the store and of the claims stage (read from its own database when the site has one)
STORE_TABLES = (*TABLE_COLUMNS, *CLAIM_TABLES)


def render(store: SiteStore) -> Page:
    tables = []
    for t in STORE_TABLES:
        claims = t in CLAIM_TABLES
        if not store.has_table(t, claims=claims):
            continue
        # the whole table, sorted on all its columns: the same rows ingested in another order give the same file
        rel = (store.claims_con if claims else store.con).table(t).order("ALL")  # DuckDB's relation API
        store.data_files(t, rel.columns, [list(r) for r in rel.fetchall()], whole=True)
        tables.append(t)
    return page(store, "data.html", "data downloads", "data.html", tables=tables, shown=sorted(store.table_ids))
