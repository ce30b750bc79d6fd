"""The decision rule of the claims (docs/statistics.md "Decision rule"): p-values with the right degrees of
freedom, and one multiple-comparison correction over every pair a store decides.

- Student's t: :func:`t_sf` (upper tail) from the regularized incomplete beta function,
  P(T > t) = ½·I_{ν/(ν+t²)}(ν/2, ½) for t ≥ 0, the incomplete beta by its continued fraction evaluated
  with the modified Lentz method (Numerical Recipes, 3rd ed., §6.4: ``betacf``); ν = ∞ is the standard
  normal (``statistics.NormalDist``). :func:`t_quantile` inverts it by bisection. Checked against
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
from statistics import NormalDist

#: the family-wise level of the claims' decisions (Holm-adjusted p < ALPHA decides)
ALPHA = 0.05
_N = NormalDist()


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes §6.4)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta: no convergence for a={a}, b={b}, x={x}")


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"betainc: x={x} outside [0, 1]")
    if x in (0.0, 1.0):
        return x
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):  # the fraction converges fast here; else use the symmetry
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float | None) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (None or ∞: the standard normal)."""
    if df is None or math.isinf(df):
        return 1.0 - _N.cdf(t) if t < 0 else _N.cdf(-t)
    if df <= 0:
        raise ValueError(f"t_sf: df={df} must be > 0")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))  # P(T > |t|)
    return tail if t >= 0 else 1.0 - tail


def t_quantile(q: float, df: float | None) -> float:
    """The q-quantile of Student's t (None or ∞: the standard normal), by bisection on :func:`t_sf`."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"t_quantile: q={q} outside (0, 1)")
    if df is None or math.isinf(df):
        return _N.inv_cdf(q)
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1.0 - q:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_sf(mid, df) > 1.0 - q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def welch_df(parts: list[tuple[float, float | None]]) -> float | None:
    """Welch–Satterthwaite ν of a sum of independent variance terms [(se_i, ν_i)]: (Σ se_i²)² / Σ se_i⁴/ν_i; a
    term with ν_i None (∞: a normal standard error over many examples) adds nothing to the denominator. None
    (∞) when every term is; NaN-free: a zero total variance gives None."""
    num = sum(se * se for se, _ in parts) ** 2
    den = sum(se**4 / nu for se, nu in parts if nu is not None)
    if num == 0.0 or den == 0.0:
        return None
    return num / den


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
