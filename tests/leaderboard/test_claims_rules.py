"""Issue 55: verdicts an A/A test cannot fake. One test per rule; each fails on the rule of 01ea20b:

1. the training run is the unit of replication (>= 3 runs a side; examples and documents are no replications);
2. A/A calibration: a test that rejects too often on groups of one encoding's seeds decides nothing;
3. learned and converged per run (the learned gate on every run, still-improving runs, extensions, SCROLLS);
4. equivalence needs a positive control;
5. Holm families are pre-registered (claims.yaml ``families``), m counts every declared pair;
6. the test is fixed by the design (no df switch when a variance is 0);
7. an untrained store decides nothing (tests/helpers/untrained.py; the published stores, 20 draws).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml
from conftest import REPO
from helpers.claims import write_claims_file
from helpers.untrained import untrained_store

from leaderboard import claims as C
from leaderboard.claims import calibration
from leaderboard.claims.profiles import ORDER, registered_family
from leaderboard.store import schema_sql
from peeval import records

FF_OOD, FF = "peeval_diag_flip_flop_ood_sparse", "peeval_diag_flip_flop_test"
II = "peeval_diag_indirect_indexing_test"
CNT = "peeval_diag_counting_test"


def _db():
    con = duckdb.connect()
    con.execute(schema_sql())
    return con


def _run(con, rid, pe, seed, kind="diagnostic", options=None, params=None, summary=None, training_length=None):
    con.execute(
        "INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date, training_length) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, TIMESTAMP '2026-11-22 20:00:00', ?)",
        [rid, pe, kind, f"ck/{rid}", pe, json.dumps(options or {}), json.dumps(params or {}), seed, training_length],
    )
    if summary is not None:
        con.execute("INSERT INTO efficiency (checkpoint, pe, params, tokens, summary) VALUES (?, ?, ?, ?, ?)",
                    [f"ck/{rid}", pe, summary.get("params"), summary.get("tokens"), json.dumps(summary)])  # fmt: skip


def _metric(con, rid, task, metric, value, stderr=None, n=None):
    con.execute("INSERT INTO metrics VALUES (?, ?, ?, 'none', ?, ?, ?)", [rid, task, metric, value, stderr, n])


def _samples(con, rid, task, outcomes):
    for i, ok in enumerate(outcomes):
        con.execute("INSERT INTO samples (run_id, task, doc_id, prompt, target, response, correct) VALUES "
                    "(?, ?, ?, ?, 'a', 'a', ?)", [rid, task, i, f"q{i}", bool(ok)])  # fmt: skip


def _pair(con, task, focus, other, pes=("pope", "rope"), metric="acc"):
    """Runs of two encodings on ``task``, one per value (seed = position)."""
    for pe, vals in zip(pes, (focus, other), strict=True):
        for s, v in enumerate(vals):
            _run(con, f"{pe}{s}", pe, s)
            _metric(con, f"{pe}{s}", task, metric, v, 0.01, 500)


def _verdicts(con, path, **kw):
    return {r["claim_id"]: r for r in C.compute_claims(con, path, **kw)}


# --------------------------------------------------------------------------- 1. runs, not examples
def test_one_run_a_side_decides_nothing_however_many_examples(tmp_path):
    """500 examples each, 0.90 vs 0.60: 01ea20b's McNemar over examples gave p ~ 1e-30 and 'reproduced'; one
    training run a side is no replication, so the pair is 'not decidable here' and says why."""
    con = _db()
    _pair(con, II, [0.90], [0.60])
    _samples(con, "pope0", II, [1] * 450 + [0] * 50)
    _samples(con, "rope0", II, [1] * 300 + [0] * 200)
    (row,) = _verdicts(con, write_claims_file(tmp_path, [{}])).values()
    assert row["verdict"] == "not decidable here", row["setting_diff"]
    assert "1 vs 1 runs per side" in row["setting_diff"] and row["p_value"] is None and row["test"] is None


def test_three_runs_a_side_are_compared_over_runs_not_examples(tmp_path):
    """3 runs a side with per-example samples: the test is the t over the 3 + 3 run accuracies (01ea20b paired the
    examples: 'paired-se' with the example component in the se)."""
    from scipy import stats

    con = _db()
    pope, rope = [0.62, 0.70, 0.58], [0.60, 0.61, 0.59]
    _pair(con, II, pope, rope)
    for pe, vals in (("pope", pope), ("rope", rope)):
        for s, v in enumerate(vals):
            _samples(con, f"{pe}{s}", II, [1] * round(100 * v) + [0] * (100 - round(100 * v)))
    (row,) = _verdicts(con, write_claims_file(tmp_path, [{}])).values()
    ref = stats.ttest_ind(pope, rope, equal_var=False)  # Welch's t over the runs (issue 67)
    assert row["test"] == "runs-t" and row["df"] == pytest.approx(ref.df, rel=1e-9)
    assert row["p_value"] == pytest.approx(ref.pvalue, rel=1e-9)


# --------------------------------------------------------------------------- 2. A/A calibration
def test_a_test_that_fails_its_a_a_check_decides_nothing(tmp_path):
    """Seeds of one encoding that differ wildly (0.10, 0.11 vs 0.80, 0.81): split by seed order, the t over runs rejects
    in both A/A groups, so its rate's interval (0.16-1) lies above 0.05 and no pair is decided, saying why."""
    con = _db()
    _pair(con, "piqa", [0.10, 0.11, 0.80, 0.81], [0.12, 0.13, 0.30, 0.31])  # 2 vs 2: Welch needs two a side
    con.execute("UPDATE runs SET kind = 'pretrain'")  # no diagnostic: no learned gate in the way
    path = write_claims_file(tmp_path, [{"task": "piqa"}])
    (row,) = _verdicts(con, path).values()
    con2 = duckdb.connect()
    C.compute_claims(con, path, out=con2)
    (runs_t,) = [r for r in con2.execute("SELECT test, groups, rejections, lo, decides FROM claims_calibration")
                 .fetchall() if r[0] == "runs-t"]  # fmt: skip
    assert runs_t[1:3] == (2, 2) and runs_t[3] > 0.05 and runs_t[4] is False
    assert row["verdict"] == "not decidable here" and "A/A false-positive rate" in row["setting_diff"]


