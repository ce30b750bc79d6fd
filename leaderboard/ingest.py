"""Ingest peeval outputs into the DuckDB store (schema and column docs: ``leaderboard/schema.sql``).

Inputs, found under the paths given (recursively):

- ``peeval eval`` results directories: ``results.json`` (+ ``samples_<task>.jsonl``);
- training checkpoints: ``train_summary.json`` + ``train_curve.csv``;
- adapters: ``adapt_summary.json``.

Idempotent: a run's id is the sha256 of its results.json, a checkpoint's key its path, and
every ingest first deletes the rows it is about to write (plus older runs read from the same
results path), so the same input twice gives the same rows. Transactional: every file is
parsed and checked before the database is opened; a malformed or partial file raises
:class:`IngestError` naming it and the database is left as it was. The inserts then run in
one transaction.

Sources kept apart (issue 42): every run carries its source, ``local`` (``peeval eval`` here), ``external`` (plain
lm_eval) or ``published/<profile>`` (a folder with a SOURCE.json, whether found under ``published`` or named as a
path, checked against its SOURCE.json first); a name never holds runs of two sources, and within a source one
checkpoint is one seed (a copied folder or a second evaluation on the same tasks is refused). A results folder
whose checkpoint's weights no longer have the sha256 recorded at evaluation time is refused.

    python -m leaderboard.ingest --db leaderboard/peeval.duckdb results/ checkpoints/
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from leaderboard._cli import run_command
from leaderboard.store import (
    CHECKPOINT_TABLES,
    DEFAULT_DB,
    EXTERNAL_SOURCE,
    RUN_TABLES,
    SOURCE_FILE,
    TABLE_COLUMNS,
    VIEWS,
    WRITTEN,
    RunKind,
    StoreError,
    connect,
    insert_rows,
    open_store,
)
from peeval._io import remove_database
from peeval.records import (
    CURVE_COLUMNS,
    DATA_SOURCES,
    DOC_SCORE_KEYS,
    LOCAL_SOURCE,
    METRICS,
    OUTCOME_KEYS,
    PASSKEY_TASK,
    PPL_BASES,
    PPL_PREFIX,
    PROVENANCE_KEY,
    adapted_name,
    base_model_label,
    clip_text,
    encoding_label,
    external_name,
    is_cell,
    metric_base,
    metric_kind,
    metric_spec,
    parse_passkey_metric,
    parse_ppl_metric,
    parse_result_key,
    ppl_corpus,
    published_name,
    published_source,
    shipped_name,
    stderr_key,
    trained_base_label,
)

TEXT_LIMIT = 3000  # samples: longer texts keep their head and tail


class IngestError(ValueError):
    """A malformed, partial or unreadable input file (the message names it)."""


# ----------------------------------------------------------------------------- helpers


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise IngestError(f"{path}: not a readable JSON file ({e})") from e


def _num(value: Any, where: str) -> float | None:
    """A metric value: number, bool, None or lm-eval's 'N/A' (range checks: :func:`check_metric`)."""
    if value is None or value == "N/A":
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.lower() in ("inf", "infinity", "-inf", "nan"):
        return float(value)
    raise ValueError(f"{where}: expected a number, got {value!r}")


#: DuckDB's BIGINT: a count beyond it cannot be stored as the number it is
BIGINT_MAX = 2**63 - 1


def _int(value: Any, where: str = "value", minimum: int | None = 0) -> int | None:
    """A count or id: None/'' stay None; anything else must be a whole number (>= ``minimum``,
    within DuckDB's BIGINT)."""
    if value is None or value == "":
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a whole number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(f) or f != int(f):
        raise ValueError(f"{where}: expected a whole number, got {value!r}")
    if minimum is not None and f < minimum:
        raise ValueError(f"{where}: {value!r} is below {minimum}")
    if abs(f) > BIGINT_MAX:
        raise ValueError(f"{where}: {value!r} does not fit a 64-bit integer")
    return int(f)


def _real(value: Any, where: str, lo: float = 0.0, hi: float = math.inf) -> float | None:
    """A finite number in [lo, hi] (None/'' stay None): losses, rates, times."""
    if value is None or value == "":
        return None
    try:
        v = float(value)
        if isinstance(value, bool):
            raise TypeError
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a number, got {value!r}") from None
    if not (math.isfinite(v) and lo <= v <= hi):
        raise ValueError(f"{where}: {value!r} is not a finite number in [{lo:g}, {hi:g}]")
    return v


#: what each kind of metric (peeval.records.METRICS) can be, and the words an error says it is not
_RANGES = {
    "fraction": (0.0, 1.0, "an accuracy in [0, 1]"),
    "percent": (0.0, 100.0, "a score in [0, 100]"),
    "perplexity": (1.0, math.inf, "a perplexity (>= 1, as exp of a non-negative NLL)"),
    "bits": (0.0, math.inf, "a bits-per-byte value (>= 0)"),
}


def check_metric(
    task: str, metric: str, value: float | None, stderr: float | None, where: str, stderr_where: str = "stderr"
) -> None:
    """ValueError naming ``where`` when a metric value cannot be a result of its task (its kind:
    ``peeval.records.metric_kind``).

    NaN never is (a broken run or bad task metadata, not a measurement). +inf is allowed only for
    peeval's ``ppl@L`` / ``bpb@L``: the perplexity task reports it when a model explodes (its
    documented contract, and a real outcome beyond the training length). Perplexity must be >= 1:
    ppl = exp(NLL / tokens) and a log-probability is <= 0, so anything below 1 is a sign error."""
    kind = metric_kind(task, metric)
    ppl_cell = task.startswith(PPL_PREFIX) and is_cell(metric)
    if value is not None:
        explodes = ppl_cell and kind in ("perplexity", "bits")  # +inf: a model that explodes
        if math.isnan(value) or value == -math.inf or (value == math.inf and not explodes):
            raise ValueError(f"{where}: {value!r} is not a finite number")
        if kind in _RANGES:
            lo, hi, what = _RANGES[kind]
            if not lo <= value <= hi:
                raise ValueError(f"{where}: {value!r} is not {what}")
        if kind == "count" and not (0 <= value <= BIGINT_MAX and value == int(value)):
            raise ValueError(f"{where}: {value!r} is not a count (a whole number >= 0 that fits a 64-bit integer)")
    if stderr is not None and not (math.isfinite(stderr) and stderr >= 0.0):
        raise ValueError(f"{stderr_where}: {stderr!r} is not a finite number >= 0")


