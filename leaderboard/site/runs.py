"""A page per run (``runs/<run_id>.html``), titled by what ran (name, tasks, kind, seed): first a summary table,
then its metrics, its first samples per task (texts clipped; every sample whole in the store's download
``data/samples.csv.gz``), the data it read, and its whole provenance record as JSON last."""

from __future__ import annotations

import json
from typing import Any

from leaderboard.site.context import Page, SiteStore, fmt, natural_key
from leaderboard.site.responses import response_words
from leaderboard.site.tables import page, table
from peeval.records import NOT_RECORDED

SAMPLES_PER_TASK = 20
#: characters of a sample's text shown on the page (a prompt's end, a target's or response's start); the download
#: holds them whole (a SCROLLS prompt is a document: 100 of them made one run page 750 kB)
CLIP = 400
#: the summary table, first on the page: what ran, where, with what
SUMMARY = ("name", "kind", "pe", "pe_options", "checkpoint", "seed", "training_length", "max_length", "protocol",
           "source", "machine", "date", "run_id")  # fmt: skip
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


def _clip(text: Any, end: bool = False) -> str:
    """A sample's text as the page shows it: at most ``CLIP`` characters (a prompt's end, another text's start)."""
    text = "" if text is None else str(text)
    if len(text) <= CLIP:
        return text
    return f"…{text[-CLIP:]}" if end else f"{text[:CLIP]}…"


def run_page(store: SiteStore, run: dict) -> Page:
    rid = run["run_id"]
    metrics = store.view("run_metrics", "run_id = ?", [rid])
    metrics.sort(key=lambda m: (m["task"], natural_key(m["metric"]), m["filter"]))
    samples = store.view("run_samples", "run_id = ? AND k <= ?", [rid, SAMPLES_PER_TASK], order="task, doc_id")
    tasks = sorted({store.labels.get((rid, m["task"]), m["task"]) for m in metrics})
    what = f"{run['name']}: {', '.join(tasks) or 'no metrics'} ({run['kind']}, seed {fmt(run['seed'])})"
    summary = [(k, *provenance(k, run.get(k))[1:]) for k in SUMMARY if k in run]
    read = store.view("run_data", "run_id = ?", [rid], order="task")
    read_rows = [[store.labels.get((rid, d["task"]), d["task"]), *(d[c] for c in DATA_COLUMNS)] for d in read]
    # rows of the store's task_data and metrics tables (their downloads: the data page), not written again per run
    read_table = (table(store, f"data_{rid}", ["shown as", *DATA_COLUMNS], read_rows, prefix="../", download=False)
                  if read else None)  # fmt: skip
    metric_table = table(store, f"metrics_{rid}", METRIC_COLUMNS, [[m[c] for c in METRIC_COLUMNS] for m in metrics],
                         prefix="../", download=False)  # fmt: skip
    record = json.dumps({k: _parsed(v) for k, v in run.items()}, indent=1, default=str, ensure_ascii=False)
    return page(store, f"runs/{rid}.html", what, "run.html", run_id=rid, summary=summary, record=record,
                read=read_table, not_recorded=NOT_RECORDED, metrics=metric_table, per_task=SAMPLES_PER_TASK,
                clip=CLIP, samples=[{**s, "prompt": _clip(s["prompt"], end=True), "target": _clip(s["target"]),
                                     "response": _clip(response_words(s["response"])), "correct": fmt(s["correct"])}
                                    for s in samples])  # fmt: skip


def _parsed(v: Any) -> Any:
    """A JSON column (params, pe_options) as the object it holds, so the record reads as one JSON document."""
    if isinstance(v, str) and v[:1] in "{[":
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def render(store: SiteStore) -> list[Page]:
    return [run_page(store, run) for run in store.view("runs")]