def test_a_a_table_counts_the_retired_tests_on_pairs_of_seeds(tmp_path):
    """Two seeds of one encoding whose examples differ by chance: McNemar over examples (one run a side, the old
    rule) rejects; it is in the table as retired and never decides."""
    con = _db()
    _pair(con, II, [0.90, 0.60, 0.75], [0.5, 0.5, 0.5])
    _samples(con, "pope0", II, [1] * 450 + [0] * 50)
    _samples(con, "pope1", II, [1] * 300 + [0] * 200)
    _samples(con, "pope2", II, [1] * 375 + [0] * 125)
    claims = C.load_claims(write_claims_file(tmp_path, [{}]))
    store = C.read_store(con)
    table = {r["test"]: r for r in calibration.aa_table(C.find_runs(claims, store), store)}
    mc = table[calibration.RETIRED[1]]
    assert mc["groups"] == 3 and mc["rejections"] == 3 and mc["decides"] is False


# --------------------------------------------------------------------------- 3. learned and converged, per run
def test_learned_gate_is_per_run_not_on_the_mean(tmp_path):
    """Flip-flop OOD: cope's in-distribution accuracies 0.99, 0.99, 0.40 (mean 0.79 > 0.608) — one run did not
    learn the task, so the pair is 'not learned at this scale' (01ea20b's mean let it through to 'reproduced')."""
    con = _db()
    _pair(con, FF_OOD, [0.90, 0.91, 0.92], [0.50, 0.52, 0.51], pes=("cope", "rope"))
    for s, (a, b) in enumerate([(0.99, 0.99), (0.99, 0.99), (0.40, 0.99)]):
        _metric(con, f"cope{s}", FF, "acc", a, 0.01, 500)
        _metric(con, f"rope{s}", FF, "acc", b, 0.01, 500)
    path = write_claims_file(tmp_path, [{"id": "ff", "task": FF_OOD, "variants": {
        "a": {"pe": "cope", "paper": 90.0}, "b": {"pe": "rope", "paper": 10.0}}}])  # fmt: skip
    (row,) = _verdicts(con, path).values()
    assert row["verdict"] == "not learned at this scale", row["setting_diff"]
    assert "1 of 3 runs below" in row["setting_diff"] and row["p_adjusted"] is None


