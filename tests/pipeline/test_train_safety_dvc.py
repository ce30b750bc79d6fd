"""Issue 16 item 2: SIGKILL `dvc repro` during a train stage, run it again: training resumes from the
last saved step (the state lives outside the stage's outputs, which DVC deletes before a rerun) and
the final weights equal an uninterrupted run's. In a copy of the repository on the smoke profile."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO
from helpers.data_mirror import BIN, needs_mirror, offline_env, sh
from safetensors.torch import load_file

ENV = offline_env()
ENV.pop("PYTHONPATH", None)  # the copy's own peeval (pipelines/common.py puts the copy first anyway)


@pytest.mark.slow
@needs_mirror("local", "gutenberg-train")
def test_killed_dvc_repro_resumes_and_equals_uninterrupted(tmp_path, data_mirror):
    work = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, files):
        if (Path(REPO) / rel).is_file():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(REPO) / rel, work / rel)
    sh([str(BIN / "dvc"), "config", "--local", "core.no_scm", "true"], work, ENV)
    sh([sys.executable, "pipelines/use_profile.py", "smoke"], work, ENV)
    params = work / "params.yaml"
    p = yaml.safe_load(params.read_text())
    p["data"]["root"] = str(data_mirror.resolve())
    p["train"]["set"] = {"steps": 400, "save_every": 25, "eval_every": 200}  # long enough to be killed mid-way
    params.write_text(yaml.safe_dump(p, sort_keys=False))
    sh([str(BIN / "dvc"), "repro", "tokenizer"], work, ENV)  # upstream stages, not timed

    state = work / ".resume" / "train" / "rope" / "train_state.pt"
    out = work / "checkpoints" / "pretrain" / "rope"
    proc = subprocess.Popen([str(BIN / "dvc"), "repro", "train@rope"], cwd=work, env=ENV, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    t0 = time.time()
    while not state.exists() and proc.poll() is None and time.time() - t0 < 600:
        time.sleep(0.02)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # dvc and the stage's python: the whole process group
    proc.wait()
    assert state.exists(), "no resume state outside the stage's outputs after the kill"
    assert not (out / "model.safetensors").exists(), "the stage finished before the kill"
    saved = torch.load(state, weights_only=False)["step"]
    assert 25 <= saved < 400

    log = sh([str(BIN / "dvc"), "repro", "train@rope"], work, ENV)
    assert "Running stage 'train@rope'" in log
    assert f"resuming from step {saved} of" in log, log[-3000:]
    assert not state.exists()
    resumed = load_file(str(out / "model.safetensors"))
    resumed_curve = (out / "train_curve.csv").read_text()

    log = sh([str(BIN / "dvc"), "repro", "--force", "--single-item", "train@rope"], work, ENV)  # uninterrupted
    assert "resuming" not in log
    fresh = load_file(str(out / "model.safetensors"))
    assert resumed.keys() == fresh.keys()
    for k in fresh:
        assert torch.equal(resumed[k], fresh[k]), k

    def strip(text):  # every column but elapsed_s
        return [line.rsplit(",", 1)[0] for line in text.splitlines()]

    assert strip(resumed_curve) == strip((out / "train_curve.csv").read_text())
    assert len(resumed_curve.splitlines()) == 401
