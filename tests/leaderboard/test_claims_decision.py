"""The decision rule (issue 27 item 4, issue 31 item 2): t quantiles and tails against tabulated values and
closed forms, Welch's degrees of freedom, TOST, Holm and Benjamini–Hochberg by hand, Holm applied across every
pair of a store, and the fourth state 'not measured' naming the profile whose parameter file measures the pair.

Every expected value is a table's, a closed form's or worked by hand below, never read back from the code."""

from __future__ import annotations

import json
import math

import duckdb
import pytest
import yaml
from helpers.claims import CLAIM, write_claims_file

from leaderboard import claims as C
from leaderboard.claims import decision as D
from leaderboard.claims import profiles as PR
from leaderboard.store import schema_sql


# --------------------------------------------------------------------------- Student's t
@pytest.mark.parametrize(
    ("q", "df", "want"),
    [  # two-sided 95 % critical values (any t table), and a few one-sided ones
        (0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 3, 3.182), (0.975, 4, 2.776), (0.975, 10, 2.228),
        (0.975, 30, 2.042), (0.975, None, 1.960), (0.975, math.inf, 1.960), (0.95, 3, 2.353), (0.995, 5, 4.032),
        (0.99, 20, 2.528), (0.9, 7, 1.415),
    ],
)  # fmt: skip
def test_t_quantile_matches_the_tables(q, df, want):
    assert D.t_quantile(q, df) == pytest.approx(want, abs=5e-4)
    assert D.t_quantile(1 - q, df) == pytest.approx(-want, abs=5e-4)  # symmetric


@pytest.mark.parametrize("t", [0.0, 0.3, 1.0, 2.5, 7.0, -1.7])
def test_t_tail_closed_forms(t):
    assert D.t_sf(t, 1) == pytest.approx(0.5 - math.atan(t) / math.pi, abs=1e-13)  # Cauchy
    assert D.t_sf(t, 2) == pytest.approx(0.5 - t / (2 * math.sqrt(2 + t * t)), abs=1e-13)
    # nu = 4: P(T > t) = 1/2 - (3/4)·s·(1 - s²/3), s = t / sqrt(4 + t²)
    s = t / math.sqrt(4 + t * t)
    assert D.t_sf(t, 4) == pytest.approx(0.5 - 0.75 * s * (1 - s * s / 3), abs=1e-13)
    assert D.t_sf(t, None) == pytest.approx(0.5 * math.erfc(t / math.sqrt(2)), abs=1e-15)
    assert D.t_sf(t, 1e7) == pytest.approx(0.5 * math.erfc(t / math.sqrt(2)), abs=1e-6)  # nu -> inf: normal


@pytest.mark.parametrize("x", [0.0, 0.01, 0.3, 0.5, 0.77, 0.999, 1.0])
def test_incomplete_beta_closed_forms(x):
    assert D.betainc(1, 1, x) == pytest.approx(x, abs=1e-14)
    assert D.betainc(3, 1, x) == pytest.approx(x**3, abs=1e-14)
    assert D.betainc(1, 4, x) == pytest.approx(1 - (1 - x) ** 4, abs=1e-14)
    assert D.betainc(2.5, 0.5, x) + D.betainc(0.5, 2.5, 1 - x) == pytest.approx(1.0, abs=1e-13)  # symmetry


def test_t_against_scipy_where_installed():
    stats = pytest.importorskip("scipy.stats")  # an independent reference when present; never a dependency
    for df in (1, 2, 2.94, 5, 17.5, 120):
        for t in (-3.0, 0.1, 1.96, 4.3, 12.0):
            assert D.t_sf(t, df) == pytest.approx(stats.t.sf(t, df), rel=1e-9, abs=1e-15)
        assert D.t_quantile(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-9)


# --------------------------------------------------------------------------- the tests' pieces by hand
def test_welch_df_by_hand():
    assert D.welch_df([(1.0, 2), (1.0, 2)]) == pytest.approx(4.0)  # (1 + 1)² / (1/2 + 1/2)
    assert D.welch_df([(1.0, 2), (2.0, None)]) == pytest.approx(50.0)  # (1 + 4)² / (1/2): a normal side adds no term
    assert D.welch_df([(1.0, None), (2.0, None)]) is None  # both normal: the normal
    # 3 seeds each, se² 4/3 and 1/3 (the tests' pope and rope below): (5/3)² / ((16/9)/2 + (1/9)/2) = 50/17
    assert D.welch_df([(math.sqrt(4 / 3), 2), (math.sqrt(1 / 3), 2)]) == pytest.approx(50 / 17)


