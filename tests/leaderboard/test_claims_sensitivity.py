"""Issue 67, item 3: each decided pair's calibrated error rate (its test on simulated nulls at the pair's own
spreads) and its three sensitivities (pooled t, a store-wide Holm family, the second model size), in the claims db
(``claims_sensitivity``) and on the claims page. Expected values come from scipy and hand-written Holm, never from
``leaderboard.claims.sensitivity``; the rates from the issue's numbers (3 vs 3 at a 5.8x sd ratio: pooled t 0.093,
Welch 0.058) within a stated Monte Carlo tolerance.
"""

from __future__ import annotations

import duckdb
import pytest
import yaml
from helpers.claims import write_claims_file
from scipy import stats

from leaderboard import claims as C
from leaderboard.site.claims_page import render_claims_page
from leaderboard.store import schema_sql

TASK = "piqa"  # a pretraining task: no diagnostic gate in the way of these tests
#: Monte Carlo tolerance of a rate near 0.05 over 20,000 draws: 4 standard errors (sqrt(.05 * .95 / 20000) = 0.0015)
TOL = 0.006
POPE = [0.90 - 0.0058, 0.90, 0.90 + 0.0058]  # sd 0.58 points (a standard error below 1 in the test's scale)
ROPE = [0.10 - 0.0010, 0.10, 0.10 + 0.0010]  # sd 0.1 point: PoPE's spread is 5.8x RoPE's
COPE = [0.10 - 0.0058, 0.10, 0.10 + 0.0058]  # sd 0.58 points: equal to PoPE's
#: the second model size, 4x32: PoPE 3 runs, RoPE 4, CoPE 2 (too few to test)
SMALL = {"pope": [0.50, 0.60, 0.70], "rope": [0.45, 0.50, 0.62, 0.55], "cope": [0.30, 0.35]}
#: the same, no spread over runs on either side of ii
FLAT = {"pope": [0.50, 0.50, 0.50], "rope": [0.40, 0.40, 0.40]}


def _store(second_size: dict | None = SMALL):
    con = duckdb.connect()
    con.execute(schema_sql())
    sides = [("pope", POPE, None), ("rope", ROPE, None), ("cope", COPE, None)]
    sides += [(pe, vals, "4x32") for pe, vals in (second_size or {}).items()]
    for pe, vals, size in sides:
        for s, v in enumerate(vals):
            rid = f"{pe}{s}{size or ''}"
            con.execute("INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date, size) "
                        "VALUES (?, ?, 'pretrain', ?, ?, '{}', '{}', ?, TIMESTAMP '2026-11-22 20:00:00', ?)",
                        [rid, pe, f"ck/{rid}", pe, s, size])  # fmt: skip
            con.execute("INSERT INTO metrics VALUES (?, ?, 'acc', 'none', ?, 0.01, 500)", [rid, TASK, v])
    return con


def _claims(tmp_path):
    """ii: PoPE vs RoPE (5.8x sds), kk: PoPE vs CoPE (equal sds), both declared (m = 2); jj: RoPE vs CoPE, with a
    p-value but not declared: a pair of the store-wide family only (m = 3)."""

    def other(cid, a, b):
        return {"id": cid, "task": TASK, "variants": {"a": {"pe": a, "paper": 90.0}, "b": {"pe": b, "paper": 10.0}}}

    path = write_claims_file(tmp_path, [{"task": TASK}, other("kk", "pope", "cope"), other("jj", "rope", "cope")])
    data = yaml.safe_load(path.read_text())
    data["families"] = {"cpu": ["ii:a-vs-b", "kk:a-vs-b"]}
    path.write_text(yaml.safe_dump(data))
    return path


def _sensitivity(con) -> dict[str, dict]:
    """The claims db's sensitivity rows by pair ({} where the table does not exist: before issue 67)."""
    q = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'claims_sensitivity'"
    if not con.execute(q).fetchone()[0]:
        return {}
    cur = con.execute("SELECT * FROM claims_sensitivity")
    cols = [d[0] for d in cur.description]
    return {r[0]: dict(zip(cols, r, strict=True)) for r in cur.fetchall()}


