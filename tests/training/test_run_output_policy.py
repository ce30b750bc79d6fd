"""Issue 66 items 2 and 7: `peeval train` / `peeval adapt` write only into a folder of their own, proven by the
manifest the writer itself left (``.peeval-manifest.json``), never judged by a name or a config, and hold a claim on
``--out`` while they run. Every refusal: exit 2, one line, nothing written."""

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.training import TEXT, save_tiny_llama
from helpers.training import TINY as _TINY

from peeval.cli import main

TINY = {**_TINY, "steps": 2, "save_every": 100}
ROOT = Path(__file__).resolve().parents[2]


def train_args(out, corpus, tok_dir, steps=2):
    sets = [f"{k}={'null' if v is None else v}" for k, v in {**TINY, "steps": steps}.items()] + [f"corpus={corpus}"]
    return ["train", "--pe", "rope", "--profile", "smoke", "--out", str(out), "--tokenizer", tok_dir] + [
        a for s in sets for a in ("--set", s)
    ]


def adapt_args(method, base, out, corpus):
    args = ["adapt", "--method", method, "--base", str(base), "--profile", "smoke", "--out", str(out)]
    return args + ["--set", f"corpus={corpus}", "--set", "max_layers=null", "--set", "steps=1"]


def files(folder: Path) -> dict:
    """Every file under ``folder`` (hidden ones too) and its sha256."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def one_line(capsys, *needles):
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and "%|" not in ln]
    assert len(err) == 1, err
    for n in needles:
        assert n in err[0], (n, err[0])


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = save_tiny_llama(tmp_path_factory.mktemp("base"), TEXT)
    (Path(d) / "README.md").write_text("# My base model\n\nHand-written notes on where these weights come from.\n")
    return Path(d)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, corpus, tok_dir):
    out = tmp_path_factory.mktemp("ck") / "rope"
    assert main(train_args(out, corpus, tok_dir)) == 0
    return out


def test_adapt_never_writes_into_its_base_model(base, corpus, tmp_path, capsys):
    """`adapt --method lora --base B --out B` wrote the adapter into B and replaced its hand-written README.md."""
    before = files(base)
    capsys.readouterr()
    for out in (base, base / "adapter"):
        assert main(adapt_args("lora", base, out, corpus)) == 2
        one_line(capsys, f"--out {out}", f"the input {base}")
        assert files(base) == before


@pytest.mark.parametrize("overwrite", [False, True])
def test_adapt_never_writes_into_a_training_checkpoint(checkpoint, base, corpus, tmp_path, capsys, overwrite):
    """`adapt --method pi --out <a peeval training checkpoint>` replaced its train_curve.csv."""
    ck = tmp_path / "ck"
    shutil.copytree(checkpoint, ck)
    before = files(ck)
    capsys.readouterr()
    assert main(adapt_args("pi", base, ck, corpus) + ["--overwrite"] * overwrite) == 2
    one_line(capsys, f"--out {ck}", "not an adapter's folder")
    assert files(ck) == before


def test_train_never_writes_into_an_export_or_another_model(checkpoint, base, corpus, tok_dir, tmp_path, capsys):
    """An export holds a config of model_type peeval: it was taken for a training run's folder, and
    `train --out EXPORT --overwrite` replaced its weights. A Llama folder (config.json, weights) is no run either."""
    exp = tmp_path / "EXP"
    assert main(["export", str(checkpoint), str(exp)]) == 0
    other = tmp_path / "llama"
    shutil.copytree(base, other)
    for folder in (exp, other):
        before = files(folder)
        capsys.readouterr()
        assert main(train_args(folder, corpus, tok_dir) + ["--overwrite"]) == 2
        one_line(capsys, f"--out {folder}", "not a training run's folder")
        assert files(folder) == before


def test_train_overwrite_replaces_only_its_own_unchanged_run(checkpoint, corpus, tok_dir, tmp_path, capsys):
    """The manifest is the proof: a finished run is replaced on --overwrite; one whose listed file a user edited,
    or one with a user's weights file dropped in, is not ours any more."""
    ck = tmp_path / "ck"
    shutil.copytree(checkpoint, ck)
    assert (ck / ".peeval-manifest.json").is_file()
    assert main(train_args(ck, corpus, tok_dir) + ["--overwrite"]) == 0
    for change in ("edited curve", "added weights"):
        if change == "edited curve":
            (ck / "train_curve.csv").write_text("step,val_loss\n0,0.1\n")
        else:
            assert main(train_args(ck, corpus, tok_dir) + ["--overwrite"]) == 2  # still the edited curve
            shutil.rmtree(ck)
            shutil.copytree(checkpoint, ck)
            (ck / "model-00002-of-00002.safetensors").write_bytes(b"mine")
        before = files(ck)
        capsys.readouterr()
        assert main(train_args(ck, corpus, tok_dir) + ["--overwrite"]) == 2, change
        one_line(capsys, f"--out {ck}", "not a training run's folder")
        assert files(ck) == before, change


def test_two_trains_into_one_folder_one_is_refused(corpus, tok_dir, tmp_path, capsys):
    """Two `peeval train --out SAME` at once both exited 0 and the folder held one of them: now the second is refused
    in one line while the first holds its claim, and the first finishes as if alone."""
    out = tmp_path / "same"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    first = subprocess.Popen(
        [sys.executable, "-m", "peeval", *train_args(out, corpus, tok_dir, steps=4000)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / ".peeval-run.lock").exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (out / ".peeval-run.lock").exists(), "the first run holds no claim on --out"
        capsys.readouterr()
        assert main(train_args(out, corpus, tok_dir)) == 2
        one_line(capsys, "--out", "being written by another process", f"pid {first.pid}")
        assert not (out / "train_summary.json").exists()
    finally:
        first.terminate()
        first.wait(60)
    # the claim of a run that no longer runs (killed) is taken over: the next run starts
    if (out / ".peeval-run.lock").exists():
        (out / ".peeval-run.lock").write_text(f"{os.uname().nodename} {2**22 + 12345}")
    assert main(train_args(out, corpus, tok_dir) + ["--overwrite"]) == 0
    assert (out / "train_summary.json").is_file() and not (out / ".peeval-run.lock").exists()
