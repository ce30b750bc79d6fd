"""Issue 67 item 2, gates on outcomes, at their boundaries (stores built by hand with known values):

- a text-pretrained language model learned when its final validation log ppl is below its unigram log ppl by
  claims.yaml's ``lm_learned_margin`` (0.5 nats): either side of it, an untrained model (ppl 512 vs unigram 191), a
  run recording no unigram ppl, the curve's outcome over the summary's, and step-0 controls that still show a pair
  holding at initialisation;
- convergence from >= 3 validations in the last 30 % of a run's steps, one-sided: the trailing side's least-squares
  slope extrapolated over claims.yaml's ``converge_horizon`` (0.25) of its steps blocks only when it reaches the gap
  (accuracies), or, on a curve of losses only, a fall above ``converge_tolerance`` (0.05) of the loss.

Every threshold below is worked by hand from the fixture's numbers."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from helpers.claims import write_claims_file
from test_claims_decision import II, _db, _metric, _run

from leaderboard import claims as C

NOT_LEARNED = "not learned at this scale"
AT_INIT = "holds at initialisation (architecture)"  # the words
#: the claims file's own top-level settings (written below, the values of leaderboard/claims/claims.yaml)
TOP = {"lm_learned_margin": 0.5, "converge_horizon": 0.25, "converge_tolerance": 0.05}


def _claims(tmp_path, entries, **top):
    p = write_claims_file(tmp_path, entries)
    d = yaml.safe_load(p.read_text())
    d.update(TOP, **top)
    p.write_text(yaml.safe_dump(d))
    return p


def test_the_top_level_settings_are_claims_yamls():
    """The values these tests put at the boundary are the ones the published claims use."""
    top = yaml.safe_load(C.DEFAULT_PATH.read_text())
    assert {k: top[k] for k in TOP} == TOP


# --------------------------------------------------------------------------- language models learned by outcome
PPL = {"id": "ppl", "task": "peeval_ppl_pg19", "metric": "ppl@256", "unit": "ppl", "higher_is_better": False,
       "focus": "a", "variants": {"a": {"pe": "pope", "paper": 20.0}, "b": {"pe": "rope", "paper": 25.0}}}  # fmt: skip
UNIGRAM = 191.1543135700901  # the published cpu profile's unigram validation ppl


def _lm(con, rid, pe, seed, final_ppl, unigram=UNIGRAM, ckpt=None, **extra):
    """A text-pretraining run at 40 tokens per parameter (the budget rule passes) with its training summary."""
    ck = ckpt or f"ck/{rid}"
    summary = {"pe": pe, "pe_options": {}, "task": None, "profile": "cpu", "seed": seed, "params": 100_000,
               "tokens": 4_000_000, "steps": 1000, "final_val_ppl": final_ppl, **extra}  # fmt: skip
    if unigram is not None:
        summary["unigram_val_ppl"] = unigram
    con.execute(
        "INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date, training_length) "
        "VALUES (?, ?, 'pretrain', ?, ?, '{}', '{}', ?, TIMESTAMP '2026-11-26 10:00:00', 256)",
        [rid, pe, ck, pe, seed],
    )
    con.execute("INSERT INTO efficiency (checkpoint, pe, params, tokens, summary) VALUES (?, ?, ?, ?, ?)",
                [ck, pe, summary["params"], summary["tokens"], json.dumps(summary)])  # fmt: skip


def _ppl(con, rid, value):
    con.execute("INSERT INTO metrics (run_id, task, metric, filter, value, stderr, n) VALUES "
                "(?, 'peeval_ppl_pg19', 'ppl@256', 'none', ?, NULL, 1)", [rid, value])  # fmt: skip


def _lm_pair(con, rope_final: list[float], unigram=UNIGRAM):
    """pope at ppl 30-32 on the claim's task, rope at 40-42; final validation ppl pope 33, rope ``rope_final``."""
    for s in range(3):
        _lm(con, f"pope{s}", "pope", s, 33.0, unigram)
        _ppl(con, f"pope{s}", 30.0 + s)
        _lm(con, f"rope{s}", "rope", s, rope_final[s], unigram)
        _ppl(con, f"rope{s}", 40.0 + s)