def clip(text: Any) -> str | None:
    """A sample's text as the store keeps it: at most TEXT_LIMIT characters (``records.clip_text``)."""
    if text is None:
        return None
    return clip_text(text if isinstance(text, str) else json.dumps(text, default=str), TEXT_LIMIT)


def _rel(path: str | Path | None, root: Path) -> str | None:
    """A path as stored: relative to ``root`` when inside it, else absolute."""
    if path is None or path == "":
        return None
    p = Path(path)
    full = (root / p).resolve() if not p.is_absolute() else p.resolve()
    try:
        return full.relative_to(root.resolve()).as_posix()
    except ValueError:
        return full.as_posix()


# ----------------------------------------------------------------------------- parsing


def parse_metrics(results: dict, path: Path) -> list[tuple[str, str, str, float | None, float | None]]:
    """(task, metric, filter, value, stderr) for every metric of every task in ``results``, each value
    checked against what its metric can be (:func:`check_metric`)."""
    out = []
    for task, entry in results.items():
        if not isinstance(entry, dict):
            raise IngestError(f"{path}: results[{task!r}] is not an object")
        for key, value in entry.items():
            if (parsed := parse_result_key(key)) is None:
                continue
            metric, filt = parsed
            where = f"results[{task!r}][{key!r}]"
            se_where = f"results[{task!r}][{stderr_key(metric, filt)!r}]"
            try:
                v = _num(value, where)
                se = _num(entry.get(stderr_key(metric, filt)), se_where)
                check_metric(task, metric, v, se, where, se_where)
            except ValueError as e:
                raise IngestError(f"{path}: {e}") from e
            out.append((task, metric, filt, v, se))
    return out


def _check_cell(task: str, metric: str, where: str) -> None:
    """The cells the per-length / per-cell views parse (schema.sql) must be what they say: a ppl length
    a whole number >= 2, a passkey length >= 1 and depth in [0, 1]; ValueError naming ``where`` if not."""
    if ppl_corpus(task) is not None and metric_base(metric) in PPL_BASES:
        pm = parse_ppl_metric(metric)
        if pm is None or pm[1] < 2:  # a window of L tokens scores L-1: ppl@0, ppl@1, ppl@-3 are no lengths
            raise ValueError(f"{where}: the length must be a whole number >= 2")
    elif task == PASSKEY_TASK and (pk := parse_passkey_metric(metric)):
        length, depth = _int(pk[0], f"{where}: the length", 1), _real(pk[1], f"{where}: the depth", 0.0, 1.0)
        if length is None or depth is None:
            raise ValueError(f"{where}: a passkey cell needs a length and a depth")


def directions(doc: dict, path: Path) -> dict[str, dict[str, bool]]:
    """lm-eval's own ``higher_is_better`` of results.json ({task: {metric: bool}}), checked against peeval's
    metric registry (``peeval.records.METRICS``): a metric the registry knows must point the same way
    (IngestError naming the file otherwise); returned: the directions of the metrics it does not know."""
    hib = doc.get("higher_is_better")
    if hib is None:
        return {}
    if not isinstance(hib, dict) or not all(isinstance(v, dict) for v in hib.values()):
        raise IngestError(f"{path}: 'higher_is_better' must map task names to {{metric: true/false}}")
    out: dict[str, dict[str, bool]] = {}
    for task, by_metric in hib.items():
        for metric, up in by_metric.items():
            where = f"{path}: higher_is_better[{task!r}][{metric!r}]"
            if not isinstance(up, bool):
                if up is None:  # lm-eval writes null for a metric of no direction (a group's own aggregate)
                    continue
                raise IngestError(f"{where}: {up!r} is not true or false")
            spec = metric_spec(metric)
            if spec is None:
                out.setdefault(task, {})[metric] = up
            elif spec.higher_is_better is not None and spec.higher_is_better != up:
                said = "higher" if spec.higher_is_better else "lower"
                raise IngestError(f"{where} is {str(up).lower()}, but peeval's metric registry (peeval.records."
                                  f"METRICS) says {metric_base(metric)} is {said}-is-better")  # fmt: skip
    return out


def _sample_row(s: Any, task: str, run_id: str) -> tuple[dict, str]:
    """One samples row (and its filter) from a parsed JSONL line; ValueError/TypeError if malformed."""
    if not isinstance(s, dict) or "doc_id" not in s:
        raise ValueError("a sample needs a doc_id")
    args = s.get("arguments") or []
    if isinstance(args, dict):  # plain lm_eval's own samples file: {"gen_args_0": {"arg_0": prompt, ...}}
        args = [list(a.values()) if isinstance(a, dict) else a for a in args.values()]
    prompt = args[0][0] if args and isinstance(args[0], (list, tuple)) and args[0] else None
    resp = s.get("filtered_resps", s.get("resps"))
    if isinstance(resp, list) and len(resp) == 1:
        resp = resp[0]
    key = next((k for k in OUTCOME_KEYS if isinstance(s.get(k), (int, float))), None)
    correct = None
    if key is not None:
        hi = 1.0 if METRICS[key].kind == "fraction" else math.inf
        correct = _real(s[key], f"'{key}'", 0.0, hi) > 0
    scores = {k: v for k in DOC_SCORE_KEYS if (v := _real(s.get(k), f"'{k}'", 0.0, 1.0)) is not None}
    row = {"run_id": run_id, "task": task, "doc_id": _int(s["doc_id"], "'doc_id'"), "prompt": clip(prompt),
           "target": clip(s.get("target")), "response": clip(resp), "correct": correct,
           "scores": json.dumps(scores, sort_keys=True) if scores else None}  # fmt: skip
    return row, str(s.get("filter", "none"))


