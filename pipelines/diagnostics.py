"""Stage `diagnostics@<run>-<seed>`: train one diagnostics.runs entry (an encoding on one diagnostic
task) with one seed (params.yaml `diagnostics.seeds`: the claims average over them). A killed run
resumes (see resume.py)."""

import sys

from common import DIAG, diag_name, entry, params
from resume import RESUME, fail, resumable

from peeval.training.pretrain import run_train

if __name__ == "__main__":
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        print("usage: diagnostics.py <diagnostics.runs name> <seed>", file=sys.stderr)
        sys.exit(2)
    run, seed = sys.argv[1], int(sys.argv[2])
    p = params()
    run_entry = entry(p.diagnostics.runs, "diagnostics.runs", run)
    overrides = p.diagnostics.run_overrides(run)  # train.set, task_set, the run's task_params
    name = diag_name(run, seed)
    try:
        s = resumable(lambda rd: run_train(DIAG / name, run_entry.pe, run_entry.pe_options or None, task=run_entry.task,
                                           profile=p.profile, seed=seed, resume_dir=rd, settings=overrides,
                                           compile=p.diagnostics.train.compile,
                                           fast_step=p.diagnostics.train.fast_step),
                      RESUME / "diag" / name, f"diagnostics@{run}-{seed}")  # fmt: skip
    except (ValueError, FileNotFoundError) as e:
        fail(f"diagnostics@{run}-{seed}", f"profile, diagnostics.train, diagnostics.runs.{run}", e)
    print(f"diagnostics {run} seed {seed}: {s.get('steps')} steps, val loss {s.get('final_val_loss')}, "
          f"val exact match {s.get('final_val_exact_match')}")  # fmt: skip
