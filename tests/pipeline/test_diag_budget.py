"""Issue 64 items 2-3: the gpu-diag budget rule from measured step times (benchmarks/diag_budget.py) and the
per-paper window plan in params/gpu-diag.yaml, read and validated by benchmarks/gpu_diag.py. The expected
numbers are worked by hand from the rule in diag_budget's docstring."""

import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "benchmarks"))
sys.path.insert(0, os.path.join(REPO, "pipelines"))
import diag_budget as db  # noqa: E402
import gpu_diag  # noqa: E402
from pipeline_params import render  # noqa: E402

COPE_RUNS = {
    f"{pe}-{t}": {"pe": pe, "task": t} for t in ("flip_flop", "selective_copy") for pe in ("cope", "rope", "learned")
}
COPE_RUNS |= {f"{pe}-counting": {"pe": pe, "task": "counting"} for pe in ("cope", "t5", "learned")}
TAPE_RUNS = {f"{pe}-addition": {"pe": pe, "task": "addition"} for pe in ("rope", "randpe", "nope", "fire", "tape")}


def windows(**papers):
    return {"jobs": 2, "train_s": 100, "tables": ["t.json"], "papers": papers}


def row(task, a, device="X", jobs=2, pe="cope"):
    return {"task": task, "pe": pe, "device": device, "jobs": jobs, "aggregate_steps_per_s": a}


def test_the_rule_by_hand():
    """J = 2, train_s = 100. flip_flop 100 steps at 4 steps/s (2 at once): 100 x 2 / 4 = 50 s a run;
    selective_copy 200 steps at 8: 50 s; counting `rule` at 6 with R = 3 runs: floor(100 x 6 / (2 x ceil(3/2))
    / 50) x 50 = 150 steps, 150 x 2 / 6 = 50 s. Nine 50-s runs, two per 100-s slot, two slots: 4 a window -> 3."""
    w = windows(cope={"steps": {"flip_flop": 100, "selective_copy": 200, "counting": "rule"}, "windows": 3})
    rows = [row("flip_flop", 4), row("flip_flop", 9, pe="rope"), row("selective_copy", 8), row("counting", 6),
            row("counting", 1, device="Y"), row("flip_flop", 1, jobs=1)]  # fmt: skip
    got = db.plan("cope", db.check_windows(w, COPE_RUNS), COPE_RUNS, [0], rows, "X")
    assert got["steps"] == {"flip_flop": 100, "selective_copy": 200, "counting": 150}
    assert got["seconds"] == {"flip_flop": 50, "selective_copy": 50, "counting": 50}  # the slowest encoding's 4
    assert got["windows"] == 3 and [len(j) for j in got["jobs"]] == [4, 4, 1]
    assert sorted(j for js in got["jobs"] for j in js) == sorted((r, 0) for r in COPE_RUNS)
    # TAPE's addition: 15 runs (5 x 3 seeds) at 40 steps/s with 2 at once: floor(100 x 40 / (2 x 8) / 50) x 50 =
    # 250 steps (12.5 % of 20k), 250 x 2 / 40 = 12.5 s a run, 8 of them in each of the 2 slots: 1 window
    t = windows(tape={"steps": {"addition": "rule"}, "paper_steps": {"addition": 20000}, "windows": 1})
    got = db.plan("tape", t, TAPE_RUNS, [0, 1, 2], [row("addition", 40)], "X")
    assert got["steps"] == {"addition": 250} and got["windows"] == 1 and got["fraction"] == {"addition": 0.0125}


def test_no_measured_row_no_plan_and_a_run_longer_than_a_window_refused():
    w = windows(cope={"steps": {"flip_flop": 100, "selective_copy": 200, "counting": "rule"}, "windows": None})
    rows = [row("flip_flop", 4), row("selective_copy", 8)]  # counting never measured on X
    with pytest.raises(db.PlanError, match="no measured step time for counting on X with 2 runs at once"):
        db.plan("cope", w, COPE_RUNS, [0], rows, "X")
    with pytest.raises(db.PlanError, match="no measured step time for flip_flop on Y"):
        db.plan("cope", w, COPE_RUNS, [0], rows + [row("counting", 6)], "Y")
    w["papers"]["cope"]["steps"]["flip_flop"] = 1000  # 1000 x 2 / 4 = 500 s > 100
    with pytest.raises(db.PlanError, match="takes 500 s .* half-trained"):
        db.plan("cope", w, COPE_RUNS, [0], rows + [row("counting", 6)], "X")


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"jobs": 0}, "windows.jobs: 0: allowed an integer >= 1"),
        ({"train_s": "fast"}, "windows.train_s: 'fast'"),
        ({"tables": "t.json"}, "windows.tables"),
        ({"colour": 1}, "windows.colour: unknown"),
        ({"papers": {"alibi": {}}}, "windows.papers"),
        ({"papers": {"tape": {"steps": {"addition": 0}}}}, "windows.papers.tape.steps.addition: 0"),
        ({"papers": {"tape": {"steps": {"addition": "rule"}, "windows": 1.5}}}, "windows.papers.tape.windows: 1.5"),
        ({"papers": {"tape": {"steps": {}}}}, "windows.papers.tape.steps: {}: allowed one entry per task"),
    ],
)
def test_bad_plan_values_are_one_line_naming_the_key(change, says):
    w = {**windows(tape={"steps": {"addition": "rule"}, "windows": None}), **change}
    with pytest.raises(db.PlanError) as e:
        db.check_windows(w, TAPE_RUNS)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_written_window_count_that_is_not_the_rules_is_refused(tmp_path):
    (tmp_path / "t.json").write_text(json.dumps({"rows": [row("addition", 40)]}))
    t = windows(tape={"steps": {"addition": "rule"}, "windows": 2})
    with pytest.raises(db.PlanError, match=r"windows.papers.tape.windows: 2 written, the rule gives 1 .* write 1"):
        db.checked_plan("tape", t, TAPE_RUNS, [0, 1, 2], tmp_path, "X")
    t["papers"]["tape"]["windows"] = 1
    assert db.checked_plan("tape", t, TAPE_RUNS, [0, 1, 2], tmp_path, "X")["steps"] == {"addition": 250}
    with pytest.raises(db.PlanError, match="t.json: not a readable step-time table"):
        db.checked_plan("tape", t, TAPE_RUNS, [0], tmp_path / "none", "X")


