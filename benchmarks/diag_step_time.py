"""The step-time table of the diagnostics (issue 64 item 2): each task's steps/s at params/gpu-diag.yaml's model
size (the papers'), one run alone and J runs at once (J processes on the one device), on the fast step
(peeval.training.fast_diag: compiled, rows on the device). The budget rule (benchmarks/diag_budget.py) reads
the table it writes; a window is planned from these rows only.

  python benchmarks/diag_step_time.py --out $OUT/diag_step_time.json            # on the device: one command
  python benchmarks/diag_step_time.py --dry-run --out /tmp/t.json               # the CPU at tiny sizes

Each process builds its model and rows, takes ``--warmup`` steps (compilation, CUDA graph capture), says it is
ready, and when all J are ready times ``--steps`` steps between two device syncs. A row: the task, the encoding,
the device, J, each process's steps/s, their sum (aggregate), the sizes, torch and the commit. ``--dry-run``
measures this CPU at tiny sizes (its rows say ``device: cpu``: never a GPU's).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
#: the encoding timed per task by default: the paper's own (the new encodings are the costlier ones)
DEFAULT_PE = {"flip_flop": "cope", "selective_copy": "cope", "counting": "cope", "indirect_indexing": "pope",
              "addition": "tape"}  # fmt: skip


def settings(task: str, pe: str, dry_run: bool) -> tuple[str, dict, dict | None]:
    """(the diag profile, the settings on it a gpu-diag run of ``task`` with ``pe`` trains with, its pe_options)."""
    import gpu_diag
    import yaml

    every = list(yaml.safe_load(gpu_diag.render_profile())["diagnostics"]["runs"])
    p = gpu_diag.compose(dry_run, every)
    d = p["diagnostics"]
    run = next((r for r in d["runs"].values() if r["task"] == task and r["pe"] == pe), None)
    if run is None:
        raise SystemExit(f"diag_step_time: --pes {pe}: no gpu-diag run trains {pe} on {task}")
    s = {**d["train"].get("set", {}), **d["train"].get("task_set", {}).get(task, {})}
    return p["profile"], s, run.get("pe_options")


def worker(task: str, pe: str, steps: int, warmup: int, dry_run: bool, sync_dir: Path, rank: int) -> dict:
    """One process's measurement (its JSON line on stdout)."""
    import torch

    from peeval.models import PeevalForCausalLM
    from peeval.training import fast_diag
    from peeval.training.diagnostics import prepare_diagnostic
    from peeval.training.pretrain import model_config
    from peeval.training.profiles import get_profile

    profile, s, opts = settings(task, pe, dry_run)
    s["train_examples"] = max(s.get("batch_size", 32), 8) * (steps + warmup)  # only the rows the timing reads
    s["val_examples"] = 8
    s["steps"], s["warmup_steps"] = max(s.get("steps", 1), steps + warmup), 0
    prof = get_profile("diag", profile, s)
    tok, batches, max_len = prepare_diagnostic(task, prof, seed=rank)
    device = torch.device("cuda" if torch.cuda.is_available() and not dry_run else "cpu")
    model = PeevalForCausalLM(model_config(prof, pe, opts, len(tok), max_len, tok)).to(device)
    opt, sched = fast_diag.make_parts(model, prof, device)
    source = fast_diag.indexed_source(batches.train, steps + warmup, prof["batch_size"], rank, device)
    loss_of = fast_diag.compiled_step_loss(device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    t = time.perf_counter()
    for i in range(warmup):
        fast_diag.train_step(model, opt, sched, loss_of, source(i), prof["grad_clip"], device)
    sync()
    warm_s = time.perf_counter() - t
    (sync_dir / f"ready-{rank}").touch()
    while not (sync_dir / "go").exists():
        time.sleep(0.01)
    t = time.perf_counter()
    loss = torch.zeros((), device=device)
    for i in range(warmup, warmup + steps):
        loss += fast_diag.train_step(model, opt, sched, loss_of, source(i), prof["grad_clip"], device)
    sync()
    sec = time.perf_counter() - t
    return {"steps_per_s": steps / sec, "warmup_s": round(warm_s, 2), "loss_finite": bool(torch.isfinite(loss)),
            "layers": prof["num_hidden_layers"], "hidden": prof["hidden_size"], "batch": prof["batch_size"],
            "seq": int(batches.train["input_ids"].shape[1]),
            "params": sum(p.numel() for p in model.parameters())}  # fmt: skip


def measure(task: str, pe: str, jobs: int, steps: int, warmup: int, dry_run: bool) -> dict:
    """``jobs`` worker processes at once; the row."""
    with tempfile.TemporaryDirectory(prefix="diag-step-time.") as tmp:
        sync_dir = Path(tmp)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
               "TORCHINDUCTOR_CACHE_DIR": str(REPO / ".cache" / "inductor")}  # fmt: skip
        cmd = [sys.executable, __file__, "--worker", task, pe, str(steps), str(warmup), str(int(dry_run)), tmp]
        procs = [subprocess.Popen([*cmd, str(r)], stdout=subprocess.PIPE, text=True, env=env) for r in range(jobs)]
        while len(list(sync_dir.glob("ready-*"))) < jobs and all(p.poll() is None for p in procs):
            time.sleep(0.05)
        (sync_dir / "go").touch()
        outs = [p.communicate()[0] for p in procs]
        if any(p.returncode for p in procs):
            raise SystemExit(f"diag_step_time: {task} {pe} x{jobs}: a worker failed (exit "
                             f"{[p.returncode for p in procs]})")  # fmt: skip
    got = [json.loads(o.strip().splitlines()[-1]) for o in outs]
    each = [g["steps_per_s"] for g in got]
    return {"task": task, "pe": pe, "jobs": jobs, "steps_per_s_each": [round(x, 3) for x in each],
            "steps_per_s_alone" if jobs == 1 else "steps_per_s_mean": round(sum(each) / jobs, 3),
            "aggregate_steps_per_s": round(sum(each), 3), "timed_steps": steps, "warmup_steps": warmup,
            "warmup_s": max(g["warmup_s"] for g in got), "loss_finite": all(g["loss_finite"] for g in got),
            **{k: got[0][k] for k in ("layers", "hidden", "batch", "seq", "params")}}  # fmt: skip


