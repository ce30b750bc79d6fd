"""The data page: every table of the store and of the claims stage, and every table the other pages show, as
CSV and JSON downloads (``data/<table>.csv|json``). Built last: it lists the tables the pages before it showed."""

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
        store.data_files(t, rel.columns, [list(r) for r in rel.fetchall()])
        tables.append(t)
    return page(store, "data.html", "data downloads", "data.html", tables=tables, shown=sorted(store.table_ids))
