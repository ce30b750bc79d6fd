"""The generic page of a task family whose cells are context lengths (``peeval.tasks.family.SitePage`` without
a module of its own, e.g. lm-eval's RULER): per task, one line per name of its score against the length."""

from __future__ import annotations

from collections import defaultdict

from leaderboard.site.charts import line_charts
from leaderboard.site.context import Page, SiteStore
from leaderboard.site.tables import chart_page
from peeval.tasks.family import families


def render(store: SiteStore, family: str) -> Page | None:
    """The family's page, or None (no page, no menu entry: ``SiteStore.hidden_pages``) when no run holds it."""
    page = next(f.page for f in families() if f.name == family)
    rows = store.view("family_lengths", "family = ?", [family], order="task, name, length")
    if not rows:
        return None
    train_len = store.training_length()
    ylabel = page.ylabel or "score"
    charts = []
    for task in sorted({r["task"] for r in rows}):
        series: dict[str, list] = defaultdict(list)
        for r in rows:
            if r["task"] == task:
                series[r["name"]].append((r["length"], r["value"]))
        xs = [x for pts in series.values() for x, _ in pts]
        marks = [(train_len, f"training length {train_len}")] if train_len and min(xs) <= train_len <= max(xs) else []
        charts += line_charts(series, title=f"{task}: {ylabel} vs context length", xlabel="context length (tokens)",
                              ylabel=ylabel, logx=True, vlines=marks)  # fmt: skip
    return chart_page(store, page.href, page.title or page.text, charts, note=page.note, empty=f"no {page.text} runs",
                      tid=f"{family}_table", rows=rows, headers=store.columns("family_lengths"))  # fmt: skip
