"""The paired tests of leaderboard/claims/paired.py: McNemar and the paired standard error checked by hand and
against scipy / a numpy bootstrap, every reason a pair cannot be paired, and the contract that makes pairing
possible (the diagnostics' test examples do not depend on the encoding or the seed). Since issue 55 these tests
decide no verdict (the A/A table alone uses them): the training run is the unit of replication, a pair is tested by
Student's t over runs (``runs-t``) with >= ``decision.MIN_RUNS`` runs per side, and the store tests below check that
the claims rows follow that rule where the paired tests used to decide."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from pathlib import Path

import duckdb
import numpy as np
import pytest
import yaml
from helpers.claims import write_claims_file
from scipy import stats as sps

from leaderboard import claims as C
from leaderboard.claims import paired as P
from leaderboard.store import schema_sql  # the store's schema: schema.sql with peeval.records' names
from peeval import records

ROOT = Path(__file__).resolve().parents[2]
II = "peeval_diag_indirect_indexing_test"


# --------------------------------------------------------------------------- the statistics by hand
@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (8, 2, 2 * (1 + 10 + 45) / 1024),  # P(X <= 2), X ~ Bin(10, 1/2), twice
        (9, 1, 2 * (1 + 10) / 1024),
        (1, 9, 2 * (1 + 10) / 1024),  # symmetric
        (10, 0, 2 / 1024),
        (5, 5, 1.0),  # twice the tail is > 1: capped
        (0, 0, 1.0),  # no discordant example: no evidence
    ],
)
def test_mcnemar_exact_by_hand_and_against_scipy(b, c, p):
    stats = pytest.importorskip("scipy.stats")
    assert P.mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)
    if b + c:  # the independent reference: scipy's exact two-sided binomial test of the discordant pairs
        assert P.mcnemar_exact(b, c) == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-12)


def test_alpha_is_the_family_wise_level():
    """Changed by design (issue 27): the level is 0.05 on Holm-adjusted p-values, not the 2-se level 0.0455."""
    assert C.ALPHA == 0.05 and not hasattr(P, "ALPHA")


def test_paired_stats_by_hand_one_seed():
    focus = [[1, 1, 1, 1, 1, 1, 1, 1, 0, 0]]
    other = [[1, 1, 1, 1, 1, 1, 0, 0, 0, 0]]
    diff, se = P.paired_stats(focus, other)
    # d = 0 x6, 1 x2, 0 x2: mean 0.2; sample variance (2*0.8^2 + 8*0.2^2)/9 = 1.6/9; se = sqrt(1.6/9/10) = 0.4/3
    assert diff == pytest.approx(0.2, abs=1e-15)
    assert se == pytest.approx(0.4 / 3, rel=1e-12)


def test_paired_stats_by_hand_two_seeds():
    focus = [[1, 1, 0, 0], [1, 1, 1, 0]]
    other = [[0, 1, 0, 0], [1, 0, 0, 0]]
    diff, se = P.paired_stats(focus, other)
    # d: seed 0 [1,0,0,0] (mean .25), seed 1 [0,1,1,0] (mean .5); per example [.5,.5,.5,0]; grand mean .375
    # MS_seed = 4 * (.125^2 * 2)/1 = .125; MS_ex = 2 * (3 * .125^2 + .375^2)/3 = .125
    # residuals d - seed mean - example mean + .375: seed 0 [.625,-.375,-.375,.125], seed 1 the negatives
    # MS_res = 2 * (.390625 + .140625 + .140625 + .015625) / (1 * 3) = 11/24, above both: the seed and
    # example components truncate at 0 and Var = MS_res / (k n) = 11/24/8
    assert diff == pytest.approx(0.375, abs=1e-15)
    assert se == pytest.approx(math.sqrt(11 / 192), rel=1e-12)


def test_paired_stats_against_an_additive_model_fit():
    """The ANOVA terms against numpy: residuals of a least-squares fit d ~ seed + example."""
    rng = np.random.default_rng(3)
    k, n = 3, 30
    d = rng.normal(0, 1, (k, n)) + rng.normal(0, 2, (k, 1)) + rng.normal(0, 1.5, (1, n))
    x = np.zeros((k * n, k + n))
    for s in range(k):
        for i in range(n):
            x[s * n + i, s] = x[s * n + i, k + i] = 1.0
    fit, *_ = np.linalg.lstsq(x, d.ravel(), rcond=None)
    ms_res = ((d.ravel() - x @ fit) ** 2).sum() / ((k - 1) * (n - 1))
    ms_seed, ms_ex = n * d.mean(1).var(ddof=1), k * d.mean(0).var(ddof=1)
    var = max(0, (ms_seed - ms_res) / n) / k + max(0, (ms_ex - ms_res) / k) / n + ms_res / (k * n)
    diff, se = P.paired_stats(d.tolist(), np.zeros((k, n)).tolist())
    assert diff == pytest.approx(d.mean(), rel=1e-12)
    assert se == pytest.approx(math.sqrt(var), rel=1e-9)


def test_paired_stats_is_unbiased_in_a_crossed_design():
    """Simulated d = seed effect + example effect + noise: the mean estimated variance of the grand
    mean equals its true variance σ_seed²/k + σ_ex²/n + σ_res²/(kn) (and the spread over the
    simulations); dropping the seed term, or counting the residual twice, would not."""
    rng = np.random.default_rng(4)
    k, n, su, sv, se_ = 3, 40, 0.3, 0.5, 1.0
    true = su**2 / k + sv**2 / n + se_**2 / (k * n)
    means, est = [], []
    zeros = np.zeros((k, n)).tolist()
    for _ in range(2000):
        d = rng.normal(0, su, (k, 1)) + rng.normal(0, sv, (1, n)) + rng.normal(0, se_, (k, n))
        diff, se = P.paired_stats(d.tolist(), zeros)
        means.append(diff)
        est.append(se**2)
    assert np.mean(est) == pytest.approx(true, rel=0.08)
    assert np.var(means) == pytest.approx(true, rel=0.1)
    assert true > 2 * (sv**2 / n + se_**2 / (k * n))  # the examples alone (ignoring seeds): far too small
    assert true + se_**2 / (k * n) > 1.15 * true  # the residual counted twice: outside the 8 % above


def test_paired_se_is_the_limit_of_a_paired_bootstrap():
    """The closed form against a numpy paired bootstrap over examples (the reference it replaces)."""
    rng = np.random.default_rng(0)
    n = 400
    a = (rng.random(n) < 0.7).astype(int)
    b = np.where(rng.random(n) < 0.8, a, 1 - a)  # correlated with a
    _, se = P.paired_stats([a.tolist()], [b.tolist()])
    idx = np.random.default_rng(1).integers(0, n, size=(20000, n))
    boot = (a[idx] - b[idx]).mean(axis=1)
    # the bootstrap divides by n, the closed form by n - 1; beyond that, Monte-Carlo error (~0.5%)
    assert boot.std() == pytest.approx(se * math.sqrt((n - 1) / n), rel=0.02)
    unpaired = math.hypot(a.std(ddof=1), b.std(ddof=1)) / math.sqrt(n)
    assert se < 0.8 * unpaired  # correlated outcomes: pairing is tighter


def test_verdict_by_p_value():
    # a "better" claim decided by p < 0.0455 in the direction of the difference; se is then not used
    assert C.verdict(10.0, None, True, 1, p=0.002) == "reproduced"
    assert C.verdict(-10.0, None, True, 1, p=0.002) == "contradicted"
    assert C.verdict(10.0, None, False, 1, p=0.002) == "contradicted"  # lower is better
    assert C.verdict(10.0, None, True, -1, p=0.002) == "contradicted"  # the paper's numbers show the other ahead
    assert C.verdict(10.0, 0.1, True, 1, p=0.05) == "inconclusive"  # se alone would have decided
    assert C.verdict(10.0, 0.1, True, 1, p=0.04) == "reproduced"
    assert C.verdict(0.0, None, True, 1, p=0.0) == "inconclusive"


def test_unpaired_estimates_name_their_uncertainty():
    assert C.combine_seeds([(0.9, 0.01, 100), (0.8, 0.01, 100)], True).method == "seeds"
    assert C.combine_seeds([(0.9, 0.01, 100)], True).method == "lm-eval stderr"
    assert C.combine_seeds([(0.9, None, 100)], True).method == "binomial"
    assert C.combine_seeds([(20.0, None, None)], False).method is None
    pooled = C.combine_seeds([(0.9, 0.01, 100), (0.9, None, 100)], True, ["lm-eval stderr", None])
    assert pooled.method == "binomial+lm-eval stderr"  # identical seeds: the pooled run stderrs


# --------------------------------------------------------------------------- a store
def _db() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(schema_sql())
    return con


def _run(con, run_id: str, pe: str, seed: int, outcomes: list[int], task: str = II, prompts=None) -> None:
    """One diagnostic run: its acc with lm-eval's stderr, and one sample per example."""
    n = len(outcomes)
    acc = sum(outcomes) / n
    con.execute(
        "INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date)"
        " VALUES (?, ?, 'diagnostic', ?, ?, '{}', '{}', ?, TIMESTAMP '2026-11-22 20:00:00')",
        [run_id, pe, f"ck/{run_id}", pe, seed],
    )
    se = math.sqrt(acc * (1 - acc) / (n - 1))  # lm-eval's stderr of a mean
    con.execute("INSERT INTO metrics VALUES (?, ?, 'acc', 'none', ?, ?, ?)", [run_id, task, acc, se, n])
    for i, ok in enumerate(outcomes):
        prompt = prompts[i] if prompts else f"example {i}"
        con.execute(
            "INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
            [run_id, task, i, prompt, str(i % 7), "x", bool(ok)],
        )


