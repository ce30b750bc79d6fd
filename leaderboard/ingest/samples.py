"""A run's ``samples_<task>.jsonl`` files: one samples row per document, the documents each metric counted, and
the perplexity wrappers' (document, length) sums (``ppl_blocks``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from peeval.records import DOC_SCORE_KEYS, METRICS, OUTCOME_KEYS, PPL_PREFIX

from .rows import PplBlockRow, SampleRow
from .values import IngestError, clip, number, real, whole


def _sample_row(s: Any, task: str, run_id: str) -> tuple[SampleRow, str]:
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
        correct = real(s[key], f"'{key}'", 0.0, hi) > 0
    scores = {k: v for k in DOC_SCORE_KEYS if (v := real(s.get(k), f"'{k}'", 0.0, 1.0)) is not None}
    filt = str(s.get("filter", "none"))
    items = _items(s, filt)
    row: SampleRow = {"run_id": run_id, "task": task, "doc_id": whole(s["doc_id"], "'doc_id'"),
                      "prompt": clip(prompt), "target": clip(s.get("target")), "response": clip(resp),
                      "correct": correct, "scores": json.dumps(scores, sort_keys=True) if scores else None,
                      "items": json.dumps(items, sort_keys=True) if items else None}  # fmt: skip
    return row, filt


#: the most numbers one sample's item of one metric may hold (a flip-flop sequence's reads, a triple, a pair)
MAX_ITEM = 4096


def _item(v: Any, where: str):
    """A per-sample metric value as stored: a number (a non-finite one as its string, ``peeval.records.aggregate.
    decode_item``), or a (nested) list of them; ValueError otherwise."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return v if math.isfinite(v) else str(float(v))  # JSON has no inf / NaN: 'inf', '-inf', 'nan'
    if isinstance(v, (list, tuple)) and len(v) <= MAX_ITEM:
        return [_item(x, where) for x in v]
    raise ValueError(f"{where} must be a number or a list of numbers (its per-sample value), not {str(v)[:40]!r}")


def _items(s: dict, filt: str) -> dict:
    """{'metric,filter': value} of every metric the sample lists (``metrics``) and holds: what the run's
    aggregates are recomputed from."""
    metrics = s.get("metrics") or []
    if not isinstance(metrics, list):
        return {}
    return {f"{m},{filt}": _item(s[m], f"'{m}'") for m in metrics if isinstance(m, str) and m in s}


def _block_row(s: dict, task: str, run_id: str) -> PplBlockRow | None:
    """A perplexity sample's (document, length) sums (the peeval wrappers' response), None for other samples."""
    resp = s.get("filtered_resps", s.get("resps"))
    while isinstance(resp, list) and len(resp) == 1:
        resp = resp[0]
    if not task.startswith(PPL_PREFIX) or not isinstance(resp, dict) or "length" not in resp:
        return None
    span = resp.get("span") or [None, None]
    if not (isinstance(span, list) and len(span) == 2):
        raise ValueError("'span' must be [start, end]")
    return {"run_id": run_id, "task": task, "doc_id": whole(resp.get("document", s["doc_id"]), "'document'"),
            "length": whole(resp["length"], "'length'", 2), "ll": number(resp.get("ll"), "'ll'"),
            "tokens": whole(resp.get("tokens"), "'tokens'"), "bytes": whole(resp.get("bytes"), "'bytes'"),
            "protocol": str(resp.get("protocol") or "windows"), "target_start": whole(span[0], "'span'"),
            "target_end": whole(span[1], "'span'")}  # fmt: skip


def _sample_rows(
    run_dir: Path, run_id: str, suffix: str = ""
) -> tuple[list[SampleRow], dict[tuple[str, str, str], int], list[PplBlockRow]]:
    """samples rows, documents per (task, filter, metric) and perplexity blocks from the
    samples_<task><suffix>.jsonl files (plain lm_eval's suffix: ``_<date>`` of its results file)."""
    rows, counts, blocks = [], {}, []
    for f in sorted(run_dir.glob(f"samples_*{suffix}.jsonl")):
        task = f.stem[len("samples_") : len(f.stem) - len(suffix)]
        if not f.is_file():  # a FIFO or a device: reading it hung the ingest
            raise IngestError(f"{f}: not a regular file (a pipe, a device or a folder): a samples file is a file")
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
            except RecursionError:  # a line of `[` x 50,000
                raise IngestError(f"{f}:{i}: malformed sample (JSON nested too deeply)") from None
            for m in metrics:
                counts[(task, filt, m)] = counts.get((task, filt, m), 0) + 1
            rows.append(row)
            if block is not None:
                blocks.append(block)
    return rows, counts, blocks