def test_the_files_plan_is_valid_and_refuses_an_unmeasured_gpu():
    """params/gpu-diag.yaml: every paper's plan is read and valid; CoPE's and PoPE's budgets are the papers'; no
    GPU row is in its tables yet, so a device window is refused, never planned from an estimate."""
    p = yaml.safe_load(render(Path(REPO) / "params" / "gpu-diag.yaml"))
    w, d = db.check_windows(p["windows"], p["diagnostics"]["runs"]), p["diagnostics"]
    assert set(w["papers"]) == {"cope", "pope", "tape"}
    assert w["papers"]["cope"]["steps"] == {"flip_flop": 10000, "selective_copy": 100000, "counting": "rule"}
    assert w["papers"]["pope"]["steps"] == {"indirect_indexing": 100000}
    assert w["papers"]["tape"]["paper_steps"] == {"addition": 20000}
    rows = db.load_rows(w["tables"], Path(REPO))
    assert rows and all(r["device"] == "cpu" for r in rows)
    for paper in w["papers"]:
        with pytest.raises(db.PlanError, match="no measured step time .* on NVIDIA H200"):
            db.checked_plan(paper, w, d["runs"], d["seeds"], Path(REPO), "NVIDIA H200")
    assert p["diagnostics"]["train"]["fast_step"] is True


def test_gpu_diag_refuses_a_bad_plan_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    text = render(Path(REPO) / "params" / "gpu-diag.yaml")
    p = yaml.safe_load(text)
    p["windows"]["train_s"] = -1
    monkeypatch.setattr(gpu_diag, "render_profile", lambda: yaml.safe_dump(p))
    out = tmp_path / "o"
    assert gpu_diag.main(["--out", str(out), "--cpu", "--runs", "tape"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpu_diag: --runs tape: params/gpu-diag.yaml windows.train_s: -1") and "\n" not in err
    assert not out.exists()
    assert gpu_diag.main(["--out", str(out), "--cpu", "--window", "2"]) == 2
    assert "allowed only with --runs" in capsys.readouterr().err and not out.exists()


def test_the_cpu_plan_from_the_measured_cpu_table(capsys):
    """``--cpu --runs cope --plan``: the rule run on this CPU's measured rows at the dry run's J (2), printed or
    refused. In the committed CPU table flip-flop runs 20.231 steps/s with 2 at once: CoPE's 10,000 steps take
    10000 x 2 / 20.231 = 989 s, more than train_s = 420: refused, never cut. TAPE: no addition row on the CPU."""
    assert gpu_diag.main(["--cpu", "--runs", "cope", "--plan"]) == 2
    err = capsys.readouterr().err.strip()
    assert "a flip_flop run of 10000 steps takes 989 s" in err and "half-trained" in err and "\n" not in err
    assert gpu_diag.main(["--cpu", "--runs", "tape", "--plan"]) == 2
    assert "no measured step time for addition on cpu with 2 runs at once" in capsys.readouterr().err


def test_a_papers_window_trains_the_plans_steps_on_the_fast_step():
    p = yaml.safe_load(render(Path(REPO) / "params" / "gpu-diag.yaml"))
    p["diagnostics"]["train"]["fast_step"] = False
    got = gpu_diag.with_plan(p, {"steps": {"addition": 250, "counting": 1200}})["diagnostics"]["train"]
    assert got["fast_step"] is True
    assert {k: got["task_set"]["addition"][k] for k in ("steps", "warmup_steps", "eval_every", "save_every")} == {
        "steps": 250,
        "warmup_steps": 25,
        "eval_every": 25,
        "save_every": 250,
    }
    assert got["task_set"]["counting"]["steps"] == 1200 and got["task_set"]["counting"]["batch_size"] == 16


def test_the_measuring_script_refuses_in_one_line_and_writes_nothing(tmp_path, capsys):
    import diag_step_time

    mine = tmp_path / "mine.json"
    mine.write_text("{}")
    for argv, says in ((["--out", str(mine), "--dry-run"], "exists (never overwritten"),
                       (["--out", str(tmp_path / "n.json"), "--tasks", "sorting"], "--tasks sorting: allowed"),
                       (["--out", str(tmp_path / "n.json"), "--jobs", "0"], "--jobs [0]: allowed")):  # fmt: skip
        assert diag_step_time.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and "\n" not in err, err
    assert mine.read_text() == "{}" and not (tmp_path / "n.json").exists()
