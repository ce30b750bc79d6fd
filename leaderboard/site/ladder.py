"""The sizes page (issue 43's ladder): each encoding's perplexity ÷ RoPE's at every model size a source trained it,
so the reader sees whether a difference grows or shrinks as the model grows. One small chart per encoding against
RoPE (a claim family: PoPE vs RoPE, TAPE vs RoPE, ...): x the rung's parameters (its RoPE model's), y the ratio
with its 95 % Welch interval over seeds (``leaderboard.site.front.compare``, the front page's own), in distribution
(the training length) and at the longest length, per corpus. A rung is a model shape: the profile's default
(a row name without a size) or a row named with its size (``rope [4x32]``, ingest's
``peeval.records.sized_label``); each ratio is against the RoPE of the same rung and source."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

from leaderboard.site import front
from leaderboard.site.charts import DASH_ADAPTED, DASH_OTHER, OTHER_COLORS, line_chart, series_style
from leaderboard.site.context import Page, SiteStore
from leaderboard.site.tables import chart_page
from peeval.records import encoding_label

TITLE = "model sizes: each encoding ÷ RoPE as the model grows"
EMPTY = "No ladder runs in this store: no encoding was trained at more than one model size (params/cpu-claims.yaml)."
NOTE = ("Each point: an encoding's perplexity ÷ RoPE's, both trained at one model size (a rung) with the same data "
        "and budget, the ratio of the geometric means over seeds, with its 95 % Welch interval on log perplexity "
        "(the shaded band; none with fewer than 2 seeds a side). x: the parameters of the rung's RoPE model. "
        "A flat line: the difference does not depend on the size; a line moving away from ×1: it grows with the "
        "model. The longest length: the longest that both sides of the rung measured.")  # fmt: skip
PARITY = "parity ×1"
HEADERS = ["encoding", "source", "rung", "parameters", "corpus", "length", "ratio", "CI low", "CI high", "support",
           "outcome"]  # fmt: skip


def rungs(rows: list[dict]) -> dict[tuple[str, Any], dict]:
    """(source, size) -> {"params": RoPE's parameters, "runs": label -> (corpus, length) -> [front.Run]}: the
    pretrained runs of ``ladder_ppl`` by rung (size: ``runs.size``, None for the profile's default shape)."""
    out: dict[tuple[str, Any], dict] = {}
    for r in rows:
        opts = json.loads(r["pe_options"]) if isinstance(r["pe_options"], str) else (r["pe_options"] or {})
        empty = {"params": [], "runs": defaultdict(dict), "shape": set()}
        rung = out.setdefault((r["source"], r["size"]), empty)
        rung["shape"].add((r["layers"], r["width"]))
        label = encoding_label(r["pe"], opts)
        if label == front.BASELINE and r["params"] and r["run_id"] not in {p[0] for p in rung["params"]}:
            rung["params"].append((r["run_id"], r["params"]))
        if r["ppl"] is not None:
            cell = rung["runs"][label].setdefault((r["corpus"], r["length"]), [])
            cell.append(front.Run(float(r["ppl"]), None, None, r["tokens"], r["run_id"]))
    for rung in out.values():
        ps = [p for _, p in rung["params"]]
        rung["params"] = sum(ps) / len(ps) if ps else None
    return out


def ladder_points(rows: list[dict], train_len: int | None) -> list[dict]:
    """One point per (source, encoding, corpus, length kind, rung) where the encoding is on >= 2 rungs of a source
    that have a RoPE: ``ratio``, ``lo`` / ``hi`` (None without an interval), ``params`` (the rung's x)."""
    by = rungs(rows)
    points = []
    for source in sorted({s for s, _ in by}):
        mine = {size: rung for (s, size), rung in by.items() if s == source and rung["params"]}
        labels = {lab for rung in mine.values() for lab in rung["runs"] if lab != front.BASELINE}
        for label in sorted(labels):
            on = [size for size, rung in mine.items() if label in rung["runs"] and front.BASELINE in rung["runs"]]
            if len(on) >= 2:
                for size in on:
                    rung = mine[size]
                    head = {"encoding": label, "source": source, "rung": _rung_text(size, rung["shape"]),
                            "params": rung["params"]}  # fmt: skip
                    points += [{**head, **p} for p in _rung_points(rung["runs"], label, train_len)]
    return points


def _rung_points(runs: dict, label: str, train_len: int | None) -> list[dict]:
    """``label`` ÷ RoPE in one rung, per corpus: at the training length (in distribution) and the longest."""
    x, base = runs[label], runs[front.BASELINE]
    common = [k for k in x if k in base]
    out = []
    for corpus in sorted({c for c, _ in common}):
        lengths = sorted(L for c, L in common if c == corpus)
        where = {"in distribution": train_len if train_len in lengths else lengths[0], "longest": lengths[-1]}
        for kind, length in where.items():
            col = front.Column(f"ppl {corpus}", f"ppl@{length}", corpus, "ppl", length)
            vc = front.compare(col, x[(corpus, length)], base[(corpus, length)])
            if vc is not None:
                lo, hi = (math.exp(vc.diff.lo), math.exp(vc.diff.hi)) if vc.diff else (None, None)
                out.append({"corpus": corpus, "kind": kind, "length": length, "ratio": vc.sort, "lo": lo, "hi": hi,
                            "support": vc.sub, "outcome": vc.outcome})  # fmt: skip
    return out


def _rung_text(size: str | None, shapes: set) -> str:
    """``4x32`` (runs.size); the profile's default shape as its summaries recorded it: ``4x48 (the profile's)``."""
    if size is not None:
        return size
    known = sorted(f"{a}x{b}" for a, b in shapes if a is not None and b is not None)
    return f"{'/'.join(known)} (the profile's)" if known else "the profile's shape"


def ladder_charts(points: list[dict]) -> list[str]:
    """One chart per (source, encoding): a line per corpus (the encoding's colour for the first, then others) and
    length kind (in distribution solid, the longest dashed) across the rungs, its interval a band, and the parity
    line ×1 (grey, dotted)."""
    charts = []
    for source, label in dict.fromkeys((p["source"], p["encoding"]) for p in points):
        mine = [p for p in points if p["source"] == source and p["encoding"] == label]
        corpora = list(dict.fromkeys(p["corpus"] for p in mine))
        colours = [series_style(label)[0], *(c for c in OTHER_COLORS[1:] if c != series_style(label)[0])]
        series: dict[str, list] = defaultdict(list)
        bands: dict[str, list] = defaultdict(list)
        styles: dict[str, tuple[str, str]] = {}
        for p in mine:  # one corpus: named in the title, so the legend reads whole ("in distribution", "longest")
            name = p["kind"] if len(corpora) == 1 else f"{p['corpus']}, {p['kind']}"
            styles[name] = (colours[corpora.index(p["corpus"]) % len(colours)], DASH_ADAPTED if p["kind"] == "longest"
                            else "")  # fmt: skip
            series[name].append((p["params"], p["ratio"]))
            if p["lo"] is not None:
                bands[name].append((p["params"], p["lo"], p["hi"]))
        xs = sorted({p["params"] for p in mine})
        series[PARITY] = [(xs[0], 1.0), (xs[-1], 1.0)]
        styles[PARITY] = ("#636363", DASH_OTHER)
        where = "" if source == "local" else f" ({source})"
        on = f" on {corpora[0]}" if len(corpora) == 1 else ""
        charts.append(line_chart(dict(series), title=f"{label} ÷ rope by model size{on}{where}",
                                 xlabel="parameters (the rung's RoPE model)", ylabel=f"ppl {label} ÷ ppl rope",
                                 logx=True, logy=True, bands=dict(bands), styles=styles))  # fmt: skip
    return charts


def render(store: SiteStore) -> Page:
    points = ladder_points(store.view("ladder_ppl", order="source, name, run_id, corpus, length"),
                           store.training_length())  # fmt: skip
    rows = [{"encoding": p["encoding"], "source": p["source"], "rung": p["rung"], "parameters": round(p["params"]),
             "corpus": p["corpus"], "length": f"{p['length']} ({p['kind']})", "ratio": p["ratio"], "CI low": p["lo"],
             "CI high": p["hi"], "support": p["support"], "outcome": p["outcome"]} for p in points]  # fmt: skip
    return chart_page(store, "ladder.html", TITLE, ladder_charts(points), note=NOTE if points else "", empty=EMPTY,
                      tid="ladder_table", headers=HEADERS, rows=rows)  # fmt: skip
