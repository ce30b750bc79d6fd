"""Issue 29 item 3: a perplexity claim is decided only on language models trained to the criterion fixed before
any comparison (``decision.MIN_TOKENS_PER_PARAM`` tokens per parameter); below it the pair keeps its numbers,
gets "not decidable here" with the evidence, and is no test in Holm's family. Built on the real PoPE figure 2
entry (pope vs rope, ppl beyond the training length)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import duckdb
import numpy as np
import pytest
import yaml
from scipy import stats as sps

from leaderboard import claims as C
from leaderboard.claims import decision as D
from leaderboard.store import schema_sql

ROOT = Path(__file__).resolve().parents[2]


def _entry(claim_id: str) -> dict:
    raw = yaml.safe_load((ROOT / "leaderboard" / "claims" / "claims.yaml").read_text())
    return copy.deepcopy(next(e for e in raw["claims"] if e["id"] == claim_id))


#: perplexity at 4096 per seed (pope, rope): three runs per side, the unit of replication (issue 55)
PPL = [(200.0, 350.0), (205.0, 360.0), (198.0, 355.0)]


def _store(tokens: int, params: int) -> duckdb.DuckDBPyConnection:
    """pope far below rope at 4096 (trained at 256), 3 seeds each; every model saw ``tokens`` for ``params``."""
    con = duckdb.connect()
    con.execute(schema_sql())
    for s, (pope, rope) in enumerate(PPL):
        for pe, ppl in (("pope", pope), ("rope", rope)):
            rid, ck = f"{pe}{s}", f"ck/{pe}{s}"
            con.execute("INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date, "
                        "training_length) VALUES (?, ?, 'pretrain', ?, ?, '{}', '{}', ?, "
                        "TIMESTAMP '2026-11-26 10:00:00', 256)", [rid, pe, ck, pe, s])  # fmt: skip
            summary = {
                "pe": pe,
                "task": None,
                "profile": "cpu",
                "tokens": tokens,
                "params": params,
                "final_val_ppl": 33.0,
                "unigram_val_ppl": 191.0,
            }  # learned (lm_learned_margin)
            con.execute("INSERT INTO efficiency (checkpoint, pe, params, tokens, summary) VALUES (?, ?, ?, ?, ?)",
                        [ck, pe, params, tokens, json.dumps(summary)])  # fmt: skip
            for L, v in ((256, ppl / 2), (4096, ppl)):
                con.execute("INSERT INTO metrics VALUES (?, 'peeval_ppl_pg19', ?, 'none', ?, NULL, 1)",
                            [rid, f"ppl@{L}", v])  # fmt: skip
    return con


PAIR = "pope-f2-pg19-extrapolation:pope-vs-rope"


def _row(con, tmp_path) -> dict:
    """The pair's row, declared in profile cpu's pre-registered family (issue 55)."""
    path = tmp_path / "claims.yaml"
    claims = {"version": 1, "claims": [_entry("pope-f2-pg19-extrapolation")], "families": {"cpu": [PAIR]}}
    path.write_text(yaml.safe_dump(claims))
    return next(r for r in C.compute_claims(con, path, profile="cpu") if r["claim_id"] == PAIR)


def test_undertrained_language_models_decide_no_perplexity_claim(tmp_path):
    assert D.MIN_TOKENS_PER_PARAM == 20  # the criterion as fixed before the runs (issue 29; docs/statistics.md)
    row = _row(_store(tokens=1_024_000, params=1_053_824), tmp_path)  # the cpu profile's budget: ~1 token/param
    assert row["verdict"] == "not decidable here"
    assert "not decidable at this scale: the language models saw 0.97 tokens per parameter" in row["setting_diff"]
    assert row["peeval_value"] is not None and row["p_value"] is not None and row["p_adjusted"] is None


def test_language_models_at_the_criterion_are_decided(tmp_path):
    row = _row(_store(tokens=21_100_000, params=1_053_824), tmp_path)  # 20.0 tokens per parameter
    assert (row["verdict"], row["test"]) == ("reproduced", "runs-t")
    assert "at this scale" not in row["setting_diff"]
    pope, rope = ([np.log(v[i]) for v in PPL] for i in (0, 1))  # Student's t over runs on log perplexity
    assert row["p_adjusted"] == pytest.approx(sps.ttest_ind(pope, rope, equal_var=False).pvalue, rel=1e-9)  # m = 1
