"""The pipeline evaluates every run's step-0 untrained control (issue 67) with the run's very tasks: the
`eval_pretrain_step0`, `eval_diagnostics_step0` and `shift_step0` stages read ``<checkpoint>/step0`` (saved by
`peeval train`) and write ``<results>-step0`` beside the run's results (dry run: the arguments and the stage list)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from pipeline_params import render, validate

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _profile(name: str) -> dict:
    """params.yaml as `use_profile.py <name>` writes it (a file that extends another, composed)."""
    return yaml.safe_load(render(REPO / "params" / f"{name}.yaml"))


def _opts(argv: list[str]) -> dict[str, str]:
    assert argv[0] == "eval"
    return dict(zip(argv[1::2], argv[2::2], strict=True))


def test_a_controls_evaluation_is_its_runs_with_the_step0_checkpoint():
    import eval as stage

    p = validate(_profile("cpu-claims"))
    run = next(iter(p.diagnostics.runs))
    seed = str(p.diagnostics.seeds[0])
    trained, control = (_opts(stage.argv_for(k, run, seed, p)) for k in ("diag", "diag-step0"))
    ck = trained["--model_args"].split("pretrained=", 1)[1]
    assert control["--model_args"] == f"pretrained={ck}/step0"
    assert control["--output_path"] == trained["--output_path"] + "-step0"
    assert {k: v for k, v in control.items() if k not in ("--model_args", "--output_path")} == {
        k: v for k, v in trained.items() if k not in ("--model_args", "--output_path")
    }  # the same tasks, limit, metadata and seed
    enc, suite = next(iter(p.encodings)), p.eval.pretrain[0]
    trained, control = (_opts(stage.argv_for(k, enc, suite, p)) for k in ("pretrain", "pretrain-step0"))
    assert control["--model_args"] == trained["--model_args"].replace(f"pretrain/{enc}", f"pretrain/{enc}/step0")
    assert control["--output_path"] == trained["--output_path"] + "-step0" == f"results/pretrain/{enc}-step0"
    assert control["--run_name"] == trained["--run_name"] == suite  # -> results/pretrain/<encoding>-step0/<suite>
    assert control["--tasks"] == trained["--tasks"] and control.get("--limit") == trained.get("--limit")


def test_every_trained_run_has_its_control_stages(tmp_path):
    work = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, files):
        if (REPO / rel).is_file() and not rel.startswith("tests/"):
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, work / rel)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

    def dvc(*args):
        r = subprocess.run([str(BIN / "dvc"), *args], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{args}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        return r.stdout

    dvc("config", "--local", "core.no_scm", "true")
    (work / "params.yaml").write_text(yaml.safe_dump(_profile("cpu-claims"), sort_keys=False))
    stages = set(dvc("stage", "list", "--name-only").split())
    pairs = (("eval_pretrain@", "eval_pretrain_step0@"), ("eval_diagnostics@", "eval_diagnostics_step0@"),
             ("shift@", "shift_step0@"))  # fmt: skip
    for trained, control in pairs:
        mine = {s.removeprefix(trained) for s in stages if s.startswith(trained)}
        assert mine and mine == {s.removeprefix(control) for s in stages if s.startswith(control)}, control
    spec = yaml.safe_load((work / "dvc.yaml").read_text())["stages"]
    assert spec["shift_step0"]["do"]["cmd"].endswith(" step0")
    assert spec["eval_diagnostics_step0"]["outs"] == ["results/diag/${item.run}-s${item.seed}-step0"]