def test_a_run_still_improving_at_its_end_is_not_learned(tmp_path):
    """rope seed 1's validation loss fell 0.63 -> 0.44 over its last 30 % (4 validations, losses only): over 0.25 of
    its steps its side's mean slope would take more than converge_tolerance (5 %) off the loss: the baseline was still
    learning, so the contrast is a budget effect: 'not learned at this scale' (issue 67: >= 3 validations, relative)."""
    con = _db()
    _pair(con, II, [0.93, 0.95, 0.97], [0.10, 0.12, 0.11])
    for pe in ("pope", "rope"):
        for s in range(3):
            falling = (pe, s) == ("rope", 1)
            for step, loss in zip((700, 800, 900, 1000), (0.63, 0.57, 0.50, 0.44) if falling else
                                  (0.0102, 0.0102, 0.0101, 0.0101), strict=True):  # fmt: skip
                con.execute("INSERT INTO training_curves (checkpoint, step, val_loss) VALUES (?, ?, ?)",
                            [f"ck/{pe}{s}", step, loss])  # fmt: skip
    (row,) = _verdicts(con, write_claims_file(tmp_path, [{}])).values()
    assert row["verdict"] == "not learned at this scale", row["setting_diff"]
    assert "baseline under-trained (b behind" in row["setting_diff"] and "losses only" in row["setting_diff"]


def _extension(con, rid, method, seed, ppl_new, base="checkpoints/pretrain/rope"):
    params = {"adapt": {"method": method, "seq_len": 1024, "base": base}, "model_args": {"pretrained": base},
              "base_train": {"params": 100_000, "tokens": 3_000_000}}  # fmt: skip
    _run(con, rid, "rope", seed, kind="adapt", params=params, training_length=1024)
    _metric(con, rid, "peeval_ppl_pg19", "ppl@1024", ppl_new)
    for L, v in ((256, 30.0), (4096, ppl_new * 1.5 + (0.5 if method == "tape" else 0.0) + 0.1 * seed)):
        _metric(con, rid, "peeval_ppl_pg19", f"ppl@{L}", v)


def _extension_claims(tmp_path, base):
    """A TAPE-table-2-like claim: TAPE vs LoRA extensions of the pipeline's rope model(s) ``base``, ppl at the longest
    length both have."""
    return write_claims_file(tmp_path, [{"id": "ext", "task": "peeval_ppl_pg19", "metric": "ppl@{max}", "unit": "ppl",
                                         "higher_is_better": False, "focus": "tape", "run_params": {"base": base},
                                         "variants": {"tape": {"method": "tape", "paper": None},
                                                      "lora": {"method": "lora", "paper": None}}}])  # fmt: skip


def test_an_extension_that_did_not_learn_the_new_length_is_not_learned(tmp_path):
    """Base ppl@1024 120: lora's extensions reach 40, TAPE's 118 (log gap 0.017 < extension_margin 0.05): 'not
    learned at this scale' (01ea20b decided such a pair)."""
    con = _db()
    _run(con, "base", "rope", 0, kind="pretrain", training_length=256)
    con.execute("UPDATE runs SET checkpoint = 'published/x/checkpoints/pretrain/rope' WHERE run_id = 'base'")
    _metric(con, "base", "peeval_ppl_pg19", "ppl@1024", 120.0)
    for s in range(3):
        _extension(con, f"tape{s}", "tape", s, 118.0 + s)
        _extension(con, f"lora{s}", "lora", s, 40.0 + s)
    (row,) = _verdicts(con, _extension_claims(tmp_path, "checkpoints/pretrain/rope")).values()
    assert row["verdict"] == "not learned at this scale", row["setting_diff"]
    assert "tape seed 0: ppl@1024 118 vs the unextended base's 120" in row["setting_diff"]