def _claims(tmp_path, **change) -> Path:
    return write_claims_file(tmp_path, [change])  # the claim's pairs declared in every profile's family


def _row(con, path) -> dict:
    (row,) = C.compute_claims(con, path, profile="cpu")
    return row


def _compare(con, task=II, metric="acc", focus=("pope0",), other=("rope0",), kind="better"):
    """paired.compare on the store of ``con``, one unit per run id."""
    return P.compare(C.read_store(con), task, metric, [[r] for r in focus], [[r] for r in other], kind)


def _runs_t(focus: list[float], other: list[float]) -> tuple[float, float, float]:
    """The reference over runs: (difference of means, its se, p) from scipy's Welch two-sample t (issue 67)."""
    t = sps.ttest_ind(focus, other, equal_var=False)
    diff = float(np.mean(focus) - np.mean(other))
    return diff, diff / float(t.statistic), float(t.pvalue)


def _correlated_pair(con, with_samples: bool = True) -> None:
    """One seed each on 100 examples: pope right on 80, rope on 70, rope's right ones a subset of pope's."""
    pope = [1] * 80 + [0] * 20
    rope = [1] * 70 + [0] * 30
    _run(con, "pope0", "pope", 0, pope)
    _run(con, "rope0", "rope", 0, rope)
    if not with_samples:
        con.execute("DELETE FROM samples")