def _block_row(s: dict, task: str, run_id: str) -> dict | None:
    """A perplexity sample's (document, length) sums (the peeval wrappers' response), None for other samples."""
    resp = s.get("filtered_resps", s.get("resps"))
    while isinstance(resp, list) and len(resp) == 1:
        resp = resp[0]
    if not task.startswith(PPL_PREFIX) or not isinstance(resp, dict) or "length" not in resp:
        return None
    span = resp.get("span") or [None, None]
    if not (isinstance(span, list) and len(span) == 2):
        raise ValueError("'span' must be [start, end]")
    return {"run_id": run_id, "task": task, "doc_id": _int(resp.get("document", s["doc_id"]), "'document'"),
            "length": _int(resp["length"], "'length'", 2), "ll": _num(resp.get("ll"), "'ll'"),
            "tokens": _int(resp.get("tokens"), "'tokens'"), "bytes": _int(resp.get("bytes"), "'bytes'"),
            "protocol": str(resp.get("protocol") or "windows"), "target_start": _int(span[0], "'span'"),
            "target_end": _int(span[1], "'span'")}  # fmt: skip


def _sample_rows(run_dir: Path, run_id: str, suffix: str = "") -> tuple[list[dict], dict, list[dict]]:
    """samples rows, documents per (task, filter, metric) and perplexity blocks from the
    samples_<task><suffix>.jsonl files (plain lm_eval's suffix: ``_<date>`` of its results file)."""
    rows, counts, blocks = [], {}, []
    for f in sorted(run_dir.glob(f"samples_*{suffix}.jsonl")):
        task = f.stem[len("samples_") : len(f.stem) - len(suffix)]
        try:
            lines = f.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise IngestError(f"{f}: unreadable ({e})") from e
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                s = json.loads(line)
                row, filt = _sample_row(s, task, run_id)
                block = _block_row(s, task, run_id)
                metrics = s.get("metrics") or []
                if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
                    raise ValueError("'metrics' must be a list of metric names")
            except (ValueError, TypeError) as e:
                raise IngestError(f"{f}:{i}: malformed sample ({e})") from e
            for m in metrics:
                counts[(task, filt, m)] = counts.get((task, filt, m), 0) + 1
            rows.append(row)
            if block is not None:
                blocks.append(block)
    return rows, counts, blocks


def _obj(d: dict, key: str, where: str) -> dict:
    """``d[key]`` as a dict ({} when absent or null), else ValueError naming ``where``."""
    v = d.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"{f'{where}.' if where else ''}{key} must be an object, not {v!r}")
    return v


def _trained_base(adapt: dict | None, root: Path) -> dict | None:
    """The train_summary of an adapter's base when that base is a peeval pretraining checkpoint (its
    ``base`` folder, relative to ``root`` as the pipeline writes it), else None."""
    base = (adapt or {}).get("base")
    if not isinstance(base, str) or not base:
        return None
    f = (Path(base) if Path(base).is_absolute() else root / base) / "train_summary.json"
    return _summary(f) if f.is_file() else None


def _training_length(train: dict | None, adapt: dict | None, prov: dict) -> int | None:
    """The window a run was trained for: a pretraining's length; an adapter's own ``seq_len`` when longer than
    its base's window (an extension), else the base's (SmolLM2 adapted at 512 keeps its 8192)."""
    native = _int((train or {}).get("training_length") or prov.get("training_length"), "training_length", 1)
    adapted = _int((adapt or {}).get("seq_len"), "adapt_summary seq_len", 1)
    return max(x for x in (native, adapted) if x is not None) if native or adapted else None


def _summary(path: Path) -> dict:
    s = _read_json(path)
    if not isinstance(s, dict):
        raise IngestError(f"{path}: not a JSON object")
    return s


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


_SHA256 = re.compile(r"^[0-9a-f]{64}$")
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
    if sha is not None and not (isinstance(sha, str) and _SHA256.match(sha)):
        raise ValueError(f"{where}.documents_sha256 {sha!r} is not a sha256 (64 lower-case hex digits)")
    if read.get("params") is not None and not isinstance(read["params"], dict):
        raise ValueError(f"{where}.params must be an object or null")
    row = {k: read.get(k) for k in _READ_KEYS}
    row["documents"] = _int(read.get("documents"), f"{where}.documents")
    row["params"] = None if row["params"] is None else json.dumps(row["params"], sort_keys=True, default=str)
    return row


def task_data_rows(prov: dict, doc: dict, run_id: str) -> list[dict]:
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


#: the results file plain ``lm_eval --output_path DIR`` writes: DIR/<model>/results_<date>.json (its samples
#: ``samples_<task>_<date>.jsonl`` beside it)
LM_EVAL_RESULTS = re.compile(r"^results_(?P<date>.+)\.json$")


def results_file(run: Path) -> Path:
    """The results file of a run found by :func:`discover`: ``<dir>/results.json`` (``peeval eval``), or the
    ``results_<date>.json`` of plain lm_eval itself."""
    return run if run.is_file() else run / "results.json"


