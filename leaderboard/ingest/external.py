"""A results file plain ``lm_eval --log_samples`` wrote (no peeval provenance): an external run, always.

lm-eval's own results file says what model ran, with which arguments, seed, date and versions; the run is a
row beside the baselines (source ``external``, no encoding, no training length), never a seed of ours, whatever
checkpoint it evaluated.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from leaderboard.store import EXTERNAL_SOURCE, RunKind
from peeval.records import external_name

from .rows import RunRows
from .run import RunRecord, measure, run_rows
from .values import IngestError, obj, rel

#: the results file plain ``lm_eval --output_path DIR`` writes: DIR/<model>/results_<date>.json (its samples
#: ``samples_<task>_<date>.jsonl`` beside it)
LM_EVAL_RESULTS = re.compile(r"^results_(?P<date>.+)\.json$")


def results_file(run: Path) -> Path:
    """The results file of a run found by ``discover``: ``<dir>/results.json`` (``peeval eval``), or the
    ``results_<date>.json`` of plain lm_eval itself."""
    return run if run.is_file() else run / "results.json"


def lm_eval_provenance(doc: dict, path: Path) -> dict:
    """The provenance of a run written by plain ``lm_eval`` (no ``peeval`` record): what lm-eval's own
    results file says of the model, its arguments, the seed, the date and the versions."""
    config = obj(doc, "config", "")
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


def parse_external(doc: dict, raw: bytes, path: Path, root: Path, date: str) -> RunRows:
    """The rows of one plain lm-eval results file (its samples: ``samples_<task>_<date>.jsonl`` beside it)."""
    prov = lm_eval_provenance(doc, path)
    got = measure(doc, raw, path, f"_{date}")
    ckpt = obj(prov, "model_args", "peeval").get("adapter") or prov["checkpoint"]
    if not isinstance(ckpt or "", str):
        raise ValueError("peeval.checkpoint and peeval.model_args.adapter must be paths (strings)")
    record = RunRecord(
        kind=RunKind.EXTERNAL,
        name=external_name(prov["model"], Path(str(ckpt)).name if ckpt else None),
        source=EXTERNAL_SOURCE,
        pe=None,
        pe_options={},
        checkpoint=rel(ckpt, root),
    )
    return run_rows(doc, path, root, prov, record, got)
