"""A training or adaptation output folder: ``train_summary.json`` (``peeval train``) or ``adapt_summary.json``
(``peeval adapt``), and ``train_curve.csv``: the ``efficiency`` and ``training_curves`` rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from peeval.records import CURVE_COLUMNS, CURVE_EXTRA_COLUMNS

from .rows import CheckpointRows, CurveRow, EfficiencyRow
from .values import IngestError, real, rel, summary, whole


def parse_checkpoint_dir(ck: Path, root: Path) -> CheckpointRows:
    """training_curves + efficiency rows of a training or adaptation output directory; every number
    checked (no NaN/inf, losses >= 0, perplexity >= 1), an IngestError naming the file and key or line."""
    key = rel(ck, root)
    rows: CheckpointRows = {"training_curves": [], "efficiency": []}
    adapt, train = ck / "adapt_summary.json", ck / "train_summary.json"
    if adapt.is_file() and train.is_file():
        raise IngestError(f"{ck}: holds both adapt_summary.json and train_summary.json (one output per folder)")
    for f, row_of in ((adapt, _adapt_row), (train, _train_row)):
        if f.is_file():
            try:
                rows["efficiency"].append(row_of(summary(f), key, f))
            except ValueError as e:
                if isinstance(e, IngestError):
                    raise
                raise IngestError(f"{f}: {e}") from e
    curve = ck / "train_curve.csv"
    if curve.is_file():
        rows["training_curves"] = _curve_rows(curve, key)
    return rows


def _adapt_row(s: dict, key: str | None, f: Path) -> EfficiencyRow:
    """An adapter's efficiency row (its method, trainable and total parameters, steps, tokens, time)."""
    if "method" not in s or not isinstance(s["method"], str):
        raise IngestError(f"{f}: no 'method' (partial adapt summary)")
    return {
        "checkpoint": key, "pe": None, "method": s["method"], "pe_options": None,
        "params": whole(s.get("trainable_params"), "'trainable_params'"), "flops_per_token": None,
        "tokens_per_s": real(s.get("tokens_per_s"), "'tokens_per_s'"),
        "train_time_s": real(s.get("train_time_s"), "'train_time_s'"),
        "task": None, "steps": whole(s.get("steps"), "'steps'"), "tokens": whole(s.get("tokens"), "'tokens'"),
        "final_val_loss": None, "final_val_ppl": None,
        "total_params": whole(s.get("total_params"), "'total_params'"), "summary": json.dumps(s, default=str),
    }  # fmt: skip


def _train_row(s: dict, key: str | None, f: Path) -> EfficiencyRow:
    """A trained model's efficiency row (its encoding, parameters, FLOPs, throughput, final validation loss)."""
    if "pe" not in s or "params" not in s:
        raise IngestError(f"{f}: needs 'pe' and 'params' (partial train summary)")
    if not isinstance(s["pe"], str) or not isinstance(s.get("pe_options") or {}, dict):
        raise ValueError("'pe' must be a name and 'pe_options' an object")
    if "control" in s and (s["control"] != "step0" or not isinstance(s.get("control_of"), str)
                           or s["control_of"].startswith("/") or s.get("steps") != 0):  # fmt: skip
        raise ValueError("'control' must be 'step0' with 'control_of' a relative path and 'steps' 0 (a step-0 control)")
    return {
        "checkpoint": key, "pe": s["pe"], "pe_options": json.dumps(s.get("pe_options") or {}, sort_keys=True),
        "method": None,
        "params": whole(s["params"], "'params'", 1),
        "flops_per_token": real(s.get("flops_per_token"), "'flops_per_token'"),
        "tokens_per_s": real(s.get("tokens_per_s"), "'tokens_per_s'"),
        "train_time_s": real(s.get("train_time_s"), "'train_time_s'"), "task": s.get("task"),
        "steps": whole(s.get("steps"), "'steps'"), "tokens": whole(s.get("tokens"), "'tokens'"),
        "final_val_loss": real(s.get("final_val_loss"), "'final_val_loss'"),
        "final_val_ppl": real(s.get("final_val_ppl"), "'final_val_ppl' (exp of a loss >= 0)", 1.0),
        "total_params": whole(s["params"], "'params'", 1), "summary": json.dumps(s, default=str),
    }  # fmt: skip


def _curve_rows(curve: Path, key: str | None) -> list[CurveRow]:
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
                row = {"checkpoint": key, "step": whole(r["step"], f"line {i}, column 'step'")}
                if row["step"] is None:
                    raise ValueError(f"line {i}, column 'step': empty")
                row["tokens"] = whole(r["tokens"], f"line {i}, column 'tokens'")
                for c in CURVE_COLUMNS[2:]:  # lr, train_loss, val_loss, elapsed_s
                    row[c] = real(r[c], f"line {i}, column {c!r}")
                for c in CURVE_EXTRA_COLUMNS:  # absent from older curves: NULL
                    row[c] = real(r[c], f"line {i}, column {c!r}", 0.0, 1.0) if c in r else None
                out.append(row)
    except (OSError, ValueError, UnicodeDecodeError, csv.Error) as e:
        raise IngestError(f"{curve}: malformed training curve ({e})") from e
    return out
