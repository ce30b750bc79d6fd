"""A task's metric recomputed from its samples' per-sample items (lm-eval's ``process_results`` values, which every
line of ``samples_<task>.jsonl`` holds under the metric's name): the check that a results.json number is what its
rows give (issue 66). One rule per metric base, the same arithmetic as the task's own ``aggregation()`` (peeval's
tasks; lm-eval's ``mean`` / ``perplexity`` / ``weighted_perplexity`` / ``bits_per_byte``); a test holds each rule
equal to the task's function on random items.

A metric with no rule here, or whose items are not of the rule's shape, is :class:`NotRecomputable`: ingest refuses
the run in one line rather than show a number nothing accounts for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .metrics import metric_kind
from .names import metric_base


class NotRecomputable(ValueError):
    """No rule recomputes this metric from its items (an unknown metric, or items of another shape)."""


def _numbers(items: Sequence, what: str) -> list[float]:
    if not all(isinstance(x, (int, float)) for x in items):
        raise NotRecomputable(f"{what}: its samples' items are not numbers")
    return [float(x) for x in items]


def _pairs(items: Sequence, what: str) -> tuple[float, float]:
    if not all(isinstance(x, (list, tuple)) and len(x) == 2 and all(isinstance(v, (int, float)) for v in x)
               for x in items):  # fmt: skip
        raise NotRecomputable(f"{what}: its samples' items are not (sum, count) pairs")
    return math.fsum(float(x[0]) for x in items), math.fsum(float(x[1]) for x in items)


def _mean(xs: list[float]) -> float:
    return math.fsum(xs) / len(xs) if xs else math.nan


def _exp_neg(x: float) -> float:
    try:
        return math.exp(-x)
    except OverflowError:  # an exploding model: the tasks report inf
        return math.inf


def recompute(task: str, metric: str, items: Sequence) -> float:
    """``metric`` of ``task`` (``acc``, ``ppl@512``, ``nll_pos@128``, ``rouge_gm``...) from its samples' items, as
    the task aggregated them; :class:`NotRecomputable` when no rule applies."""
    base, what = metric_base(metric), f"{task} {metric}"
    if not items:
        raise NotRecomputable(f"{what}: no sample holds it")
    scale = 100.0 if metric_kind(task, metric) == "percent" else 1.0
    if base in ("ppl", "word_perplexity", "byte_perplexity"):  # exp(-sum ll / sum n): ppl.py _ppl, lm-eval's
        ll, n = _pairs(items, what)  # weighted_perplexity
        return _exp_neg(ll / n) if n else math.nan
    if base in ("bpb", "bits_per_byte"):  # -sum ll / (ln 2 sum bytes): ppl.py _bpb, lm-eval's bits_per_byte
        ll, b = _pairs(items, what)
        return -ll / (b * math.log(2)) if b else math.nan
    if base == "nll_pos":  # sum nll / sum tokens: ppl.py _mean_nll
        s, n = _pairs(items, what)
        return s / n if n else math.nan
    if base == "perplexity":  # lm-eval's perplexity: exp(-mean ll)
        return _exp_neg(_mean(_numbers(items, what)))
    if base in ("tokens", "windows", "sample_len"):
        return math.fsum(_numbers(items, what))
    if base == "read_acc":  # every read of every sequence (diag.py)
        if not all(isinstance(x, (list, tuple)) for x in items):
            raise NotRecomputable(f"{what}: its samples' items are not lists of reads")
        return _mean(_numbers([v for x in items for v in x], what))
    if base in ("rouge_gm", "scrolls_score") and all(isinstance(x, (list, tuple)) for x in items):
        if not all(len(x) == 3 for x in items):  # SCROLLS: the geometric mean of the three ROUGE means, x 100
            raise NotRecomputable(f"{what}: its samples' items are not (rouge1, rouge2, rougeL) triples")
        means = [_mean(_numbers([x[i] for x in items], what)) for i in range(3)]
        return 100.0 * math.prod(means) ** (1 / 3)
    if base in MEAN_BASES:
        return scale * _mean(_numbers(items, what))
    raise NotRecomputable(f"{what}: peeval has no rule to recompute it from its samples")


#: the metrics a task reports as the mean of its samples' values (x 100 for a percent: SCROLLS): lm-eval's
#: ``mean`` aggregation, peeval's ``mean_x100`` and diag.py's mean
MEAN_BASES = frozenset({"acc", "acc_norm", "exact_match", "em", "f1", "seq_acc", "acc_mutual_info", "rouge1",
                        "rouge2", "rougeL", "scrolls_score", "attn_diff", "pe_dot_diff"})  # fmt: skip


def decode_item(v):
    """A stored item (leaderboard.ingest.samples) back as numbers: ``'inf'`` / ``'-inf'`` / ``'nan'`` as floats."""
    if isinstance(v, str) and v in ("inf", "-inf", "nan"):
        return float(v)
    if isinstance(v, list):
        return [decode_item(x) for x in v]
    return v


def group_value(members: Sequence[tuple[float, int]]) -> float:
    """A group's metric from its members' (value, documents): lm-eval's size-weighted mean of the subtasks."""
    n = sum(k for _, k in members)
    return math.fsum(v * k for v, k in members) / n if n else math.nan
