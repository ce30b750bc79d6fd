"""The statistics of a verdict: peeval's raw metric in the paper's unit, and one number per encoding
(mean over seeds with its standard error).

Uncertainty per encoding: the leaderboard's mean ± stderr over seeds (``peeval.records.seed_estimate``:
across seeds when there are >= 2, else the run's own stderr, else for accuracies the binomial one from n).
``Estimate.method`` names which ('seeds', 'lm-eval stderr', 'binomial'): the claims table says which test a
verdict used.
These are the unpaired fallback; ``paired`` compares two encodings example by example when it can.
"""

from __future__ import annotations

from dataclasses import dataclass

from peeval import records

#: a difference counts when it exceeds Z combined standard errors
Z = 2.0
#: the plus-four stderr of a proportion (peeval.records owns it: the leaderboard uses it too)
binomial_stderr = records.binomial_stderr


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


def combine_seeds(
    per_seed: list[tuple[float, float | None, int | None]], acc_like: bool, kinds: list[str | None] | None = None
) -> Estimate | None:
    """Mean ± stderr over seeds (the leaderboard's own: :func:`peeval.records.seed_estimate`) as an
    :class:`Estimate`; ``acc_like``: the number is a proportion of examples."""
    est = records.seed_estimate(per_seed, acc_like, kinds)
    return None if est is None else Estimate(est.value, est.stderr, est.n, est.seeds, [], est.method)