def test_scrolls_answers_at_a_trivial_baseline_are_not_learned(tmp_path):
    """QuALITY answered by empty or repeated text in most documents: 'not learned at this scale'."""
    con = _db()
    task = "peeval_scrolls_quality"
    _pair(con, task, [0.30, 0.32, 0.31], [0.20, 0.21, 0.22], pes=("tape", "rope"), metric="em")
    con.execute("UPDATE runs SET kind = 'pretrain'")
    for pe in ("tape", "rope"):
        for s in range(3):
            for i in range(10):
                text = "" if (pe == "tape" and i < 6) else f"answer {i} is the letter B here"
                con.execute("INSERT INTO samples (run_id, task, doc_id, prompt, target, response, correct) VALUES "
                            "(?, ?, ?, 'q', ?, ?, ?)", [f"{pe}{s}", task, i, f"t{i % 4}", text, i < 3])  # fmt: skip
    path = write_claims_file(tmp_path, [{"id": "sq", "task": task, "metric": "em", "unit": "score_pct",
                                         "focus": "a", "variants": {"a": {"pe": "tape", "paper": None},
                                                                    "b": {"pe": "rope", "paper": None}}}])  # fmt: skip
    (row,) = _verdicts(con, path).values()
    assert row["verdict"] == "not learned at this scale", row["setting_diff"]
    assert "6 of 10 answers empty or repeated text" in row["setting_diff"]
    assert C.learned.degenerate("and then, and then, and then") and C.learned.degenerate("  ")
    assert not C.learned.degenerate("B") and not C.learned.degenerate("the meeting agreed on the budget and then left")


# --------------------------------------------------------------------------- 4. positive control
def _shift_store(con, control_gap: float):
    """TAPE vs RoPE under +3 BOS (equal within 2.1 x10^-2) and TAPE vs TAPE w/o EQ under shifted ids (the control,
    ``control_gap`` apart), 3 runs each, trained to the criterion (budget, and ppl 40 against a unigram 191)."""
    summary = {"task": None, "tokens": 30_000_000, "params": 1_000_000, "final_val_ppl": 40.0, "unigram_val_ppl": 191.0}
    for s in range(3):
        for pe, opts, key in (("tape", {}, "t"), ("rope", {}, "r"), ("tape", {"equivariant": False}, "n")):
            rid = f"{key}{s}"
            _run(con, rid, pe, s, kind="pretrain", options=opts, summary={**summary, "pe": pe})
            _metric(con, rid, records.SHIFT_TASK, "attn_diff@add_tokens@4", 0.085 + 0.001 * s, 0.001)
            ids = 0.0004 + 0.0001 * s + (control_gap if key == "n" else 0.0)
            _metric(con, rid, records.SHIFT_TASK, "attn_diff@shift_ids@4", ids, 1e-5)


def _shift_claims(tmp_path, control: bool):
    eq = {"id": "add", "task": records.SHIFT_TASK, "metric": "attn_diff@add_tokens@{max}", "unit": "attn_diff_e2",
          "higher_is_better": False, "focus": "t", "claim": "equal", "tolerance": 2.1,
          "variants": {"t": {"pe": "tape", "paper": 13.78}, "r": {"pe": "rope", "paper": 11.46}}}  # fmt: skip
    if control:
        eq["positive_control"] = "ids:t-vs-n"
    ids = {"id": "ids", "task": records.SHIFT_TASK, "metric": "attn_diff@shift_ids@{max}", "unit": "attn_diff_e2",
           "higher_is_better": False, "focus": "t",
           "variants": {"t": {"pe": "tape", "paper": 0.04}, "n": {"pe": "tape", "pe_options": {"equivariant": False},
                                                                  "paper": 0.51}}}  # fmt: skip
    return write_claims_file(tmp_path, [eq, ids])


@pytest.mark.parametrize(
    "control, gap, want",
    [(False, 0.005, "no contrast at this setting"),  # no control declared: equivalence alone proves nothing
     (True, 0.0, "no contrast at this setting"),  # the control does not separate TAPE from TAPE w/o EQ either
     (True, 0.005, "reproduced")],  # the instrument separates what must differ: equivalence counts
)  # fmt: skip
def test_equivalence_counts_only_with_a_positive_control(tmp_path, control, gap, want):
    con = _db()
    _shift_store(con, gap)
    rows = _verdicts(con, _shift_claims(tmp_path, control))
    assert rows["add:t-vs-r"]["verdict"] == want, rows["add:t-vs-r"]["setting_diff"]


