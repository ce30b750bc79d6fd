"""The rows of one run, from its results file and what its record says of its model (:class:`RunRecord`):
shared by the two results parsers, ``results`` (peeval's) and ``external`` (plain lm-eval's)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

from leaderboard.store import RunKind
from peeval.records import DATA_SOURCES, is_cell

from .identity import data_reads, eval_protocol, run_identity, scoring_options, training_identity
from .rows import MetricRow, PplBlockRow, RunRow, RunRows, SampleRow, TaskDataRow
from .samples import _sample_rows
from .values import SHA256, IngestError, check_cell, directions, obj, parse_metrics, read_json, rel, whole


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """What a run's own record says of its model: its kind and row name (never guessed from the model's name),
    and what the summaries of the checkpoint it evaluated add."""

    kind: RunKind
    name: str
    source: str
    pe: str | None
    pe_options: dict
    checkpoint: str | None  # as stored: relative to the ingest's root when inside it
    train: dict | None = None  # the checkpoint's train_summary.json
    adapt: dict | None = None  # the adapter's adapt_summary.json
    base_train: dict | None = None  # the budget of the peeval model an adapter extended (claims' scale criterion)
    size: str | None = None  # a pretrained model's shape when not its profile's (``4x32``; its name says ``[4x32]``)
    task_setting: str | None = None  # a diagnostic model's generator parameters off its task's defaults (n_instr=256)


@dataclasses.dataclass(frozen=True)
class Measured:
    """What a results file measured, before its record is read: the metrics, samples and perplexity blocks."""

    run_id: str
    metrics: list[tuple[str, str, str, float | None, float | None]]
    samples: list[SampleRow]
    counts: dict[tuple[str, str, str], int]  # documents per (task, filter, metric), from the samples
    blocks: list[PplBlockRow]
    n_samples: dict


def read_results(path: Path) -> tuple[dict, bytes]:
    """A results file (``results.json`` or lm-eval's own) and its bytes (a run's id is their sha256)."""
    raw = path.read_bytes() if path.is_file() else b""
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict) or not doc["results"]:
        raise IngestError(f"{path}: no 'results' object (partial or not an lm-eval results file)")
    return doc, raw


def measure(doc: dict, raw: bytes, path: Path, samples_suffix: str = "") -> Measured:
    """Every metric (checked) and sample of a results file; IngestError when it holds no metric."""
    run_id = hashlib.sha256(raw).hexdigest()[:16]
    metrics = parse_metrics(doc["results"], path)
    if not metrics:
        raise IngestError(f"{path}: the results hold no metric")
    if all(v is None for _, _, _, v, _ in metrics):  # shown as "not run" on the board, though it ran
        raise IngestError(f"{path}: every metric is null (or 'N/A'): the run measured nothing; evaluate it again")
    check_samples_account(doc, path, samples_suffix)
    samples, counts, blocks = _sample_rows(path.parent, run_id, samples_suffix)
    return Measured(run_id, metrics, samples, counts, blocks, obj(doc, "n-samples", ""))


def check_samples_account(doc: dict, path: Path, samples_suffix: str = "") -> None:
    """IngestError unless the samples files beside a results file are exactly those its writer recorded
    (``peeval.samples_files``, written by ``peeval eval``): a deleted or renamed file skipped the check of its
    numbers against their samples, and one of another run or task would be read as this run's. Results that
    record no list (plain lm_eval's, or written before peeval recorded it) are read as before."""
    listed = obj(doc, "peeval", "").get("samples_files")
    if listed is None:
        return
    if not (isinstance(listed, list) and all(isinstance(f, str) for f in listed)):
        raise IngestError(f"{path}: peeval.samples_files must be a list of file names, not {listed!r}")
    found = sorted(f.name for f in path.parent.glob(f"samples_*{samples_suffix}.jsonl"))
    if missing := sorted(set(listed) - set(found)):
        raise IngestError(f"{path}: its samples file {missing[0]} is missing (deleted or renamed"
                          f"{f'; {len(missing) - 1} more' if len(missing) > 1 else ''}): its numbers cannot be "
                          "checked against its samples; restore it or evaluate again")  # fmt: skip
    if extra := sorted(set(found) - set(listed)):
        raise IngestError(f"{path}: {extra[0]} lies beside it but is not one of the samples its run wrote "
                          f"({', '.join(listed) or 'none'}): another run's or task's file; move it away")  # fmt: skip


def summarised_subtasks(doc: dict, path: Path) -> list[str]:
    """The tasks that lm-eval ran inside a group that reports its own aggregate row (results.json
    ``group_subtasks``: BLiMP's 67 paradigms, MMLU's subjects under a category): the leaderboard shows
    the group's row, the run page every subtask."""
    groups = doc.get("group_subtasks") or {}
    if not isinstance(groups, dict) or not all(isinstance(v, list) for v in groups.values()):
        raise IngestError(f"{path}: 'group_subtasks' must map group names to lists of tasks")
    results = doc["results"]
    summarised = [g for g in groups if isinstance(results.get(g), dict) and any("," in k for k in results[g])]
    return sorted({t for g in summarised for t in groups[g] if t not in groups and t in results})


_READ_KEYS = ("source", "location", "config", "split", "revision", "documents", "documents_sha256", "params")


def _read_row(read: Any, where: str) -> dict:
    """One dataset a task read (results.json ``peeval.data[task][i]``), checked; ValueError naming ``where``."""
    if not isinstance(read, dict):
        raise ValueError(f"{where} must be an object")
    if read.get("source") not in DATA_SOURCES:
        raise ValueError(f"{where}.source {read.get('source')!r} is not one of {', '.join(DATA_SOURCES)}")
    if not isinstance(read.get("location"), str) or not read["location"]:
        raise ValueError(f"{where}.location must be a non-empty string")
    for key in ("config", "split", "revision"):
        if read.get(key) is not None and not isinstance(read[key], str):
            raise ValueError(f"{where}.{key} must be a string or null, not {read[key]!r}")
    sha = read.get("documents_sha256")
    if sha is not None and not (isinstance(sha, str) and SHA256.match(sha)):
        raise ValueError(f"{where}.documents_sha256 {sha!r} is not a sha256 (64 lower-case hex digits)")
    if read.get("params") is not None and not isinstance(read["params"], dict):
        raise ValueError(f"{where}.params must be an object or null")
    row = {k: read.get(k) for k in _READ_KEYS}
    row["documents"] = whole(read.get("documents"), f"{where}.documents")
    row["params"] = None if row["params"] is None else json.dumps(row["params"], sort_keys=True, default=str)
    return row


def task_data_rows(prov: dict, doc: dict, run_id: str) -> list[TaskDataRow]:
    """The ``task_data`` rows of one run: per task of its results, the datasets it read (``peeval.data``);
    a group the reads of its members. ValueError naming the key when the record is malformed."""
    data = prov.get("data")
    if data is None:
        return []
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError("peeval.data must map task names to lists of the datasets they read")
    reads = {task: [_read_row(r, f"peeval.data[{task!r}][{i}]") for i, r in enumerate(rs)] for task, rs in data.items()}
    groups = doc.get("group_subtasks") or {}

    def of(task: str, seen: frozenset = frozenset()) -> list[dict]:
        if task in reads:
            return reads[task]
        members = groups.get(task) if isinstance(groups, dict) else None
        if not isinstance(members, list) or task in seen:
            return []
        out = [r for m in members for r in of(m, seen | {task})]
        return [dict(t) for t in dict.fromkeys(tuple(sorted(r.items())) for r in out)]  # once each

    return [{"run_id": run_id, "task": task, **r} for task in doc["results"] for r in of(task)]


def training_length(train: dict | None, adapt: dict | None, prov: dict) -> int | None:
    """The window a run was trained for: a pretraining's length; an adapter's own ``seq_len`` when longer than
    its base's window (an extension), else the base's (SmolLM2 adapted at 512 keeps its 8192)."""
    native = whole((train or {}).get("training_length") or prov.get("training_length"), "training_length", 1)
    adapted = whole((adapt or {}).get("seq_len"), "adapt_summary seq_len", 1)
    return max(x for x in (native, adapted) if x is not None) if native or adapted else None


def _params(doc: dict, path: Path, prov: dict, model_args: dict, record: RunRecord) -> dict:
    """``runs.params``: what the run was, beyond its columns (JSON, keys sorted)."""
    train, adapt = record.train, record.adapt
    params = {
        "train": (train or {}).get("params"),
        "adapt": adapt,
        "model": prov.get("model"),
        "model_args": model_args,
        "limit": prov.get("limit"),
        "device": prov.get("device"),
        # weights depend on the training thread count (float sums in another order): part of what a run is
        "torch_threads": {"train": (train or adapt or {}).get("torch_threads"), "eval": prov.get("torch_threads")},
        "checkpoint_sha256": prov.get("checkpoint_sha256"),
        "rope_parameters": prov.get("rope_parameters"),
        "eval_metadata": obj(prov, "protocol", "peeval").get("metadata"),
        "versions": obj(prov, "versions", "peeval"),
    }
    # the size and tokenizer measured when the run was evaluated (any checkpoint; a Hugging Face one has no summary)
    if prov.get("model_params") is not None:
        params["model_params"] = whole(prov["model_params"], "peeval.model_params", 1)
    if isinstance(prov.get("tokenizer"), dict):
        params["tokenizer"] = {**prov["tokenizer"], "hash": prov.get("tokenizer_hash")}
    if record.base_train is not None:  # the budget of the model an extension started from (claims' scale criterion)
        params["base_train"] = record.base_train
    if subtasks := summarised_subtasks(doc, path):
        params["subtasks"] = subtasks
        # each group row's members, what its value is recomputed from (leaderboard.store.aggregate_mismatches)
        params["groups"] = {g: list(m) for g, m in (doc.get("group_subtasks") or {}).items() if g in doc["results"]}
    if unknown := directions(doc, path):  # metrics peeval's registry does not know: lm-eval's direction
        params["higher_is_better"] = unknown
    return params


def run_rows(doc: dict, path: Path, root: Path, prov: dict, record: RunRecord, got: Measured) -> RunRows:
    """Every row of one run: its runs row (named and kinded by ``record``), metrics, samples, perplexity blocks
    and the datasets its tasks read."""
    model_args = obj(prov, "model_args", "peeval")
    versions, protocol = obj(prov, "versions", "peeval"), obj(prov, "protocol", "peeval")
    try:
        date = dt.datetime.fromisoformat(str(prov["date"])).astimezone(dt.UTC).replace(tzinfo=None)
    except ValueError as e:
        raise IngestError(f"{path}: bad peeval.date ({e})") from e
    params = _params(doc, path, prov, model_args, record)
    train = record.train or {}
    # the training's seed (a pretraining's, an adapter's or extension's own), else the evaluation's
    seed = whole((record.train or record.adapt or {}).get("seed", prov.get("seed")), "seed", None)
    run: RunRow = {
        "run_id": got.run_id, "name": record.name, "kind": record.kind, "checkpoint": record.checkpoint,
        "pe": record.pe, "pe_options": json.dumps(record.pe_options, sort_keys=True),
        "params": json.dumps(params, sort_keys=True, default=str), "seed": seed,
        "git_commit": prov.get("git_commit"), "peeval_version": prov.get("peeval_version"),
        "lm_eval_version": versions.get("lm_eval") or doc.get("lm_eval_version"),
        "torch_version": versions.get("torch"),
        "transformers_version": versions.get("transformers") or doc.get("transformers_version"),
        "date": date, "max_length": whole(prov.get("max_length"), "peeval.max_length", 1),
        "training_length": training_length(record.train, record.adapt, prov),
        "protocol": protocol.get("ppl"), "dtype": prov.get("dtype"),
        "results_path": rel(path, root), "diag_task": train.get("task"), "source": record.source,
        "size": record.size, "task_setting": record.task_setting,
    }  # fmt: skip
    rows: RunRows = {"runs": [run], "metrics": [], "samples": got.samples, "ppl_blocks": got.blocks, "task_data": []}
    for task, metric, filt, value, se in got.metrics:
        rows["metrics"].append(_metric_row(got, task, metric, filt, value, se))
        if filt == "none":  # the cells of every family (check_cell: what a family parses as one)
            check_cell(task, metric, f"results[{task!r}][{metric + ',' + filt!r}]")
    rows["task_data"] = task_data_rows(prov, doc, got.run_id)
    # results of a peeval that did not yet record its samples files (``peeval.samples_files``): a task of theirs
    # without samples is read as before (shift stability logged none); today's are held to them; a
    # plain lm_eval run without --log_samples (no samples file at all) is read as before too; one whose samples
    # files are there but one task's is missing (deleted, renamed) is held to them
    pv = doc.get("peeval")
    run["_unsampled_ok"] = (isinstance(pv, dict) and "samples_files" not in pv) or (pv is None and not got.samples)
    # what makes two results the same run, whatever their bytes or folders (never stored: the duplicate check)
    run["_content"] = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    run["_identity"] = run_identity(params, sorted(doc["results"]), [record.pe, record.pe_options])
    run["_training"] = training_identity(record.train, params, sorted(doc["results"]), data_reads(rows["task_data"]))
    run["_protocol"] = eval_protocol(
        run["protocol"], params.get("limit"), list(doc["results"]), scoring_options(doc.get("configs"))
    )
    return rows


def _metric_row(got: Measured, task: str, metric: str, filt: str, value, se) -> MetricRow:
    """One metrics row; ``n``: the documents its samples counted, else lm-eval's n-samples (never for a cell)."""
    if (task, filt, metric) in got.counts:
        n = got.counts[(task, filt, metric)]
    else:
        ns = obj(got.n_samples, task, "n-samples")
        n = whole(ns.get("effective"), f"n-samples[{task!r}].effective") if not is_cell(metric) else None
    return {"run_id": got.run_id, "task": task, "metric": metric, "filter": filt, "value": value, "stderr": se, "n": n}
