"""The hand-written Student's t that peeval.records used before scipy's (issue 41): kept only as the reference
that tests/leaderboard/test_records_stats.py holds scipy's to, so the switch provably moved no number."""

import math
import statistics

#: the standard normal (Student's t with df None or infinite)
_NORMAL = statistics.NormalDist()


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes §6.4)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        delta = 1.0
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
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
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):  # the fraction converges fast here; else use the symmetry
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float | None) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (None or ∞: the standard normal); the tail
    straight from the incomplete beta, P(T > |t|) = ½·I_{ν/(ν+t²)}(ν/2, ½), so small p-values keep their digits."""
    if df is None or math.isinf(df):
        return 1.0 - _NORMAL.cdf(t) if t < 0 else _NORMAL.cdf(-t)
    if df <= 0:
        raise ValueError(f"t_sf: df={df} must be > 0")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_cdf(t: float, df: float | None) -> float:
    """P(T <= t) of Student's t (df None or ∞: the normal)."""
    return 1.0 - t_sf(t, df)


def t_quantile(q: float, df: float | None) -> float:
    """The ``q`` quantile of Student's t (None or ∞: the standard normal), by bisection on :func:`t_sf`: the
    critical value of an interval, e.g. ``t_quantile(0.975, 2)`` = 4.303 (not the normal's 1.96)."""
    if not 0.0 < q < 1.0 or (df is not None and not df > 0):
        raise ValueError(f"t_quantile: needs 0 < q < 1 and df > 0, got q={q}, df={df}")
    if df is None or math.isinf(df):
        return _NORMAL.inv_cdf(q)
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1.0 - q:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_sf(mid, df) > 1.0 - q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0
