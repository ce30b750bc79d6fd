"""The statistics of a verdict: peeval's raw metric in the paper's unit, and one number per encoding
(mean over seeds with its standard error).

Uncertainty per encoding: the standard error across seeds when there are >= 2 seeds, else the run's
own stderr (lm-eval's), else for accuracies the binomial (plus-four) stderr from n. ``Estimate.method``
names which ('seeds', 'lm-eval stderr', 'binomial'): the claims table says which test a verdict used.
These are the unpaired fallback; ``paired`` compares two encodings example by example when it can.
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
    #: where ``stderr`` came from: 'seeds' | 'lm-eval stderr' | 'binomial' (None: no stderr)
    method: str | None = None


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


def combine_seeds(
    per_seed: list[tuple[float, float | None, int | None]], acc_like: bool, kinds: list[str | None] | None = None
) -> Estimate | None:
    """Mean over seeds; stderr across seeds (>= 2 seeds) else the run's stderr, else binomial.
    ``kinds[i]`` names where ``per_seed[i]``'s stderr came from (default: 'lm-eval stderr')."""
    if not per_seed:
        return None
    vals = [v for v, _, _ in per_seed]
    ns = [n for _, _, n in per_seed]
    n_tot = sum(ns) if all(n is not None for n in ns) else None
    k = len(vals)
    mean, across = records.mean_stderr(vals)  # across seeds: None for one seed

    kinds = list(kinds) if kinds is not None else ["lm-eval stderr"] * k

    def own(v, se, n, kind):
        """(stderr, its method) of one run."""
        if se is not None and se > 0:
            return se, kind or "lm-eval stderr"
        if acc_like and n:
            return binomial_stderr(min(max(v, 0.0), 1.0), int(n)), "binomial"
        return se, None if se is None else kind or "lm-eval stderr"

    if k >= 2:
        se, method = across, "seeds"
        if se == 0.0:  # identical seeds: fall back to the pooled within-run uncertainty
            owns = [own(*x, kd) for x, kd in zip(per_seed, kinds, strict=True)]
            ok = all(s is not None for s, _ in owns)
            se = math.sqrt(sum(s * s for s, _ in owns)) / k if ok else None
            method = "+".join(sorted({m for _, m in owns if m})) if ok else None
    else:
        se, method = own(*per_seed[0], kinds[0])
    return Estimate(mean, se, n_tot, k, [], method)