def lm_eval_provenance(doc: dict, path: Path) -> dict:
    """The provenance of a run written by plain ``lm_eval`` (no ``peeval`` record): what lm-eval's own
    results file says of the model, its arguments, the seed, the date and the versions. The run is
    ingested as an external run (no encoding, no training length): a row beside the baselines."""
    config = _obj(doc, "config", "")
    model_args = config.get("model_args") or {}
    if isinstance(model_args, str):  # older lm-eval releases wrote "k=v,k2=v2": lm-eval's own parser reads it
        from lm_eval.utils import simple_parse_args_string

        model_args = simple_parse_args_string(model_args)
    if not isinstance(model_args, dict) or not config.get("model"):
        raise IngestError(f"{path}: neither a 'peeval' provenance nor lm-eval's 'config' with a model")
    try:
        date = dt.datetime.fromtimestamp(float(doc["date"]), dt.UTC).isoformat(timespec="seconds")
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise IngestError(f"{path}: no usable lm-eval 'date' ({e})") from e
    pretrained = model_args.get("pretrained")
    return {
        "model": str(config["model"]), "model_args": model_args, "date": date, "seed": config.get("random_seed"),
        "checkpoint": str(pretrained) if pretrained else None, "device": config.get("device"),
        "limit": config.get("limit"), "dtype": config.get("model_dtype"), "max_length": doc.get("max_length"),
        "versions": {"lm_eval": doc.get("lm_eval_version"), "transformers": doc.get("transformers_version")},
        "protocol": {}, "git_commit": doc.get("git_hash"), "written_by": "lm_eval",
    }  # fmt: skip


def parse_results_dir(run_dir: Path, root: Path) -> dict[str, list[dict]]:
    """All rows one run contributes: a ``peeval eval`` results directory, or a results file of plain
    ``lm_eval --log_samples`` (an external run); IngestError naming the file if any part is malformed."""
    path = results_file(run_dir)
    try:
        return _parse_results_dir(run_dir, path, root)
    except IngestError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise IngestError(f"{path}: {e}") from e


def _parse_results_dir(run_dir: Path, path: Path, root: Path) -> dict[str, list[dict]]:
    raw = path.read_bytes() if path.is_file() else b""
    doc = _read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict) or not doc["results"]:
        raise IngestError(f"{path}: no 'results' object (partial or not an lm-eval results file)")
    prov = doc.get(PROVENANCE_KEY)
    plain = LM_EVAL_RESULTS.match(path.name) if prov is None else None
    if plain:
        prov = lm_eval_provenance(doc, path)
    if not isinstance(prov, dict) or "model" not in prov or "date" not in prov:
        raise IngestError(f"{path}: no 'peeval' provenance (write results with `peeval eval`, or keep plain "
                          "lm_eval's own results_<date>.json name)")  # fmt: skip
    run_id = hashlib.sha256(raw).hexdigest()[:16]
    metrics = parse_metrics(doc["results"], path)
    if not metrics:
        raise IngestError(f"{path}: the results hold no metric")
    samples, cell_counts, blocks = _sample_rows(path.parent, run_id, f"_{plain['date']}" if plain else "")
    n_samples = _obj(doc, "n-samples", "")

    def n_of(task: str, metric: str, filt: str) -> int | None:
        if (task, filt, metric) in cell_counts:
            return cell_counts[(task, filt, metric)]
        ns = _obj(n_samples, task, "n-samples")
        return _int(ns.get("effective"), f"n-samples[{task!r}].effective") if not is_cell(metric) else None

    model_args = _obj(prov, "model_args", "peeval")
    if not isinstance(model_args.get("adapter") or prov.get("checkpoint") or "", str):
        raise ValueError("peeval.checkpoint and peeval.model_args.adapter must be paths (strings)")
    ckpt_raw = model_args.get("adapter") or prov.get("checkpoint")
    checkpoint = _rel(ckpt_raw, root)
    ckdir = (root / ckpt_raw) if ckpt_raw and not Path(ckpt_raw).is_absolute() else Path(ckpt_raw or ".")
    check_checkpoint(prov, model_args, path, root)
    pe, pe_options = prov.get("pe"), _obj(prov, "pe_options", "peeval")
    train = adapt = base_train = None
    if (ckdir / "adapt_summary.json").is_file():
        adapt = _summary(ckdir / "adapt_summary.json")
    elif (ckdir / "train_summary.json").is_file():
        train = _summary(ckdir / "train_summary.json")
        pe_options = train.get("pe_options") or pe_options
        if not isinstance(pe_options, dict):
            raise IngestError(f"{ckdir / 'train_summary.json'}: 'pe_options' must be an object")
    shipped = base_model_label(model_args.get("gguf_file"))
    if adapt is not None or model_args.get("adapter"):
        kind = RunKind.ADAPT
        name = str((adapt or {}).get("method") or Path(str(ckpt_raw)).name)
        if (label := base_model_label((adapt or {}).get("gguf_file"))) is not None:
            name = adapted_name(label, name)
        elif (base := _trained_base(adapt, root)) is not None:  # the pipeline's own model extended (`extend`)
            name = adapted_name(trained_base_label(base.get("pe"), base.get("pe_options"),
                                                   base.get("training_length")), name)  # fmt: skip
            base_train = {"tokens": base.get("tokens"), "params": base.get("params")}
    elif train is None and prov["model"] == "peeval-llama" and shipped and not model_args.get("rope_scaling"):
        kind = RunKind.ADAPT  # the adapters' base as shipped: their reference row (params.adapt null: no claim method)
        name = shipped_name(shipped)
    elif train is not None:
        kind = RunKind.DIAGNOSTIC if train.get("task") else RunKind.PRETRAIN
        pe = train.get("pe") or pe
        name = encoding_label(pe, pe_options)
    else:
        kind = RunKind.EXTERNAL
        name = external_name(prov["model"], Path(str(ckpt_raw)).name if ckpt_raw else None)
    versions = _obj(prov, "versions", "peeval")
    protocol_all = _obj(prov, "protocol", "peeval")
    try:
        date = dt.datetime.fromisoformat(str(prov["date"])).astimezone(dt.UTC).replace(tzinfo=None)
    except ValueError as e:
        raise IngestError(f"{path}: bad peeval.date ({e})") from e
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
        "eval_metadata": protocol_all.get("metadata"),
        "versions": versions,
    }
    if base_train is not None:  # the budget of the model an extension started from (claims' scale criterion)
        params["base_train"] = base_train
    if subtasks := summarised_subtasks(doc, path):
        params["subtasks"] = subtasks
    if unknown := directions(doc, path):  # metrics peeval's registry does not know: lm-eval's direction
        params["higher_is_better"] = unknown
    protocol = protocol_all.get("ppl")
    seed = (train or {}).get("seed", prov.get("seed"))
    rows: dict[str, list[dict]] = {t: [] for t in RUN_TABLES}
    rows["runs"].append({
        "run_id": run_id, "name": name, "kind": kind, "checkpoint": checkpoint, "pe": pe,
        "pe_options": json.dumps(pe_options, sort_keys=True), "params": json.dumps(params, sort_keys=True, default=str),
        "seed": _int(seed, "seed", None), "git_commit": prov.get("git_commit"),
        "peeval_version": prov.get("peeval_version"),
        "lm_eval_version": versions.get("lm_eval") or doc.get("lm_eval_version"),
        "torch_version": versions.get("torch"),
        "transformers_version": versions.get("transformers") or doc.get("transformers_version"),
        "date": date, "max_length": _int(prov.get("max_length"), "peeval.max_length", 1),
        "training_length": _training_length(train, adapt, prov),
        "protocol": protocol, "dtype": prov.get("dtype"), "results_path": _rel(path, root),
        "diag_task": (train or {}).get("task"), "source": EXTERNAL_SOURCE if plain else LOCAL_SOURCE,
    })  # fmt: skip
    for task, metric, filt, value, se in metrics:
        rows["metrics"].append({"run_id": run_id, "task": task, "metric": metric, "filter": filt, "value": value,
                                "stderr": se, "n": n_of(task, metric, filt)})  # fmt: skip
        if is_cell(metric) and filt == "none":
            _check_cell(task, metric, f"results[{task!r}][{metric + ',' + filt!r}]")
    rows["samples"] = samples
    rows["ppl_blocks"] = blocks
    rows["task_data"] = task_data_rows(prov, doc, run_id)
    # what makes two results the same run, whatever their bytes or folders (never stored: ingest's duplicate check)
    rows["runs"][0]["_content"] = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    rows["runs"][0]["_identity"] = run_identity(params, sorted(doc["results"]))
    return rows