def write(path: Path, table: dict) -> None:
    """The table as it stands, replaced whole (a temporary, then a rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(table, indent=1) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/diag_step_time.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="the table's JSON file (new: never overwritten)")
    ap.add_argument("--tasks", nargs="+", default=list(DEFAULT_PE), help="tasks to time (default: all five)")
    ap.add_argument("--pes", nargs="+", default=None, help="encodings to time per task (default: the paper's)")
    ap.add_argument("--jobs", nargs="+", type=int, default=None, help="runs at once (default 1 8; dry run 1 2)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 200; dry run 5)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed first steps (default 20; dry run 2)")
    ap.add_argument("--dry-run", action="store_true", help="time this CPU at tiny sizes (rows say device cpu)")
    a = ap.parse_args(argv)
    bad = [t for t in a.tasks if t not in DEFAULT_PE]
    jobs = a.jobs or ([1, 2] if a.dry_run else [1, 8])
    steps = a.steps if a.steps is not None else (5 if a.dry_run else 200)
    warmup = a.warmup if a.warmup is not None else (2 if a.dry_run else 20)
    for what, ok, allowed in ((f"--tasks {' '.join(bad)}", not bad, ", ".join(DEFAULT_PE)),
                              (f"--jobs {jobs}", all(j >= 1 for j in jobs), "integers >= 1"),
                              (f"--steps {steps}", steps >= 1, "an integer >= 1"),
                              (f"--warmup {warmup}", warmup >= 1, "an integer >= 1 (the compilation)")):  # fmt: skip
        if not ok:
            print(f"diag_step_time: {what}: allowed {allowed}", file=sys.stderr)
            return 2
    if a.out.exists():
        print(f"diag_step_time: --out {a.out}: exists (never overwritten: name a new file)", file=sys.stderr)
        return 2
    import gpu_diag
    import torch

    info = gpu_diag.device_info()
    if a.dry_run:
        info["device"] = "cpu"
    elif info["device"] == "cpu":
        print("diag_step_time: no CUDA device (use --dry-run to time this CPU at tiny sizes)", file=sys.stderr)
        return 2
    rows: list[dict] = []
    table = {**info, "dry_run": a.dry_run, "threads": 1, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
             "cpu_count": os.cpu_count(), "torch_threads_main": torch.get_num_threads(), "complete": False,
             "rows": rows}  # fmt: skip
    a.out.parent.mkdir(parents=True, exist_ok=True)
    for task in a.tasks:
        for pe in a.pes or [DEFAULT_PE[task]]:
            for j in jobs:
                row = {**measure(task, pe, j, steps, warmup, a.dry_run), "device": info["device"]}
                print(json.dumps(row), flush=True)
                rows.append(row)
                write(a.out, table)  # after every row: a window killed mid-way keeps what it measured
    table["complete"] = True
    write(a.out, table)
    print(f"diag_step_time: {len(rows)} rows on {info['device']}: {a.out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        task, pe, steps, warmup, dry, sync_dir, rank = sys.argv[2:9]
        sys.path.insert(0, str(REPO))
        print(json.dumps(worker(task, pe, int(steps), int(warmup), dry == "1", Path(sync_dir), int(rank))))
        sys.exit(0)
    sys.exit(main())