# --------------------------------------------------------------------------- 5. pre-registered families
def test_holm_family_is_the_declared_one_not_the_store(tmp_path):
    """Declared: ii and a second pair the store lacks (m = 2, so p is doubled); a third pair with a p-value but not
    declared gets numbers and no verdict (01ea20b: m = whatever the store held)."""
    from scipy import stats

    con = _db()
    pope, rope = [0.93, 0.95, 0.97], [0.10, 0.12, 0.11]
    _pair(con, II, pope, rope)
    for s, v in enumerate([0.5, 0.6, 0.55]):
        _run(con, f"cope{s}", "cope", s)
        _metric(con, f"cope{s}", II, "acc", v, 0.01, 500)
    path = write_claims_file(tmp_path, [{}, {"id": "jj", "task": CNT}, {"id": "kk", "variants": {
        "a": {"pe": "pope", "paper": 90.0}, "b": {"pe": "cope", "paper": 10.0}}}])  # fmt: skip
    data = yaml.safe_load(path.read_text())
    data["families"] = {"cpu": ["ii:a-vs-b", "jj:a-vs-b"]}  # kk:a-vs-b is not declared
    path.write_text(yaml.safe_dump(data))
    rows = _verdicts(con, path, profile="cpu")
    p = stats.ttest_ind([100 * x for x in pope], [100 * x for x in rope], equal_var=False).pvalue
    assert rows["ii:a-vs-b"]["family_m"] == 2 and rows["ii:a-vs-b"]["p_adjusted"] == pytest.approx(2 * p, rel=1e-9)
    assert rows["jj:a-vs-b"]["verdict"] == "not measured" and rows["jj:a-vs-b"]["family_m"] == 2
    kk = rows["kk:a-vs-b"]
    assert kk["verdict"] == "not decidable here" and kk["p_value"] is not None and kk["p_adjusted"] is None
    assert "not in the pre-registered family of profile cpu" in kk["setting_diff"]
    assert {r["verdict"] for r in _verdicts(con, path, profile="smoke").values()} <= {"not decidable here",
                                                                                      "not measured"}  # fmt: skip


def test_claims_file_families_follow_the_design_rule():
    """claims.yaml's families are what the parameter files alone declare (both sides >= 3 seeds by design, the
    training profile not in unlearned_at): they change when a params file changes, never with a result."""
    claims = C.load_claims()
    for name in ORDER:
        assert sorted(claims[0].families.get(name, [])) == sorted(registered_family(claims, name)), name
    assert "smoke" not in claims[0].families


# --------------------------------------------------------------------------- 6. a test fixed by the design
def test_degrees_of_freedom_do_not_move_when_a_variance_is_zero(tmp_path):
    """One side's three runs identical: 01ea20b's paired ANOVA switched from seeds - 1 to examples - 1 df; the t over
    runs is Welch's (issue 67), whose df is then the varying side's n - 1 = 2 (Welch-Satterthwaite with one variance
    0), and its p is scipy's Welch t."""
    from scipy import stats

    con = _db()
    pope, rope = [0.70, 0.70, 0.70], [0.60, 0.66, 0.63]
    _pair(con, II, pope, rope)
    for pe, vals in (("pope", pope), ("rope", rope)):
        for s, v in enumerate(vals):
            _samples(con, f"{pe}{s}", II, [1] * round(100 * v) + [0] * (100 - round(100 * v)))
    (row,) = _verdicts(con, write_claims_file(tmp_path, [{}])).values()
    assert row["df"] == pytest.approx(2.0, rel=1e-12) and row["test"] == "runs-t"
    assert row["p_value"] == pytest.approx(stats.ttest_ind(pope, rope, equal_var=False).pvalue, rel=1e-9)


# --------------------------------------------------------------------------- 7. an untrained store
@pytest.fixture(scope="module")
def published_stores(tmp_path_factory):
    def build(profile):
        db = tmp_path_factory.mktemp(profile) / "peeval.duckdb"
        folder = Path(REPO) / "leaderboard" / "published" / profile
        cmd = [sys.executable, "-m", "leaderboard.ingest", str(folder), "--db", str(db)]
        subprocess.run(cmd, check=True, cwd=REPO, capture_output=True)
        return C.read_store(duckdb.connect(str(db), read_only=True), f"published/{profile}")

    return build


def _untrained_draws(store, zero_tokens: bool, draws: int = 20) -> dict:
    claims, decided = C.load_claims(), {}
    for d in range(draws):
        rows, _, _ = C.evaluate_claims(claims, untrained_store(store, d, zero_tokens))
        for r in rows:
            if r["verdict"] in ("reproduced", "contradicted"):
                decided.setdefault(d, []).append(r["claim_id"])
    return decided


