"""Claims about contexts beyond a model's window (``beyond_window``, issue 29 item 1): a pair measured only inside the
runs' training length gets numbers but no verdict and no test (a declared pair without a test counts as p = 1 in its
paper's Holm family, issue 55); one measured beyond it is decided, by Student's t over >= 3 runs per side.
Built on the real claims.yaml entries (TAPE figure 3, PoPE figure 2), so a claim that loses the field fails here."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import duckdb
import numpy as np
import pytest
import yaml
from helpers.claims import CLAIM, write_claims_file
from scipy import stats as sps

from leaderboard import claims as C
from leaderboard.store import schema_sql

ROOT = Path(__file__).resolve().parents[2]
INSIDE = "measured at 2048 tokens, inside the model's 8192-token window: the claim is about extending beyond it"


def _entry(claim_id: str) -> dict:
    raw = yaml.safe_load((ROOT / "leaderboard" / "claims" / "claims.yaml").read_text())
    return copy.deepcopy(next(e for e in raw["claims"] if e["id"] == claim_id))


def _db() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(schema_sql())
    return con


def _run(con, run_id: str, seed: int, training_length: int, *, method: str | None = None, pe: str = "rope") -> None:
    kind = "adapt" if method else "pretrain"
    # an adapter of the packaged SmolLM2 GGUF, as adapt_summary.json records it (the claims pin their base)
    params = {"adapt": {"method": method, "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"}} if method else {}
    con.execute(
        "INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date, training_length)"
        " VALUES (?, ?, ?, ?, ?, '{}', ?, ?, TIMESTAMP '2026-11-26 10:00:00', ?)",
        [run_id, method or pe, kind, f"ck/{run_id}", pe, json.dumps(params), seed, training_length],
    )


def _metric(con, run_id: str, task: str, metric: str, value: float, stderr=None, n=None) -> None:
    q = "INSERT INTO metrics (run_id, task, metric, filter, value, stderr, n) VALUES (?, ?, ?, 'none', ?, ?, ?)"
    con.execute(q, [run_id, task, metric, value, stderr, n])


#: passkeys retrieved per seed (0, 1, 2) of the 3 x len(lengths) cells: TAPE almost none, LoRA almost all (the
#: issue's 0/9 vs 9/9, three runs per side with some spread: a difference no test misses)
TAPE_RIGHT, LORA_MISSED = (0, 1, 2), (0, 1, 2)


def _passkey(con, prefix: str, lengths: list[int]) -> None:
    n = 3 * len(lengths)
    for method in ("tape", "lora"):
        for s in range(3):
            right = TAPE_RIGHT[s] if method == "tape" else n - LORA_MISSED[s]
            rid = f"{prefix}-{method}{s}"
            _run(con, rid, s, 8192, method=method)
            _metric(con, rid, "peeval_passkey", "acc", right / n, None, n)
            cells = [(L, depth) for L in lengths for depth in (0.0, 0.5, 1.0)]
            for i, (L, depth) in enumerate(cells):  # one example per cell: the first `right` retrieved
                _metric(con, rid, "peeval_passkey", f"acc@{L}@{depth}", float(i < right), None, 1)


def _passkey_runs_t(lengths: list[int]) -> tuple[float, float]:
    """The reference over runs (scipy's Student's t): (tape − lora in accuracy %, p)."""
    n = 3 * len(lengths)
    tape = [100 * r / n for r in TAPE_RIGHT]
    lora = [100 * (n - m) / n for m in LORA_MISSED]
    return float(np.mean(tape) - np.mean(lora)), float(sps.ttest_ind(tape, lora, equal_var=False).pvalue)


def _indirect_indexing(con) -> None:
    """One decided pair of another claim ('ii'): pope far ahead over 3 seeds."""
    for s, (a, b) in enumerate([(0.93, 0.10), (0.95, 0.12), (0.97, 0.11)]):
        for pe, acc in (("pope", a), ("rope", b)):
            con.execute("INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date) "
                        "VALUES (?, ?, 'diagnostic', ?, ?, '{}', '{}', ?, TIMESTAMP '2026-11-26 10:00:00')",
                        [f"{pe}{s}", pe, f"ck/{pe}{s}", pe, s])  # fmt: skip
            _metric(con, f"{pe}{s}", "peeval_diag_indirect_indexing_test", "acc", acc, 0.01, 500)


def _rows(con, tmp_path, entries: list[dict]) -> dict[str, dict]:
    """The claims rows, every pair of ``entries`` declared in profile cpu's pre-registered family."""
    path = tmp_path / "claims.yaml"
    pairs = [f"{e['id']}:{e['focus']}-vs-{o}" for e in entries for o in e["variants"] if o != e["focus"]]
    path.write_text(yaml.safe_dump({"version": 1, "claims": entries, "families": {"cpu": pairs}}))
    return {r["claim_id"]: r for r in C.compute_claims(con, path, profile="cpu")}


