"""Stage `diagnostics@<encoding>-<task>-<seed>`: train one encoding on one diagnostic task with one seed
(params.yaml `diagnostics.seeds`: the claims average over them). A killed run resumes (see resume.py)."""

import sys

from common import DIAG, entry, params
from resume import RESUME, fail, resumable

from peeval.training.pretrain import run_train

if __name__ == "__main__":
    key, task, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    p = params()
    enc = entry(p, "encodings", key)
    train = p["diagnostics"]["train"]
    per_task = (train.get("task_set") or {}).get(task) or {}
    overrides = {**(train.get("set") or {}), **per_task, **(enc.get("set") or {})}
    name = f"{key}-{task}-s{seed}"
    try:
        s = resumable(lambda rd: run_train(DIAG / name, enc["pe"], enc.get("pe_options") or None, task=task,
                                           profile=p["profile"], seed=seed, resume_dir=rd, settings=overrides),
                      RESUME / "diag" / name, f"diagnostics@{name}")  # fmt: skip
    except (ValueError, FileNotFoundError) as e:
        fail(f"diagnostics@{name}", f"profile, diagnostics.train, encodings.{key}", e)
    print(f"diagnostics {key} {task} seed {seed}: {s.get('steps')} steps, val loss {s.get('final_val_loss')}, "
          f"val exact match {s.get('final_val_exact_match')}")  # fmt: skip
