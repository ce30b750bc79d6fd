"""The efficiency page: parameters, FLOPs per token and throughput of each training / adaptation run."""

from __future__ import annotations

from leaderboard.site.context import Page, SiteStore
from leaderboard.site.tables import page, table


def render(store: SiteStore) -> Page:
    rows = store.view("efficiency", order="task, pe, method, checkpoint")  # checkpoint: seeds in one order
    shown = table(store, "efficiency_table", store.columns("efficiency"), [list(r.values()) for r in rows])
    return page(store, "efficiency.html", "efficiency", "efficiency.html", table=shown)