@pytest.mark.parametrize("zero_tokens", [False, True], ids=["metadata-as-trained", "zero-tokens"])
def test_untrained_published_cpu_store_decides_nothing(published_stores, zero_tokens):
    """The published cpu store, every outcome an untrained model's (noise per encoding and seed), 20 draws: at most
    one draw decides any pair (Holm at 0.05 per draw). 01ea20b decided in 8 of 16 draws with 0 tokens."""
    decided = _untrained_draws(published_stores("cpu"), zero_tokens)
    assert len(decided) <= 1, decided
    if zero_tokens:
        assert not decided, decided


@pytest.mark.slow
@pytest.mark.parametrize("zero_tokens", [False, True], ids=["metadata-as-trained", "zero-tokens"])
def test_untrained_published_cpu_claims_store_decides_nothing(published_stores, zero_tokens):
    """The same on the published cpu-claims store (220 runs; slow: ~25 s a mode)."""
    decided = _untrained_draws(published_stores("cpu-claims"), zero_tokens)
    assert len(decided) <= 1, decided
    if zero_tokens:
        assert not decided, decided


def test_zero_training_tokens_are_an_untrained_base_not_an_unknown_one(tmp_path):
    """An extension whose base trained on 0 tokens: 01ea20b read `if base.get('tokens')` (0 -> unknown) and decided;
    0 tokens is below the criterion: 'not decidable here' at this scale."""
    con = _db()
    _run(con, "base", "rope", 0, kind="pretrain", training_length=256)
    con.execute("UPDATE runs SET checkpoint = 'checkpoints/pretrain/rope' WHERE run_id = 'base'")
    _metric(con, "base", "peeval_ppl_pg19", "ppl@1024", 500.0)  # the extensions learned the new length
    for s in range(3):
        for m, v in (("tape", 100.0), ("lora", 200.0)):
            params = {"adapt": {"method": m, "seq_len": 1024, "base": "checkpoints/pretrain/rope"},
                      "model_args": {"pretrained": "checkpoints/pretrain/rope"},
                      "base_train": {"params": 100_000, "tokens": 0}}  # fmt: skip
            _run(con, f"{m}{s}", "rope", s, kind="adapt", params=params, training_length=1024)
            for L in (1024, 4096):
                _metric(con, f"{m}{s}", "peeval_ppl_pg19", f"ppl@{L}", v + 3 * s + L / 1024)
    (row,) = _verdicts(con, _extension_claims(tmp_path, "checkpoints/pretrain/rope")).values()
    assert row["verdict"] == "not decidable here", row["setting_diff"]
    assert "saw 0 tokens per parameter" in row["setting_diff"]


def test_run_params_list_takes_any_of_its_values(tmp_path):
    """TAPE table 2 (scaled) extends three rope seeds: run_params base as a list takes the extensions of each, so
    each side has 3 runs (01ea20b compared the list with each run's one base and found none)."""
    con = _db()
    bases = [f"checkpoints/pretrain/rope{t}" for t in ("", "-s1", "-s2")]
    for s, base in enumerate(bases):
        _run(con, f"b{s}", "rope", s, kind="pretrain", training_length=256)
        con.execute("UPDATE runs SET checkpoint = ? WHERE run_id = ?", [base, f"b{s}"])
        _metric(con, f"b{s}", "peeval_ppl_pg19", "ppl@1024", 300.0)
        for m, v in (("tape", 100.0), ("lora", 130.0)):
            params = {"adapt": {"method": m, "seq_len": 1024, "base": base}, "model_args": {"pretrained": base},
                      "base_train": {"params": 100_000, "tokens": 3_000_000}}  # fmt: skip
            _run(con, f"{m}{s}", "rope", s, kind="adapt", params=params, training_length=1024)
            for L in (1024, 4096):
                _metric(con, f"{m}{s}", "peeval_ppl_pg19", f"ppl@{L}", v + 7 * s * (m == "tape") + L / 1024)
    (row,) = _verdicts(con, _extension_claims(tmp_path, bases)).values()
    assert row["seeds"] == 3 and row["test"] == "runs-t" and row["df"] >= 2, row["setting_diff"]