def check_checkpoint(prov: dict, model_args: dict, path: Path, root: Path) -> None:
    """IngestError unless the checkpoint a run evaluated is still the one its provenance recorded: the summaries
    beside it (encoding, options, training length, seed) are read now, so a checkpoint retrained in place
    (``--overwrite``) after the evaluation would lend its new summary to the old numbers. Checked where the
    weights are here (a published folder holds none: its recorded provenance is what there is)."""
    recorded = prov.get("checkpoint_sha256")
    pretrained = model_args.get("pretrained") or prov.get("checkpoint")
    if (
        not isinstance(recorded, str)
        or not _SHA256.match(recorded)
        or not isinstance(pretrained, str)
        or not pretrained
    ):
        return
    weights = Path(pretrained) if Path(pretrained).is_absolute() else root / pretrained
    if isinstance(gguf := model_args.get("gguf_file"), str) and gguf:
        weights = weights / gguf
    now = checkpoint_sha256(weights)
    if now is not None and now != recorded:
        raise IngestError(f"{path}: the checkpoint {pretrained} changed since it was evaluated (sha256 "
                          f"{recorded[:12]}… recorded, {now[:12]}… now: retrained or replaced): evaluate it "
                          "again, or ingest results whose checkpoint is as evaluated")  # fmt: skip


def run_identity(params: dict, tasks: list[str]) -> tuple | None:
    """What one evaluation of one checkpoint is, whatever folder it was copied to: the checkpoint's sha256
    recorded at evaluation time, the model's arguments but its path, and each task it ran; None when no
    sha256 was recorded (plain lm_eval, a checkpoint without weight files, anything but 64 hex digits)."""
    sha = params.get("checkpoint_sha256")
    if not isinstance(sha, str) or not _SHA256.match(sha):  # none recorded, or not a sha256 (a test's placeholder)
        return None
    args = {k: v for k, v in (params.get("model_args") or {}).items() if k != "pretrained"}
    return sha, json.dumps(args, sort_keys=True, default=str), tuple(tasks)


def checkpoint_sha256(path: Path) -> str | None:
    """sha256 of a checkpoint's weight files as ``peeval eval`` records it (``peeval.evaluation.checkpoint_hash``:
    the ``*.safetensors`` of a folder in name order, or the file itself); None when there are none."""
    if not path.exists():
        return None
    files = [path] if path.is_file() else sorted(path.glob("*.safetensors"))
    h = hashlib.sha256()
    for f in files:
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest() if files else None