@pytest.mark.parametrize(("gain", "learned"), [(0.49, False), (0.51, True)])
def test_a_language_model_learned_by_its_margin_below_the_unigram(tmp_path, gain, learned):
    """rope seed 1 at log(unigram) - log(ppl) = 0.49 nats: below the margin of 0.5, "not learned at this scale"
    naming its ppl and the unigram's; at 0.51: the pair is decided (pope 30-32 vs rope 40-42: reproduced)."""
    ppl = UNIGRAM * math.exp(-gain)  # 116.9 (0.49) / 114.6 (0.51)
    con = _db()
    _lm_pair(con, [33.0, ppl, 33.0])
    (row,) = C.compute_claims(con, _claims(tmp_path, [PPL]), profile="cpu")
    if learned:
        assert row["verdict"] == "reproduced", row["setting_diff"]
    else:
        assert row["verdict"] == NOT_LEARNED and row["p_adjusted"] is None, row["setting_diff"]
        assert f"b seed 1: validation ppl {ppl:.4g} vs unigram 191.2 (+0.490 nats)" in row["setting_diff"]
        assert "lm_learned_margin = 0.5" in row["setting_diff"]


def test_an_untrained_language_model_is_not_learned_whatever_its_budget(tmp_path):
    """Issue 67: ppl 512 (a uniform guess over the vocabulary) against a unigram ppl of 191 passed the budget rule."""
    con = _db()
    _lm_pair(con, [512.0, 512.0, 512.0])
    (row,) = C.compute_claims(con, _claims(tmp_path, [PPL]), profile="cpu")
    assert row["verdict"] == NOT_LEARNED, row["setting_diff"]
    assert "b seed 0: validation ppl 512 vs unigram 191.2 (-0.985 nats)" in row["setting_diff"]  # log(191.15/512)


def test_a_language_model_recording_no_unigram_ppl_is_no_evidence_it_learned(tmp_path):
    con = _db()
    _lm_pair(con, [33.0, 33.0, 33.0], unigram=None)
    (row,) = C.compute_claims(con, _claims(tmp_path, [PPL]), profile="cpu")
    assert row["verdict"] == NOT_LEARNED and "no final validation ppl and unigram ppl recorded" in row["setting_diff"]


def test_the_curves_last_validation_is_the_outcome_read(tmp_path):
    """A summary saying 33 with a curve that ends at log(512) (an untrained store keeping its trained records):
    what the run scored decides."""
    con = _db()
    _lm_pair(con, [33.0, 33.0, 33.0])
    for s in range(3):
        con.execute("INSERT INTO training_curves (checkpoint, step, val_loss) VALUES (?, 1000, ?)",
                    [f"ck/rope{s}", math.log(512.0)])  # fmt: skip
    (row,) = C.compute_claims(con, _claims(tmp_path, [PPL]), profile="cpu")
    assert row["verdict"] == NOT_LEARNED and "validation ppl 512 vs unigram" in row["setting_diff"]


def test_step0_controls_are_judged_with_their_trained_runs_record_so_holding_at_init_shows(tmp_path):
    """Controls at their own step-0 ppl (512, worse than the unigram) answering the claim as the trained runs do: the
    gate reads their trained runs' record (learned), so the pair is "holds at initialisation", not hidden behind
    "not learned" (had a control been judged by its own ppl, the pair would stay "reproduced")."""
    con = _db()
    _lm_pair(con, [33.0, 33.0, 33.0])
    for pe in ("pope", "rope"):
        for s in range(3):
            rid = f"{pe}{s}-step0"
            _lm(con, rid, pe, s, 512.0, ckpt=f"ck/{pe}{s}/step0", control="step0", control_of="..", tokens=0)
            _ppl(con, rid, (30.0 if pe == "pope" else 40.0) + s)
    (row,) = C.compute_claims(con, _claims(tmp_path, [PPL]), profile="cpu")
    assert row["verdict"] == AT_INIT, row["setting_diff"]
    assert "its step-0 controls are reproduced" in row["setting_diff"]


# --------------------------------------------------------------------------- convergence, one-sided
POPE, ROPE = [0.93, 0.95, 0.97], [0.60, 0.62, 0.61]  # in-distribution accuracy; gap 0.95 - 0.61 = 0.34
GAP_SLOPE = 0.34 / (0.25 * 1000)  # per step: 0.25 of 1000 steps at this slope gains exactly the gap (0.00136)


def _pair(con, pope=POPE, rope=ROPE):
    for pe, vals in (("pope", pope), ("rope", rope)):
        for s, v in enumerate(vals):
            _run(con, f"{pe}{s}", pe, s)
            _metric(con, f"{pe}{s}", II, v, 0.01)


def _curve(con, ck, points):
    """``points``: (step, loss, accuracy or None); a curve without accuracies is written as an older one was."""
    for step, loss, acc in points:
        if acc is None:
            con.execute("INSERT INTO training_curves (checkpoint, step, val_loss) VALUES (?, ?, ?)", [ck, step, loss])
            continue
        con.execute("INSERT INTO training_curves (checkpoint, step, val_loss, val_exact_match) VALUES (?, ?, ?, ?)",
                    [ck, step, loss, acc])  # fmt: skip


