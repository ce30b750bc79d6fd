"""Issue 67, item 6: the rule at its boundaries. Each constant of the decision (MIN_RUNS, ALPHA) set one step off
fails a test here by its assertion (before, `MIN_RUNS = 2` passed every claims test)."""

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


def _curves(con, falling: dict[tuple[str, int], tuple[float, float]]) -> None:
    """Two validations per run: (loss at step 500, loss at step 1000); flat 0.0102 -> 0.0101 unless ``falling``."""
    for pe in ("pope", "rope"):
        for s in range(3):
            l0, l1 = falling.get((pe, s), (0.0102, 0.0101))
            for step, loss in ((500, l0), (1000, l1)):
                con.execute("INSERT INTO training_curves (checkpoint, step, val_loss) VALUES (?, ?, ?)",
                            [f"ck/{pe}{s}", step, loss])  # fmt: skip


def test_the_trailing_side_still_improving_blocks_naming_side_slope_and_gap(tmp_path):
    """Issue 67 item 2: the block names its side ('baseline under-trained'), each run's slope and the gap."""
    con = _db()
    _pair(con, [0.93, 0.95, 0.97], [0.10, 0.12, 0.11])
    _curves(con, {("rope", 1): (0.63, 0.44)})
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]))
    assert row["verdict"] == "not learned at this scale" and row["p_adjusted"] is None, row["verdict"]
    why = row["setting_diff"]
    assert "baseline under-trained (b behind" in why and "b seed 1: 0.6300 at step 500 -> 0.4400" in why, why
    assert "-0.38 nats per 1,000 steps" in why and "gap a − b = +0.840" in why, why


def test_the_leading_side_still_improving_never_blocks(tmp_path):
    """Issue 67 item 2: one-sided. The side already ahead (pope, 0.95 vs 0.11) still improving only widens its lead:
    the pair is decided (before: "not learned at this scale" whichever side improved)."""
    con = _db()
    _pair(con, [0.93, 0.95, 0.97], [0.10, 0.12, 0.11])
    _curves(con, {("pope", 1): (0.63, 0.44)})
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]))
    assert row["verdict"] == "reproduced", row["setting_diff"]


def test_a_run_at_the_learned_ceiling_is_never_still_improving(tmp_path):
    """Issue 67 item 2: a run at >= 0.99 in-distribution accuracy whose loss still falls (CoPE selective copy seed 2:
    0.1958 -> 0.0005 nats at accuracy 1.00) has learned the task: no block, even on the trailing side."""
    con = _db()
    _pair(con, [0.999, 0.998, 0.999], [0.990, 0.991, 0.992])
    _curves(con, {("rope", 1): (0.1958, 0.0005)})
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]))
    assert row["verdict"] != "not learned at this scale", row["setting_diff"]
    assert "still improving" not in row["setting_diff"]
