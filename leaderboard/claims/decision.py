"""The decision rule of the claims (docs/statistics.md "Decision rule"): p-values with the right degrees of
freedom, and one multiple-comparison correction over every pair a store decides.

- Student's t (``peeval.records.stats``, the one owner; the site's intervals use it too): :func:`t_sf` (upper
  tail) and :func:`t_quantile`, scipy's ``scipy.stats.t``; ν = ∞ is the standard normal
  (``statistics.NormalDist``). Checked against
  tabulated values (t_{0.975,2} = 4.303, t_{0.975,4} = 2.776, t_{0.975,10} = 2.228, t_{0.975,∞} = 1.960)
  and closed forms (ν = 1: Cauchy; ν = 2: t/√(2+t²)) in tests/leaderboard/test_claims_decision.py.
- Welch–Satterthwaite degrees of freedom of a difference of two means (:func:`welch_df`).
- :func:`two_sided_p` (H0: no difference) and :func:`tost_p` (two one-sided tests of equivalence within
  ±tolerance) for a difference with a standard error and ν degrees of freedom.
- :func:`holm` (the correction used: family-wise error at ``ALPHA`` under any dependence between the
  pairs) and :func:`benjamini_hochberg` (false discovery rate; not used, kept for comparison).
"""

from __future__ import annotations

import math

from peeval.records.stats import betainc, t_quantile, t_sf, welch_df

__all__ = ["ALPHA", "MIN_RUNS", "MIN_TOKENS_PER_PARAM", "benjamini_hochberg", "betainc", "clopper_pearson", "holm",
           "outside_p", "student_t", "welch_t", "t_quantile", "t_sf", "tost_p", "two_sided_p", "welch_df"]  # fmt: skip

#: the family-wise level of the claims' decisions (Holm-adjusted p < ALPHA decides)
ALPHA = 0.05
#: a perplexity claim is decided only on language models pretrained on at least this many tokens per parameter
#: (all parameters, as Hoffmann et al. 2022 count them; ~20 is their compute-optimal ratio). Fixed before any
#: comparison was looked at (issue 29); fewer: numbers, but "not decidable here" (at this scale)
MIN_TOKENS_PER_PARAM = 20
#: a pair is tested only when each side has at least this many independently trained runs (seeds) at its setting
#: (issue 55): the training run is the unit of replication; documents and examples only give each run's estimate
MIN_RUNS = 3


def welch_t(focus: list[float], other: list[float]) -> tuple[float, float, float]:
    """Welch's two-sample t on per-run values (one number per training run): (mean difference focus − other, its
    standard error sqrt(s_f²/n_f + s_o²/n_o), the Welch–Satterthwaite df). The one test of the claims, fixed by the
    design (issue 67): unlike pooled t it holds α when the two sides' run-to-run spreads differ (PoPE table 4's
    runs: 5.8x RoPE's standard deviation, where pooled t on 3 vs 3 rejects a true null 9.3 % of the time). When
    neither side varies, df is n_f + n_o − 2 (no spread to weigh)."""
    nf, no = len(focus), len(other)
    if nf < 2 or no < 2:
        raise ValueError(f"welch_t needs >= 2 runs per side, not {nf} + {no}")
    mf, mo = sum(focus) / nf, sum(other) / no
    vf = sum((x - mf) ** 2 for x in focus) / (nf - 1) / nf
    vo = sum((x - mo) ** 2 for x in other) / (no - 1) / no
    se = math.sqrt(vf + vo)
    df = (vf + vo) ** 2 / (vf**2 / (nf - 1) + vo**2 / (no - 1)) if vf + vo > 0 else float(nf + no - 2)
    return mf - mo, se, float(df)


