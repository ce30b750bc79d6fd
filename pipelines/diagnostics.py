"""Stage `diagnostics@<encoding>-<task>`: train one encoding on one diagnostic task."""

import sys

from common import DIAG, entry, params

from peeval.train import run_train

if __name__ == "__main__":
    key, task = sys.argv[1], sys.argv[2]
    p = params()
    enc = entry(p, "encodings", key)
    overrides = {**(p["diagnostics"]["train"].get("set") or {}), **(enc.get("set") or {})}
    s = run_train(DIAG / f"{key}-{task}", enc["pe"], enc.get("pe_options") or None, task=task, profile=p["profile"],
                  seed=p["seed"], **overrides)  # fmt: skip
    print(f"diagnostics {key} {task}: {s.get('steps')} steps, val loss {s.get('final_val_loss')}")