def test_passkey_inside_the_native_window_gets_no_verdict_and_says_why(tmp_path):
    """The issue's case: SmolLM2 adaptations read at 512..2048, inside its 8192 window: not 'contradicted'."""
    con = _db()
    _passkey(con, "cpu", [512, 1024, 2048])
    row = _rows(con, tmp_path, [_entry("tape-f3-passkey")])["tape-f3-passkey:tape-vs-lora"]
    assert row["verdict"] == "not decidable here"
    assert INSIDE in row["setting_diff"]
    diff, p = _passkey_runs_t([512, 1024, 2048])
    assert row["peeval_value"] == pytest.approx(diff) and diff == pytest.approx(100 / 9 - 800 / 9)  # the numbers stay
    assert row["p_value"] == pytest.approx(p, rel=1e-9) and p < 0.01  # decisive, and yet
    assert row["p_adjusted"] is None  # no test


def test_passkey_beyond_the_native_window_is_decided(tmp_path):
    con = _db()
    _passkey(con, "gpu", [8192, 16384, 32768])
    row = _rows(con, tmp_path, [_entry("tape-f3-passkey")])["tape-f3-passkey:tape-vs-lora"]
    assert (row["verdict"], row["test"]) == ("contradicted", "runs-t")
    assert "measured at 32768 tokens, beyond the model's 8192-token window" in row["setting_diff"]
    diff, p = _passkey_runs_t([8192, 16384, 32768])
    assert row["peeval_value"] == pytest.approx(diff)
    assert row["p_adjusted"] == pytest.approx(p, rel=1e-9)  # the only pair of TAPE's family: m = 1


def test_passkey_beyond_the_window_with_one_run_per_side_is_not_decidable(tmp_path):
    con = _db()
    _passkey(con, "gpu", [8192, 16384, 32768])
    con.execute("DELETE FROM runs WHERE run_id NOT LIKE '%0'")  # seed 0 alone, as before issue 55
    row = _rows(con, tmp_path, [_entry("tape-f3-passkey")])["tape-f3-passkey:tape-vs-lora"]
    assert (row["verdict"], row["p_adjusted"]) == ("not decidable here", None)
    assert "1 vs 1 runs per side" in row["setting_diff"] and row["peeval_value"] == pytest.approx(-100.0)


def test_passkey_length_is_the_shortest_longest_over_the_pair(tmp_path):
    """One side read beyond the window, the other not: the pair's measurement is the shorter one, inside."""
    con = _db()
    _passkey(con, "mixed", [512, 1024, 2048])
    for s in range(3):
        _metric(con, f"mixed-tape{s}", "peeval_passkey", "acc@16384@0.0", 0.0, None, 1)
    row = _rows(con, tmp_path, [_entry("tape-f3-passkey")])["tape-f3-passkey:tape-vs-lora"]
    assert row["verdict"] == "not decidable here" and INSIDE in row["setting_diff"]


def _ppl(con, training_length: int, lengths: list[int]) -> None:
    """pope and rope pretrained at ``training_length``, 3 seeds, perplexity up to max(lengths): pope ahead."""
    for s in range(3):
        for pe, base in (("pope", 30.0), ("rope", 60.0)):
            rid = f"{pe}-ppl{s}"
            _run(con, rid, s, training_length, pe=pe)
            for L in lengths:
                _metric(con, rid, "peeval_ppl_pg19", f"ppl@{L}", base + L / 1000 + s)


def test_pope_extrapolation_beyond_the_training_length_keeps_its_verdict(tmp_path):
    """PoPE figure 2 on CPU checkpoints: trained at 256, read up to 16x: beyond the window, decided over runs on the
    log of the perplexity."""
    con = _db()
    _ppl(con, 256, [256, 1024, 4096])
    row = _rows(con, tmp_path, [_entry("pope-f2-pg19-extrapolation")])["pope-f2-pg19-extrapolation:pope-vs-rope"]
    assert row["metric"] == "ppl@4096"
    assert (row["verdict"], row["test"]) == ("reproduced", "runs-t")
    pope, rope = ([np.log(base + 4.096 + s) for s in range(3)] for base in (30.0, 60.0))
    assert row["p_value"] == pytest.approx(sps.ttest_ind(pope, rope, equal_var=False).pvalue, rel=1e-9)
    assert "measured at 4096 tokens, beyond the model's 256-token window" in row["setting_diff"]