def test_mcnemar_pairs_the_examples_but_one_run_per_side_decides_nothing(tmp_path):
    # without samples: nothing to pair
    con = _db()
    _correlated_pair(con, with_samples=False)
    pair, why = _compare(con)
    assert pair is None and why == "run pope0 has no per-example samples"
    # with samples: the same examples, 10 discordant, all for pope: McNemar p = 2/2^10
    con = _db()
    _correlated_pair(con)
    pair, why = _compare(con)
    assert why == "" and pair.test == "mcnemar" and (pair.b, pair.c, pair.n, pair.pairs) == (10, 0, 100, 1)
    assert pair.diff == pytest.approx(0.1)
    assert pair.p == pytest.approx(sps.binomtest(10, 10, 0.5).pvalue, rel=1e-12)
    # se of the paired difference: d = 1 on 10 of 100 examples: sqrt(var(d)/n), var = (10*.9^2 + 90*.1^2)/99
    assert pair.se == pytest.approx(math.sqrt((10 * 0.81 + 90 * 0.01) / 99 / 100))
    se_unpaired = math.hypot(math.sqrt(0.8 * 0.2 / 99), math.sqrt(0.7 * 0.3 / 99))  # two independent means
    assert pair.se < se_unpaired / 2
    assert "paired on 100 shared examples x 1 seed pair(s) (seed s with seed s); discordant 10/0" in pair.describe()
    assert "McNemar exact p=0.00195" in pair.describe()
    # issue 55: examples are no replications of a training run: one run per side is no test at all
    row = _row(con, _claims(tmp_path))
    assert row["peeval_value"] == pytest.approx(10.0)  # the numbers stay
    assert (row["verdict"], row["test"], row["p_adjusted"]) == ("not decidable here", None, None)
    assert "not decidable here: 1 vs 1 runs per side" in row["setting_diff"], row["setting_diff"]
    assert duckdb_claims(con) == [("ii:a-vs-b", "not decidable here", None)]


