"""The passkey page: exact match of the pass key per (context length, needle depth) cell, a heatmap per name."""

from __future__ import annotations

from leaderboard.site.charts import heatmap
from leaderboard.site.context import Page, SiteStore
from leaderboard.site.tables import chart_page


def render(store: SiteStore) -> Page:
    rows = store.view("passkey", order="name, length, depth")
    charts = []
    for name in sorted({r["name"] for r in rows}):
        mine = [r for r in rows if r["name"] == name]
        depths = sorted({r["depth"] for r in mine})
        lengths = sorted({r["length"] for r in mine})
        vals = {(r["depth"], r["length"]): r["acc"] for r in mine}
        charts.append(heatmap(depths, lengths, vals, title=f"passkey: {name}", row_label="depth", col_label="length"))
    return chart_page(store, "passkey.html", "passkey retrieval", charts, empty="no passkey runs", tid="passkey_table",
                      note="Exact match of the pass key per (context length, needle depth) cell.",
                      headers=store.columns("passkey"), rows=rows)  # fmt: skip
