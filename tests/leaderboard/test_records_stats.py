"""peeval.records.stats' Student's t is scipy's since issue 41: on the grid the claims and the site use it
(df up to ~1000, ordinary t and q) it equals the former hand-written one (tests/helpers/student_t_reference.py)
to 1e-12, so no p-value or interval moved; where the two differ (df >= 1e4, t near 0) the old one had lost
digits, as a 40-digit mpmath evaluation shows."""

import math

import pytest
from helpers import student_t_reference as old

from peeval.records import stats

TS = [-50, -8, -3, -1.5, -0.3, 0, 0.01, 0.2, 0.7, 1, 1.96, 2.5, 4, 8, 20, 60, math.inf, -math.inf]
DFS = [0.5, 1, 1.5, 2, 50 / 17, 2.7, 3, 4, 5, 9, 10, 29.3, 100, 999, None, math.inf]
QS = [0.001, 0.025, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999]


def test_t_sf_and_cdf_equal_the_old_ones_on_the_grid():
    for df in DFS:
        for t in TS:
            assert stats.t_sf(t, df) == pytest.approx(old.t_sf(t, df), rel=1e-11, abs=1e-12), (t, df)
            assert stats.t_cdf(t, df) == pytest.approx(old.t_cdf(t, df), abs=1e-12), (t, df)


def test_t_quantile_equals_the_old_one_on_the_grid():
    for df in DFS:
        for q in QS:
            want = old.t_quantile(q, df)
            assert stats.t_quantile(q, df) == pytest.approx(want, rel=1e-12, abs=1e-12), (q, df)


def test_betainc_equals_the_old_one():
    for a in (0.25, 0.5, 1, 2.5, 10, 500):
        for b in (0.5, 1, 3, 50):
            for x in (0.0, 1e-8, 0.01, 0.3, 0.5, 0.77, 0.999, 1.0):
                assert stats.betainc(a, b, x) == pytest.approx(old.betainc(a, b, x), abs=1e-12), (a, b, x)


def test_where_they_differ_scipy_has_the_digits():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40

    def exact_sf(t, df):
        t, df = mpmath.mpf(t), mpmath.mpf(df)
        tail = mpmath.betainc(df / 2, mpmath.mpf(1) / 2, 0, df / (df + t * t), regularized=True) / 2
        return float(tail if t >= 0 else 1 - tail)

    for t, df in ((1.96, 1e7), (0.5, 1e7), (1.5, 1e4), (1e-9, 999)):
        want = exact_sf(t, df)
        assert stats.t_sf(t, df) == pytest.approx(want, rel=1e-14), (t, df)
        assert abs(old.t_sf(t, df) - want) > 1e-11 * want, (t, df)  # the old one was off here


def test_bad_arguments_are_refused_as_before():
    for call in (lambda: stats.t_sf(1.0, 0), lambda: stats.t_quantile(1.0, 3), lambda: stats.t_quantile(0.5, -1)):
        with pytest.raises(ValueError):
            call()
    with pytest.raises(ValueError, match="outside"):
        stats.betainc(1, 1, 1.5)
