"""Issue 57: the gpu-diag parameter file (the papers' diagnostics at the papers' model sizes, a step budget rule
written down before any run) and benchmarks/gpu_diag.sh (a dry run on the CPU, then publish of its tarball)."""

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "pipelines"))
from pipeline_params import load, render  # noqa: E402

FILE = Path(REPO) / "params" / "gpu-diag.yaml"
#: the papers' model sizes (layers, width) and the encodings each claim compares (issue 57's list)
PAPERS = {
    "indirect_indexing": ((8, 512), {"pope", "rope"}),  # PoPE table 1
    "flip_flop": ((4, 256), {"cope", "rope", "learned"}),  # CoPE table 2
    "selective_copy": ((2, 64), {"cope", "rope", "learned"}),  # CoPE table 2
    "counting": ((4, 256), {"cope", "t5", "learned"}),  # CoPE tables 3-4 (one cell of {128, 256} x {2, 4})
    "addition": ((16, 1024), {"rope", "randpe", "nope", "fire", "tape"}),  # TAPE figure 2, appendix B
}


def test_the_file_holds_the_papers_diagnostics_at_their_sizes_with_3_seeds_and_one_budget_per_task():
    _, p = load(FILE)
    d = p.diagnostics
    assert len(d.seeds) >= 3
    by_task: dict[str, dict[str, dict]] = {}
    for name, run in d.runs.items():
        by_task.setdefault(run.task, {})[run.pe] = d.run_overrides(name)
    assert set(by_task) == set(PAPERS)
    rule = FILE.read_text()
    for task, ((layers, width), pes) in PAPERS.items():
        assert set(by_task[task]) == pes, task
        settings = list(by_task[task].values())
        assert all(s == settings[0] for s in settings), f"{task}: one budget and size for every encoding"
        s = settings[0]
        assert (s["num_hidden_layers"], s["hidden_size"]) == (layers, width) if "hidden_size" in s else True
        # the budget is the one the rule in the file's header derived for this task
        derived = re.search(rf"^#\s+{task}\s.*->\s*(\d+)", rule, re.M)
        assert derived and int(derived.group(1)) == s["steps"], task
        assert s["save_every"] == s["steps"] and s["warmup_steps"] == s["steps"] // 10
        assert s["eval_every"] == s["steps"] // 10  # >= 3 validations in the last 30 % (issue 67)


def test_the_file_composes_to_the_models_it_names():
    """Through ``extends: gpu``: the gpu profile's per-task sizes reach the runs (no size silently the default)."""
    composed = yaml.safe_load(render(FILE))["diagnostics"]["train"]["task_set"]
    sizes = {t: (s.get("num_hidden_layers", 4), s.get("hidden_size", 256)) for t, s in composed.items()}
    assert sizes == {t: v[0] for t, v in PAPERS.items()}  # 4 x 256: the gpu diag profile's own model
    assert composed["counting"]["batch_size"] == 16


