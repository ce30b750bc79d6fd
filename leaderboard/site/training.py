"""The training page: loss curves per encoding; a name trained with several seeds is drawn as the mean over its
seeds with the band of their range (min to max), never as one line zig-zagging through the seeds. Its table: one
row per checkpoint (its last point); every point is a download on the data page (training_curves)."""

from __future__ import annotations

import json
import math
from collections import defaultdict

from leaderboard.site.charts import line_charts
from leaderboard.site.context import Page, SiteStore
from leaderboard.site.tables import chart_page
from peeval.records import adapt_label, adapted_name, base_model_label, encoding_label

HEADERS = ["checkpoint", "shown as", "task", "steps", "tokens", "train_loss", "val_loss", "best val_loss", "elapsed_s"]


def curves(store: SiteStore) -> list[dict]:
    """Every logged point, with ``label`` (what the charts call its checkpoint) and ``group`` (its chart)."""
    rows = store.view("training_curves", order="checkpoint, step")
    bases = {r["checkpoint"]: base_model_label(json.loads(r["summary"]).get("gguf_file"))
             for r in store.view("adapted_bases")}  # fmt: skip
    # an extension of the pipeline's own model is named by its run ("rope (256 tokens) + tape")
    labels: dict[str, str] = {r["checkpoint"]: r["name"] for r in store.view("extended_names")}
    # a ladder rung's model by its row's size (``rope [4x32]``), never averaged with the default shape's curves
    sized = [r for r in store.view("pretrain_names") if r["size"]]
    labels |= {r["checkpoint"]: r["name"].rsplit(" @", 1)[0] for r in sized}
    for r in rows:
        ck = r["checkpoint"]
        if ck not in labels:
            opts = json.loads(r["pe_options"]) if r["pe_options"] else None
            base = bases.get(ck)
            labels[ck] = ((adapted_name(base, r["method"]) if base else adapt_label(r["method"])) if r["method"]
                          else encoding_label(r["pe"], opts) if r["pe"] else ck)  # fmt: skip
        r["label"] = labels[ck]
        r["group"] = "adaptation" if r["method"] else r["task"] or ""
    return rows


def charts(rows: list[dict]) -> list[str]:
    out = []
    for task in sorted({r["group"] for r in rows}):
        for col in ("train_loss", "val_loss"):
            by: dict[str, dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
            for r in rows:
                if r["group"] == task and r[col] is not None and math.isfinite(r[col]):
                    by[r["label"]][r["step"]][r["checkpoint"]] = r[col]
            series: dict[str, list] = {}
            bands: dict[str, list] = {}
            for label, steps in by.items():
                seeds = len({ck for vs in steps.values() for ck in vs})
                name = label if seeds == 1 else f"{label} (mean of {seeds} seeds)"
                series[name] = [(st, sum(vs.values()) / len(vs)) for st, vs in sorted(steps.items())]
                if seeds > 1:
                    bands[name] = [(st, min(vs.values()), max(vs.values())) for st, vs in sorted(steps.items())]
            if series:
                note = ", band: range over seeds" if bands else ""
                out += line_charts(series, title=f"{task or 'text pretraining'}: {col}{note}", xlabel="step",
                                   ylabel=col, bands=bands)  # fmt: skip
    return out


def last_points(rows: list[dict]) -> list[dict]:
    """One row per checkpoint: its last logged step, its last and best validation loss."""
    last: dict[str, dict] = {}
    for r in rows:  # ordered by checkpoint, step
        e = last.setdefault(r["checkpoint"], dict.fromkeys(HEADERS))
        e.update({"checkpoint": r["checkpoint"], "shown as": r["label"], "task": r["group"] or "text pretraining"})
        e.update({"steps" if k == "step" else k: r[k] for k in ("step", "tokens", "train_loss", "elapsed_s")
                  if r[k] is not None})  # fmt: skip
        if r["val_loss"] is not None and math.isfinite(r["val_loss"]):
            best = e["best val_loss"]
            e.update({"val_loss": r["val_loss"],
                      "best val_loss": r["val_loss"] if best is None else min(best, r["val_loss"])})  # fmt: skip
    return list(last.values())


def render(store: SiteStore) -> Page:
    rows = curves(store)
    return chart_page(store, "training.html", "training curves", charts(rows), empty="no training curves",
                      tid="training_summary", rows=last_points(rows), headers=HEADERS,
                      template="training.html")  # fmt: skip