def student_t(focus: list[float], other: list[float]) -> tuple[float, float, float]:
    """Student's pooled two-sample t (mean difference, pooled standard error, df = n_f + n_o − 2): the claims'
    test before issue 67, kept for the sensitivity the claims page shows beside each decided pair."""
    nf, no = len(focus), len(other)
    if nf < 1 or no < 1 or nf + no < 3:
        raise ValueError(f"student_t needs >= 3 runs in all and one per side, not {nf} + {no}")
    mf, mo = sum(focus) / nf, sum(other) / no
    ss = sum((x - mf) ** 2 for x in focus) + sum((x - mo) ** 2 for x in other)
    df = nf + no - 2
    return mf - mo, math.sqrt(ss / df * (1.0 / nf + 1.0 / no)), float(df)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper–Pearson) binomial interval of k successes in n trials (n = 0: (0, 1))."""
    if n <= 0:
        return 0.0, 1.0
    from scipy.stats import beta

    a = (1.0 - level) / 2.0
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1.0 - a, k + 1, n - k))
    return lo, hi


def two_sided_p(diff: float, se: float, df: float | None) -> float:
    """P(|T| > |diff|/se) under H0: no difference."""
    if se <= 0.0:
        return 1.0 if diff == 0.0 else 0.0
    return min(1.0, 2.0 * t_sf(abs(diff) / se, df))


def tost_p(diff: float, se: float, df: float | None, tolerance: float) -> float:
    """Two one-sided tests of equivalence (H0: |difference| >= tolerance): the larger of P(T > (diff + tol)/se)
    and P(T < (diff − tol)/se). Significant at α exactly when the 1 − 2α interval lies inside ±tolerance."""
    if se <= 0.0:
        return 0.0 if abs(diff) < tolerance else 1.0
    return max(t_sf((diff + tolerance) / se, df), t_sf((tolerance - diff) / se, df))


def outside_p(diff: float, se: float, df: float | None, tolerance: float) -> float:
    """Two-sided test that the difference lies outside ±tolerance (H0: |difference| <= tolerance), used for a
    "comparable" claim's contradiction: 2·P(T > (|diff| − tol)/se), at most 1 (doubled like :func:`two_sided_p`)."""
    if se <= 0.0:
        return 0.0 if abs(diff) > tolerance else 1.0
    return min(1.0, 2.0 * t_sf((abs(diff) - tolerance) / se, df))


def holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (in the input's order): sorted ascending, p_(i)·(m − i + 1), made
    non-decreasing, at most 1. Rejecting adjusted p < α controls the family-wise error at α under any
    dependence between the tests."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def benjamini_hochberg(ps: list[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (in the input's order): sorted ascending, p_(i)·m/i, made
    non-increasing from the largest down, at most 1 (false discovery rate; not the rule used, see Holm)."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    out, running = [0.0] * m, 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, ps[i] * m / (rank + 1))
        out[i] = min(1.0, running)
    return out


def _advantage(diff: float, higher_is_better: bool) -> float:
    return diff if higher_is_better else -diff


def p_value(
    diff: float | None,
    se: float | None,
    df: float | None = None,
    kind: str = "better",
    tolerance: float | None = None,
    exact: float | None = None,
) -> float | None:
    """The (unadjusted) p-value of one comparison, or None without a difference and an uncertainty. ``exact``: an
    exact test's two-sided p (McNemar) for a "better" claim. ``kind`` 'equal': TOST's p when |diff| <=
    tolerance, else the two-sided p of |difference| > tolerance (the side the data point to: at most one of the
    two can be significant below 0.5)."""
    if diff is None or not math.isfinite(diff):
        return None
    if kind != "equal" and exact is not None:
        return exact
    if se is None or not math.isfinite(se):
        return None
    if kind == "equal":
        tol = tolerance or 0.0
        return tost_p(diff, se, df, tol) if abs(diff) <= tol else outside_p(diff, se, df, tol)
    return two_sided_p(diff, se, df)


def verdict(
    diff: float | None,
    se: float | None,
    higher_is_better: bool,
    expected_sign: int = 1,
    kind: str = "better",
    tolerance: float | None = None,
    df: float | None = None,
    p: float | None = None,
    alpha: float = ALPHA,
) -> str:
    """``diff`` = focus − other in the paper's unit; ``expected_sign`` = +1 if the paper says the focus is better,
    −1 if its own numbers show the other ahead. ``p``: the comparison's (adjusted) p-value; None: computed by
    :func:`p_value` from ``diff``, ``se`` and ``df`` (unadjusted). Decided when p < ``alpha``: a "better" claim
    in the direction of ``diff``, an "equal" one as equivalent (|diff| <= tolerance) or outside it."""
    if p is None:
        p = p_value(diff, se, df, kind, tolerance)
    if p is None or diff is None or not math.isfinite(diff) or p >= alpha:
        return "inconclusive"
    adv = _advantage(diff, higher_is_better)
    if kind == "equal":
        return "reproduced" if abs(adv) <= (tolerance or 0.0) else "contradicted"
    if adv == 0:
        return "inconclusive"
    return "reproduced" if adv * (1 if expected_sign >= 0 else -1) > 0 else "contradicted"
