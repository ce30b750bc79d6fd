"""The `gpu-diag` profile in one device window (issue 57; ``benchmarks/gpu_diag.sh`` calls this).

Every ``diagnostics.runs`` entry x seed of params/gpu-diag.yaml: ``pipelines/diagnostics.py`` (train) then
``pipelines/eval.py diag`` (test and OOD splits), ``--jobs`` of them at once on the one GPU, in a scratch folder
(the repository's params.yaml, checkpoints and results are not touched; no DVC). Then at most 8 files under
``--out``: ``gpu-diag.tar.gz`` (results folders and training summaries and curves, never weights, plus
``gpu_diag.json``), ``gpu_diag.json`` (device, torch, commit, each run's status and seconds), ``params.yaml``
(what ran) and ``gpu_diag.log`` (each failed step's last lines). ``python -m leaderboard.publish --profile
gpu-diag --machine ... --tarball gpu-diag.tar.gz`` publishes the tarball.

``--runs cope|pope|tape`` (issue 64): one paper's window, planned by ``benchmarks/diag_budget.py`` from
params/gpu-diag.yaml ``windows`` and the measured step-time tables (refused, one line, without a measured row for
the device or when the file's written window count is not the rule's); ``--window N`` picks the plan's N-th
window, ``--plan`` prints the plan and writes nothing. Its runs train on the fast step
(``diagnostics.train.fast_step``) with the plan's steps.

``--cpu``: a dry run on the CPU at tiny sizes (the smoke diag profile, 4 steps, 1 seed, ``--runs`` or two runs),
which proves the script end to end in CI; its results are not a measurement.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # leaderboard (publish's path rewriting), when run as a script
PROFILE = REPO / "params" / "gpu-diag.yaml"
#: what a checkpoint folder contributes to the tarball (as leaderboard.publish): no weights
CHECKPOINT_FILES = ("train_summary.json", "train_curve.csv")
#: an evaluation's lock (peeval.evaluation.runner.EVAL_LOCK): scratch state that a killed eval leaves; never packed
EVAL_LOCK = ".peeval-eval.lock"
#: the dry run's runs when --runs names none: one CoPE task and one TAPE task, two processes at once
CPU_RUNS = ("rope-flip_flop", "tape-addition")
#: ``--runs <paper>``: one paper's planned window (benchmarks/diag_budget.py)
PAPERS = ("cope", "pope", "tape")
CPU_SIZES = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
             "num_key_value_heads": 2, "steps": 4, "warmup_steps": 1, "eval_every": 4, "save_every": 4,
             "batch_size": 8, "train_examples": 64, "val_examples": 16}  # fmt: skip


def compose(cpu: bool, runs: list[str] | None) -> dict:
    """params/gpu-diag.yaml composed (``pipeline_params.render``); ``--cpu``: tiny sizes, one seed."""
    p = yaml.safe_load(render_profile())
    d = p["diagnostics"]
    wanted = runs or (list(CPU_RUNS) if cpu else list(d["runs"]))
    unknown = sorted(set(wanted) - set(d["runs"]))
    if unknown:
        raise SystemExit(f"gpu_diag: --runs {' '.join(unknown)}: allowed {', '.join(d['runs'])}")
    d["runs"] = {k: v for k, v in d["runs"].items() if k in wanted}
    if cpu:
        p["profile"] = "smoke"
        d["seeds"] = [0]
        d["train"] = {"set": dict(CPU_SIZES), "task_set": {}, "fast_step": d["train"].get("fast_step", False)}
        d["eval"] = {**d["eval"], "n": 4, "limit": 4}
    return p


def paper_plan(paper: str, cpu: bool, device: str, jobs: int) -> dict:
    """The plan of ``paper``'s windows (diag_budget); ``--cpu``: planned from this CPU's measured rows at the
    dry run's ``jobs`` runs at once, the file's written window count not compared (it is the device's)."""
    import diag_budget as db

    p = yaml.safe_load(render_profile())
    w, d = p.get("windows"), p["diagnostics"]
    if cpu:
        db.check_windows(w, d["runs"])
        w = {**w, "jobs": jobs}
        return db.plan(paper, w, d["runs"], d["seeds"], db.load_rows(w["tables"], REPO), "cpu")
    return db.checked_plan(paper, w, d["runs"], d["seeds"], REPO, device)


def render_profile() -> str:
    sys.path.insert(0, str(REPO / "pipelines"))
    from pipeline_params import render

    return render(PROFILE)


def with_plan(params: dict, pl: dict) -> dict:
    """The plan's steps on each of its tasks (warm-up 10 %, an evaluation every tenth of the steps: >= 3 in the last
    30 % for the claims' convergence gate, issue 67; one save at the end), the fast step."""
    d = params["diagnostics"]
    for task, n in pl["steps"].items():
        d["train"]["task_set"].setdefault(task, {}).update(
            steps=n, warmup_steps=n // 10, eval_every=max(1, n // 10), save_every=n
        )
    d["train"]["fast_step"] = True
    return params


def device_info() -> dict:
    import torch

    cuda = torch.cuda.is_available()
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip() != ""  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = os.environ.get("PEEVAL_COMMIT", "unknown"), None  # a copy without .git: say so
    return {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__, "commit": commit,
            "commit_dirty": dirty}  # fmt: skip


def run_one(work: Path, run: str, seed: int, threads: int, stop_at: float | None = None) -> dict:
    """Train, then evaluate, one run x seed; the status and each step's seconds (a failure keeps its log).
    ``stop_at`` (a ``time.monotonic()``): a step not started by then is skipped, one still running then is
    killed, so that the window always ends with the results of the runs that finished."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TORCHINDUCTOR_CACHE_DIR": str(work / ".cache" / "inductor"), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    row: dict = {"run": run, "seed": seed}
    for step, cmd in (("train", ["diagnostics.py", run, str(seed)]), ("eval", ["eval.py", "diag", run, str(seed)])):
        if stop_at is not None and time.monotonic() >= stop_at:
            row["status"] = f"not run: the window ended before its {step}"
            row["log_tail"] = []
            return row
        log = work / "logs" / f"{run}-s{seed}.{step}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        with open(log, "w") as f:
            proc = subprocess.Popen([sys.executable, str(REPO / "pipelines" / cmd[0]), *cmd[1:]], cwd=work, env=env,
                                    stdout=f, stderr=subprocess.STDOUT)  # fmt: skip
            try:
                rc = proc.wait(None if stop_at is None else max(1.0, stop_at - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = None
        row[f"{step}_s"] = round(time.perf_counter() - t, 1)
        if rc != 0:
            row["status"] = f"{step} killed at the window's end" if rc is None else f"{step} failed (exit {rc})"
            row["log_tail"] = log.read_text(errors="replace").splitlines()[-15:]
            return row
    row["status"] = "ok"
    return row


def relative_checkpoints(results_json: Path, work: Path) -> None:
    """A results.json's checkpoint paths relative to the scratch folder (the device's absolute paths mean
    nothing where it is published; relative, they find the published summaries)."""
    from leaderboard.publish import _relative_paths

    results_json.write_text(_relative_paths(results_json, work.resolve()), encoding="utf-8")


def pack(work: Path, out: Path, manifest: dict) -> Path:
    """gpu-diag.tar.gz: results/diag/*, checkpoints/diag/*/{summary, curve}, gpu_diag.json."""
    (work / "gpu_diag.json").write_text(json.dumps(manifest, indent=1) + "\n")
    tarball = out / "gpu-diag.tar.gz"
    with tarfile.open(tarball, "w:gz") as tf:
        for d in sorted((work / "results" / "diag").glob("*")):
            for f in sorted(d.rglob("*")):
                if f.name == "results.json":
                    relative_checkpoints(f, work)
                if f.is_file() and f.name != EVAL_LOCK:
                    tf.add(f, f.relative_to(work).as_posix())
        for d in sorted((work / "checkpoints" / "diag").glob("*")):
            for name in CHECKPOINT_FILES:
                if (d / name).is_file():
                    tf.add(d / name, (d / name).relative_to(work).as_posix())
        tf.add(work / "gpu_diag.json", "gpu_diag.json")
    return tarball


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/gpu_diag.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="folder for the (at most 8) output files")
    ap.add_argument("--jobs", type=int, default=None, help="runs at once (default: 8 on CUDA, 2 with --cpu)")
    ap.add_argument("--cpu", action="store_true", help="a dry run on the CPU at tiny sizes")
    ap.add_argument(
        "--runs",
        nargs="*",
        default=None,
        help="only these diagnostics.runs entries, or one paper's planned window: cope, pope or tape",
    )
    ap.add_argument("--window", type=int, default=1, help="with --runs <paper>: which of its planned windows")
    ap.add_argument("--plan", action="store_true", help="with --runs <paper>: print the plan, write nothing")
    ap.add_argument(
        "--window_s",
        type=float,
        default=None,
        help="seconds after which no step starts and running "
        "ones are killed, so that the results of the finished runs are packed in time (default: none)",
    )
    a = ap.parse_args(argv)
    jobs = a.jobs if a.jobs is not None else (2 if a.cpu else 8)
    if jobs < 1:
        print(f"gpu_diag: --jobs {jobs}: allowed an integer >= 1", file=sys.stderr)
        return 2
    if a.window_s is not None and not 0 < a.window_s < float("inf"):
        print(f"gpu_diag: --window_s {a.window_s}: allowed a finite number of seconds > 0", file=sys.stderr)
        return 2
    if a.runs is not None and not a.runs:
        print("gpu_diag: --runs: name at least one diagnostics.runs entry (omit --runs for every run)", file=sys.stderr)
        return 2
    paper = a.runs[0] if a.runs and len(a.runs) == 1 and a.runs[0] in PAPERS else None
    if (a.plan or a.window != 1) and paper is None:
        print(f"gpu_diag: --plan/--window: allowed only with --runs {'|'.join(PAPERS)}", file=sys.stderr)
        return 2
    if a.out is None and not a.plan:
        print("gpu_diag: --out: required (an empty or new folder)", file=sys.stderr)
        return 2
    info = device_info()
    if not a.cpu and info["device"] == "cpu":
        print("gpu_diag: no CUDA device (use --cpu for the dry run)", file=sys.stderr)
        return 2
    pl = None
    if paper is not None:
        import diag_budget

        try:
            pl = paper_plan(paper, a.cpu, info["device"], jobs)
        except diag_budget.PlanError as e:
            print(f"gpu_diag: --runs {paper}: {e}", file=sys.stderr)
            return 2
        if a.plan:
            print(json.dumps({"paper": paper, "device": "cpu" if a.cpu else info["device"], **pl}, indent=1))
            return 0
        if not 1 <= a.window <= pl["windows"]:
            print(f"gpu_diag: --window {a.window}: allowed 1 to {pl['windows']} ({paper}'s planned windows)",
                  file=sys.stderr)  # fmt: skip
            return 2
        planned_jobs = yaml.safe_load(render_profile())["windows"]["jobs"]
        if not a.cpu and a.jobs is not None and a.jobs != planned_jobs:
            print(f"gpu_diag: --jobs {a.jobs}: allowed {planned_jobs} with --runs {paper} (the runs at once its "
                  "step times were measured with, params/gpu-diag.yaml windows.jobs)", file=sys.stderr)  # fmt: skip
            return 2
        jobs = jobs if a.cpu else planned_jobs
    if a.out.exists() and not a.out.is_dir():
        print(f"gpu_diag: --out {a.out}: not a folder (allowed: an empty or new folder)", file=sys.stderr)
        return 2
    if a.out.exists() and any(a.out.iterdir()):
        print(f"gpu_diag: --out {a.out}: not empty (never overwritten: name an empty or new folder)", file=sys.stderr)
        return 2
    if pl is not None:
        window = [tuple(j) for j in pl["jobs"][a.window - 1]]
        if a.cpu:  # the dry run: seed 0's runs of the window (if it has any)
            window = [j for j in window if j[1] == 0] or window
        params = compose(a.cpu, sorted({r for r, _ in window}))
        if not a.cpu:
            with_plan(params, pl)
    else:
        params = compose(a.cpu, a.runs)
        window = None
    a.out.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    stop_at = None if a.window_s is None else time.monotonic() + a.window_s
    with tempfile.TemporaryDirectory(prefix="gpu-diag.") as tmp:
        work = Path(tmp)
        text = yaml.safe_dump(params, sort_keys=False, default_flow_style=None, width=120)
        (work / "params.yaml").write_text(text)
        (a.out / "params.yaml").write_text(text)
        d = params["diagnostics"]
        # the largest models first, so that the last wave is short ones
        order = {"addition": 0, "indirect_indexing": 1}
        jobs_list = sorted(
            window or ((r, s) for r in d["runs"] for s in d["seeds"]),
            key=lambda j: order.get(d["runs"][j[0]]["task"], 2),
        )
        threads = max(1, (os.cpu_count() or 1) // jobs)
        print(f"gpu_diag: {len(jobs_list)} runs, {jobs} at once, on {info['device']} (torch {info['torch']})",
              flush=True)  # fmt: skip
        with ThreadPoolExecutor(jobs) as pool:
            rows = list(pool.map(lambda j: run_one(work, j[0], j[1], threads, stop_at), jobs_list))
        for r in rows:
            print(f"  {r['run']} seed {r['seed']}: {r['status']} (train {r.get('train_s')} s, eval "
                  f"{r.get('eval_s', '-')} s)", flush=True)  # fmt: skip
        manifest = {**info, "profile": "gpu-diag", "dry_run_cpu": a.cpu, "jobs": jobs, "started": started,
                    "wall_s": round(time.perf_counter() - t0, 1), "window_s": a.window_s,
                    "paper": paper, "window": a.window if paper else None, "plan": pl,
                    "runs": [{k: v for k, v in r.items() if k != "log_tail"} for r in rows]}  # fmt: skip
        pack(work, a.out, manifest)
        (a.out / "gpu_diag.json").write_text(json.dumps(manifest, indent=1) + "\n")
        failed = [r for r in rows if r["status"] != "ok"]
        with open(a.out / "gpu_diag.log", "w") as f:
            for r in failed:
                f.write(f"== {r['run']} seed {r['seed']}: {r['status']}\n" + "\n".join(r["log_tail"]) + "\n")
    print(f"gpu_diag: {len(rows) - len(failed)} of {len(rows)} runs ok in {manifest['wall_s']} s; {a.out}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