def _linear(final: float, per_step: float, steps=range(100, 1001, 100), loss=0.5):
    """Accuracy rising by ``per_step`` to ``final`` at step 1000, the loss flat."""
    return [(st, loss, final - per_step * (1000 - st)) for st in steps]


def _curves(con, rope_slope=0.0, pope_slope=0.0, pope=POPE, rope=ROPE, steps=range(100, 1001, 100)):
    for s in range(3):
        _curve(con, f"ck/pope{s}", _linear(pope[s], pope_slope, steps))
        _curve(con, f"ck/rope{s}", _linear(rope[s], rope_slope, steps))


@pytest.mark.parametrize(("factor", "blocked"), [(1.05, True), (0.95, False)])
def test_the_trailing_side_blocks_only_when_its_slope_reaches_the_gap(tmp_path, factor, blocked):
    """rope (behind by 0.34) rising at 1.05x the slope that gains 0.34 in 250 steps (0.25 of its 1000): blocked as
    "baseline under-trained", naming side, slope and gap; at 0.95x: decided."""
    con = _db()
    _pair(con)
    _curves(con, rope_slope=factor * GAP_SLOPE)
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]), profile="cpu")
    why = row["setting_diff"]
    if not blocked:
        assert row["verdict"] == "reproduced" and "under-trained" not in why, why
        return
    assert row["verdict"] == NOT_LEARNED and row["p_adjusted"] is None, why
    assert "baseline under-trained (b behind" in why, why
    assert f"rising {factor * GAP_SLOPE * 1000:+.3g} per 1,000 steps" in why, why  # +1.43 per 1,000 steps
    assert f"{factor * 0.34:+.3f} over 0.25 of its steps" in why and "gap a − b = +0.340" in why, why


def test_the_leading_side_still_improving_never_blocks(tmp_path):
    """pope, ahead, rising steeply (0.01 a step): it only widens its lead; the pair is decided."""
    con = _db()
    _pair(con)
    _curves(con, pope_slope=0.0003)
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]), profile="cpu")
    assert row["verdict"] == "reproduced" and "under-trained" not in row["setting_diff"], row["setting_diff"]


def test_a_run_at_the_learned_ceiling_is_never_still_improving(tmp_path):
    """rope at 0.990-0.992, rising 0.001 a step (0.25 over the horizon, far above its 0.008 gap): at >= 0.99 it has
    learned the task, so no block (issue 67: CoPE selective copy seed 2 at 1.00 was flagged)."""
    pope, rope = [0.999, 0.998, 0.999], [0.990, 0.991, 0.992]
    con = _db()
    _pair(con, pope, rope)
    _curves(con, rope_slope=0.001, pope=pope, rope=rope)
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]), profile="cpu")
    assert row["verdict"] != NOT_LEARNED and "under-trained" not in row["setting_diff"], row["setting_diff"]


@pytest.mark.parametrize(("steps", "judged"), [((400, 700, 850, 1000), True), ((400, 690, 850, 1000), False)])
def test_three_validations_in_the_last_30_percent_are_needed(tmp_path, steps, judged):
    """Validations at 700, 850, 1000 (700 = 70 % of 1000: in the window): three, judged and blocked by a slope twice
    the gap's; at 690, 850, 1000: two there, judged on their last two validations' losses instead (flat here: the
    linear curves move the accuracy, not the loss), said in a note, and no block."""
    con = _db()
    _pair(con)
    _curves(con, rope_slope=2 * GAP_SLOPE, steps=steps)
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]), profile="cpu")
    why = row["setting_diff"]
    if judged:
        assert row["verdict"] == NOT_LEARNED and "baseline under-trained" in why, why
    else:
        assert row["verdict"] == "reproduced", why
        assert "judged on each run's last two validations at most" in why, why
        assert "b seed 0: 2 validations in the last 30%" in why, why


@pytest.mark.parametrize(("last", "blocked"), [(0.40, True), (0.49, False)])
def test_a_run_with_two_validations_is_judged_on_them_never_waved_through(tmp_path, last, blocked):
    """Runs that validated only at 500 and 1000 (both published profiles): the trailing side's loss 0.50 -> 0.40
    (issue 55's learned PE on flip-flop) projects 0.0002 x 250 = 0.05 nats, 12.5 % of 0.40 > 5 %: blocked, naming
    the two validations; 0.50 -> 0.49 projects 0.5 % of 0.49: decided, with the note."""
    con = _db()
    _pair(con)
    for s in range(3):
        _curve(con, f"ck/pope{s}", [(500, 0.01, None), (1000, 0.01, None)])
        _curve(con, f"ck/rope{s}", [(500, 0.50, None), (1000, last, None)])
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]), profile="cpu")
    why = row["setting_diff"]
    if blocked:
        assert row["verdict"] == NOT_LEARNED and "baseline under-trained (b behind" in why, why
        assert "3 of its 3 runs judged on their last two validations only" in why, why
        assert f"{(0.50 - last) / 500 * 250 / last:.1%} of its loss" in why and "gap a − b = +0.340" in why, why
    else:
        assert row["verdict"] == "reproduced" and "under-trained" not in why, why
        assert "last two validations at most" in why, why