def _holm(ps: list[float]) -> list[float]:
    """Holm by hand: sorted ascending, p_(i) (m - i + 1), running maximum, at most 1 (tiny m only)."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, run = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        run = max(run, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = run
    return out


def _decided_rows(sens: dict) -> tuple[dict, dict]:
    """ii's and kk's rows (an assertion, not a KeyError, when the table lacks them)."""
    assert {"ii:a-vs-b", "kk:a-vs-b"} <= set(sens), f"no sensitivity rows for the decided pairs: {sorted(sens)}"
    return sens["ii:a-vs-b"], sens["kk:a-vs-b"]


def _pct(xs):
    return [100 * x for x in xs]


@pytest.fixture
def decided(tmp_path):
    con, out = _store(), duckdb.connect()
    rows = {r["claim_id"]: r for r in C.compute_claims(con, _claims(tmp_path), out=out, profile="cpu")}
    return rows, _sensitivity(out), out


def test_each_decided_pair_has_one_row_and_the_verdict_is_still_welchs(decided):
    rows, sens, _ = decided
    assert {k for k, r in rows.items() if r["verdict"] in ("reproduced", "contradicted")} == {"ii:a-vs-b", "kk:a-vs-b"}
    assert set(sens) == {"ii:a-vs-b", "kk:a-vs-b"}  # jj is not decided (not declared): no row
    welch = stats.ttest_ind(_pct(POPE), _pct(ROPE), equal_var=False).pvalue
    assert rows["ii:a-vs-b"]["p_value"] == pytest.approx(welch, rel=1e-9)


def test_calibrated_error_rate_at_the_pairs_own_spreads(decided):
    """5.8x sd ratio, 3 vs 3: pooled t rejects ~0.093 of true nulls, Welch ~0.058 (the issue's numbers); equal sds:
    pooled t holds alpha (within Monte Carlo error), Welch at 3 vs 3 is conservative (below alpha)."""
    _, sens, _ = decided
    ii, kk = _decided_rows(sens)
    assert (ii["n_focus"], ii["n_other"], ii["draws"]) == (3, 3, 20_000)
    assert ii["sd_focus"] / ii["sd_other"] == pytest.approx(5.8, rel=1e-9)
    assert ii["pooled_rate"] == pytest.approx(0.093, abs=TOL + 0.001)  # the issue gives 0.093 to 3 digits
    assert ii["welch_rate"] == pytest.approx(0.058, abs=TOL + 0.001)
    assert kk["sd_focus"] == pytest.approx(kk["sd_other"], rel=1e-9)
    assert kk["pooled_rate"] == pytest.approx(0.05, abs=TOL)
    assert kk["welch_rate"] < 0.05
    for s in (ii, kk):  # the rate's exact interval contains it
        assert s["welch_lo"] < s["welch_rate"] < s["welch_hi"] and s["welch_hi"] - s["welch_lo"] < 0.01


def test_simulated_rate_of_welchs_t_is_alpha_at_equal_spreads_and_many_runs():
    """30 vs 30 at equal sds: Welch's t holds alpha within Monte Carlo error (and at any scale of the sds)."""
    try:
        from leaderboard.claims.sensitivity import simulated_rates
    except ImportError:  # before issue 67: no simulated calibration at all
        simulated_rates = None
    assert simulated_rates is not None, "no simulated calibration (leaderboard.claims.sensitivity)"
    welch, pooled = simulated_rates(0.3, 0.3, 30, 30)
    assert welch == pytest.approx(0.05, abs=TOL) and pooled == pytest.approx(0.05, abs=TOL)
    assert simulated_rates(300.0, 300.0, 30, 30) == (welch, pooled)


def test_pooled_t_sensitivity_retests_the_whole_family(decided):
    _, sens, _ = decided
    _decided_rows(sens)
    pooled = [stats.ttest_ind(_pct(POPE), _pct(other), equal_var=True).pvalue for other in (ROPE, COPE)]
    adj = _holm(pooled)
    for pid, p, a in zip(("ii:a-vs-b", "kk:a-vs-b"), pooled, adj, strict=True):
        assert sens[pid]["p_pooled"] == pytest.approx(p, rel=1e-9)
        assert sens[pid]["p_pooled_adjusted"] == pytest.approx(a, rel=1e-9)
        assert sens[pid]["verdict_pooled"] == ("reproduced" if a < 0.05 else "inconclusive")


def test_store_wide_family_counts_every_pair_with_a_p_value(decided):
    rows, sens, _ = decided
    _decided_rows(sens)
    welch = [stats.ttest_ind(_pct(a), _pct(b), equal_var=False).pvalue for a, b in ((POPE, ROPE), (POPE, COPE),
                                                                                     (ROPE, COPE))]  # fmt: skip
    adj = _holm(welch)
    for pid, a in zip(("ii:a-vs-b", "kk:a-vs-b"), adj[:2], strict=True):
        assert sens[pid]["store_m"] == 3 and rows[pid]["family_m"] == 2
        assert sens[pid]["p_store_adjusted"] == pytest.approx(a, rel=1e-9)
        assert sens[pid]["verdict_store"] == ("reproduced" if a < 0.05 else "inconclusive")


def test_second_model_size(decided):
    """ii at 4x32: Welch's p over those runs alone (unadjusted); kk has no CoPE run at 4x32: no test, and says so."""
    _, sens, _ = decided
    ii, kk = _decided_rows(sens)
    pope, rope = _pct(SMALL["pope"]), _pct(SMALL["rope"])
    ref = stats.ttest_ind(pope, rope, equal_var=False).pvalue
    assert ii["second_size"] == "4x32" and ii["p_second"] == pytest.approx(ref, rel=1e-9)
    assert ii["diff_second"] == pytest.approx(sum(pope) / 3 - sum(rope) / 4, rel=1e-9)
    assert "(unadjusted, 3 vs 4 runs)" in ii["second_note"]
    assert ii["verdict_second"] == ("reproduced" if ref < 0.05 else "inconclusive")
    assert kk["second_size"] == "4x32" and kk["p_second"] is None
    assert kk["second_note"] == "4x32: no test (3 vs 2 runs)"


def test_second_size_without_spread_is_no_test(tmp_path):
    """ii at 4x32 with every run of a side equal (0.50 x 3 vs 0.40 x 3): no spread, so no p-value, and it says so."""
    con, out = _store(second_size=FLAT), duckdb.connect()
    C.compute_claims(con, _claims(tmp_path), out=out, profile="cpu")
    ii, _ = _decided_rows(_sensitivity(out))
    assert ii["p_second"] is None and ii["second_note"] == "4x32: no test (no spread over runs)"


def test_no_second_size_in_the_store(tmp_path):
    con, out = _store(second_size=None), duckdb.connect()
    C.compute_claims(con, _claims(tmp_path), out=out, profile="cpu")
    sens = _sensitivity(out)
    assert sens and all(s["second_size"] is None and s["second_note"] == "no second size" for s in sens.values())


def test_claims_page_shows_the_line_and_the_simulated_calibration(decided):
    """One line under each decided pair; the A/A split cannot be made on 3 runs an encoding, so the A/A table shows
    the simulated calibration instead and says so."""
    _, sens, out = decided
    html = render_claims_page(out)
    ii, _ = _decided_rows(sens)
    assert html.count('<tr class="more sens">') == 2
    assert f"calibrated error rate {ii['welch_rate']:.3f}" in html
    assert "store-wide family (m = 3)" in html and "4x32: difference" in html
    assert "runs-t (Welch), simulated" in html and "no A/A split (no group of &gt;= 4 runs)" in html


def test_a_claims_db_written_before_the_table_existed_is_replaced(tmp_path, capsys):
    """pipelines/claims.py replaces only a database it wrote: one written before ``claims_sensitivity`` existed (its
    three verdict tables and claims_store) still is, and gets the table; one holding another table still is not."""
    import importlib.util

    from conftest import REPO

    from leaderboard.store import connect, table_ddl

    spec = importlib.util.spec_from_file_location("claims_stage_67", f"{REPO}/pipelines/claims.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    db = tmp_path / "s.duckdb"
    connect(db).close()
    for name, extra in (("old.duckdb", None), ("notes.duckdb", "CREATE TABLE notes AS SELECT 'keep me' AS text")):
        con = duckdb.connect(str(tmp_path / name))
        for t in ("claims", "claim_values", "claims_calibration"):
            con.execute(table_ddl(t))
        con.execute("CREATE TABLE claims_store AS SELECT 'x' AS fingerprint, 'local' AS source")
        if extra:
            con.execute(extra)
        con.close()
    assert stage.main(["--db", str(db), "--out", str(tmp_path / "old.duckdb")]) == 0
    con = duckdb.connect(str(tmp_path / "old.duckdb"), read_only=True)
    q = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'claims_sensitivity'"
    assert con.execute(q).fetchone() == (1,) and _sensitivity(con) == {}  # the table, empty: nothing decided
    con.close()
    assert stage.main(["--db", str(db), "--out", str(tmp_path / "notes.duckdb")]) == 2
    assert "never replaced" in capsys.readouterr().err
