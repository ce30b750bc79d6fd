"""Claims: the file's schema, its numbers against the seed papers, the verdict logic on
constructed numbers, and the whole stage on a small DuckDB store built here."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import duckdb
import pytest
import yaml
from helpers.claims import CLAIM, write_claims_file

from leaderboard import claims as C
from leaderboard.claims import schema as CS
from leaderboard.store import schema_sql  # the store's schema: schema.sql with peeval.records' names

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT.parent / "shared" / "seeds"
SCHEMA = ROOT / "leaderboard" / "store" / "schema.sql"


def _raw() -> dict:
    return yaml.safe_load((ROOT / "leaderboard" / "claims" / "claims.yaml").read_text())


# --------------------------------------------------------------------------- the file
def test_claims_file_validates_and_covers_the_issue():
    claims = C.load_claims()
    refs = {(c.paper, c.ref.split(" (")[0]) for c in claims}
    for want in [
        ("PoPE", "Table 1"),
        ("CoPE", "Table 2"),
        ("CoPE", "Table 3"),
        ("CoPE", "Table 4"),
        ("TAPE", "Figure 2"),
        ("PoPE", "Figure 2"),
        ("PoPE", "Table 5"),
        ("TAPE", "Table 1"),
        ("TAPE", "Table 2"),
        ("TAPE", "Figure 3"),
        ("TAPE", "Table 6"),
        ("PoPE", "Table 8"),
        ("TAPE", "Table 8"),
    ]:
        assert any(p == want[0] and r.startswith(want[1]) for p, r in refs), want
    # the issue's splits: flip-flop in-dist/OOD, selective copy in-dist/dense/sparse, counting 1/3/5 + OOD
    tasks = {c.task for c in claims if isinstance(c.task, str)}
    for t in [
        "peeval_diag_flip_flop_test",
        "peeval_diag_flip_flop_ood_sparse",
        "peeval_diag_selective_copy_test",
        "peeval_diag_selective_copy_ood_dense",
        "peeval_diag_selective_copy_ood_sparse",
        "peeval_diag_counting_ood_long",
        "peeval_diag_counting_ood_short",
    ]:
        assert t in tasks
    assert sorted(c.run_params.get("n_vars") for c in claims if c.task == "peeval_diag_counting_test") == [1, 3, 5]


def test_diagnostic_task_names_exist():
    gen = pytest.importorskip("peeval.tasks.diagnostics.generators")
    for c in C.load_claims():
        if isinstance(c.task, str) and c.task.startswith("peeval_diag_"):
            m = re.fullmatch(r"peeval_diag_(.+)_(train|test|ood_\w+)", c.task)
            assert m and m[1] in gen.TASKS and m[2] in gen.splits(m[1]), c.task


def test_peeval_task_names_exist():
    """Every peeval_* task a claim reads is a task YAML of the package (or the shift-stability stage)."""
    names = {p.stem for p in (ROOT / "peeval" / "tasks").rglob("peeval_*.yaml")}
    if not names:
        pytest.skip("no task YAMLs")
    for c in C.load_claims():
        for t in C._leaf_tasks(c.task):
            if t.startswith("peeval_") and t != "peeval_shift_stability":
                assert t in names, (c.id, t)


# numbers the seed's OCR mangled, checked by hand: CoPE table 3 prints "53" for 5.3, table 7
# runs CoPE's "0.03 (0.06)" together as "0.030.060" and absolute PE's "21.7 (7.9)" as "21.77.9)"
OCR_EXCEPTIONS = {
    ("cope-t3-counting-1var", "absolute", "paper"),
    ("cope-t2-flip-flop-in-dist", "cope", "paper_std"),
    ("cope-t2-flip-flop-ood", "absolute", "paper_std"),
}


@pytest.mark.skipif(not SEEDS.is_dir(), reason="seed papers not present (../shared/seeds)")
def test_every_paper_number_occurs_in_its_seed():
    texts = {p: (SEEDS / f"{p.lower()}.txt").read_text() for p in C.PAPERS}
    for c in C.load_claims():
        for v in c.variants.values():
            for key in ("paper", "paper_std"):
                x = getattr(v, key)
                if x is None or (c.id, v.name, key) in OCR_EXCEPTIONS:
                    continue
                forms = {f"{x}", f"{x:.2f}", f"{x:.1f}", f"{x:.3f}", f"{x:.4f}"}
                assert any(
                    re.search(rf"(?<![\d.]){re.escape(f)}(?!\d)", texts[c.paper]) for f in forms if float(f) == x
                ), (c.id, v.name, key, x)


def test_known_numbers_are_exact():
    """A few values transcribed by hand from the seeds, independently of the YAML."""
    by_id = {c.id: c for c in C.load_claims()}
    assert by_id["pope-t1-indirect-indexing"].variants["pope"].paper == 94.82
    assert by_id["pope-t1-indirect-indexing"].variants["rope"].paper_std == 2.45
    assert by_id["cope-t2-flip-flop-ood"].variants["cope"].paper == 4.9
    assert by_id["cope-t2-selective-copy-ood-sparse"].variants["absolute"].paper == 85.2
    assert by_id["tape-f2-addition-2x"].variants["fire"].paper == 26.98
    assert by_id["tape-t1-scrolls-quality"].variants["tape"].paper == 11.60
    assert by_id["tape-t2-ctx-ext-pg19"].variants["theta"].paper == 7.999
    assert by_id["pope-t8-ablation"].variants["no-softplus"].paper == 21.57
    assert by_id["tape-t8-shift-ids-attn"].variants["no-eq"].paper == 0.51


# --------------------------------------------------------------------------- schema errors
def _one(**change) -> dict:
    base = {**copy.deepcopy(CLAIM), "id": "x-claim"}
    base.update(change)
    return {"claims": [base]}


@pytest.mark.parametrize(
    "change, field",
    [
        ({"unit": "furlongs"}, "unit"),
        ({"focus": "zzz"}, "focus"),
        ({"paper": "GPT"}, "paper"),
        ({"higher_is_better": "yes"}, "higher_is_better"),
        ({"variants": {"a": {"pe": "nonsense", "paper": 1.0}, "b": {"pe": "rope", "paper": 1.0}}}, "variants.a"),
        ({"variants": {"a": {"pe": "pope", "paper": "high"}, "b": {"pe": "rope", "paper": 1.0}}}, "variants.a"),
        ({"variants": {"a": {"pe": "pope"}, "b": {"pe": "rope", "paper": 1.0}}}, "variants.a"),
        ({"claim": "equal"}, "tolerance"),
        ({"task": ["ok", 3]}, "task"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_schema_error_names_claim_and_field(change, field):
    with pytest.raises(C.ClaimsError) as e:
        C.validate(_one(**change), "claims.yaml")
    msg = str(e.value)
    assert "claims.yaml" in msg and "'x-claim'" in msg and field in msg


def test_misspelt_claim_field_names_the_one_meant():
    """Issue 30: a claims entry with a misspelt key is one line with a "did you mean" hint."""
    d = _one()
    d["claims"][0]["toleranse"] = d["claims"][0].pop("tolerance", 0.1)
    with pytest.raises(C.ClaimsError, match=r"'x-claim'.*unknown field 'toleranse'; did you mean 'tolerance'\?"):
        C.validate(d)
    d = _one(variants={"a": {"pe": "pope", "papr": 1.0}, "b": {"pe": "rope", "paper": 1.0}})
    with pytest.raises(C.ClaimsError, match=r"variants\.a.*unknown key\(s\) papr; did you mean 'paper'\?"):
        C.validate(d)


def test_schema_missing_field_and_duplicate_id():
    d = _one()
    del d["claims"][0]["metric"]
    with pytest.raises(C.ClaimsError, match=r"'x-claim'.*missing field 'metric'"):
        C.validate(d)
    d = _one()
    d["claims"].append(copy.deepcopy(d["claims"][0]))
    with pytest.raises(C.ClaimsError, match=r"'x-claim'.*'id' is duplicated"):
        C.validate(d)


def test_bad_yaml_file_names_it(tmp_path):
    p = tmp_path / "claims.yaml"
    p.write_text("claims: [\n")
    with pytest.raises(C.ClaimsError, match="claims.yaml: not valid YAML"):
        C.load_claims(p)


# --------------------------------------------------------------------------- statistics
def test_verdicts_reachable_and_uncertainty_respected():
    # higher is better, paper says focus better
    assert C.verdict(3.0, 1.4, True) == "reproduced"  # 3 > 2*1.4
    assert C.verdict(3.0, 1.6, True) == "inconclusive"  # 3 < 2*1.6: same direction, not beyond uncertainty
    assert C.verdict(-3.0, 1.4, True) == "contradicted"
    assert C.verdict(-3.0, 1.6, True) == "inconclusive"
    # lower is better (error %, perplexity): a negative difference is the claimed direction
    assert C.verdict(-3.0, 1.0, False) == "reproduced"
    assert C.verdict(3.0, 1.0, False) == "contradicted"
    # the paper's own numbers show the other ahead: expected_sign -1
    assert C.verdict(-3.0, 1.0, True, expected_sign=-1) == "reproduced"
    # missing number or uncertainty
    assert C.verdict(None, 1.0, True) == "inconclusive"
    assert C.verdict(5.0, None, True) == "inconclusive"
    # equal claims: within tolerance beyond doubt / outside beyond doubt / neither
    assert C.verdict(0.1, 0.1, True, kind="equal", tolerance=0.5) == "reproduced"  # 0.1 + 0.2 <= 0.5
    assert C.verdict(1.0, 0.1, True, kind="equal", tolerance=0.5) == "contradicted"  # 1.0 - 0.2 > 0.5
    assert C.verdict(0.4, 0.1, True, kind="equal", tolerance=0.5) == "inconclusive"


def test_combine_seeds_by_hand():
    est = C.combine_seeds([(0.8, 0.01, 100), (0.9, 0.01, 100), (1.0, 0.01, 100)], acc_like=True)
    assert est.value == pytest.approx(0.9)
    assert est.stderr == pytest.approx(0.1 / math.sqrt(3))  # sample std of .8,.9,1 is 0.1
    assert est.n == 300 and est.seeds == 3
    one = C.combine_seeds([(0.5, 0.02, 96)], acc_like=True)
    assert one.stderr == 0.02  # the run's own (lm-eval) stderr
    binom = C.combine_seeds([(0.5, None, 96)], acc_like=True)
    assert binom.stderr == pytest.approx(0.05)  # plus-four: (48+2)/100 = .5, sqrt(.25/100)
    assert C.combine_seeds([(20.0, None, None)], acc_like=False).stderr is None
    same = C.combine_seeds([(1.0, None, 46), (1.0, None, 46)], acc_like=True)
    assert same.stderr == pytest.approx(math.sqrt(2 * (48 / 50 * 2 / 50) / 50) / 2)


def test_units():
    assert C.to_unit("err_pct", 0.951, 0.01) == (pytest.approx(4.9), pytest.approx(1.0))
    assert C.to_unit("acc_pct", 0.25, None) == (25.0, None)
    assert C.to_unit("ppl", 21.5, None) == (21.5, None)
    assert C.to_unit("attn_diff_e2", 0.0004, 0.0) == (pytest.approx(0.04), 0.0)


# --------------------------------------------------------------------------- end to end
def _db() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(schema_sql())  # the real store's schema
    return con


def _run(con, run_id, pe, seed, kind="diagnostic", options=None, params=None, training_length=None):
    con.execute(
        "INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date, training_length)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, TIMESTAMP '2026-11-22 20:00:00', ?)",
        [run_id, pe, kind, f"ck/{run_id}", pe, json.dumps(options or {}), json.dumps(params or {}), seed,
         training_length],
    )  # fmt: skip


def _metric(con, run_id, task, metric, value, stderr=None, n=None):
    con.execute(
        "INSERT INTO metrics (run_id, task, metric, filter, value, stderr, n) VALUES (?, ?, ?, 'none', ?, ?, ?)",
        [run_id, task, metric, value, stderr, n],
    )


def _claims_file(tmp_path, entries) -> Path:
    return write_claims_file(tmp_path, entries, base=_one()["claims"][0])


def _pope_ahead_on_indirect_indexing(con) -> None:
    """Three seeds of pope and rope on indirect indexing (claim 'ii'), pope far ahead."""
    ii = "peeval_diag_indirect_indexing_test"
    for s, (a, b) in enumerate([(0.93, 0.10), (0.95, 0.12), (0.97, 0.11)]):
        _run(con, f"pope{s}", "pope", s)
        _run(con, f"rope{s}", "rope", s)
        _metric(con, f"pope{s}", ii, "acc", a, 0.01, 500)
        _metric(con, f"rope{s}", ii, "acc", b, 0.01, 500)


def test_end_to_end_verdicts_from_a_store(tmp_path):
    con = _db()
    _pope_ahead_on_indirect_indexing(con)  # pope far ahead over 3 seeds -> reproduced
    # flip-flop OOD (error %, lower better): cope is *worse* in peeval -> contradicted; one seed, lm-eval stderr
    ff = "peeval_diag_flip_flop_ood_sparse"
    _run(con, "cope0", "cope", 0)
    _metric(con, "cope0", ff, "acc", 0.50, 0.02, 400)
    _metric(con, "rope0", ff, "acc", 0.90, 0.02, 400)
    for rid in ("cope0", "rope0"):  # both learned the task in distribution: the OOD pair is tested (issue 44)
        _metric(con, rid, "peeval_diag_flip_flop_test", "acc", 0.99, 0.005, 400)
    # perplexity at the longest common length, one seed, no stderr -> inconclusive
    _run(con, "popeP", "pope", 0, kind="pretrain", training_length=256)
    _run(con, "ropeP", "rope", 0, kind="pretrain", training_length=256)
    for rid, vals in {"popeP": {256: 30.0, 1024: 40.0, 2048: 45.0}, "ropeP": {256: 29.0, 1024: 90.0}}.items():
        for L, v in vals.items():
            _metric(con, rid, "peeval_ppl_pg19", f"ppl@{L}", v)
    # TAPE ablation: equivariant=false runs must not count as 'tape'
    _run(con, "tapeA", "tape", 0, kind="pretrain", options={"position_size": 16})
    _run(con, "tapeB", "tape", 0, kind="pretrain", options={"position_size": 16, "equivariant": False})
    _metric(con, "tapeA", "peeval_shift_stability", "attn_diff@shift_ids@4", 0.0001, 0.00001)
    _metric(con, "tapeB", "peeval_shift_stability", "attn_diff@shift_ids@4", 0.0100, 0.0001)
    _metric(con, "tapeB", "peeval_shift_stability", "attn_diff@shift_ids@8", 0.0200, 0.0001)
    for rid in ("tapeA", "tapeB"):  # trained to the criterion (shift stability of an untrained model: no verdict)
        summary = {
            "pe": "tape",
            "task": None,
            "profile": "cpu",
            "tokens": 25_000_000,
            "params": 1_000_000,
            "final_val_ppl": 33.0,
            "unigram_val_ppl": 191.0,
        }  # learned (lm_learned_margin)
        con.execute("INSERT INTO efficiency (checkpoint, pe, params, tokens, summary) VALUES (?, 'tape', ?, ?, ?)",
                    [f"ck/{rid}", 1_000_000, 25_000_000, json.dumps(summary)])  # fmt: skip
    path = _claims_file(
        tmp_path,
        [
            {"id": "ii"},
            {
                "id": "ff",
                "task": ff,
                "unit": "err_pct",
                "higher_is_better": False,
                "focus": "cope",
                "variants": {"cope": {"pe": "cope", "paper": 4.9}, "rope": {"pe": "rope", "paper": 20.3}},
            },
            {
                "id": "ppl",
                "task": "peeval_ppl_pg19",
                "metric": "ppl@{max}",
                "unit": "ppl",
                "higher_is_better": False,
                "focus": "a",
                "variants": {"a": {"pe": "pope", "paper": None}, "b": {"pe": "rope", "paper": None}},
            },
            {
                "id": "eq",
                "task": "peeval_shift_stability",
                "metric": "attn_diff@shift_ids@{max}",
                "unit": "attn_diff_e2",
                "higher_is_better": False,
                "focus": "t",
                "variants": {
                    "t": {"pe": "tape", "paper": 0.04},
                    "n": {"pe": "tape", "pe_options": {"equivariant": False}, "paper": 0.51},
                },
            },
        ],
    )
    rows = {r["claim_id"]: r for r in C.compute_claims(con, path)}
    ii_row = rows["ii:a-vs-b"]
    assert ii_row["verdict"] == "reproduced", ii_row["setting_diff"]
    assert ii_row["seeds"] == 3 and ii_row["n"] == 3000
    assert ii_row["peeval_value"] == pytest.approx(100 * (0.95 - 0.11))
    se_a = 0.02 / math.sqrt(3) * 100  # std of .93,.95,.97 is .02
    se_b = 0.01 / math.sqrt(3) * 100  # std of .10,.12,.11 is .01
    assert ii_row["stderr"] == pytest.approx(math.hypot(se_a, se_b))
    assert ii_row["paper_value"] == pytest.approx(80.0)
    assert sorted(json.loads(ii_row["run_ids"])) == sorted(
        [f"pope{s}" for s in range(3)] + [f"rope{s}" for s in range(3)]
    )

    ff_row = rows["ff:cope-vs-rope"]  # one run per side: documents are no replications of a training run
    assert ff_row["verdict"] == "not decidable here" and "1 vs 1 runs per side" in ff_row["setting_diff"]
    assert ff_row["peeval_value"] == pytest.approx(50.0 - 10.0)  # error % cope - rope
    assert ff_row["stderr"] is None and ff_row["p_value"] is None
    assert ff_row["seeds"] == 1

    ppl_row = rows["ppl:a-vs-b"]
    assert ppl_row["metric"] == "ppl@1024"  # the longest length both runs have
    assert ppl_row["peeval_value"] == pytest.approx(-50.0)
    assert ppl_row["verdict"] == "not decidable here" and "1 vs 1 runs per side" in ppl_row["setting_diff"]

    eq_row = rows["eq:t-vs-n"]
    assert eq_row["metric"] == "attn_diff@shift_ids@4"
    assert json.loads(eq_row["run_ids"]) == ["tapeA", "tapeB"]
    assert eq_row["verdict"] == "not decidable here"  # one run per side

    # the table holds exactly these rows, and a second run replaces rather than appends
    C.compute_claims(con, path)
    got = con.execute("SELECT claim_id, verdict FROM claims ORDER BY claim_id").fetchall()
    assert got == sorted((k, r["verdict"]) for k, r in rows.items())
    vals = con.execute("SELECT variant, peeval_value FROM claim_values WHERE claim_id = 'ii' ORDER BY variant")
    assert [(v, round(x, 6)) for v, x in vals.fetchall()] == [("a", 95.0), ("b", 11.0)]


def test_adapt_runs_and_run_params(tmp_path):
    con = _db()
    _run(con, "ad1", "rope", 0, kind="adapt", params={"adapt": {"method": "tape"}})
    _run(con, "ad2", "rope", 0, kind="adapt", params={"adapt": {"method": "lora"}})
    con.execute("INSERT INTO metrics VALUES ('ad1', 'peeval_passkey', 'acc', 'strict-match', 0.0, 0.0, 100)")
    _metric(con, "ad1", "peeval_passkey", "acc", 0.9, 0.03, 100)  # the 'none' filter is the one read
    _metric(con, "ad2", "peeval_passkey", "acc", 0.5, 0.05, 100)
    _run(con, "c3", "cope", 0, params={"train": {"n_vars": 3}})
    _run(con, "c1", "cope", 1)  # no n_vars recorded: the generator default 1
    _run(con, "t3", "t5", 0, params={"train": {"n_vars": 3}})
    for rid, acc in (("c3", 0.99), ("c1", 0.5), ("t3", 0.80)):
        _metric(con, rid, "peeval_diag_counting_test", "acc", acc, None, 1000)
    path = _claims_file(
        tmp_path,
        [
            {
                "id": "pk",
                "task": "peeval_passkey",
                "focus": "tape",
                "variants": {"tape": {"method": "tape", "paper": None}, "lora": {"method": "lora", "paper": None}},
            },
            {
                "id": "cnt",
                "task": "peeval_diag_counting_test",
                "run_params": {"n_vars": 3},
                "unit": "err_pct",
                "higher_is_better": False,
                "focus": "cope",
                "variants": {"cope": {"pe": "cope", "paper": 1.2}, "rel": {"pe": "t5", "paper": 17.8}},
            },
        ],
    )
    rows = {r["claim_id"]: r for r in C.compute_claims(con, path)}
    assert rows["pk:tape-vs-lora"]["verdict"] == "not decidable here"  # one adapter run per method
    assert json.loads(rows["pk:tape-vs-lora"]["run_ids"]) == ["ad1", "ad2"]
    cnt = rows["cnt:cope-vs-rel"]
    assert json.loads(cnt["run_ids"]) == ["c3", "t3"]
    assert cnt["peeval_value"] == pytest.approx(1.0 - 20.0)
    assert cnt["verdict"] == "not decidable here"  # one run per side, however many examples


def test_task_mean_over_runs_of_one_checkpoint(tmp_path):
    """A checkpoint evaluated task by task (one run each) is one seed; the mean spans its runs."""
    con = _db()
    for rid, pe, task, acc in [
        ("p1", "pope", "piqa", 0.60),
        ("p2", "pope", "arc_easy", 0.40),
        ("r1", "rope", "piqa", 0.58),
        ("r2", "rope", "arc_easy", 0.30),
    ]:
        con.execute(
            "INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date)"
            " VALUES (?, ?, 'pretrain', ?, ?, '{}', '{}', 0, TIMESTAMP '2026-11-22 20:00:00')",
            [rid, pe, f"ck/{pe}", pe],
        )
        _metric(con, rid, task, "acc", acc, 0.01, 1000)
    path = _claims_file(tmp_path, [{"id": "zs", "task": ["piqa", "arc_easy"]}])
    (row,) = C.compute_claims(con, path)
    assert row["seeds"] == 1
    assert row["peeval_value"] == pytest.approx(100 * ((0.60 + 0.40) / 2 - (0.58 + 0.30) / 2))
    assert row["stderr"] is None and row["verdict"] == "not decidable here"  # one checkpoint per side
    assert sorted(json.loads(row["run_ids"])) == ["p1", "p2", "r1", "r2"]


def test_real_claims_file_on_an_empty_store_is_all_not_measured():
    """No peeval number at all: every pair is 'not measured' (not 'inconclusive'), naming a profile or 'none'."""
    con = _db()
    rows = C.compute_claims(con)
    assert rows and all(r["verdict"] == "not measured" for r in rows)
    assert all(r["measured_in"] in (*C.profiles.ORDER, "none") for r in rows)
    assert all(r["p_value"] is None and r["p_adjusted"] is None for r in rows)
    n_pairs = sum(len(c.variants) - 1 for c in C.load_claims())
    assert con.execute("SELECT count(*) FROM claims").fetchone()[0] == n_pairs


# --------------------------------------------------------------------------- page and stage
def _page_db():
    con = _db()
    C.write_claims(
        con,
        [
            dict(claim_id=f"c-{v}:a-vs-b", paper=p, ref="Table 1", task="peeval_diag_x_test", metric="acc",
                 compared="a vs b", paper_value=1.5, peeval_value=2.0, stderr=0.5, n=100, seeds=3, verdict=v,
                 setting_diff="paper: <b>big</b> & long | peeval: tiny", run_ids=json.dumps(["r<1>", "r2"]),
                 test="<mcnemar>", df=2.0, p_value=0.0123, p_adjusted=0.0369, measured_in=None)
            for v, p in (("reproduced", "PoPE"), ("contradicted", "CoPE"), ("inconclusive", "TAPE"),
                         ("not decidable here", "TAPE"))
        ] + [
            dict(claim_id=f"c-{v}:a-vs-b", paper="CoPE", ref="Table 3", task="peeval_diag_x_test", metric="acc",
                 compared="a vs b", paper_value=1.5, peeval_value=0.0, stderr=0.0, n=100, seeds=3, verdict=v,
                 setting_diff=f"paper: s | peeval: t | {v}: why", run_ids="[]", test=None, df=None, p_value=None,
                 p_adjusted=None, measured_in=None)
            for v in ("not learned at this scale", "no contrast at this setting", C.controls.AT_INIT)
        ] + [
            dict(claim_id="c-nm:a-vs-b", paper="TAPE", ref="Table 2", task="peeval_diag_x_test", metric="acc",
                 compared="a vs b", paper_value=1.5, peeval_value=None, stderr=None, n=None, seeds=0,
                 verdict="not measured", setting_diff="paper: <b>big</b> & long | peeval: no runs", run_ids="[]",
                 test=None, df=None, p_value=None, p_adjusted=None, measured_in="gpu<x>")
        ],
        [
            dict(claim_id="c-reproduced", variant="a", encoding="<script>alert(1)</script>", paper_value=90.0,
                 paper_std=2.0, peeval_value=80.0, stderr=1.0, n=50, seeds=3, run_ids="[]"),
            dict(claim_id="c-reproduced", variant="b", encoding="rope", paper_value=10.0, paper_std=None,
                 peeval_value=None, stderr=None, n=None, seeds=0, run_ids="[]"),
        ],
    )  # fmt: skip
    return con


def test_claims_page_escapes_and_shows_every_verdict():
    from leaderboard.site.claims_page import render_claims_page

    html = render_claims_page(_page_db())
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    for v, cls in (
        ("reproduced", "ok"),
        ("contradicted", "bad"),
        ("inconclusive", "unk"),
        ("not decidable here", "nd"),
        ("not learned at this scale", "nl"),
        ("no contrast at this setting", "nc"),
    ):
        assert f'<td class="verdict {cls}">{v}</td>' in html
    assert '<td class="verdict nm">not measured · profile gpu&lt;x&gt;' in html  # the profile that measures it
    assert "<b>big</b>" not in html and "&lt;b&gt;big&lt;/b&gt; &amp; long" in html
    assert 'href="runs/r&lt;1&gt;.html"' in html and 'href="runs/r2.html"' in html
    assert "<script" not in html and "<mcnemar>" not in html and "<x>" not in html
    # every decided or measured row shows its test with the t's degrees of freedom, p and Holm-adjusted p
    assert html.count('<td class="small">&lt;mcnemar&gt;, t(2)</td>') == 4
    assert html.count('<td class="num">0.012</td><td class="num">0.037</td>') == 4  # 2 significant digits
    assert html.count('<svg class="forest"') == 3  # one forest plot per paper with a measured pair
    forest = html.split('id="paper-TAPE"', 1)[1].split("</svg>", 1)[0]
    assert "c-inconclusive:a-vs-b" in forest and "c-not decidable here" not in forest  # no test: not drawn
    assert "90 ± 2" in html and "80 ± 1 (3 seeds)" in html  # paper vs peeval per encoding
    assert html.index(">PoPE</h2>") < html.index(">CoPE</h2>") < html.index(">TAPE</h2>")


def test_claims_page_without_table_is_none():
    from leaderboard.site.claims_page import render_claims_page

    assert render_claims_page(duckdb.connect()) is None


def test_stage_script_on_a_database(tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("claims_stage", ROOT / "pipelines" / "claims.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    db = tmp_path / "p.duckdb"
    assert stage.main(["--db", str(db)]) == 2
    assert "no such database" in capsys.readouterr().err
    con = duckdb.connect(str(db))
    if SCHEMA.is_file():
        con.execute(schema_sql())
    con.close()
    out = tmp_path / "summary.json"
    assert stage.main(["--db", str(db), "--summary", str(out)]) == 0
    s = json.loads(out.read_text())
    assert s["comparisons"] == s["not measured"] > 40 and s["reproduced"] == s["inconclusive"] == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_one(unit="nope")))
    before = duckdb.connect(str(db)).execute("SELECT count(*) FROM claims").fetchone()[0]
    assert stage.main(["--db", str(db), "--claims", str(bad)]) == 2
    assert "'x-claim'" in capsys.readouterr().err
    assert duckdb.connect(str(db)).execute("SELECT count(*) FROM claims").fetchone()[0] == before


def test_claims_page_in_headless_chromium(tmp_path):
    """The site builder writes the page and links it; a visitor at 1400 px sees the five answers in four
    groups per paper (decided with its test, inconclusive, not decidable here with its reason unfolded, not
    measured naming the profile), a forest plot,
    the setting folded under each row, hostile text as text, and no horizontal scrolling even with a long
    setting text."""
    import os

    chromium = os.environ.get("PEEVAL_CHROMIUM", "/usr/bin/chromium")
    if not Path(chromium).exists():
        pytest.skip(f"no Chromium at {chromium}")
    site = pytest.importorskip("leaderboard.site")
    from playwright.sync_api import sync_playwright

    db = tmp_path / "peeval.duckdb"
    con = _page_db()
    long = "paper: " + "16 x 1024 layers, 20k steps, " * 40 + "x" * 300  # runs off a 1400-px table unless wrapped
    con.execute("UPDATE claims SET setting_diff = ? WHERE claim_id = 'c-inconclusive:a-vs-b'", [long])
    con.execute(f"ATTACH '{db}' AS f")
    con.execute("COPY FROM DATABASE memory TO f")
    con.execute("DETACH f")
    index = site.build_site(db, tmp_path / "site")
    page_path = index.parent / "claims.html"
    assert page_path.is_file() and "claims.html" in index.read_text()
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"], headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_path.as_uri())
            for v in C.VERDICTS:
                assert page.locator("td.verdict", has_text=v).count() == 1, v
            assert page.locator("h2").all_inner_texts() == ["PoPE", "CoPE", "TAPE"]
            # every answer is defined above the tables with its count; how a test decides is folded below them
            states = page.locator("dl.states dt").all_inner_texts()
            assert [t.rsplit(":", 1)[0] for t in states] == list(C.VERDICTS), states
            assert all(t.strip() for t in page.locator("dl.states dd").all_inner_texts())
            assert page.locator("dl.states dd").count() == len(states)
            assert not page.locator("details.how p").is_visible()
            tape = page.locator("#paper-TAPE")
            assert tape.locator("h3").all_inner_texts() == ["Inconclusive: measured, no decision",
                                                            "Not decidable here: measured, but not in the claim's "
                                                            "setting", "Not measured in this profile"]  # fmt: skip
            why = page.locator("tr:has(td.verdict.nd) + tr.more details p", has_text="<b>big</b>").first
            assert why.is_visible()  # the reason is shown, not folded
            assert page.locator("#paper-PoPE h3").all_inner_texts() == ["Decided"]
            assert "profile gpu<x>" in tape.locator("td.verdict.nm").inner_text()  # escaped, shown as text
            assert page.locator("svg.forest").count() == 3 and page.locator("svg.forest circle.mark").count() == 3
            details = page.locator("#paper-TAPE table.nmtable details").first
            assert not details.locator("p").first.is_visible()  # folded
            details.locator("summary").click()
            assert details.locator("p", has_text="<b>big</b> & long").is_visible()  # shown as text, unfolded
            wide = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert wide <= 0, f"the page scrolls sideways by {wide} px at 1400 px"
            link = page.locator("a", has_text="r2").first.get_attribute("href")
            assert link == "runs/r2.html"
        finally:
            browser.close()
    assert not errors, errors


def test_pretraining_claims_ignore_the_diagnostic_models_of_the_same_encoding(tmp_path):
    """train_val of a pretraining claim: the pretrained checkpoints only, not the (3-seed) rope models
    trained on a diagnostic task, whose validation perplexity (~1.4) is of another task entirely."""
    con = _db()
    _run(con, "popeP", "pope", 0, kind="pretrain")
    _run(con, "ropeP", "rope", 0, kind="pretrain")
    curves = {"ck/popeP": 5.0, "ck/ropeP": 5.2}
    for s in range(3):
        _run(con, f"ropeD{s}", "rope", s)  # kind diagnostic
        curves[f"ck/ropeD{s}"] = 0.3
    for ck, loss in curves.items():
        con.execute("INSERT INTO training_curves (checkpoint, step, val_loss) VALUES (?, 100, ?)", [ck, loss])
    path = _claims_file(
        tmp_path,
        [{"id": "tv", "task": "train_val", "metric": "ppl", "unit": "ppl", "higher_is_better": False,
          "focus": "a", "variants": {"a": {"pe": "pope", "paper": 21.33}, "b": {"pe": "rope", "paper": 21.55}}}],
    )  # fmt: skip
    row = {r["claim_id"]: r for r in C.compute_claims(con, path)}["tv:a-vs-b"]
    assert json.loads(row["run_ids"]) == ["popeP", "ropeP"]
    assert row["peeval_value"] == pytest.approx(math.exp(5.0) - math.exp(5.2))
    assert row["seeds"] == 1


# --------------------------------------------------------------------------- names that exist nowhere
@pytest.mark.parametrize(
    "change, field, fragment",
    [
        ({"task": "peeval_diag_indirect_indexing_tset"}, "task", "did you mean peeval_diag_indirect_indexing_test"),
        ({"task": ["piqa", "peeval_cbt_cnn"]}, "task", "'peeval_cbt_cnn' is not a peeval task"),
        ({"metric": "accc"}, "metric", "peeval_diag_indirect_indexing_test reports acc, acc@all"),
        ({"task": "peeval_diag_flip_flop_test", "metric": "read_ac"}, "metric", "read_acc, seq_acc"),
        ({"task": "peeval_passkey", "metric": "ppl@{max}"}, "metric", "acc or acc@<length>@<depth>"),
        ({"task": "peeval_ppl_pg19", "metric": "ppl@{maximum}"}, "metric", "ppl@L, bpb@L"),
        ({"task": "peeval_ppl_pg19", "metric": "perplexity"}, "metric", "ppl@L, bpb@L"),
        ({"task": "peeval_scrolls_quality", "metric": "f1"}, "metric", "scrolls_score, em"),
        ({"task": "peeval_scrolls_gov_report", "metric": "rouge_l"}, "metric", "rougeL"),
        ({"task": ["peeval_cbt_cn", "peeval_cbt_ne"], "metric": "accuracy"}, "metric", "acc, acc_norm"),
        ({"task": "piqa", "metric": "acc_nrom"}, "metric", "a metric lm-eval registers"),
        ({"task": "train_val", "metric": "loss"}, "metric", "ppl"),
        ({"task": "peeval_shift_stability", "metric": "attn_diff@shift_id@{max}"}, "metric", "shift_ids"),
        ({"task": "not_in_peeval_music"}, "task", "allowed only with cpu: no"),
        ({"variants": {"a": {"method": "lroa", "paper": 1.0}, "b": {"method": "lora", "paper": 1.0}}}, "variants.a",
         "'lroa' is not a peeval adapt method"),
        ({"variants": {"a": {"pe": "tape", "pe_options": {"equivarient": False}, "paper": 1.0},
                       "b": {"pe": "rope", "paper": 1.0}}}, "variants.a", "unknown pe_options equivarient for tape"),
        ({"task": "peeval_diag_counting_test", "run_params": {"nvars": 3}}, "run_params", "counting generator"),
        ({"run_params": {"n_vars": 3}}, "run_params", "indirect_indexing generator"),
    ],
)  # fmt: skip
def test_a_name_that_exists_nowhere_is_an_error(monkeypatch, change, field, fragment):
    """Before: validated, then every pair silently 'inconclusive' (no run can ever match a typo)."""
    monkeypatch.setattr(CS, "lm_eval_task_names", lambda: pytest.fail("peeval's own names need no lm-eval index"))
    with pytest.raises(C.ClaimsError) as e:
        C.validate(_one(**change), "claims.yaml")
    msg = str(e.value)
    assert "claims.yaml: claim 'x-claim'" in msg and f"field '{field}" in msg and fragment in msg, msg


@pytest.mark.parametrize(
    "change",
    [
        {"task": "not_in_peeval_music", "cpu": "no", "metric": "nll"},
        {"task": "peeval_diag_addition_test", "metric": "acc@3x3"},
        {"task": "peeval_diag_flip_flop_ood_sparse", "metric": "acc@seq_acc"},
        {"task": "peeval_passkey", "metric": "acc@{max}@0.5"},
        {"task": "peeval_ppl_proof_pile", "metric": "bpb@{train}"},
        {"task": "peeval_shift_stability", "metric": "pe_dot_diff@add_tokens@{max}"},
        {"task": "peeval_scrolls_qmsum", "metric": "rouge_gm"},
        {"task": "peeval_zeroshot", "metric": "acc"},
        {"task": ["mmlu_stem", "arc_challenge"], "metric": "acc_norm"},
        {"task": "peeval_diag_counting_ood_long", "run_params": {"n_vars": 5, "max_ops": 64}},
        {"variants": {"a": {"pe": "tape", "pe_options": {"equivariant": False}, "paper": 1.0},
                      "b": {"method": "yarn", "paper": None}}},
    ],
)  # fmt: skip
def test_names_peeval_has_are_accepted(monkeypatch, change):
    monkeypatch.setattr(CS, "lm_eval_task_names", lambda: pytest.fail("peeval's own names need no lm-eval index"))
    assert len(C.validate(_one(**change), "claims.yaml")) == 1


def test_other_lm_eval_tasks_are_looked_up_in_its_index(monkeypatch):
    """A task outside peeval's suites is asked of lm-eval's index, once for the whole file."""
    asked = []
    monkeypatch.setattr(CS, "lm_eval_task_names", lambda: asked.append(1) or {"wikitext", "piqa"})
    d = _one(task="wikitext", metric="word_perplexity")
    d["claims"].append({**_one()["claims"][0], "id": "y", "task": "wikitext", "metric": "bits_per_byte"})
    assert len(C.validate(d, "claims.yaml")) == 2 and asked == [1]
    with pytest.raises(
        C.ClaimsError, match=r"'wikitex' is neither a peeval task nor an lm-eval task; did you mean wikitext"
    ):
        C.validate(_one(task="wikitex", metric="acc"), "claims.yaml")


@pytest.mark.slow
def test_lm_eval_index_rejects_a_misspelt_builtin():
    """The real lm-eval index (~10-20 s to build)."""
    with pytest.raises(C.ClaimsError, match="'piqaa' is neither a peeval task nor an lm-eval task"):
        C.validate(_one(task="piqaa"), "claims.yaml")
    assert len(C.validate(_one(task="wikitext", metric="word_perplexity"), "claims.yaml")) == 1


def test_typo_is_an_error_while_runs_not_made_are_not_measured(tmp_path):
    """The line between the two: names are checked against peeval, numbers looked up in the store; a pair
    without a number is 'not measured' (was 'inconclusive'), naming the profile that measures it."""
    con = _db()
    _pope_ahead_on_indirect_indexing(con)
    not_run = _claims_file(tmp_path, [{"id": "ii"}, {"id": "sc", "task": "peeval_diag_selective_copy_test"}])
    rows = {r["claim_id"]: r for r in C.compute_claims(con, not_run)}
    assert rows["ii:a-vs-b"]["verdict"] == "reproduced" and rows["ii:a-vs-b"]["measured_in"] is None
    assert rows["sc:a-vs-b"]["verdict"] == "not measured" and "no peeval number" in rows["sc:a-vs-b"]["setting_diff"]
    assert rows["sc:a-vs-b"]["measured_in"] == "none"  # no parameter file trains pope on selective copy
    typo = _claims_file(tmp_path, [{"id": "ii", "metric": "acc_norm"}])
    with pytest.raises(C.ClaimsError, match=r"claim 'ii': field 'metric': 'acc_norm' is not a metric of this task"):
        C.compute_claims(con, typo)
    # the store keeps the last good verdicts
    assert con.execute("SELECT count(*) FROM claims").fetchone() == (2,)


def test_a_corrupt_store_column_is_an_error_not_the_defaults(tmp_path):
    """Before: _json turned unreadable pe_options into {} and the run counted as the default encoding
    (the JSON column type already refuses malformed JSON; a non-object still gets in)."""
    con = _db()
    _run(con, "pope0", "pope", 0)
    _run(con, "rope0", "rope", 0)
    con.execute("""UPDATE runs SET pe_options = '"softplus=false"' WHERE run_id = 'pope0'""")  # JSON, not an object
    path = _claims_file(tmp_path, [{"id": "ii"}])
    with pytest.raises(C.ClaimsError, match=r"store: runs.pe_options of run pope0: expected a JSON object, got str"):
        C.compute_claims(con, path)
    con.execute("UPDATE runs SET pe_options = '[1]' WHERE run_id = 'pope0'")
    with pytest.raises(C.ClaimsError, match=r"runs.pe_options of run pope0: expected a JSON object, got list"):
        C.compute_claims(con, path)


def test_an_encoding_lookup_failure_is_not_swallowed(tmp_path, monkeypatch):
    """Before: _defaults caught every exception and matched runs as if the encoding had no options.
    The options are now read from peeval's source without torch: a declaration that cannot be read
    is an error, not {}."""
    from peeval.registry import declarations

    con = _db()
    _run(con, "pope0", "pope", 0)
    _metric(con, "pope0", "peeval_diag_indirect_indexing_test", "acc", 0.9, 0.01, 500)
    path = _claims_file(tmp_path, [{"id": "ii"}])

    broken = tmp_path / "encodings"
    broken.mkdir()
    (broken / "__init__.py").write_text('ENCODINGS = {"pope": "pope:PoPE", "rope": "rope:RoPE"}\n')
    (broken / "pope.py").write_text("class PoPE(Encoding):\n    options = make_options()\n")
    (broken / "rope.py").write_text("class RoPE(Encoding):\n    options = {}\n")
    monkeypatch.setattr(declarations, "ENCODINGS_DIR", broken)
    declarations._encoding_option_defaults.cache_clear()
    try:
        with pytest.raises(declarations.DeclarationError, match="PoPE: options is not a dict literal"):
            C.compute_claims(con, path)
    finally:
        declarations._encoding_option_defaults.cache_clear()


def _stage_and_empty_store(tmp_path):
    """pipelines/claims.py as a module, and an empty store of this schema."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("claims_stage", ROOT / "pipelines" / "claims.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    db = tmp_path / "p.duckdb"
    con = duckdb.connect(str(db))
    con.execute(schema_sql())
    con.close()
    return stage, db


