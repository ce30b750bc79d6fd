"""The statistics of a verdict: peeval's raw metric in the paper's unit, and one number per encoding
(mean over seeds with its standard error).

Uncertainty per encoding: the standard error across seeds when there are >= 2 seeds, else the run's
own stderr (lm-eval's), else for accuracies the binomial (plus-four) stderr from n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from peeval import records

#: a difference counts when it exceeds Z combined standard errors
Z = 2.0


@dataclass
class Estimate:
    """One encoding's number in the paper's unit: mean over seeds, its stderr, total n."""

    value: float
    stderr: float | None
    n: int | None
    seeds: int
    run_ids: list[str]


def to_unit(unit: str, value: float, stderr: float | None) -> tuple[float, float | None]:
    """peeval's raw metric (accuracies in [0, 1]) converted to the paper's unit."""
    if unit == "acc_pct":
        return 100.0 * value, None if stderr is None else 100.0 * stderr
    if unit == "err_pct":
        return 100.0 * (1.0 - value), None if stderr is None else 100.0 * stderr
    if unit == "attn_diff_e2":
        return 100.0 * value, None if stderr is None else 100.0 * stderr
    return value, stderr


def binomial_stderr(p: float, n: int) -> float:
    """Plus-four stderr of a proportion: never 0, so 0/n or n/n is not 'certain'."""
    pt = (p * n + 2.0) / (n + 4.0)
    return math.sqrt(pt * (1.0 - pt) / (n + 4.0))


def combine_seeds(per_seed: list[tuple[float, float | None, int | None]], acc_like: bool) -> Estimate | None:
    """Mean over seeds; stderr across seeds (>= 2 seeds) else the run's stderr, else binomial."""
    if not per_seed:
        return None
    vals = [v for v, _, _ in per_seed]
    ns = [n for _, _, n in per_seed]
    n_tot = sum(ns) if all(n is not None for n in ns) else None
    k = len(vals)
    mean, across = records.mean_stderr(vals)  # across seeds: None for one seed

    def own(v, se, n):
        if se is not None and se > 0:
            return se
        if acc_like and n:
            return binomial_stderr(min(max(v, 0.0), 1.0), int(n))
        return se

    if k >= 2:
        se = across
        if se == 0.0:  # identical seeds: fall back to the pooled within-run uncertainty
            owns = [own(*x) for x in per_seed]
            se = math.sqrt(sum(s * s for s in owns)) / k if all(s is not None for s in owns) else None
    else:
        se = own(*per_seed[0])
    return Estimate(mean, se, n_tot, k, [])