def parse_checkpoint_dir(ck: Path, root: Path) -> dict[str, list[dict]]:
    """training_curves + efficiency rows of a training or adaptation output directory; every number
    checked (no NaN/inf, losses >= 0, perplexity >= 1), an IngestError naming the file and key or line."""
    key = _rel(ck, root)
    rows: dict[str, list[dict]] = {t: [] for t in CHECKPOINT_TABLES}
    if (ck / "adapt_summary.json").is_file() and (ck / "train_summary.json").is_file():
        raise IngestError(f"{ck}: holds both adapt_summary.json and train_summary.json (one output per folder)")
    if (ck / "adapt_summary.json").is_file():
        f = ck / "adapt_summary.json"
        s = _summary(f)
        if "method" not in s or not isinstance(s["method"], str):
            raise IngestError(f"{f}: no 'method' (partial adapt summary)")
        try:
            rows["efficiency"].append({
                "checkpoint": key, "pe": None, "method": s["method"], "pe_options": None,
                "params": _int(s.get("trainable_params"),
                "'trainable_params'"), "flops_per_token": None,
                "tokens_per_s": _real(s.get("tokens_per_s"), "'tokens_per_s'"),
                "train_time_s": _real(s.get("train_time_s"), "'train_time_s'"),
                "task": None, "steps": _int(s.get("steps"), "'steps'"), "tokens": _int(s.get("tokens"), "'tokens'"),
                "final_val_loss": None, "final_val_ppl": None,
                "total_params": _int(s.get("total_params"), "'total_params'"), "summary": json.dumps(s, default=str),
            })  # fmt: skip
        except ValueError as e:
            raise IngestError(f"{f}: {e}") from e
    if (ck / "train_summary.json").is_file():
        f = ck / "train_summary.json"
        s = _summary(f)
        if "pe" not in s or "params" not in s:
            raise IngestError(f"{f}: needs 'pe' and 'params' (partial train summary)")
        try:
            if not isinstance(s["pe"], str) or not isinstance(s.get("pe_options") or {}, dict):
                raise ValueError("'pe' must be a name and 'pe_options' an object")
            rows["efficiency"].append({
                "checkpoint": key, "pe": s["pe"], "pe_options": json.dumps(s.get("pe_options") or {}, sort_keys=True),
                "method": None,
                "params": _int(s["params"], "'params'", 1),
                "flops_per_token": _real(s.get("flops_per_token"), "'flops_per_token'"),
                "tokens_per_s": _real(s.get("tokens_per_s"), "'tokens_per_s'"),
                "train_time_s": _real(s.get("train_time_s"), "'train_time_s'"), "task": s.get("task"),
                "steps": _int(s.get("steps"), "'steps'"), "tokens": _int(s.get("tokens"), "'tokens'"),
                "final_val_loss": _real(s.get("final_val_loss"), "'final_val_loss'"),
                "final_val_ppl": _real(s.get("final_val_ppl"), "'final_val_ppl' (exp of a loss >= 0)", 1.0),
                "total_params": _int(s["params"], "'params'", 1), "summary": json.dumps(s, default=str),
            })  # fmt: skip
        except ValueError as e:
            raise IngestError(f"{f}: {e}") from e
    curve = ck / "train_curve.csv"
    if curve.is_file():
        rows["training_curves"] = _curve_rows(curve, key)
    return rows


def _curve_rows(curve: Path, key: str | None) -> list[dict]:
    """train_curve.csv rows: step and tokens whole numbers >= 0, lr / losses / time finite and >= 0
    (a NaN loss means the run diverged: its numbers are not a result to rank)."""
    out = []
    try:
        with curve.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = set(CURVE_COLUMNS) - set(reader.fieldnames or ())
            if missing:
                raise ValueError(f"missing columns {sorted(missing)}")
            for i, r in enumerate(reader, 2):
                if None in r.values() or None in r:
                    raise ValueError(f"line {i} has the wrong number of fields")
                row = {"checkpoint": key, "step": _int(r["step"], f"line {i}, column 'step'")}
                if row["step"] is None:
                    raise ValueError(f"line {i}, column 'step': empty")
                row["tokens"] = _int(r["tokens"], f"line {i}, column 'tokens'")
                for c in CURVE_COLUMNS[2:]:  # lr, train_loss, val_loss, elapsed_s
                    row[c] = _real(r[c], f"line {i}, column {c!r}")
                out.append(row)
    except (OSError, ValueError, UnicodeDecodeError, csv.Error) as e:
        raise IngestError(f"{curve}: malformed training curve ({e})") from e
    return out