def test_ppl_at_max_inside_the_training_length_gets_no_verdict(tmp_path):
    con = _db()
    _ppl(con, 8192, [512, 1024, 2048])
    row = _rows(con, tmp_path, [_entry("pope-f2-pg19-extrapolation")])["pope-f2-pg19-extrapolation:pope-vs-rope"]
    assert row["metric"] == "ppl@2048"
    assert row["verdict"] == "not decidable here" and INSIDE in row["setting_diff"]


def test_holm_family_counts_the_undecidable_pair_as_untested(tmp_path):
    """Two tested pairs (ii of PoPE, and TAPE's passkey beyond the window) and one in-window PoPE pair with a tiny p
    of its own: it gets no adjusted p and no verdict, and counts as p = 1 in PoPE's pre-registered family (m = 2),
    never as its small p; TAPE's family is its one pair."""
    con = _db()
    _indirect_indexing(con)
    _passkey(con, "gpu", [8192, 16384])
    _ppl(con, 8192, [512, 2048])
    ii = {**copy.deepcopy(CLAIM)}
    rows = _rows(con, tmp_path, [ii, _entry("tape-f3-passkey"), _entry("pope-f2-pg19-extrapolation")])
    inside = rows["pope-f2-pg19-extrapolation:pope-vs-rope"]
    assert inside["verdict"] == "not decidable here" and inside["p_value"] < 0.05 and inside["p_adjusted"] is None
    ii_row, passkey = rows["ii:a-vs-b"], rows["tape-f3-passkey:tape-vs-lora"]
    assert (ii_row["family_m"], passkey["family_m"], inside["family_m"]) == (2, 1, 2)
    pope, rope = [93.0, 95.0, 97.0], [10.0, 12.0, 11.0]  # _indirect_indexing's accuracies, in %
    p_ii = sps.ttest_ind(pope, rope, equal_var=False).pvalue
    assert ii_row["p_value"] == pytest.approx(p_ii, rel=1e-9)
    assert ii_row["p_adjusted"] == pytest.approx(min(1.0, 2 * p_ii), rel=1e-9)  # Holm over (p_ii, 1)
    assert passkey["p_adjusted"] == pytest.approx(_passkey_runs_t([8192, 16384])[1], rel=1e-9)


def test_a_claim_without_the_field_is_decided_inside_the_window(tmp_path):
    """Short-context questions (TAPE table 9: what adaptation costs) stay decidable: no field, no length rule."""
    con = _db()
    _passkey(con, "cpu", [512, 1024, 2048])
    entry = _entry("tape-f3-passkey")
    del entry["beyond_window"]
    row = _rows(con, tmp_path, [entry])["tape-f3-passkey:tape-vs-lora"]
    assert row["verdict"] == "contradicted" and "measured at" not in row["setting_diff"]
    assert row["p_adjusted"] == pytest.approx(_passkey_runs_t([512, 1024, 2048])[1], rel=1e-9)


def test_the_context_extension_claims_carry_the_field():
    claims = {c.id: c for c in C.load_claims()}
    beyond = {cid for cid, c in claims.items() if c.beyond_window}
    assert beyond == {"tape-t2-ctx-ext-proof-pile", "tape-t2-ctx-ext-pg19", "tape-f3-passkey",
                      "tape-f3-passkey-theta", "pope-f2-pg19-extrapolation",
                      "tape-t2-scaled-pg19", "tape-t2-scaled-proof-pile"}  # fmt: skip


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"beyond_window": "yes"}, "field 'beyond_window' must be true or false, not 'yes'"),
        ({"beyond_window": True}, "field 'beyond_window' needs a task measured by context length"),
    ],
)
def test_beyond_window_schema_errors_are_one_line(tmp_path, change, fragment):
    path = write_claims_file(tmp_path, [{"id": "x-claim", **change}])
    with pytest.raises(C.ClaimsError) as e:
        C.load_claims(path)
    msg = str(e.value)
    assert fragment in msg and "claim 'x-claim'" in msg and "\n" not in msg