def test_two_sided_tost_and_outside_by_hand():
    phi = lambda z: 0.5 * math.erfc(-z / math.sqrt(2))  # noqa: E731  the normal CDF
    assert D.two_sided_p(3.0, 1.4, None) == pytest.approx(2 * (1 - phi(3 / 1.4)))
    assert D.two_sided_p(4.303, 1.0, 2) == pytest.approx(0.05, abs=1e-4)  # the table's t_{0.975,2}
    # TOST at tolerance 2: diff 0, se 1 -> both one-sided p = P(Z > 2); diff 1 -> max(P(Z > 3), P(Z > 1))
    assert D.tost_p(0.0, 1.0, None, 2.0) == pytest.approx(1 - phi(2))
    assert D.tost_p(1.0, 1.0, None, 2.0) == pytest.approx(1 - phi(1))
    assert D.tost_p(1.0, 1.0, 4, 2.0) == pytest.approx(0.5 - 0.75 * (1 / math.sqrt(5)) * (1 - 1 / 15))  # nu = 4
    assert D.outside_p(3.0, 1.0, None, 2.0) == pytest.approx(2 * (1 - phi(1)))
    assert D.outside_p(-3.0, 1.0, None, 2.0) == pytest.approx(2 * (1 - phi(1)))


def test_holm_and_benjamini_hochberg_by_hand():
    ps = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.06 for the last
    assert D.holm(ps) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: sorted times 4/1, 4/2, 4/3, 4/4 = 0.02, 0.02, 0.04, 0.04 -> running min from the top
    assert D.benjamini_hochberg(ps) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert D.holm([0.6, 0.7]) == [1.0, 1.0] and D.holm([]) == []  # capped at 1
    assert D.benjamini_hochberg([0.04, 0.045]) == pytest.approx([0.045, 0.045])


def test_verdict_on_p_values():
    assert C.verdict(3.0, 1.4, True) == "reproduced"  # p = 0.032 (normal)
    assert C.verdict(3.0, 1.0, True, df=2) == "inconclusive"  # t(2) = 3 < 4.303: p = 0.095
    assert C.verdict(3.0, 0.6, True, df=2) == "reproduced"  # t(2) = 5 > 4.303: p = 0.038
    assert C.verdict(-3.0, 0.6, True, df=2) == "contradicted"
    assert C.verdict(3.0, 0.6, True, df=2, p=0.06) == "inconclusive"  # the adjusted p decides
    assert C.verdict(0.5, 1.0, True, kind="equal", tolerance=3.0) == "reproduced"  # TOST p = P(Z > 2.5) = 0.006
    assert C.verdict(0.5, 1.0, True, kind="equal", tolerance=3.0, df=2) == "inconclusive"  # t(2) 2.5: p = 0.065


# --------------------------------------------------------------------------- a store
def _db():
    con = duckdb.connect()
    con.execute(schema_sql())
    return con


def _run(con, run_id, pe, seed):
    con.execute(
        "INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date) VALUES "
        "(?, ?, 'diagnostic', ?, ?, '{}', '{}', ?, TIMESTAMP '2026-11-22 20:00:00')",
        [run_id, pe, f"ck/{run_id}", pe, seed],
    )


def _metric(con, run_id, task, value, stderr, n=500):
    con.execute(
        "INSERT INTO metrics (run_id, task, metric, filter, value, stderr, n) VALUES (?, ?, 'acc', 'none', ?, ?, ?)",
        [run_id, task, value, stderr, n],
    )


def _claims(tmp_path, entries):
    return write_claims_file(tmp_path, entries)


FF, SC, II = ("peeval_diag_flip_flop_test", "peeval_diag_selective_copy_test", "peeval_diag_indirect_indexing_test")