def discover(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """(results directories, checkpoint directories) under ``paths``."""
    results, checkpoints = set(), set()
    for p in paths:
        if not p.exists():
            raise IngestError(f"{p}: no such file or directory")
        if p.is_file() and not LM_EVAL_RESULTS.match(p.name):
            p = p.parent
        for f in [p / "results.json", *p.rglob("results.json")] if p.is_dir() else []:
            if f.is_file():
                results.add(f.parent)
        for f in [p, *(p.rglob("results_*.json") if p.is_dir() else [])]:  # plain lm_eval: a file per run
            if f.is_file() and LM_EVAL_RESULTS.match(f.name) and not (f.parent / "results.json").is_file():
                results.add(f)
        for name in ("train_summary.json", "adapt_summary.json") if p.is_dir() else ():
            for f in [p / name, *p.rglob(name)]:
                if f.is_file():
                    checkpoints.add(f.parent)
    return sorted(results), sorted(checkpoints)


# ----------------------------------------------------------------------------- published results


def read_source(folder: Path) -> dict:
    """SOURCE.json of one published folder: which profile, machine and commit its numbers came from."""
    f = folder / SOURCE_FILE
    if not f.is_file():
        raise IngestError(
            f"{folder}: a published folder needs {SOURCE_FILE} (write it with `python -m leaderboard.publish`)"
        )
    src = _read_json(f)
    if not isinstance(src, dict):
        raise IngestError(f"{f}: expected a JSON object")
    for key in ("profile", "machine"):
        if not isinstance(src.get(key), str) or not src[key].strip():
            raise IngestError(f"{f}: {key!r} must be a non-empty string")
    if src["profile"] != folder.name:
        raise IngestError(f"{f}: profile {src['profile']!r} but the folder is named {folder.name!r}")
    return src


def published_files(folder: Path) -> dict[str, str]:
    """{path relative to ``folder``: sha256} of every file of a published folder but its SOURCE.json: what
    ``leaderboard.publish`` records in SOURCE.json ``files`` and ingest checks before it reads the folder."""
    out = {}
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f != folder / SOURCE_FILE:
            h = hashlib.sha256()
            with f.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out[f.relative_to(folder).as_posix()] = h.hexdigest()
    return out


def check_published(folder: Path, src: dict) -> None:
    """IngestError (one line) unless a published folder holds what its SOURCE.json says was published: the same
    number of runs and checkpoints, and, where SOURCE.json lists them (``files``), exactly those files with those
    sha256s. A run folder deleted (39 of 40 runs read) or copied (one more seed of a published row) is caught
    here, before a number of the folder is read."""
    f = folder / SOURCE_FILE
    files = src.get("files")
    if files is not None:
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise IngestError(f"{f}: 'files' must map each published file to its sha256")
        have = published_files(folder)
        missing = sorted(set(files) - set(have))
        extra = sorted(set(have) - set(files))
        changed = sorted(k for k in set(files) & set(have) if files[k] != have[k])
        for what, names in (("is missing", missing), ("is not in it", extra), ("changed since", changed)):
            if names:
                more = f" and {len(names) - 1} more" if len(names) > 1 else ""
                raise IngestError(f"{folder}: {names[0]}{more} {what} {SOURCE_FILE} ({len(files)} files published): "
                                  "restore the folder as published (git checkout) or publish it again")  # fmt: skip
    result_dirs, ck_dirs = discover([folder])
    for key, found in (("runs", result_dirs), ("checkpoints", ck_dirs)):
        want = src.get(key)
        if want is not None and (isinstance(want, bool) or not isinstance(want, int) or want != len(found)):
            raise IngestError(f"{folder}: {len(found)} {key} found, {SOURCE_FILE} says {want!r} were published: "
                              "restore the folder as published (git checkout) or publish it again")  # fmt: skip


def _published_rows(folder: Path, root: Path) -> dict[str, list[dict]]:
    """Every row of one published folder, told apart from local ones: source ``published/<profile>``,
    the machine, names ``<label> @<profile>``, paths under the folder and run ids salted with the source
    (a published copy of a local results.json is a different run), so local runs never replace them."""
    src = read_source(folder)
    check_published(folder, src)
    source = published_source(src["profile"])
    prefix = _rel(folder, root)
    prefix = f"{source}/" if prefix == "." else f"{prefix}/"  # never a local run's checkpoints/... key
    result_dirs, ck_dirs = discover([folder])
    rows: dict[str, list[dict]] = {t: [] for t in TABLE_COLUMNS}
    for d in result_dirs:  # paths inside the results resolve against the folder, as where they were made
        got = parse_results_dir(d, folder)
        old = got["runs"][0]["run_id"]
        new = hashlib.sha256(f"{source}\n{old}".encode()).hexdigest()[:16]
        for t in RUN_TABLES:
            for r in got[t]:
                r["run_id"] = new
        run = got["runs"][0]
        run.update(source=source, machine=src["machine"], name=published_name(run["name"], src["profile"]))
        for key in ("checkpoint", "results_path"):
            if run[key] and not Path(run[key]).is_absolute():
                run[key] = f"{prefix}{run[key]}"
        for t, rs in got.items():
            rows[t].extend(rs)
    for d in ck_dirs:
        for t, rs in parse_checkpoint_dir(d, folder).items():
            for r in rs:
                r["checkpoint"] = f"{prefix}{r['checkpoint']}"
            rows[t].extend(rs)
    return rows


def published_home(path: Path) -> Path | None:
    """The published folder (one with a SOURCE.json) that ``path`` is, or lies in; None for any other path."""
    for d in (path, *path.parents) if path.is_dir() else path.parents:
        if (d / SOURCE_FILE).is_file():
            return d
    return None


def _where(run: dict) -> str:
    return str(run["results_path"])


def _check_duplicates(runs: list[dict]) -> None:
    """IngestError (one line naming both) when two results of one source are the same run: the same results
    (a copied folder, re-indented or not) or the same checkpoint evaluated on the same tasks (one checkpoint is
    one seed, whatever the copies), or when one name would hold runs of two sources (a local run is never one
    more seed of a published row)."""
    seen: dict[tuple, dict] = {}
    for r in runs:
        keys = [(r["source"], "content", r.get("_content"))]
        if r.get("_identity") is not None:
            keys.append((r["source"], "identity", r["_identity"]))
        for key in keys:
            if key[2] is None:
                continue
            if key in seen:
                what = "results" if key[1] == "content" else "checkpoint (sha256), model and tasks"
                raise IngestError(f"{_where(r)}: the same {what} as {_where(seen[key])}: one run copied twice "
                                  "would count as two seeds: remove one")  # fmt: skip
            seen[key] = r
    sources: dict[str, dict] = {}
    for r in runs:
        other = sources.setdefault(r.get("name"), r)
        if other["source"] != r["source"]:
            raise IngestError(f"{_where(r)}: its name {r['name']!r} is taken by a run of {other['source']} "
                              f"({_where(other)}): runs of two sources never share a leaderboard row")  # fmt: skip


def _check_against_store(con, runs: list[dict], replaced: list[str]) -> None:
    """:func:`_check_duplicates` against the runs already in the store (those this ingest replaces aside)."""
    if not runs:
        return
    stored = con.execute("SELECT r.run_id, r.name, r.source, r.params, r.results_path, "
                         "(SELECT list(DISTINCT m.task ORDER BY m.task) FROM metrics m WHERE m.run_id = r.run_id) "
                         "FROM runs r WHERE NOT list_contains(?, r.run_id)", [replaced]).fetchall()  # fmt: skip
    old = []
    for run_id, name, source, params, path, tasks in stored:
        try:
            ident = run_identity(json.loads(params) if params else {}, list(tasks or []))
        except (ValueError, AttributeError):
            ident = None
        old.append({"run_id": run_id, "name": name, "source": source, "results_path": f"{path} (in the store)",
                    "_identity": ident})  # fmt: skip
    _check_duplicates([*old, *runs])


def ingest(
    paths: list[str | Path],
    db: str | Path = DEFAULT_DB,
    root: str | Path | None = None,
    published: str | Path | None = None,
) -> dict[str, int]:
    """Ingest every results / checkpoint directory under ``paths`` into ``db``, and every folder of
    ``published`` (see ``PUBLISHED``) beside them; rows written per table."""
    root = Path(root or Path.cwd())
    if Path(db).is_file():  # never lay peeval's tables into someone else's database, or mix two schemas
        try:
            open_store(db, "--db", allow_empty=True).close()
        except StoreError as e:
            raise IngestError(str(e)) from None
    given = [Path(p).resolve() for p in paths]
    result_dirs, ck_dirs = discover(given)  # found from the cwd, stored from root
    # a published folder is read whole, checked against its SOURCE.json, as its profile's runs: also when it is
    # named as a path (`make site`) or lies under one, so its runs never become local ones (a user's run beside
    # them is another row, never one more seed of theirs)
    named = {h for d in (*given, *result_dirs, *ck_dirs) if (h := published_home(d)) is not None}
    result_dirs = [d for d in result_dirs if published_home(d) is None]
    ck_dirs = [d for d in ck_dirs if published_home(d) is None]
    shelf = (
        sorted(p.resolve() for p in Path(published).iterdir() if p.is_dir())
        if published and Path(published).is_dir()
        else []
    )
    folders = sorted(set(shelf) | named)
    if not result_dirs and not ck_dirs and not folders:
        raise IngestError(f"nothing to ingest under {[str(p) for p in paths]} (no results.json / *_summary.json)")
    rows: dict[str, list[dict]] = {t: [] for t in TABLE_COLUMNS}
    for d in result_dirs:  # parse everything first: a bad file stops us before the database is touched
        got = parse_results_dir(d, root)
        for r in got["runs"]:
            r.setdefault("source", LOCAL_SOURCE)
        for t, rs in got.items():
            rows[t].extend(rs)
    for d in ck_dirs:
        for t, rs in parse_checkpoint_dir(d, root).items():
            rows[t].extend(rs)
    for folder in folders:
        for t, rs in _published_rows(folder, root).items():
            rows[t].extend(rs)
    _check_duplicates(rows["runs"])
    whole = {published_source(src["profile"]): src["machine"] for src in map(read_source, folders)}
    run_ids = sorted({r["run_id"] for r in rows["runs"]})
    paths_ = sorted({r["results_path"] for r in rows["runs"]})
    cks = sorted({r["checkpoint"] for t in CHECKPOINT_TABLES for r in rows[t]})
    created = not Path(db).exists()  # a store this ingest creates goes again if the ingest fails
    try:
        con = connect(db)
    except Exception as e:  # duckdb.Error, OSError: not a database, a folder, no permission
        if created:
            remove_database(db)
        raise IngestError(f"{db}: cannot open as a DuckDB database ({type(e).__name__}: {e})") from e
    try:
        con.execute("BEGIN TRANSACTION")
        stale: list[str] = []
        if run_ids or whole:
            old = [r[0] for r in con.execute("SELECT run_id FROM runs WHERE list_contains(?, results_path)",
                                             [paths_]).fetchall()]  # fmt: skip
            for source, machine in whole.items():  # a published folder replaces its profile's rows whole
                # (and the copies an older `make site` wrote of them: source 'local' with the folder's machine)
                q = "SELECT run_id FROM runs WHERE source = ? OR (source = ? AND machine = ?)"
                old += [r[0] for r in con.execute(q, [source, LOCAL_SOURCE, machine]).fetchall()]
            stale = sorted(set(run_ids) | set(old))
            for t in RUN_TABLES:
                con.execute(f"DELETE FROM {t} WHERE list_contains(?, run_id)", [stale])
        _check_against_store(con, rows["runs"], stale)
        if cks:
            for t in CHECKPOINT_TABLES:
                con.execute(f"DELETE FROM {t} WHERE list_contains(?, checkpoint)", [cks])
        for t in WRITTEN:
            insert_rows(con, t, rows[t])
        counts = {t: len(rs) for t, rs in rows.items()}
        for t in VIEWS:  # the new runs' rows as the views show them
            q = f"SELECT count(*) FROM {t} WHERE list_contains(?, run_id)"
            counts[t] = con.execute(q, [run_ids]).fetchone()[0] if run_ids else 0
        con.execute("COMMIT")
    except BaseException as e:  # a full disk, Ctrl-C: the old store as it was, no new empty one
        try:
            con.execute("ROLLBACK")
        finally:
            con.close()
            if created:
                remove_database(db)
        if isinstance(e, Exception) and not isinstance(e, IngestError):
            why = " ".join(str(e).split())
            raise IngestError(f"--db {db}: writing the store failed, nothing was changed ({why})") from e
        raise
    con.close()
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m leaderboard.ingest", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "paths",
        nargs="+",
        help="results / checkpoint directories (searched recursively); a published "
        "folder (leaderboard/published/<profile>) records the machine its SOURCE.json names",
    )
    p.add_argument("--db", default=str(DEFAULT_DB), help="DuckDB file (default: %(default)s)")
    p.add_argument("--root", default=None, help="paths are stored relative to this directory (default: cwd)")
    args = p.parse_args(argv)

    def action() -> str:
        counts = ingest(args.paths, args.db, args.root)
        return f"{args.db}: " + ", ".join(f"{t} {n}" for t, n in counts.items() if n)

    return run_command("ingest", action, IngestError)


if __name__ == "__main__":
    sys.exit(main())
