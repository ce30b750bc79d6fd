"""A diagnostics run carries its task generator's parameters (issue 28): ``task_params: {n_vars: 3}`` reaches
the run's training and its evaluation's --metadata, so CoPE table 3's 3- and 5-variable rows get runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

from pipeline_params import load  # noqa: E402

from peeval.records import split_diag_task  # noqa: E402
from peeval.training.profiles import get_profile  # noqa: E402


def _eval_stage():
    spec = importlib.util.spec_from_file_location("eval_stage", REPO / "pipelines" / "eval.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    return stage


def test_every_counting_claim_variant_has_a_run_in_the_claims_profile():
    """Every variant of a claim that names run_params (CoPE tables 3-4: n_vars 1, 3, 5) has a cpu-claims run
    of its encoding and task trained with those parameters (an absent n_vars is 1, as the claims read it)."""
    claims = yaml.safe_load((REPO / "leaderboard" / "claims" / "claims.yaml").read_text())["claims"]
    _, p = load(REPO / "params" / "cpu-claims.yaml")
    # the diagnostic claims that name run_params (adapter claims pin their base with it: not these)
    claims = [c for c in claims if c.get("run_params") and split_diag_task(c["task"])]
    task_of = {c["id"]: split_diag_task(c["task"])[0] for c in claims}
    assert {"cope-t3-counting-3var", "cope-t3-counting-5var"} <= set(task_of)
    for c in claims:
        if not c.get("run_params"):
            continue
        for name, v in c["variants"].items():
            runs = [
                r
                for r in p.diagnostics.runs
                if p.diagnostics.runs[r].pe == v["pe"]
                and p.diagnostics.runs[r].task == task_of[c["id"]]
                and {"n_vars": 1, **p.diagnostics.run_task_params(r, p.profile)}.items() >= c["run_params"].items()
            ]
            assert runs, f"{c['id']}: no cpu-claims run for variant {name} ({v['pe']}, {c['run_params']})"


def test_task_params_reach_training_and_evaluation(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "pipelines"))
    _, p = load(REPO / "params" / "cpu-claims.yaml")
    # training: the diag profile the stage builds holds the run's n_vars (on top of the counting task_set)
    overrides = p.diagnostics.run_overrides("cope-counting-5var")
    prof = get_profile("diag", p.profile, overrides)
    assert prof["task_params"] == {"n_vars": 5} and prof["steps"] == p.diagnostics.train.task_set["counting"]["steps"]
    from peeval.training.diagnostics import prepare_diagnostic

    tok, batches, _ = prepare_diagnostic("counting", {**prof, "train_examples": 4, "val_examples": 4}, seed=0)
    first = tok.convert_ids_to_tokens(batches.val["input_ids"][0].tolist())
    assert {t for t in first if t in "abcde"} == set("abcde")  # every row sets the five variables first
    # evaluation: the run's test splits are generated with the same n_vars; a run without task_params: none
    stage = _eval_stage()
    argv = stage.argv_for("diag", "cope-counting-5var", "0", p)
    assert json.loads(argv[argv.index("--metadata") + 1])["n_vars"] == 5
    argv = stage.argv_for("diag", "cope-counting", "0", p)
    assert "n_vars" not in json.loads(argv[argv.index("--metadata") + 1])
    assert p.diagnostics.run_overrides("cope-counting") == p.diagnostics.train.overrides("counting")