def test_holm_within_the_paper_family_of_runs(tmp_path):
    """Two pairs, 3 runs a side, with raw p from scipy's pooled two-sample t (computed here, not by peeval): each
    alone is decided; together, Holm over the paper's family (m = 2) adjusts both, and the smaller p doubled."""
    from scipy import stats

    con = _db()
    runs = {FF: ([0.90, 0.93, 0.88], [0.85, 0.86, 0.84]), SC: ([0.90, 0.91, 0.93], [0.86, 0.88, 0.85])}
    for task, (a, b) in runs.items():
        for s in range(3):
            _run(con, f"cope-{task}-{s}", "cope", s)
            _run(con, f"rope-{task}-{s}", "rope", s)
            _metric(con, f"cope-{task}-{s}", task, a[s], 0.01)
            _metric(con, f"rope-{task}-{s}", task, b[s], 0.01)
    variants = {"a": {"pe": "cope", "paper": 90.0}, "b": {"pe": "rope", "paper": 10.0}}
    both = _claims(tmp_path, [{"id": k, "task": t, "variants": variants} for k, t in (("ff", FF), ("sc", SC))])
    rows = {r["claim_id"]: r for r in C.compute_claims(con, both)}
    ref = {k: stats.ttest_ind(*runs[t], equal_var=False) for k, t in (("ff", FF), ("sc", SC))}  # Welch (issue 67)
    p = {k: r.pvalue for k, r in ref.items()}
    for k in ("ff", "sc"):
        r = rows[f"{k}:a-vs-b"]
        assert r["p_value"] == pytest.approx(p[k], rel=1e-9) and r["test"] == "runs-t"
        assert r["df"] == pytest.approx(ref[k].df, rel=1e-9)
        assert r["family_m"] == 2 and r["family"] == "PoPE @ cpu"
    lo, hi = sorted(p.values())
    assert sorted(r["p_adjusted"] for r in rows.values()) == pytest.approx([2 * lo, max(2 * lo, hi)], rel=1e-9)
    (alone,) = C.compute_claims(con, _claims(tmp_path, [{"id": "ff", "task": FF, "variants": variants}]))
    assert alone["p_adjusted"] == pytest.approx(p["ff"], rel=1e-9) and alone["family_m"] == 1


def test_runs_level_test_is_students_t(tmp_path):
    """3 runs a side: pope 0.93/0.95/0.97, rope 0.10/0.12/0.11: Student's pooled t on 4 df, whatever the runs'
    own stderrs over examples; the p-value from scipy's ttest_ind on the per-run accuracies in points."""
    from scipy import stats

    con = _db()
    pope, rope = [0.93, 0.95, 0.97], [0.10, 0.12, 0.11]
    for s, (a, b) in enumerate(zip(pope, rope, strict=True)):
        _run(con, f"pope{s}", "pope", s)
        _run(con, f"rope{s}", "rope", s)
        _metric(con, f"pope{s}", II, a, 0.01)
        _metric(con, f"rope{s}", II, b, 0.01)
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]))
    ref = stats.ttest_ind([100 * x for x in pope], [100 * x for x in rope], equal_var=False)  # Welch (issue 67)
    assert row["test"] == "runs-t" and row["df"] == pytest.approx(ref.df, rel=1e-9)
    assert row["p_value"] == pytest.approx(ref.pvalue, rel=1e-9) and row["p_value"] < 1e-3
    assert row["stderr"] == pytest.approx(84 / ref.statistic, rel=1e-9)
    assert row["verdict"] == "reproduced" and row["p_adjusted"] == row["p_value"]


def test_a_pair_without_a_number_is_not_measured_naming_the_profile(tmp_path):
    """Issue 31: no peeval number for a side is 'not measured' (the old rule said 'inconclusive'), and the row
    names the first parameter file that runs both variants on the task (params/*.yaml), or 'none'."""
    con = _db()
    _run(con, "cope0", "cope", 0)
    _metric(con, "cope0", FF, 0.9, 0.01)  # one side only
    cope_rope = {"a": {"pe": "cope", "paper": 90.0}, "b": {"pe": "rope", "paper": 10.0}}
    path = _claims(tmp_path, [
        {"id": "ff", "task": FF, "variants": cope_rope},  # cpu.yaml trains cope and rope on flip-flop
        {"id": "sc", "task": SC, "variants": cope_rope},  # cpu-claims.yaml adds selective copy
        {"id": "ii"},  # pope vs rope on indirect indexing: cpu-claims.yaml
        {"id": "ii-unlearned", "unlearned_at": ["cpu"]},  # ... but no verdict at the cpu budget: gpu.yaml
        {"id": "sc-pope", "task": SC},  # pope on selective copy: no parameter file
    ])  # fmt: skip
    rows = {r["claim_id"].split(":")[0]: r for r in C.compute_claims(con, path)}
    want = {"ff": "cpu", "sc": "cpu-claims", "ii": "cpu-claims", "ii-unlearned": "gpu", "sc-pope": "none"}
    assert {k: (r["verdict"], r["measured_in"]) for k, r in rows.items()} == {
        k: ("not measured", v) for k, v in want.items()
    }
    assert all(r["p_value"] is None and r["p_adjusted"] is None for r in rows.values())
    assert "no peeval number for b (rope)" in rows["ff"]["setting_diff"]
    want = (
        "reproduced: 0, contradicted: 0, inconclusive: 0, holds at initialisation (architecture): 0, "
        "not learned at this scale: 0, no contrast at this setting: 0, not decidable here: 0, not measured: 5"
    )
    assert C.summary(list(rows.values())) == want


