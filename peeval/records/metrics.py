"""The metric registry: each metric base once (kind and unit, direction, headline rank, aggregation over seeds,
per-example outcome), read by ingest's range checks, the site's columns and arrows and the claims' tests.

Changes when a metric is added or its meaning is fixed, never with a task's names or a statistic's formula.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from .names import POSITION_BASE, SCROLLS_PREFIX, metric_base

#: what a metric's values are, and the range ingest holds them to:
#: fraction: a share of examples in [0, 1]; percent: a score in [0, 100]; perplexity: exp of a mean NLL >= 0,
#: so >= 1; bits: bits per byte >= 0; count: a whole number >= 0; score: a score of no fixed range (lm-eval's
#: em / f1 / ROUGE are in [0, 1] or [0, 100] by task: on a SCROLLS task they are percents, ``metric_kind``);
#: loss: a mean NLL; difference: a measured difference (shift stability)
KINDS = ("fraction", "percent", "perplexity", "bits", "count", "score", "loss", "difference")


@dataclass(frozen=True)
class MetricSpec:
    """One metric base (the part before the first ``@``: ``ppl@512`` is a ``ppl``), described once for
    every reader: ingest's range checks, the site's columns and arrows, the claims' tests.

    ``higher_is_better``: None for a count (no direction, never "best"); lm-eval's own ``higher_is_better``
    in results.json must agree (ingest checks). ``headline``: the rank of a task's leaderboard column (lowest
    first; None: never a column). ``seeds``: how runs of several seeds combine: ``"mean"`` (± the stderr of
    :func:`seed_estimate`) or ``"sum"`` (counts). ``outcome``: a sample's value of it is that example's 0/1
    correctness (``samples.correct``), so two runs on the same examples can be compared example by example."""

    kind: str
    higher_is_better: bool | None
    headline: int | None = None
    seeds: str = "mean"
    outcome: bool = False


_FRACTION = MetricSpec("fraction", True)
_SCORE = MetricSpec("score", True)
_PPL = MetricSpec("perplexity", False)
_BITS = MetricSpec("bits", False)
_COUNT = MetricSpec("count", None, seeds="sum")
#: every metric base peeval knows (its own tasks' and the lm-eval ones its suites run); a metric not here
#: takes lm-eval's ``higher_is_better`` from results.json, else counts as higher-is-better
METRICS: dict[str, MetricSpec] = {
    "acc_norm": dataclasses.replace(_FRACTION, headline=0),
    "acc": dataclasses.replace(_FRACTION, headline=1, outcome=True),
    "exact_match": dataclasses.replace(_FRACTION, headline=2, outcome=True),
    "em": dataclasses.replace(_SCORE, headline=3, outcome=True),
    "f1": dataclasses.replace(_SCORE, headline=4),
    "rougeL": dataclasses.replace(_SCORE, headline=5),
    "mcc": dataclasses.replace(_SCORE, headline=6),
    "seq_acc": dataclasses.replace(_FRACTION, headline=7),  # flip-flop: the whole sequence right
    "read_acc": dataclasses.replace(_FRACTION, headline=0),  # flip-flop: every read (the claims' unit, Liu et al.)
    "acc_mutual_info": _FRACTION,
    "acc_all": _FRACTION,
    "rouge1": _SCORE,
    "rouge2": _SCORE,
    "rouge_gm": _SCORE,
    "scrolls_score": _SCORE,
    "ppl": _PPL,
    "perplexity": _PPL,
    "word_perplexity": _PPL,
    "byte_perplexity": _PPL,
    "bpb": _BITS,
    "bits_per_byte": _BITS,
    "loss": MetricSpec("loss", False),
    POSITION_BASE: MetricSpec("loss", False),  # perplexity tasks: the loss by position
    "tokens": _COUNT,
    "windows": _COUNT,
    "sample_len": _COUNT,
    "attn_diff": MetricSpec("difference", False),  # shift stability: the smaller, the more shift-invariant
    "pe_dot_diff": MetricSpec("difference", False),
}


def metric_spec(metric: str) -> MetricSpec | None:
    """The registry entry of a metric's base (``ppl@512`` -> ``ppl``'s), None for an unknown one."""
    return METRICS.get(metric_base(metric))


def metric_kind(task: str, metric: str) -> str | None:
    """A metric's kind on ``task``: the registry's, except that a score of a SCROLLS task is a percent."""
    spec = metric_spec(metric)
    if spec is None:
        return None
    return "percent" if spec.kind == "score" and task.startswith(SCROLLS_PREFIX) else spec.kind


def higher_is_better(metric: str, lm_eval: bool | None = None) -> bool:
    """The direction of a metric: the registry's; else lm-eval's (``lm_eval``, from results.json); else higher.
    A count has none: True, as lm-eval reports it."""
    spec = metric_spec(metric)
    if spec is not None and spec.higher_is_better is not None:
        return spec.higher_is_better
    return True if lm_eval is None else bool(lm_eval)


def is_count(metric: str) -> bool:
    """A count (tokens, windows, sample length): no score, never a leaderboard column."""
    spec = metric_spec(metric)
    return spec is not None and spec.kind == "count"


def is_outcome(metric: str, task: str = "") -> bool:
    """A share of examples whose per-example value is the 0/1 ``samples.correct`` (acc, exact_match; on a
    SCROLLS task also em, a percent of examples: :func:`outcome_scale`)."""
    spec = METRICS.get(metric)
    return spec is not None and spec.outcome and metric_kind(task, metric) in ("fraction", "percent")


def outcome_scale(task: str, metric: str) -> float:
    """The task mean of an outcome metric per share of examples right: 100 for a percent (SCROLLS' em), else 1."""
    return 100.0 if metric_kind(task, metric) == "percent" else 1.0


#: the per-document parts of a corpus statistic (SCROLLS' Rgm: the geometric mean of the three corpus means) that
#: ingest keeps in samples.scores, for the paired bootstrap over documents (leaderboard/claims/paired.py)
DOC_SCORE_KEYS: tuple[str, ...] = ("rouge1", "rouge2", "rougeL")

#: the keys of a sample (samples_<task>.jsonl) that hold its 0/1 outcome, in the order ingest reads them
OUTCOME_KEYS: tuple[str, ...] = tuple(m for m, spec in METRICS.items() if spec.outcome)


def headline_metrics(metrics: Iterable[str]) -> list[str]:
    """The plain (non-cell) headline metrics among ``metrics``, best-ranked first."""
    ranked = [(METRICS[m].headline, m) for m in set(metrics) if m in METRICS and METRICS[m].headline is not None]
    return [m for _, m in sorted(ranked)]


__all__ = [
    "KINDS",
    "MetricSpec",
    "METRICS",
    "metric_spec",
    "metric_kind",
    "higher_is_better",
    "is_count",
    "is_outcome",
    "outcome_scale",
    "DOC_SCORE_KEYS",
    "OUTCOME_KEYS",
    "headline_metrics",
]
