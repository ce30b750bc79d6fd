"""``peeval eval`` end to end on a tiny checkpoint, offline: lm-eval's built-in tasks from the
mirror, hellaswag and CBT from hub-schema fixtures added to a copy of the mirror, SCROLLS,
the diagnostics and (slow) the two suites."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.checkpoints import save_tiny_checkpoint
from helpers.data_mirror import MIRROR, needs_mirror
from helpers.mirrors import write_cbt_mirror, write_hub_layout

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A tiny rope checkpoint with a byte-level BPE tokenizer trained here (no download)."""
    corpus = ["The quick brown fox jumps over the lazy dog. Question: Answer: 0123456789 the of and a to in is"]
    out = tmp_path_factory.mktemp("ckpt") / "rope"
    return save_tiny_checkpoint(out, corpus, pe="rope", vocab_size=300, max_positions=256, byte_decoder=True)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """The real mirror (linked) plus hub-schema fixtures of hellaswag and CBT."""
    root = tmp_path_factory.mktemp("mirror")
    written = {"Rowan/hellaswag", "cam-cst/cbt"}  # the fixtures' own: never link (and so overwrite) the real ones
    for org in (MIRROR / "hf").iterdir():
        if org.is_dir():
            (root / "hf" / org.name).mkdir(parents=True)
            for ds in org.iterdir():
                if f"{org.name}/{ds.name}" not in written:
                    (root / "hf" / org.name / ds.name).symlink_to(ds)
    write_hub_layout(root)
    write_cbt_mirror(root)
    return root


def peeval_eval(ckpt, mirror, tasks: str, out: Path, limit: int = 2):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PEEVAL_DATA_MIRROR": str(mirror)}  # fmt: skip
    args = [str(BIN / "peeval"), "eval", "--model", "peeval", "--model_args", f"pretrained={ckpt},max_length=1024",
            "--tasks", tasks, "--limit", str(limit), "--output_path", str(out), "--run_name", "run"]  # fmt: skip
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads((out / "run" / "results.json").read_text())["results"]


@needs_mirror("hf", "allenai", "ai2_arc")
def test_builtin_fixture_scrolls_and_diagnostic_tasks_run(ckpt, mirror, tmp_path):
    tasks = ["lambada_openai", "blimp_adjunct_island", "piqa", "arc_easy", "arc_challenge", "mmlu_anatomy",
             "hellaswag", "peeval_cbt_ne", "peeval_scrolls_quality", "peeval_diag_addition_test"]  # fmt: skip
    res = peeval_eval(ckpt, mirror, ",".join(tasks), tmp_path)
    for t in tasks:
        assert res[t]["sample_len"] == 2, t
    for t in tasks[:8]:
        assert 0.0 <= res[t]["acc,none"] <= 1.0, t
    assert 0.0 <= res["peeval_scrolls_quality"]["em,none"] <= 100.0
    assert "acc@1x1,none" in res["peeval_diag_addition_test"]


@pytest.mark.slow
@needs_mirror("hf", "allenai", "ai2_arc")
def test_zeroshot_suite_and_diagnostics_run(ckpt, mirror, tmp_path):
    res = peeval_eval(ckpt, mirror, "peeval_zeroshot,peeval_diag,peeval_scrolls_qmsum", tmp_path, 1)
    assert 0.0 <= res["peeval_zeroshot"]["acc,none"] <= 1.0
    for t in ("lambada_openai", "blimp", "peeval_cbt", "hellaswag", "piqa", "arc_easy"):
        assert 0.0 <= res[t]["acc,none"] <= 1.0, t
    assert "rouge_gm,none" in res["peeval_scrolls_qmsum"]
    assert sum(t.startswith("peeval_diag_") for t in res) == 11


@pytest.mark.slow
@needs_mirror("hf", "allenai", "ai2_arc")
def test_tape_suite_runs(ckpt, mirror, tmp_path):
    """(lm-eval refuses one task in two requested groups: run the suites separately.)"""
    res = peeval_eval(ckpt, mirror, "peeval_tape_suite", tmp_path, 1)
    for t in ("mmlu_humanities", "mmlu_social_sciences", "mmlu_stem", "mmlu_other", "arc_challenge", "arc_easy"):
        assert 0.0 <= res[t]["acc,none"] <= 1.0, t