def test_scrolls_exact_match_a_score_x100_is_paired_by_mcnemar():
    """SCROLLS' em is a task mean x 100 (metrics.mean_x100) of per-document 0/1 matches: paired like acc, its
    samples checked against the x100 mean."""
    con = _db()
    task = "peeval_scrolls_contract_nli"
    for run_id, pe, ok in (("tape0", "tape", [1] * 8 + [0] * 12), ("rope0", "rope", [1] * 2 + [0] * 18)):
        _run(con, run_id, pe, 0, ok, task=task)
        con.execute(
            "UPDATE metrics SET metric = 'em', value = 100 * value, stderr = 100 * stderr WHERE run_id = ?", [run_id]
        )
        con.execute("UPDATE runs SET kind = 'pretrain' WHERE run_id = ?", [run_id])  # SCROLLS reads language models
    pair, why = _compare(con, task, "em", ("tape0",), ("rope0",))
    assert why == "" and pair.test == "mcnemar" and (pair.b, pair.c) == (6, 0)
    assert pair.diff == pytest.approx(0.4 - 0.1)  # shares of documents; x100 is the claims' unit scale
    assert pair.p == pytest.approx(sps.binomtest(6, 6, 0.5).pvalue, rel=1e-12)  # 6 discordant, all for tape
    # d = 1 on 6 of 20 documents: var = (6 * .7^2 + 14 * .3^2) / 19, se = sqrt(var / 20)
    assert pair.se == pytest.approx(math.sqrt((6 * 0.49 + 14 * 0.09) / 19 / 20))
    assert records.outcome_scale(task, "em") == 100.0 and records.outcome_scale(II, "acc") == 1.0
    con.execute("UPDATE metrics SET value = value / 100 WHERE run_id = 'tape0'")  # an em not x100: not its samples
    pair, why = _compare(con, task, "em", ("tape0",), ("rope0",))
    assert pair is None and "run tape0: its samples give 40, not its em 0.4" in why, why


def duckdb_claims(con) -> list[tuple]:
    return con.execute("SELECT claim_id, verdict, test FROM claims").fetchall()


def test_error_unit_and_a_contradicting_pair(tmp_path):
    """err_pct (lower is better), three runs per side: the focus's lower accuracy is a higher error -> contradicted,
    decided by Student's t over the runs' errors."""
    con = _db()
    pope, rope = (70, 72, 67), (80, 81, 78)  # right of 100, per seed
    for s, (a, b) in enumerate(zip(pope, rope, strict=True)):
        _run(con, f"pope{s}", "pope", s, [1] * a + [0] * (100 - a))
        _run(con, f"rope{s}", "rope", s, [1] * b + [0] * (100 - b))
    variants = {"a": {"pe": "pope", "paper": 5.0}, "b": {"pe": "rope", "paper": 20.0}}  # the paper: pope's error lower
    row = _row(con, _claims(tmp_path, unit="err_pct", higher_is_better=False, variants=variants))
    diff, se, p = _runs_t([100.0 - a for a in pope], [100.0 - b for b in rope])  # error % per run
    assert diff == pytest.approx(10.0)
    assert row["peeval_value"] == pytest.approx(diff) and row["stderr"] == pytest.approx(se)
    welch_df = sps.ttest_ind([100.0 - a for a in pope], [100.0 - b for b in rope], equal_var=False).df
    assert (row["verdict"], row["test"]) == ("contradicted", "runs-t") and row["df"] == pytest.approx(welch_df)
    assert row["p_value"] == pytest.approx(p, rel=1e-9) and row["p_adjusted"] == pytest.approx(p, rel=1e-9)  # m = 1


def test_seeds_paired_over_examples_but_decided_over_runs(tmp_path):
    """Three seeds each whose accuracies move together (seed s of both at the same level): paired over seeds x
    examples the gap is a steady 10 points; but the runs are the replications, and over runs the seeds' spread
    (50 to 90 %) swamps it."""
    con = _db()
    for s, right in enumerate((25, 35, 45)):  # of 50 examples; rope misses 5 of pope's (always docs 0-4)
        _run(con, f"pope{s}", "pope", s, [1] * right + [0] * (50 - right))
        _run(con, f"rope{s}", "rope", s, [0] * 5 + [1] * (right - 5) + [0] * (50 - right))
    runs = [f"{pe}{s}" for pe in ("pope", "rope") for s in range(3)]
    pair, why = _compare(con, focus=runs[:3], other=runs[3:])
    assert why == "" and pair.test == "paired-se" and pair.pairs == 3 and pair.n == 50
    assert pair.diff == pytest.approx(0.1)
    # per seed pair d_s = 0.1 (no spread); per example: 1 on docs 0-4, 0 on 45 -> var (5*.9^2 + 45*.1^2)/49
    assert pair.se == pytest.approx(math.sqrt((5 * 0.81 + 45 * 0.01) / 49 / 50))
    assert "x 3 seed pair(s) (seed s with seed s)" in pair.describe()
    row = _row(con, _claims(tmp_path))
    diff, se, p = _runs_t([100 * r / 50 for r in (25, 35, 45)], [100 * (r - 5) / 50 for r in (25, 35, 45)])
    assert row["peeval_value"] == pytest.approx(diff) and diff == pytest.approx(10.0)
    assert row["stderr"] == pytest.approx(se) and row["p_value"] == pytest.approx(p, rel=1e-9)
    assert (row["verdict"], row["test"], row["df"]) == ("inconclusive", "runs-t", 4)


