"""Statistics shared by the leaderboard and the claims: the stderr over seeds, :class:`SeedEstimate`, Student's t
and the Welch interval of a difference (one owner: leaderboard/claims/ imports these, never its own copies).

Changes when a statistical method changes, never with names or formats. Student's t is scipy's
(``scipy.stats.t``; scipy comes with lm-eval through scikit-learn), imported on first use so that the
leaderboard's readers stay light; the normal (df None or ∞) is ``statistics.NormalDist``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass


def seed_stderr(xs: Iterable[float]) -> float | None:
    """Standard error of the mean across repeats: sample stdev / sqrt(n); None for n < 2, NaN when
    a value is not finite (no spread can be measured; ``statistics.stdev`` would raise)."""
    xs = list(xs)
    if len(xs) < 2:
        return None
    if not all(math.isfinite(x) for x in xs):
        return math.nan
    scale = max(abs(x) for x in xs) or 1.0  # stdev of x / scale, so squares of ~1e308 never overflow
    return statistics.stdev([x / scale for x in xs]) / math.sqrt(len(xs)) * scale


def mean_stderr(xs: Iterable[float]) -> tuple[float, float | None]:
    """(mean, :func:`seed_stderr`) of a non-empty sequence."""
    xs = list(xs)
    if not xs:
        raise ValueError("mean_stderr of no values")
    return finite_mean(xs), seed_stderr(xs)


def finite_mean(xs: list[float]) -> float:
    """The mean, never overflowing on finite values (two seeds at 1.7e308 sum past float's range): the sum of
    x / n when the plain sum overflows. An infinite value keeps its infinity (an exploded model stays +inf)."""
    total = sum(xs)
    if math.isinf(total) and all(math.isfinite(x) for x in xs):
        return sum(x / len(xs) for x in xs)
    return total / len(xs)


def pooled_stderr(ses: list[float]) -> float:
    """The stderr of the mean of independent estimates with standard errors ``ses``: sqrt(Σ se²) / count."""
    return math.sqrt(sum(s * s for s in ses)) / len(ses)


def sample_variance(xs: list[float]) -> float:
    """Sample variance (n − 1 in the denominator) by plain float sums (the claims' paired ANOVA reads it)."""
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def binomial_stderr(p: float, n: int) -> float:
    """Plus-four stderr of a proportion: never 0, so 0/n or n/n is not 'certain'."""
    pt = (p * n + 2.0) / (n + 4.0)
    return math.sqrt(pt * (1.0 - pt) / (n + 4.0))


@dataclass
class SeedEstimate:
    """One number over seeds: the mean, its standard error, the seeds and examples behind it."""

    value: float
    stderr: float | None
    n: int | None  # examples, all seeds together (None when a seed's n is unknown)
    seeds: int
    #: where ``stderr`` came from: 'seeds' | 'lm-eval stderr' | 'binomial' (pooled ones joined by '+'); None: none
    method: str | None = None


def seed_estimate(
    per_seed: list[tuple[float, float | None, int | None]], proportion: bool, kinds: list[str | None] | None = None
) -> SeedEstimate | None:
    """The mean ± stderr of one number over seeds, as the leaderboard and the claims both show it.

    ``per_seed``: (value, the run's own stderr, its examples) per seed; ``proportion``: a share of
    examples (a binomial stderr is known from n); ``kinds[i]``: where ``per_seed[i]``'s stderr came from
    (default 'lm-eval stderr'). The stderr is

    - >= 2 seeds: the sample standard deviation (n - 1) over seeds / sqrt(seeds), since the seeds are the
      repeats a reader wants to generalise over; when it is 0 (identical seeds) the runs' own standard errors
      pooled, sqrt(sum se²) / seeds (a spread of 0 is not certainty); None when a value is not finite;
    - one seed: the run's own stderr over examples (lm-eval's); for a proportion whose stderr is missing or 0,
      the binomial (plus-four) one from n, since 0/n and n/n are not certain either; else None."""
    if not per_seed:
        return None
    vals = [v for v, _, _ in per_seed]
    ns = [n for _, _, n in per_seed]
    n_tot = sum(ns) if all(n is not None for n in ns) else None
    k = len(vals)
    mean, across = mean_stderr(vals)  # across seeds: None for one seed
    kinds = list(kinds) if kinds is not None else ["lm-eval stderr"] * k

    def own(v, se, n, kind):
        """(stderr, its method) of one run."""
        if se is not None and se > 0:
            return se, kind or "lm-eval stderr"
        if proportion and n and math.isfinite(v):
            return binomial_stderr(min(max(v, 0.0), 1.0), int(n)), "binomial"
        return se, None if se is None else kind or "lm-eval stderr"

    if k >= 2:
        se, method = across, "seeds"
        if se is not None and not math.isfinite(se):
            se, method = None, None  # an infinite or NaN value: no spread can be measured
        elif se == 0.0:
            owns = [own(*x, kd) for x, kd in zip(per_seed, kinds, strict=True)]
            ok = all(s is not None for s, _ in owns)
            se = pooled_stderr([s for s, _ in owns]) if ok else None
            method = "+".join(sorted({m for _, m in owns if m})) if ok else None
    else:
        se, method = own(*per_seed[0], kinds[0])
    return SeedEstimate(mean, se, n_tot, k, method)


# ----------------------------------------------------------------------------- Student's t (scipy's, one owner)
#: the standard normal (Student's t with df None or infinite)
_NORMAL = statistics.NormalDist()


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1 (``scipy.special.betainc``)."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"betainc: x={x} outside [0, 1]")
    from scipy.special import betainc as _betainc

    return float(_betainc(a, b, x))


def t_sf(t: float, df: float | None) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (None or ∞: the standard normal); scipy computes the
    tail itself (not 1 - cdf), so small p-values keep their digits."""
    if df is None or math.isinf(df):
        return 1.0 - _NORMAL.cdf(t) if t < 0 else _NORMAL.cdf(-t)
    if df <= 0:
        raise ValueError(f"t_sf: df={df} must be > 0")
    from scipy.stats import t as student

    return float(student.sf(t, df))


def t_cdf(t: float, df: float | None) -> float:
    """P(T <= t) of Student's t (df None or ∞: the normal)."""
    return 1.0 - t_sf(t, df)


def t_quantile(q: float, df: float | None) -> float:
    """The ``q`` quantile of Student's t (None or ∞: the standard normal): the critical value of an interval, e.g.
    ``t_quantile(0.975, 2)`` = 4.303 (not the normal's 1.96)."""
    if not 0.0 < q < 1.0 or (df is not None and not df > 0):
        raise ValueError(f"t_quantile: needs 0 < q < 1 and df > 0, got q={q}, df={df}")
    if df is None or math.isinf(df):
        return _NORMAL.inv_cdf(q)
    from scipy.stats import t as student

    return float(student.ppf(q, df))


def welch_df(parts: list[tuple[float, float | None]]) -> float | None:
    """Welch–Satterthwaite ν of a sum of independent variance terms [(se_i, ν_i)]: (Σ se_i²)² / Σ se_i⁴/ν_i; a
    term with ν_i None (∞: a normal standard error over many examples) adds nothing to the denominator. None
    (∞) when every term is; a zero total variance gives None."""
    num = sum(se * se for se, _ in parts) ** 2
    den = sum(se**4 / nu for se, nu in parts if nu is not None)
    if num == 0.0 or den == 0.0:
        return None
    return num / den


@dataclass
class Difference:
    """``a - b`` of two :class:`SeedEstimate`s with its ``level`` interval [lo, hi]; ``df``: the Welch degrees
    of freedom (inf: both sides one run each, the runs' own standard errors over examples, a normal interval)."""

    value: float
    lo: float
    hi: float
    df: float
    level: float = 0.95


def welch_difference(a: SeedEstimate, b: SeedEstimate, level: float = 0.95) -> Difference | None:
    """The difference ``a - b`` and its Welch interval: ``t_quantile((1 + level) / 2, df)`` standard errors either
    side, df by Welch-Satterthwaite from each side's seeds - 1. Both sides one run: their own standard errors
    over examples and the normal quantile. None when an interval cannot be justified: a stderr missing or not
    finite, or one side one run and the other several (a run's spread over examples is not a spread over seeds)."""
    if a.stderr is None or b.stderr is None or not (math.isfinite(a.stderr) and math.isfinite(b.stderr)):
        return None
    if not (math.isfinite(a.value) and math.isfinite(b.value)):
        return None
    diff, se = a.value - b.value, math.hypot(a.stderr, b.stderr)
    if a.seeds == 1 and b.seeds == 1:
        df = math.inf
    elif a.seeds >= 2 and b.seeds >= 2:
        df = welch_df([(a.stderr, a.seeds - 1), (b.stderr, b.seeds - 1)]) or float(a.seeds + b.seeds - 2)
    else:
        return None
    half = t_quantile((1.0 + level) / 2.0, df) * se
    return Difference(diff, diff - half, diff + half, df, level)


__all__ = [
    "seed_stderr",
    "mean_stderr",
    "pooled_stderr",
    "sample_variance",
    "binomial_stderr",
    "SeedEstimate",
    "seed_estimate",
    "betainc",
    "t_sf",
    "t_cdf",
    "t_quantile",
    "welch_df",
    "Difference",
    "welch_difference",
]