def test_publish_refuses_a_dry_run_and_what_is_not_a_tarball(tmp_path, capsys):
    from leaderboard import publish

    manifest = tmp_path / "gpu_diag.json"
    manifest.write_text(json.dumps({"dry_run_cpu": True, "device": "cpu"}))
    tarball = tmp_path / "t.tar.gz"
    with tarfile.open(tarball, "w:gz") as tf:
        tf.add(manifest, "gpu_diag.json")
    (tmp_path / "junk.tar.gz").write_text("not a tarball")
    for path, says in ((tarball, "a --cpu dry run"), (tmp_path / "junk.tar.gz", "not a readable tar"),
                       (tmp_path / "none.tar.gz", "no such file")):  # fmt: skip
        out = tmp_path / "published"
        assert publish.main(["--profile", "gpu-diag", "--machine", "x", "--tarball", str(path), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
        assert not (out / "gpu-diag").exists()


@pytest.mark.slow
def test_the_dry_run_end_to_end_and_its_tarball_published(tmp_path):
    """benchmarks/gpu_diag.sh --cpu (also run by .ci/run): at most 8 files, a tarball without weights whose
    results publish (once it is not marked a dry run) with the device, torch and commit in SOURCE.json."""
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PY": sys.executable}
    proc = subprocess.run(["bash", os.path.join(REPO, "benchmarks", "gpu_diag.sh"), "--cpu"], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and "gpu-diag.tar.gz" in files
    with tarfile.open(out / "gpu-diag.tar.gz") as tf:
        names = tf.getnames()
    assert not [n for n in names if n.endswith((".safetensors", ".pt", ".bin", ".pth"))]
    assert {"gpu_diag.json"} <= set(names) and any(n.endswith("train_summary.json") for n in names)
    assert sum(n.endswith("/results.json") for n in names) == 2
    manifest = json.loads((out / "gpu_diag.json").read_text())
    assert [r["status"] for r in manifest["runs"]] == ["ok", "ok"] and manifest["dry_run_cpu"] is True
    # as a device's tarball would be
    unpacked = tmp_path / "unpacked"
    with tarfile.open(out / "gpu-diag.tar.gz") as tf:
        tf.extractall(unpacked, filter="data")
    (unpacked / "gpu_diag.json").write_text(json.dumps({**manifest, "dry_run_cpu": False}))
    device_tarball = tmp_path / "device.tar.gz"
    with tarfile.open(device_tarball, "w:gz") as tf:
        for n in names:
            tf.add(unpacked / n, n)
    from leaderboard import publish

    published = tmp_path / "published"
    assert publish.main(["--profile", "gpu-diag", "--machine", "1x test", "--tarball", str(device_tarball),
                         "--out", str(published)]) == 0  # fmt: skip
    source = json.loads((published / "gpu-diag" / "SOURCE.json").read_text())
    assert source["runs"] == 2 and source["run"]["torch"] == manifest["torch"]
    assert source["run"]["device"] == "cpu" and source["run"]["commit"] == manifest["commit"]


def test_the_window_skips_what_it_cannot_start_and_kills_what_it_cannot_finish(tmp_path, monkeypatch):
    """``--window_s``: a step not started by the window's end is not run, one running then is killed; both are
    reported as such (never as a failure of the run), so the finished runs are packed in time."""
    import time

    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    import gpu_diag

    assert gpu_diag.run_one(tmp_path, "rope-flip_flop", 0, 1, stop_at=time.monotonic() - 1)["status"] == (
        "not run: the window ended before its train"
    )
    slow = tmp_path / "pipelines"
    slow.mkdir()
    (slow / "diagnostics.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setattr(gpu_diag, "REPO", tmp_path)
    t = time.monotonic()
    row = gpu_diag.run_one(tmp_path, "rope-flip_flop", 0, 1, stop_at=time.monotonic() + 1.5)
    assert row["status"] == "train killed at the window's end" and time.monotonic() - t < 20
    for bad in ("0", "-5", "nan", "inf"):
        assert gpu_diag.main(["--out", str(tmp_path / "o"), "--window_s", bad]) == 2, bad
    assert not (tmp_path / "o").exists()  # nothing written


def test_diagnostics_train_compile_is_validated_where_it_enters():
    from pipeline_params import DiagTrain

    assert DiagTrain(compile="off").compile == "off" and DiagTrain().compile == "auto"
    with pytest.raises(ValueError, match="allowed auto, on, off"):
        DiagTrain(compile="fast")
    _, p = load(FILE)
    assert p.diagnostics.train.compile == "off"  # gpu-diag's runs are too short to pay a compile (the file's header)


def test_out_a_file_and_runs_naming_nothing_are_refused_in_one_line(tmp_path, capsys):
    """Issue 66: ``--out`` naming a file was a NotADirectoryError traceback; ``--runs`` with no names ran every
    run. Both: one line naming the option, exit 2, nothing written."""
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    import gpu_diag

    afile = tmp_path / "a-file"
    afile.write_text("mine\n")
    capsys.readouterr()
    assert gpu_diag.main(["--out", str(afile), "--cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpu_diag: --out ") and "not a folder" in err and "\n" not in err
    assert afile.read_text() == "mine\n"
    assert gpu_diag.main(["--out", str(tmp_path / "o"), "--cpu", "--runs"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpu_diag: --runs") and "\n" not in err
    assert not (tmp_path / "o").exists()


def test_the_tarball_never_packs_an_eval_lock(tmp_path):
    """Issue 66: a killed evaluation (``--window_s``) leaves ``.peeval-eval.lock`` in its results folder; the
    tarball packs the results, never the stale lock."""
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    import gpu_diag

    run = tmp_path / "work" / "results" / "diag" / "rope-flip_flop-s0"
    run.mkdir(parents=True)
    (run / ".peeval-eval.lock").write_text("12345\n")
    (run / "scores.csv").write_text("a,b\n")
    out = tmp_path / "out"
    out.mkdir()
    with tarfile.open(gpu_diag.pack(tmp_path / "work", out, {"runs": []})) as tf:
        names = tf.getnames()
    assert "results/diag/rope-flip_flop-s0/scores.csv" in names and "gpu_diag.json" in names
    assert not any(n.endswith(".peeval-eval.lock") for n in names)