@pytest.mark.parametrize(
    ("spoil", "why"),
    [
        ("UPDATE samples SET prompt = 'another example' WHERE run_id = 'rope0' AND doc_id = 3",
         "the runs answered different examples"),
        ("DELETE FROM samples WHERE run_id = 'rope0' AND doc_id = 99; "
         "UPDATE metrics SET value = 70 / 99, n = 99 WHERE run_id = 'rope0'", "the runs answered different examples"),
        ("UPDATE samples SET correct = NOT correct WHERE run_id = 'rope0' AND doc_id = 0",
         "run rope0: its samples give 0.69, not its acc 0.7"),
        ("INSERT INTO samples VALUES ('rope0', 'peeval_diag_indirect_indexing_test', 5, 'example 5', '5', 'x', true, "
         "NULL, NULL)",
         "run rope0 holds a doc_id twice"),
        ("DELETE FROM samples WHERE run_id = 'pope0'", "run pope0 has no per-example samples"),
    ],
)  # fmt: skip
def test_no_shared_examples_is_not_paired_and_says_why(spoil, why):
    con = _db()
    _correlated_pair(con)
    assert _compare(con)[0] is not None
    con.execute(spoil)
    pair, got = _compare(con)
    assert pair is None and why in got, got


def test_other_reasons_not_to_pair():
    con = _db()
    _correlated_pair(con)
    _run(con, "pope1", "pope", 1, [1] * 75 + [0] * 25)  # pope has 2 seeds, rope 1
    pair, why = _compare(con, focus=("pope0", "pope1"))
    assert pair is None and why == "seed counts differ (2 vs 1)"
    # several seeds with fewer than MIN_EXAMPLES shared examples: no normal approximation
    con2 = _db()
    for s in range(2):
        _run(con2, f"pope{s}", "pope", s, [1] * (8 - s) + [0] * (1 + s))
        _run(con2, f"rope{s}", "rope", s, [1] * (7 - s) + [0] * (2 + s))
    pair, why = _compare(con2, focus=("pope0", "pope1"), other=("rope0", "rope1"))
    assert pair is None and why.startswith("9 shared examples (< 10"), why
    # one seed each: McNemar is exact for any number of examples
    assert _compare(con2)[0].test == "mcnemar"
    # a cell metric or a task mean has no per-example outcome in the samples table
    pair, why = P.compare(C.read_store(con2), II, "acc@1x1", [["pope0"]], [["rope0"]])
    assert pair is None and "no per-example outcome for 'acc@1x1'" in why
    pair, why = P.compare(C.read_store(con2), [II, II], "acc", [["pope0"]], [["rope0"]])
    assert pair is None and "task mean" in why


def test_published_and_other_runs_samples_are_not_read():
    con = _db()
    _correlated_pair(con)
    con.execute("UPDATE runs SET source = 'published/gpu' WHERE run_id = 'rope0'")
    store = C.read_store(con)
    assert len(store.outcomes("pope0", II)) == 100 and store.outcomes("rope0", II) == []
    assert store.outcomes("pope0", "another_task") == []
    assert store.outcomes("pope0", II)[3] == (3, hashlib.md5(b"example 3\x1f3").hexdigest(), True)


def test_equal_claims_use_the_paired_se():
    con = _db()
    _run(con, "pope0", "pope", 0, [1] * 50 + [0] * 50)
    _run(con, "rope0", "rope", 0, [1] * 50 + [0] * 50)
    # an equal claim is not McNemar's (a test of a difference), even with one seed: the paired se
    pair, why = _compare(con, kind="equal")
    assert why == "" and (pair.test, pair.diff, pair.se) == ("paired-se", 0.0, 0.0)
    assert pair.p == 1.0  # identical outcomes: no discordant example, no evidence of any difference
    _run(con, "pope1", "pope", 1, [1] * 52 + [0] * 48)  # a second seed that differs: a spread
    _run(con, "rope1", "rope", 1, [1] * 49 + [0] * 51)
    pair, why = _compare(con, focus=("pope0", "pope1"), other=("rope0", "rope1"), kind="equal")
    assert pair.test == "paired-se" and pair.pairs == 2 and pair.se > 0 and pair.p is None
    assert pair.diff == pytest.approx((0.02 - (-0.01)) / 2)  # seed 0: 0, seed 1: .52 - .49