@pytest.mark.parametrize(("factor", "blocked"), [(1.05, True), (0.95, False)])
def test_a_curve_of_losses_only_is_judged_relative_to_the_loss(tmp_path, factor, blocked):
    """No accuracy in the curves (older runs): rope's loss falling to 0.44 at 1000 at a slope that, over 250 steps,
    is 1.05x (blocked) or 0.95x (decided) of 5 % of 0.44, i.e. of 0.05 * 0.44 / 250 = 8.8e-5 a step."""
    k = factor * 0.05 * 0.44 / 250
    con = _db()
    _pair(con)
    for s in range(3):
        _curve(con, f"ck/pope{s}", [(st, 0.1, None) for st in range(100, 1001, 100)])
        _curve(con, f"ck/rope{s}", [(st, 0.44 + k * (1000 - st), None) for st in range(100, 1001, 100)])
    (row,) = C.compute_claims(con, _claims(tmp_path, [{}]), profile="cpu")
    why = row["setting_diff"]
    if blocked:
        assert row["verdict"] == NOT_LEARNED and "baseline under-trained (b behind" in why, why
        assert f"{factor * 0.05:.1%} of its loss over 0.25 of its steps" in why and "losses only" in why, why
    else:
        assert row["verdict"] == "reproduced" and "under-trained" not in why, why


# --------------------------------------------------------------------------- the curves' accuracy, the profiles
def test_a_curves_accuracy_column_is_read_and_an_older_curve_stays_readable(tmp_path):
    """train_curve.csv with val_exact_match (a diagnostic's, issue 67) and without (every curve before it): both
    ingest; the column is NULL where absent or at steps without validation; an accuracy outside [0, 1] is refused."""
    from leaderboard.ingest.checkpoints import _curve_rows
    from leaderboard.ingest.values import IngestError

    old, new, bad = tmp_path / "old.csv", tmp_path / "new.csv", tmp_path / "bad.csv"
    old.write_text("step,tokens,lr,train_loss,val_loss,elapsed_s\n1,8,0.001,2.0,,0.1\n2,16,0.001,1.9,1.8,0.2\n")
    new.write_text("step,tokens,lr,train_loss,val_loss,elapsed_s,val_exact_match\n1,8,0.001,2.0,,0.1,\n"
                   "2,16,0.001,1.9,1.8,0.2,0.375000\n")  # fmt: skip
    bad.write_text("step,tokens,lr,train_loss,val_loss,elapsed_s,val_exact_match\n2,16,0.001,1.9,1.8,0.2,1.5\n")
    assert [r["val_exact_match"] for r in _curve_rows(old, "ck")] == [None, None]
    assert [r["val_exact_match"] for r in _curve_rows(new, "ck")] == [None, 0.375]
    with pytest.raises(IngestError, match="val_exact_match"):
        _curve_rows(bad, "ck")


def _validations_in_last_30(steps: int, every: int) -> int:
    """Validations (every ``every`` steps and at the end, as loop.fit) at steps >= 70 % of ``steps``."""
    at = {k for k in range(every, steps + 1, every)} | {steps}
    return sum(k >= 0.7 * steps for k in at)


def test_the_training_profiles_validate_three_times_in_the_last_30_percent():
    """Issue 67: the cpu, gpu and paper profiles (peeval/training/profiles.yaml), params/cpu.yaml's diagnostic rungs,
    cpu-claims' 4 x 32 ladder (329 steps) and params/gpu-diag.yaml's per-task budgets (smoke: plumbing, 6 steps)."""
    from peeval.training.profiles import get_profile

    got = {}
    for kind in ("train", "diag"):
        for name in ("cpu", "gpu", "paper"):
            prof = get_profile(kind, name, {})
            got[f"{kind}/{name}"] = _validations_in_last_30(prof["steps"], prof["eval_every"])
    got["train/cpu 4x32 (329 steps)"] = _validations_in_last_30(329, get_profile("train", "cpu", {})["eval_every"])
    root = C.DEFAULT_PATH.parents[2] / "params"
    for f in ("cpu.yaml", "gpu-diag.yaml"):
        for task, s in yaml.safe_load((root / f).read_text())["diagnostics"]["train"]["task_set"].items():
            got[f"{f} {task}"] = _validations_in_last_30(s["steps"], s["eval_every"])
    assert len(got) >= 13 and all(n >= 3 for n in got.values()), got
