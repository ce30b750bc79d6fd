"""Issue 26, item 1: each metric described once (peeval.records.METRICS), lm-eval's own direction checked
against it, the per-cell tables as views over ``metrics``, and one mean ± stderr for the leaderboard and
the claims page. Expected values are worked out by hand in the comments."""

import json
import math
from pathlib import Path

import duckdb
import pytest
from helpers.claims import CLAIM

from leaderboard import claims as C  # noqa: E402
from leaderboard.ingest import IngestError, connect, ingest  # noqa: E402
from leaderboard.site import build_site  # noqa: E402
from peeval import records as R  # noqa: E402


# --------------------------------------------------------------------------- the registry
def test_registry_hand_checked():
    assert R.higher_is_better("ppl@512") is False and R.higher_is_better("bpb@64") is False
    assert R.higher_is_better("acc@3x5") is True and R.higher_is_better("word_perplexity") is False
    # a count has no direction (lm-eval reports it as higher-is-better, and so does the registry's reader)
    assert R.metric_spec("tokens@32").higher_is_better is None and R.is_count("windows@32")
    assert R.higher_is_better("tokens@32") is True
    # a metric the registry does not know: lm-eval's direction, else higher
    assert R.higher_is_better("brier_score", lm_eval=False) is False and R.higher_is_better("brier_score")
    assert R.higher_is_better("ppl@64", lm_eval=True) is False  # the registry wins (ingest refuses the clash)
    assert R.metric_kind("peeval_scrolls_qasper", "f1") == "percent" and R.metric_kind("drop", "f1") == "score"
    assert R.metric_kind("peeval_passkey", "acc@64@0.5") == "fraction"
    # the leaderboard's column: acc_norm before acc before exact_match; cells and unknown metrics never
    assert R.headline_metrics(["exact_match", "acc", "acc_norm", "acc@3x5", "brier"]) == ["acc_norm", "acc",
                                                                                           "exact_match"]  # fmt: skip
    # flip-flop leads with the error over every read (the claims' unit, Liu et al.), then the final read
    assert R.headline_metrics(["acc", "read_acc", "seq_acc"]) == ["read_acc", "acc", "seq_acc"]
    assert R.OUTCOME_KEYS == ("acc", "exact_match", "em")
    assert R.is_outcome("acc") and R.is_outcome("exact_match") and not R.is_outcome("em")
    # SCROLLS' em is a percent of examples (metrics.mean_x100 of 0/1 matches): an outcome there, x 100
    assert R.is_outcome("em", "peeval_scrolls_quality") and R.outcome_scale("peeval_scrolls_quality", "em") == 100
    assert R.outcome_scale("peeval_diag_addition_test", "acc") == 1
    assert {s.seeds for s in R.METRICS.values()} == {"mean", "sum"}
    assert all(s.kind in R.KINDS for s in R.METRICS.values())


def test_seed_estimate_hand_checked():
    # two seeds 0.8, 0.9: sample sd (n - 1) = 0.0707107, / sqrt(2) = 0.05
    e = R.seed_estimate([(0.8, 0.01, 100), (0.9, 0.01, 100)], proportion=True)
    assert (e.value, e.seeds, e.n, e.method) == (pytest.approx(0.85), 2, 200, "seeds")
    assert e.stderr == pytest.approx(0.05)
    # one seed, a proportion without a stderr: plus-four, (48 + 2) / (96 + 4) = 0.5, sqrt(0.25 / 100) = 0.05
    one = R.seed_estimate([(0.5, None, 96)], proportion=True)
    assert (one.stderr, one.method) == (pytest.approx(0.05), "binomial")
    # lm-eval's stderr 0 on a proportion is no certainty either: 46/46 -> (48 / 50) -> sqrt(0.96 * 0.04 / 50)
    assert R.seed_estimate([(1.0, 0.0, 46)], proportion=True).stderr == pytest.approx(0.0277128, rel=1e-5)
    # a perplexity with a stderr of its own keeps it; without one there is none
    assert R.seed_estimate([(20.0, 0.3, None)], proportion=False).stderr == 0.3
    assert R.seed_estimate([(20.0, None, None)], proportion=False).stderr is None
    # identical seeds: the runs' own errors pooled, sqrt(0.03² + 0.04²) / 2 = 0.025
    same = R.seed_estimate([(0.7, 0.03, 50), (0.7, 0.04, 50)], proportion=True)
    assert (same.stderr, same.method) == (pytest.approx(0.025), "lm-eval stderr")
    # an exploding seed: the mean is infinite and no spread can be measured
    inf = R.seed_estimate([(math.inf, None, None), (30.0, None, None)], proportion=False)
    assert math.isinf(inf.value) and inf.stderr is None and inf.method is None
    assert R.seed_estimate([], proportion=True) is None