# --------------------------------------------------------------------------- why pairing applies
def test_diagnostic_test_examples_do_not_depend_on_the_encoding_or_the_seed(monkeypatch):
    """The pipeline evaluates every (encoding, seed) with the same --metadata, and the generator's
    seed is the task's eval seed, not the model's: every encoding answers the same examples."""
    monkeypatch.syspath_prepend(str(ROOT / "pipelines"))  # the stage scripts import their common.py
    spec = importlib.util.spec_from_file_location("eval_stage", ROOT / "pipelines" / "eval.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    from pipeline_params import load

    _, params = load(ROOT / "params" / "cpu-claims.yaml")  # what the stages receive (cpu-claims extends cpu)
    seen = set()
    for run, seed in (
        ("rope-indirect_indexing", "0"),
        ("pope-indirect_indexing", "1"),
        ("rope-indirect_indexing", "2"),
    ):
        argv = stage.argv_for("diag", run, seed, params)
        seen.add((argv[argv.index("--tasks") + 1], argv[argv.index("--metadata") + 1]))
    assert len(seen) == 1 and "seed" not in json.loads(next(iter(seen))[1])
    from peeval.tasks.diagnostics import diag, generators

    first = generators.generate("flip_flop", "test", 20, seed=diag.EVAL_SEED)
    assert generators.generate("flip_flop", "test", 20, seed=diag.EVAL_SEED) == first
    assert generators.generate("flip_flop", "test", 20, seed=0) != first  # the seed is what fixes them


def test_perplexity_stays_unpaired_and_says_why(tmp_path):
    con = _db()
    for rid, pe, ppl in (("popeP", "pope", 40.0), ("ropeP", "rope", 90.0)):
        con.execute(
            "INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date)"
            " VALUES (?, ?, 'pretrain', ?, ?, '{}', '{}', 0, TIMESTAMP '2026-11-22 20:00:00')",
            [rid, pe, f"ck/{rid}", pe],
        )
        con.execute("INSERT INTO metrics VALUES (?, 'peeval_ppl_pg19', 'ppl@1024', 'none', ?, NULL, 2)", [rid, ppl])
    pair, why = _compare(con, "peeval_ppl_pg19", "ppl@1024", ("popeP",), ("ropeP",))
    assert pair is None and why == "no per-example outcome for 'ppl@1024' of a task"
    docs, why = P.compare_ppl(C.read_store(con), "peeval_ppl_pg19", "ppl@1024", [["popeP"]], [["ropeP"]])
    assert docs is None and "run popeP has no per-document perplexity sums" in why, why
    change = dict(task="peeval_ppl_pg19", metric="ppl@{max}", unit="ppl", higher_is_better=False)
    row = _row(con, _claims(tmp_path, **change))
    assert (row["verdict"], row["test"]) == ("not decidable here", None)
    assert "1 vs 1 runs per side" in row["setting_diff"], row["setting_diff"]


# --------------------------------------------------------------------------- a task the budget does not learn
def _with_profile(con, profile: str) -> None:
    """Give every run a training summary of ``profile`` (the efficiency row ingest writes)."""
    for (ck,) in con.execute("SELECT checkpoint FROM runs").fetchall():
        con.execute(
            "INSERT INTO efficiency (checkpoint, summary) VALUES (?, ?)", [ck, json.dumps({"profile": profile})]
        )


@pytest.mark.parametrize("profile,want", [("cpu", "not learned at this scale"), ("paper", "reproduced")])
def test_unlearned_at_keeps_the_numbers_but_gives_no_verdict(tmp_path, profile, want):
    """claims.yaml `unlearned_at: [cpu]`: the sweep's baseline did not learn the task at the cpu budget,
    so cpu runs that differ decisively (three runs per side, 10 points apart) still get no verdict; paper runs do."""
    con = _db()
    pope, rope = (80, 82, 78), (70, 71, 69)  # right of 100, per seed
    for s, (a, b) in enumerate(zip(pope, rope, strict=True)):
        _run(con, f"pope{s}", "pope", s, [1] * a + [0] * (100 - a))
        _run(con, f"rope{s}", "rope", s, [1] * b + [0] * (100 - b))
    _with_profile(con, profile)
    row = _row(con, _claims(tmp_path, unlearned_at=["cpu"]))
    assert row["verdict"] == want and row["peeval_value"] == pytest.approx(10.0)
    assert _runs_t(list(pope), list(rope))[2] < 0.01  # decisive over runs
    assert ("does not learn this task at the cpu budget" in row["setting_diff"]) == (profile == "cpu")


def test_unlearned_at_must_name_profiles(tmp_path):
    with pytest.raises(C.ClaimsError, match="unlearned_at"):
        C.compute_claims(_db(), _claims(tmp_path, unlearned_at="cpu"))


def test_flip_flop_claims_read_every_read_and_stay_unpaired(tmp_path):
    """CoPE table 2 replicates Liu et al.'s error over every read (``read_acc``); a sample's 0/1 ``correct``
    is the final read alone, so pairing on it would test another quantity: no paired test, and the claim is
    decided over the runs' ``read_acc``."""
    claims = yaml.safe_load((ROOT / "leaderboard" / "claims" / "claims.yaml").read_text())["claims"]
    flip_flop = [c for c in claims if str(c["task"]).startswith("peeval_diag_flip_flop")]
    assert flip_flop and all(c["metric"] == "read_acc" for c in flip_flop)
    ff = "peeval_diag_flip_flop_test"
    con = _db()
    for s in range(3):  # the final read: both always right; every read: cope 0.98 ± 0.01, rope 0.89 ± 0.01
        for pe, read_acc in (("cope", 0.99 - 0.01 * s), ("rope", 0.90 - 0.01 * s)):
            _run(con, f"{pe}{s}", pe, s, [1] * 100, task=ff)
            con.execute(
                "INSERT INTO metrics VALUES (?, ?, 'read_acc', 'none', ?, NULL, 100)", [f"{pe}{s}", ff, read_acc]
            )
    variants = {"a": {"pe": "cope", "paper": 0.0}, "b": {"pe": "rope", "paper": 1.8}}
    path = _claims(tmp_path, task=ff, metric="read_acc", unit="err_pct", higher_is_better=False, variants=variants)
    row = _row(con, path)
    assert row["peeval_value"] == pytest.approx(2.0 - 11.0)  # error % over every read, cope - rope
    diff, se, p = _runs_t([1.0, 2.0, 3.0], [10.0, 11.0, 12.0])
    assert row["test"] == "runs-t" and row["stderr"] == pytest.approx(se) and diff == pytest.approx(-9.0)
    assert row["p_value"] == pytest.approx(p, rel=1e-9) and row["verdict"] == "reproduced"  # cope's error lower
    pair, why = _compare(con, ff, "read_acc", ("cope0",), ("rope0",))
    assert pair is None and why == "no per-example outcome for 'read_acc' of a task"
    assert not records.is_outcome("read_acc") and records.is_outcome("acc")


# --------------------------------------------------------------------------- perplexity, paired over documents
def _ppl_store(blocks: dict[str, list[tuple[int, int, float, int]]]):
    """A store with ppl_blocks rows (run -> [(doc, target_start, ll, tokens)] at length 64) and each run's ppl@64
    as ingest computes it (exp of minus the summed ll over the summed tokens)."""
    from leaderboard.claims.matching import Store

    con = duckdb.connect(":memory:")
    con.execute(schema_sql())
    values, runs = {}, {}
    for run, rows in blocks.items():
        runs[run] = {"run_id": run, "seed": 0}
        for doc, start, ll, n in rows:
            con.execute("INSERT INTO ppl_blocks VALUES (?, 'peeval_ppl_pg19', ?, 64, ?, ?, 0, 'targets', ?, ?)",
                        [run, doc, ll, n, start, start + n])  # fmt: skip
        ppl = math.exp(-sum(r[2] for r in rows) / sum(r[3] for r in rows))
        values[(run, "peeval_ppl_pg19")] = {"ppl@64": (ppl, None, None)}
    return Store(runs, values, con=con)


def test_perplexity_is_paired_over_documents_by_hand():
    # per-document mean NLL (ll / tokens = -nll): focus 2.0, 3.0, 4.5; other 2.5, 3.25, 4.5
    store = _ppl_store({"f": [(0, 100, -20.0, 10), (1, 500, -30.0, 10), (2, 900, -45.0, 10)],
                        "o": [(0, 100, -25.0, 10), (1, 500, -32.5, 10), (2, 900, -45.0, 10)]})  # fmt: skip
    got, why = P.compare_ppl(store, "peeval_ppl_pg19", "ppl@64", [["f"]], [["o"]])
    d = [-0.5, -0.25, 0.0]  # by hand: mean -0.25, sample sd 0.25, se 0.25 / sqrt(3), 2 df
    assert why == "" and got[3:] == (3, 1)
    assert got[0] == pytest.approx(-0.25) and got[1] == pytest.approx(0.25 / math.sqrt(3)) and got[2] == 2
    assert got[0] == pytest.approx(sum(d) / 3)
    # the mean of the per-document differences is the difference of log perplexities (equal tokens)
    fp, op = (store.values[(r, "peeval_ppl_pg19")]["ppl@64"][0] for r in ("f", "o"))
    assert got[0] == pytest.approx(math.log(fp) - math.log(op))


def test_perplexity_on_different_targets_is_not_paired():
    store = _ppl_store({"f": [(0, 100, -20.0, 10), (1, 500, -30.0, 10)],
                        "o": [(0, 100, -25.0, 10), (1, 600, -32.5, 10)]})  # fmt: skip
    got, why = P.compare_ppl(store, "peeval_ppl_pg19", "ppl@64", [["f"]], [["o"]])
    assert got is None and "different tokens" in why
    got, why = P.compare_ppl(store, "peeval_ppl_pg19", "bpb@64", [["f"]], [["o"]])
    assert got is None and "not a perplexity" in why


# --------------------------------------------------------------------------- SCROLLS' Rgm: paired bootstrap
QMSUM = "peeval_scrolls_qmsum"


def _rouge_run(con, run_id: str, pe: str, triples: list[tuple[float, float, float]]) -> None:
    """One language model's QMSum run: its Rgm and one sample per document with rouge1/2/L (samples.scores)."""
    from peeval.tasks.scrolls.metrics import rouge_geometric_mean  # the task's own aggregation

    con.execute(
        "INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date)"
        " VALUES (?, ?, 'pretrain', ?, ?, '{}', '{}', 0, TIMESTAMP '2026-11-26 09:00:00')",
        [run_id, pe, f"ck/{run_id}", pe],
    )
    con.execute(
        "INSERT INTO metrics VALUES (?, ?, 'rouge_gm', 'none', ?, NULL, ?)",
        [run_id, QMSUM, rouge_geometric_mean(triples), len(triples)],
    )
    for i, (r1, r2, rl) in enumerate(triples):
        scores = json.dumps({"rouge1": r1, "rouge2": r2, "rougeL": rl})
        con.execute(
            "INSERT INTO samples VALUES (?, ?, ?, ?, ?, 'x', NULL, ?, NULL)",
            [run_id, QMSUM, i, f"doc {i}", "t", scores],
        )


def _compare_rouge(con):
    return P.compare_rouge(C.read_store(con), QMSUM, "rouge_gm", [["tape0"]], [["rope0"]])


def test_rouge_gm_is_paired_by_a_bootstrap_over_documents():
    """With rouge1 = rouge2 = rougeL on every document, Rgm is 100 x the mean: the difference is 100 x the mean
    per-document difference and the bootstrap's se the population sd of it / sqrt(n) (to its Monte Carlo error)."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0.05, 0.4, 30)
    y = np.clip(x - 0.03 + rng.normal(0, 0.02, 30), 0.01, 1)  # correlated with x: pairing matters
    con = _db()
    _rouge_run(con, "tape0", "tape", [(v, v, v) for v in x])
    _rouge_run(con, "rope0", "rope", [(v, v, v) for v in y])
    got, why = _compare_rouge(con)
    diff, se, df, n = got
    d = 100 * (x - y)
    assert why == "" and diff == pytest.approx(d.mean(), rel=1e-9)
    assert (df, n) == (29, 30)
    assert se == pytest.approx(d.std(ddof=0) / math.sqrt(30), rel=0.03)
    unpaired = 100 * math.hypot(x.std(ddof=1), y.std(ddof=1)) / math.sqrt(30)
    assert se < unpaired / 2  # the documents' difficulty counted once
    assert _compare_rouge(con) == (got, "")  # a fixed seed: deterministic


def test_rouge_gm_of_the_claims_equals_the_tasks_aggregation():
    from peeval.tasks.scrolls.metrics import rouge_geometric_mean

    triples = [(0.3, 0.1, 0.25), (0.05, 0.0, 0.04), (0.5, 0.2, 0.45)]
    assert float(P.rouge_gm(np.array(triples))) == pytest.approx(rouge_geometric_mean(triples), rel=1e-12)
    # by hand: corpus means (0.85/3, 0.3/3, 0.74/3); their geometric mean x 100
    assert rouge_geometric_mean(triples) == pytest.approx(100 * (0.85 * 0.3 * 0.74) ** (1 / 3) / 3, rel=1e-12)


@pytest.mark.parametrize(
    ("spoil", "why"),
    [
        ("UPDATE samples SET scores = NULL WHERE run_id = 'rope0'", "run rope0 has no per-document rouge1"),
        ("UPDATE samples SET prompt = 'other' WHERE run_id = 'rope0' AND doc_id = 3", "different documents"),
        ("UPDATE metrics SET value = value + 1 WHERE run_id = 'tape0'", "its documents give rouge_gm"),
        (None, "9 shared documents (< 10"),
    ],
)
def test_rouge_gm_is_not_paired_and_says_why(spoil, why):
    con = _db()
    n = 12 if spoil else 9
    _rouge_run(con, "tape0", "tape", [(0.2 + i / 100, 0.05, 0.18) for i in range(n)])
    _rouge_run(con, "rope0", "rope", [(0.15 + i / 100, 0.04, 0.14) for i in range(n)])
    if spoil:
        con.execute(spoil)
    got, reason = _compare_rouge(con)
    assert got is None and why in reason, reason
