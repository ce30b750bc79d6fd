"""Issue 67, item 6: the rule at its boundaries. Each constant of the decision (MIN_RUNS, ALPHA) set one step off
fails a test here by its assertion (before, `MIN_RUNS = 2` passed every claims test). The outcome gates (language
models learned, convergence) at theirs: tests/leaderboard/test_claims_outcome_gates.py."""

from __future__ import annotations

import pytest
from scipy import stats
from test_claims_decision import II, _claims, _db, _metric, _run

from leaderboard import claims as C


def _pair(con, pope: list[float], rope: list[float]) -> None:
    for s, v in enumerate(pope):
        _run(con, f"pope{s}", "pope", s)
        _metric(con, f"pope{s}", II, v, 0.01)
    for s, v in enumerate(rope):
        _run(con, f"rope{s}", "rope", s)
        _metric(con, f"rope{s}", II, v, 0.01)


@pytest.mark.parametrize(("runs", "decided"), [(2, False), (3, True)])
def test_a_pair_is_tested_from_three_runs_a_side(tmp_path, runs, decided):
    """Two runs a side, however far apart (0.95 vs 0.10): "not decidable here"; three: tested and decided."""
    con = _db()
    _pair(con, [0.93, 0.97, 0.95][:runs], [0.10, 0.12, 0.11][:runs])
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]))
    if decided:
        assert row["verdict"] == "reproduced" and row["test"] == "runs-t", row["setting_diff"]
    else:
        assert row["verdict"] == "not decidable here" and row["p_value"] is None, row["verdict"]
        assert f"{runs} vs {runs} runs per side" in row["setting_diff"]


@pytest.mark.parametrize(
    ("rope", "verdict"),
    [([0.80, 0.90, 0.85], "inconclusive"), ([0.84, 0.91, 0.86], "reproduced")],
)
def test_alpha_is_five_percent(tmp_path, rope, verdict):
    """A pair whose p (Welch's, scipy) lies between 0.05 and 0.10 is inconclusive; one just below 0.05 decides."""
    pope = [0.93, 0.95, 0.97]
    p = stats.ttest_ind(pope, rope, equal_var=False).pvalue
    assert (0.05 < p < 0.10) if verdict == "inconclusive" else (0.01 < p < 0.05), p  # the fixture's own premise
    con = _db()
    _pair(con, pope, rope)
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]))
    assert row["p_value"] == pytest.approx(p, rel=1e-9) and row["p_adjusted"] == pytest.approx(p, rel=1e-9)
    assert row["verdict"] == verdict, (row["verdict"], p)
