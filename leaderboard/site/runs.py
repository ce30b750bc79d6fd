"""A page per run (``runs/<run_id>.html``): its provenance, the data it read, its metrics and its first samples
per task (all of them a download: ``data/samples_<run_id>.csv|json``)."""

from __future__ import annotations

import json
from typing import Any

from leaderboard.site.context import Page, SiteStore, fmt, natural_key
from leaderboard.site.tables import page, table
from peeval.records import NOT_RECORDED

SAMPLES_PER_TASK = 100
SAMPLE_COLUMNS = ["task", "doc_id", "prompt", "target", "response", "correct"]
DATA_COLUMNS = ["task", "source", "location", "config", "split", "revision", "documents", "documents_sha256", "params"]
METRIC_COLUMNS = ["task", "metric", "filter", "value", "stderr", "n"]


def provenance(key: str, v: Any) -> tuple[str, str, bool]:
    """(key, shown value, whether it is preformatted): params and pe_options as indented JSON."""
    if key in ("params", "pe_options") and isinstance(v, str):
        try:
            return key, json.dumps(json.loads(v), indent=1, sort_keys=True), True
        except ValueError:
            pass
    return key, fmt(v), False


def run_page(store: SiteStore, run: dict) -> Page:
    rid = run["run_id"]
    metrics = store.view("run_metrics", "run_id = ?", [rid])
    metrics.sort(key=lambda m: (m["task"], natural_key(m["metric"]), m["filter"]))
    samples = store.view("run_samples", "run_id = ? AND k <= ?", [rid, SAMPLES_PER_TASK], order="task, doc_id")
    store.data_files(f"samples_{rid}", SAMPLE_COLUMNS, [[s[c] for c in SAMPLE_COLUMNS] for s in samples])
    read = store.view("run_data", "run_id = ?", [rid], order="task")
    read_rows = [[store.labels.get((rid, d["task"]), d["task"]), *(d[c] for c in DATA_COLUMNS)] for d in read]
    read_table = (table(store, f"data_{rid}", ["shown as", *DATA_COLUMNS], read_rows, prefix="../")
                  if read else None)  # fmt: skip
    metric_table = table(store, f"metrics_{rid}", METRIC_COLUMNS, [[m[c] for c in METRIC_COLUMNS] for m in metrics],
                         prefix="../")  # fmt: skip
    return page(store, f"runs/{rid}.html", f"run {run['name']} ({rid})", "run.html", run_id=rid,
                prov=[provenance(k, v) for k, v in run.items()], read=read_table, not_recorded=NOT_RECORDED,
                metrics=metric_table, per_task=SAMPLES_PER_TASK,
                samples=[{**s, "correct": fmt(s["correct"])} for s in samples])  # fmt: skip


def render(store: SiteStore) -> list[Page]:
    return [run_page(store, run) for run in store.view("runs")]