def test_stage_rejects_a_misspelt_claim_and_a_non_database_in_one_line(tmp_path, capsys):
    stage, db = _stage_and_empty_store(tmp_path)
    bad = _claims_file(tmp_path, [{"id": "ii", "task": "peeval_diag_indirect_indexing"}])
    assert stage.main(["--db", str(db), "--claims", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "claim 'ii': field 'task'" in err[0] and "did you mean" in err[0], err
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database")
    assert stage.main(["--db", str(junk)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot open as a DuckDB database" in err[0], err


def test_stage_script_on_a_full_disk_keeps_the_old_verdicts(tmp_path, capsys, monkeypatch):
    """Issue 30: a write that fails (injected ENOSPC) is one line, exit 2; the old claims file stays
    byte for byte and no temporary database is left beside it."""
    stage, db = _stage_and_empty_store(tmp_path)
    assert stage.main(["--db", str(db)]) == 0
    capsys.readouterr()
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def full_disk(con, rows, values, calibration=()):
        raise duckdb.IOException("IO Error: No space left on device")

    monkeypatch.setattr(C, "write_claims", full_disk)
    assert stage.main(["--db", str(db)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left" in err[0] and "claims.duckdb" in err[0], err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files


def test_a_long_forest_label_is_written_whole_and_hovers_with_its_claim():
    """The forest plot's row label is written whole over as many lines as it needs (issue 58: it was cut in its
    middle, "pope vs rope ·…· Gutenberg"), each at most 52 characters, and its hover holds it with the claim id."""
    from leaderboard.site.claims_page import forest_svg

    task = "peeval_ppl_pg19 · Gutenberg books (PG-19 substitute) @ 4096 tokens"
    claim = {"claim_id": "c:a-vs-b", "compared": "pope vs rope", "task": task, "peeval_value": -1.0,
             "paper_value": -2.0, "stderr": 0.5, "df": 4, "verdict": "inconclusive"}  # fmt: skip
    svg = forest_svg([claim], "t")
    shown = svg.split('class="rowlabel">', 1)[1].split("</text>", 1)[0].split("</title>", 1)[1]
    lines = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", shown)
    assert len(lines) == 2 and all(len(x) <= 52 for x in lines) and "…" not in shown, lines
    assert "".join(lines).replace(" ", "") == f"pope vs rope · {task}".replace(" ", "")  # every character, in order
    assert f"<title>pope vs rope · {task} (c:a-vs-b)</title>" in svg