# --------------------------------------------------------------------------- ingest: views and lm-eval's direction
def _results(d: Path, results: dict, higher_is_better: dict | None = None, model: str = "hf") -> None:
    d.mkdir(parents=True)
    doc = {"results": results, "peeval": {"model": model, "model_args": {}, "date": "2026-11-22T10:00:00+00:00",
                                          "protocol": {"ppl": "disjoint windows"}}}  # fmt: skip
    if higher_is_better is not None:
        doc["higher_is_better"] = higher_is_better
    (d / "results.json").write_text(json.dumps(doc))


def test_views_read_task_and_cell_names_as_records_does(tmp_path):
    _results(tmp_path / "r", {
        "peeval_diag_flip_flop_ood_dense": {"acc,none": 0.5, "read_acc,none": 0.75, "acc_norm,none": 0.1},
        "peeval_diag_my_new_task_ood": {"acc,none": 0.25, "acc@2x10,none": 1.0, "acc@2x10,other": 0.0},
        "peeval_diag_solo": {"acc,none": 1.0},
        "peeval_ppl_pg19": {"ppl@32,none": 11.0, "tokens@32,none": 31, "bpb@032,none": 2.0, "ppl@64,other": 3.0},
        "peeval_passkey": {"acc,none": 0.5, "acc@64@0.25,none": 0.5, "acc@64,none": 1.0},
    })  # fmt: skip
    db = tmp_path / "s.duckdb"
    ingest([tmp_path / "r"], db, root=tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    q = "select task, split, cell, len_a, len_b, acc from diagnostic_cells order by task, split, cell"
    assert con.execute(q).fetchall() == [
        ("flip_flop", "ood_dense", "all", None, None, 0.5),  # a known generator: its name, whole
        ("flip_flop", "ood_dense", "read_acc", None, None, 0.75),  # acc_norm does not end in acc: no cell
        ("my_new_task", "ood", "2x10", 2, 10, 1.0),  # unknown: split at the last underscore; filter 'other' left out
        ("my_new_task", "ood", "all", None, None, 0.25),
        ("solo", "test", "all", None, None, 1.0),  # no underscore: the split is 'test'
    ]
    # 032 is the length 32; ppl@64 of another filter is not a row
    assert con.execute("select corpus, length, ppl, bpb, tokens, windows, protocol from ppl_by_length").fetchall() == [
        ("pg19", 32, 11.0, 2.0, 31, None, "disjoint windows")]  # fmt: skip
    assert con.execute("select length, depth, acc, n from passkey_cells").fetchall() == [(64, 0.25, 0.5, None)]
    assert con.execute("select count(*) from metrics").fetchone() == (14,)  # 3 + 3 + 1 + 4 + 3: each once
    con.close()


def test_lm_evals_direction_is_checked_against_the_registry(tmp_path):
    _results(tmp_path / "bad", {"peeval_ppl_pg19": {"ppl@32,none": 11.0}}, {"peeval_ppl_pg19": {"ppl@32": True}})
    with pytest.raises(
        IngestError, match=r"higher_is_better\['peeval_ppl_pg19'\]\['ppl@32'\] is true.*lower-is-better"
    ):
        ingest([tmp_path / "bad"], tmp_path / "bad.duckdb", root=tmp_path)
    assert not (tmp_path / "bad.duckdb").exists()
    _results(tmp_path / "odd", {"t": {"acc,none": 0.5}}, {"t": {"acc": "yes"}})
    with pytest.raises(IngestError, match="'yes' is not true or false"):
        ingest([tmp_path / "odd"], tmp_path / "odd.duckdb", root=tmp_path)


def test_a_metric_the_registry_does_not_know_takes_lm_evals_direction(tmp_path):
    # brier_score: lower is better by lm-eval's word; the leaderboard's arrow and best follow it
    for name, v in (("m1", 0.2), ("m2", 0.1)):
        _results(tmp_path / "r" / name, {"calib": {"brier_score,none": v, "brier_score_stderr,none": 0.01}},
                 {"calib": {"brier_score": False}}, model=name)  # fmt: skip
    db = tmp_path / "s.duckdb"
    ingest([tmp_path / "r"], db, root=tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    (params,) = con.execute("select params from runs where name = 'm2'").fetchone()
    assert json.loads(params)["higher_is_better"] == {"calib": {"brier_score": False}}
    con.close()
    html = (build_site(db, tmp_path / "site").parent / "index.html").read_text()
    assert "calib · data not recorded brier_score ↓" in html  # its results.json names no data: said so
    assert '<td class="num best" data-sort="0.1">0.1' in html


# --------------------------------------------------------------------------- one mean ± stderr
def test_the_leaderboard_and_the_claims_show_one_stderr(tmp_path):
    """pope: one seed, 46/46 right, lm-eval's stderr 0; rope: 23/46. Both pages show pope's plus-four
    stderr sqrt(0.96 * 0.04 / 50) = 0.027713 (the claims in percent: 2.7713)."""
    db = tmp_path / "peeval.duckdb"
    con = connect(db)
    task = CLAIM["task"]
    for rid, pe, acc in (("pope0", "pope", 1.0), ("rope0", "rope", 0.5)):
        con.execute("INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date) VALUES "
                    "(?, ?, 'diagnostic', ?, ?, '{}', '{}', 0, TIMESTAMP '2026-11-22 20:00:00')",
                    [rid, pe, f"ck/{rid}", pe])  # fmt: skip
        con.execute("INSERT INTO metrics VALUES (?, ?, 'acc', 'none', ?, 0.0, 46)", [rid, task, acc])
    rows, values, _ = C.evaluate_claims(C.validate({"claims": [CLAIM]}), C.read_store(con))
    con.close()
    pope = next(v for v in values if v["variant"] == "a")
    assert pope["stderr"] == pytest.approx(2.77128, rel=1e-5)
    html = (build_site(db, tmp_path / "site").parent / "index.html").read_text()
    assert '1 <span class="se">± 0.02771</span>' in html.replace("</td>", "").replace('data-sort="1.0">', "")


def test_family_metrics_hand_checked():
    """What a task of the families peeval.records formats reports (claims.yaml's metric check reads it)."""
    assert R.family_metric("peeval_ppl_pg19", "bpb@512") == (
        "ppl@L, bpb@L, tokens@L, windows@L (L a length, {max} or {train}) or nll_pos@P", True)  # fmt: skip
    assert R.family_metric("peeval_ppl_pg19", "ppl@max")[1] is False
    assert R.family_metric("peeval_ppl_pg19", "nll_pos@128")[1]
    assert not R.family_metric("peeval_ppl_pg19", "nll_pos@x")[1]
    assert R.family_metric("peeval_passkey", "acc@512@0.25")[1] and R.family_metric("peeval_passkey", "acc")[1]
    assert not R.family_metric("peeval_passkey", "acc@512@2.0")[1]  # a depth is in [0, 1]
    assert R.family_metric("peeval_diag_flip_flop_test", "acc@seq_acc") == (
        "acc, read_acc, seq_acc, acc@all, acc@read_acc, acc@seq_acc", True)  # fmt: skip
    assert R.family_metric("peeval_diag_addition_test", "acc@3x12")[1]
    assert not R.family_metric("peeval_diag_counting_test", "acc@3x12")[1]
    assert R.family_metric("peeval_shift_stability", "attn_diff@shift_ids@3")[1]
    assert R.family_metric("hellaswag", "acc") is None


def test_a_store_with_copied_cell_tables_is_refused(tmp_path):
    """A store of the code before the views (ppl_by_length etc. as tables of copied rows): one line naming
    them, re-ingest; never read as if current."""
    from leaderboard.ingest import TABLE_COLUMNS, VIEWS, StoreError, open_store

    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    for t, cols in TABLE_COLUMNS.items():
        con.execute(f"CREATE TABLE {t} ({', '.join(f'{c} VARCHAR' for c in cols)})")
    con.close()
    assert VIEWS == ("ppl_by_length", "loss_by_position", "passkey_cells", "diagnostic_cells", "family_length_cells")
    views = "ppl_by_length, loss_by_position, passkey_cells, diagnostic_cells, family_length_cells"
    with pytest.raises(StoreError, match=f"{views} tables, not views"):
        open_store(db)