def test_measured_in_reads_composed_parameter_files(tmp_path):
    """A parameter folder by hand: 'cpu' runs only rope, 'cpu-claims' extends it with pope; 'gpu' runs both but
    is later in the order; an option the variant names must match the entry's (defaults filled in)."""
    folder = tmp_path / "params"
    folder.mkdir()
    suites = {"suites": {"ppl": {"tasks": ["peeval_ppl_pg19"]}}, "pretrain": ["ppl"]}
    (folder / "cpu.yaml").write_text(yaml.safe_dump({"profile": "cpu", "encodings": {"rope": {"pe": "rope"}},
                                                     "eval": suites}))  # fmt: skip
    (folder / "cpu-claims.yaml").write_text(yaml.safe_dump({"extends": "cpu", "encodings": {"pope": {"pe": "pope"}}}))
    (folder / "gpu.yaml").write_text(yaml.safe_dump({"profile": "gpu", "encodings": {"rope": {"pe": "rope"},
                                                     "pope": {"pe": "pope"}}, "eval": suites}))  # fmt: skip
    claims = C.validate(
        {"claims": [{**CLAIM, "task": "peeval_ppl_pg19", "metric": "ppl@512", "unit": "ppl", "higher_is_better": False},
                    {**CLAIM, "id": "abl", "task": "peeval_ppl_pg19", "metric": "ppl@512", "unit": "ppl",
                     "higher_is_better": False, "variants": {"a": {"pe": "pope", "pe_options": {"softplus": False},
                     "paper": 1.0}, "b": {"pe": "pope", "paper": 2.0}}}]},
        "claims.yaml",
    )  # fmt: skip
    PR.parameter_files.cache_clear()
    assert PR.measured_in(claims[0], ("a", "b"), str(folder)) == "cpu-claims"
    assert PR.measured_in(claims[0], ("b",), str(folder)) == "cpu"
    assert PR.measured_in(claims[1], ("a", "b"), str(folder)) == "none"  # no entry turns softplus off
    PR.parameter_files.cache_clear()


def test_measured_in_of_an_extension_claim_reads_extend_not_adapt():
    """TAPE table 2 scaled down extends the pipeline's rope model (``run_params: {base: …}``): the cpu profile
    adapts SmolLM2 with tape and lora but extends nothing, so the pair is measured first by cpu-claims (it said
    'cpu', a profile whose store had no number for it); theta is extended by cpu-claims, adapted by no profile."""
    claims = {c.id: c for c in C.load_claims()}
    scaled = claims["tape-t2-scaled-pg19"]
    PR.parameter_files.cache_clear()
    assert PR.measured_in(scaled, ("tape", "lora")) == "cpu-claims"
    assert PR.measured_in(scaled, ("tape", "theta")) == "cpu-claims"
    gguf = claims["tape-t2-ctx-ext-pg19"]  # the SmolLM2 rows read the adapt stage: cpu adapts tape and lora
    assert "base" not in gguf.run_params and PR.measured_in(gguf, ("tape", "lora")) == "cpu"


def test_schema_has_the_decision_columns():
    cols = dict(zip(C.verdicts.CLAIM_COLUMNS, C.verdicts.CLAIM_COLUMNS, strict=True))
    assert {"test", "df", "p_value", "p_adjusted", "measured_in"} <= set(cols)
    con = _db()
    C.write_claims(con, [], [])
    types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                             "WHERE table_name = 'claims'").fetchall())  # fmt: skip
    got = [types[c] for c in ("df", "p_value", "p_adjusted", "measured_in")]
    assert got == ["DOUBLE", "DOUBLE", "DOUBLE", "VARCHAR"]
    want = [
        "reproduced",
        "contradicted",
        "inconclusive",
        "holds at initialisation (architecture)",  # issue 67: its step-0 control decides it too
        "not learned at this scale",
        "no contrast at this setting",
        "not decidable here",
        "not measured",
    ]
    assert json.dumps(C.VERDICTS) == json.dumps(want)
