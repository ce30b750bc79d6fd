"""What one run is, whatever folder it was copied to: one checkpoint is one seed, a copied results folder is
no second seed, and the checkpoint a run evaluated must still be the one it recorded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from peeval.records import PPL_PREFIX

from .values import SHA256, IngestError


def checkpoint_sha256(path: Path) -> str | None:
    """sha256 of a checkpoint's weight files as ``peeval eval`` records it
    (``peeval.evaluation.runner.checkpoint_hash``:
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


def check_checkpoint(prov: dict, model_args: dict, path: Path, root: Path) -> None:
    """IngestError unless the checkpoint a run evaluated is still the one its provenance recorded: the summaries
    beside it (encoding, options, training length, seed) are read now, so a checkpoint retrained in place
    (``--overwrite``) after the evaluation would lend its new summary to the old numbers. Checked where the
    weights are here (a published folder holds none: its recorded provenance is what there is)."""
    recorded = prov.get("checkpoint_sha256")
    pretrained = model_args.get("pretrained") or prov.get("checkpoint")
    if not isinstance(recorded, str) or not SHA256.match(recorded) or not isinstance(pretrained, str) or not pretrained:
        return
    weights = Path(pretrained) if Path(pretrained).is_absolute() else root / pretrained
    if isinstance(gguf := model_args.get("gguf_file"), str) and gguf:
        weights = weights / gguf
    now = checkpoint_sha256(weights)
    if now is not None and now != recorded:
        raise IngestError(f"{path}: the checkpoint {pretrained} changed since it was evaluated (sha256 "
                          f"{recorded[:12]}… recorded, {now[:12]}… now: retrained or replaced): evaluate it "
                          "again, or ingest results whose checkpoint is as evaluated")  # fmt: skip


def run_identity(params: dict, tasks: list[str], encoding=None) -> tuple | None:
    """What one evaluation of one checkpoint is, whatever folder it was copied to: the checkpoint's sha256
    recorded at evaluation time, the encoding that reads those weights (``encoding``: pe and options; RoPE's and
    NoPE's untrained step-0 controls hold the same weights and are two models), the model's arguments but its path,
    and each task it ran; None when no sha256 was recorded (plain lm_eval, a checkpoint without weight files,
    anything but 64 hex digits)."""
    sha = params.get("checkpoint_sha256")
    if not isinstance(sha, str) or not SHA256.match(sha):  # none recorded, or not a sha256 (a test's placeholder)
        return None
    args = {k: v for k, v in (params.get("model_args") or {}).items() if k != "pretrained"}
    return (
        sha,
        json.dumps(encoding, sort_keys=True, default=str),
        json.dumps(args, sort_keys=True, default=str),
        tuple(tasks),
    )


#: what makes a training run the one it is (its seed, configuration and data), whatever the bytes of its weights
TRAINING_KEYS = ("pe", "pe_options", "task", "profile", "seed", "settings", "params", "steps", "tokens",
                 "training_length", "final_val_loss")  # fmt: skip


def data_reads(rows: list[dict]) -> str:
    """What a run's tasks read (its task_data rows: where, which split, which documents), one canonical string."""
    keys = ("task", "source", "location", "config", "split", "documents_sha256")
    return json.dumps(sorted([[str(r.get(k)) for k in keys] for r in rows]))


def training_identity(train: dict | None, params: dict, tasks: list[str], reads: str = "") -> tuple | None:
    """One training run evaluated on the same tasks, data (:func:`data_reads`) and model arguments, whatever its
    weights' bytes: a checkpoint copied with other safetensors metadata (another sha256) is still one seed. None
    without a training summary that records its seed."""
    if not isinstance(train, dict) or train.get("seed") is None:
        return None
    run = json.dumps({k: train.get(k) for k in TRAINING_KEYS}, sort_keys=True, default=str)
    args = {k: v for k, v in (params.get("model_args") or {}).items() if k != "pretrained"}
    return run, json.dumps(args, sort_keys=True, default=str), tuple(tasks), reads


#: the perplexity metadata keys that change what is scored beside the protocol's words (which documents, how many
#: windows, which copy of the corpus); the keys that only shape a report (position_buckets) are left out
SCORING_KEYS = ("max_docs", "max_windows", "hub_copy")


def scoring_options(configs: Any) -> dict[str, dict]:
    """Each perplexity task's options that change what it scored (``SCORING_KEYS``, as its config recorded them)."""
    out = {}
    for task, cfg in (configs or {}).items() if isinstance(configs, dict) else ():
        md = cfg.get("metadata") if isinstance(cfg, dict) else None
        if str(task).startswith(PPL_PREFIX) and isinstance(md, dict):
            out[task] = {k: md[k] for k in SCORING_KEYS if md.get(k) is not None}
    return out


def eval_protocol(ppl: Any, limit: Any, tasks: list[str], scoring: dict | None = None) -> str | None:
    """How a run measured its perplexity (the protocol: targets, skip, seed; ``--limit``; and ``scoring_options``:
    max_docs, max_windows, the corpus copy), for a run that measured any (a ``peeval_ppl_`` task); None otherwise.
    Seeds of one row are averaged cell by cell, so they must share it: the same positions of other text are other
    numbers."""
    if not any(str(t).startswith(PPL_PREFIX) for t in tasks):
        return None
    doc = {"protocol": ppl, "limit": limit}
    if any(scoring.values() if scoring else ()):
        doc["scoring"] = scoring
    return json.dumps(doc, sort_keys=True, default=str)


def _where(run: dict) -> str:
    return str(run["results_path"])


def check_duplicates(runs: list[dict]) -> None:
    """IngestError (one line naming both) when two results of one source are the same run: the same results
    (a copied folder, re-indented or not) or the same checkpoint evaluated on the same tasks (one checkpoint is
    one seed, whatever the copies), or when one name would hold runs of two sources (a local run is never one
    more seed of a published row)."""
    seen: dict[tuple, dict] = {}
    for r in runs:
        keys = [(r["source"], "content", r.get("_content"))]
        if r.get("_identity") is not None:
            keys.append((r["source"], "identity", r["_identity"]))
        if r.get("_training") is not None:
            keys.append((r["source"], "training", r["_training"]))
        for key in keys:
            if key[2] is None:
                continue
            if key in seen:
                what = {
                    "content": "results",
                    "identity": "checkpoint (sha256), model and tasks",
                    "training": "training run (its seed, settings and data), model and tasks",
                }[key[1]]
                raise IngestError(f"{_where(r)}: the same {what} as {_where(seen[key])}: one run copied twice "
                                  "would count as two seeds: remove one")  # fmt: skip
            seen[key] = r
    protocols: dict[tuple, dict] = {}
    for r in runs:
        if r.get("_protocol") is None:
            continue
        other = protocols.setdefault((r["source"], r.get("name")), r)
        if other["_protocol"] != r["_protocol"]:
            raise IngestError(f"{_where(r)}: its perplexity protocol {r['_protocol']} differs from that of "
                              f"{_where(other)} ({other['_protocol']}), another seed of {r['name']!r}: a cell "
                              "averages runs of one protocol only; evaluate both alike")  # fmt: skip
    check_comparable(runs)
    sources: dict[str, dict] = {}
    for r in runs:
        other = sources.setdefault(r.get("name"), r)
        if other["source"] != r["source"]:
            raise IngestError(f"{_where(r)}: its name {r['name']!r} is taken by a run of {other['source']} "
                              f"({_where(other)}): runs of two sources never share a leaderboard row")  # fmt: skip


def comparable_key(run: dict) -> dict:
    """What seeds of one row must share (issue 68): the model's size, its tokenizer (hash) and training length."""
    params = json.loads(run["params"]) if isinstance(run.get("params"), str) else run.get("params") or {}
    tok = params.get("tokenizer") if isinstance(params.get("tokenizer"), dict) else {}
    return {"size": run.get("size"), "parameters": params.get("model_params"), "tokenizer": tok.get("hash"),
            "training length": run.get("training_length")}  # fmt: skip


def check_comparable(runs: list[dict]) -> None:
    """IngestError (one line naming both) when two runs of one row differ in anything but their seed (size,
    tokenizer, training length): their mean would be of two different models (issue 68: a smoke and a cpu TAPE
    became "tape · 2 seeds")."""
    rows: dict[tuple, dict] = {}
    for r in runs:
        if str(r.get("kind")) == "diagnostic":  # a task's examples set its length per seed
            continue
        other = rows.setdefault((r["source"], r.get("name"), str(r.get("kind"))), r)
        a, b = comparable_key(other), comparable_key(r)
        diff = [k for k in a if a[k] is not None and b[k] is not None and a[k] != b[k]]
        if diff:
            raise IngestError(f"{_where(r)}: one row {r['name']!r} with {_where(other)}, but their "
                              + ", ".join(f"{k} differ ({b[k]} vs {a[k]})" for k in diff)
                              + ": only seeds of one model share a row; give each its own --run_name")  # fmt: skip
