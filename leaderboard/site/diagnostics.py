"""The diagnostics page: accuracy by split per task, and addition's accuracy per (length of a, length of b)."""

from __future__ import annotations

from leaderboard.site.charts import heatmap
from leaderboard.site.context import Page, SiteStore
from leaderboard.site.tables import chart_page

NOTE = ("Exact match of the answer (greedy). Addition: accuracy per (length of a, length of b) cell; the "
        "training lengths are the top-left block.")  # fmt: skip


def render(store: SiteStore) -> Page:
    rows = store.view("diagnostics", order="task, split, name, len_a, len_b, cell")
    charts = []
    overall = [r for r in rows if r["cell"] == "all"]
    for task in sorted({r["task"] for r in overall}):
        mine = [r for r in overall if r["task"] == task]
        names, splits = sorted({r["name"] for r in mine}), sorted({r["split"] for r in mine})
        vals = {(r["name"], r["split"]): r["acc"] for r in mine}
        charts.append(heatmap(names, splits, vals, title=f"{task}: accuracy by split", row_label="encoding",
                              col_label="split", cell=70))  # fmt: skip
    add = [r for r in rows if r["len_a"] is not None]
    for task, split, name in sorted({(r["task"], r["split"], r["name"]) for r in add}):
        mine = [r for r in add if (r["task"], r["split"], r["name"]) == (task, split, name)]
        la, lb = sorted({r["len_a"] for r in mine}), sorted({r["len_b"] for r in mine})
        vals = {(r["len_a"], r["len_b"]): r["acc"] for r in mine}
        charts.append(heatmap(la, lb, vals, title=f"{task} {split}: {name}", row_label="len a", col_label="len b",
                              cell=26))  # fmt: skip
    return chart_page(store, "diagnostics.html", "diagnostics", charts, note=NOTE, empty="no diagnostic runs",
                      tid="diagnostics_table", rows=rows, headers=store.columns("diagnostics"))  # fmt: skip
