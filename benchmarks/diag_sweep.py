"""The sizing sweep behind the diagnostics of the cpu profile (docs/statistics.md: the sweep).

The criterion is fixed before any comparison is looked at: for each task, the encoding the paper
reports learning the task in distribution (``--pe``/``--pe-options``: rope by default; PoPE table 1's
indirect indexing: pope with its δ init U(−2π, 0), appendix B.1), seed 0, is trained on a fixed ladder
of budgets, and the profile takes the cheapest rung at which its in-distribution exact match (every
row of the ``val`` split: held-out examples of the training distribution, ``--val`` of them; addition
covers each in-distribution length cell alike) reaches ``--target``. A task where no rung does is not
learnable on this budget: its claims stay inconclusive (claims.yaml ``unlearned_at`` says so). Only
that one encoding is trained here: no comparison is seen while sizing.

    OMP_NUM_THREADS=1 python benchmarks/diag_sweep.py --tasks flip_flop counting --out sweep.jsonl
    OMP_NUM_THREADS=1 python benchmarks/diag_sweep.py --tasks indirect_indexing --pe pope \
        --pe-options '{"delta_init": "uniform"}' --out sweep.jsonl

Each finished run is one JSON line in ``--out`` (appended; a rerun skips rungs already there).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

#: (layers, width) x steps, cheapest first; 32 fresh examples per step (no example repeats)
LADDER = [
    ((2, 64), 1000),
    ((2, 64), 2000),
    ((4, 128), 1000),
    ((4, 128), 2000),
]
SHAPE = {(2, 64): dict(hidden_size=64, intermediate_size=172), (4, 128): dict(hidden_size=128, intermediate_size=344)}


def _fraction(v: str) -> float:
    x = float(v)
    if not 0 < x <= 1:
        raise argparse.ArgumentTypeError(f"{v}: allowed a number in (0, 1]")
    return x


def _positive(v: str) -> int:
    if not v.isdigit() or int(v) < 1:
        raise argparse.ArgumentTypeError(f"{v}: allowed an integer >= 1")
    return int(v)


def _options(v: str) -> dict:
    try:
        x = json.loads(v)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"{v}: not JSON ({e.msg})") from None
    if not isinstance(x, dict):
        raise argparse.ArgumentTypeError(f'{v}: allowed a JSON object, e.g. \'{{"delta_init": "uniform"}}\'')
    return x


def main(argv: list[str] | None = None) -> None:
    from peeval.records import DIAG_TASKS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=list(DIAG_TASKS), choices=DIAG_TASKS)
    from peeval.registry.declarations import encoding_names

    ap.add_argument("--pe", default="rope", choices=encoding_names(), help="the baseline encoding (default rope)")
    ap.add_argument("--pe-options", type=_options, default={}, help="the encoding's options, a JSON object")
    ap.add_argument("--target", type=_fraction, default=0.9, help="in-distribution exact match that counts as learned")
    ap.add_argument("--val", type=_positive, default=256, help="validation examples (in-distribution)")
    ap.add_argument("--out", type=Path, required=True, help="JSON lines, one per trained rung")
    ap.add_argument("--all-rungs", action="store_true", help="do not stop at the first rung that reaches --target")
    a = ap.parse_args(argv)

    import torch

    from peeval.training.pretrain import run_train

    done = {}
    if a.out.exists():
        for line in a.out.read_text().splitlines():
            r = json.loads(line)
            opts = json.dumps(r.get("pe_options") or {}, sort_keys=True)
            done[(r["task"], r["pe"], opts, r["layers"], r["width"], r["steps"])] = r
    for task in a.tasks:
        for (layers, width), steps in LADDER:
            key = (task, a.pe, json.dumps(a.pe_options, sort_keys=True), layers, width, steps)
            if key in done:
                r = done[key]
            else:
                settings = dict(SHAPE[(layers, width)], num_hidden_layers=layers, steps=steps, eval_every=steps,
                                save_every=steps, train_examples=32 * steps, val_examples=a.val)  # fmt: skip
                t0 = time.perf_counter()
                with tempfile.TemporaryDirectory() as d:
                    s = run_train(
                        Path(d) / "m",
                        a.pe,
                        task=task,
                        profile="cpu",
                        seed=0,
                        settings=settings,
                        pe_options=a.pe_options,
                    )
                r = dict(task=task, pe=a.pe, pe_options=a.pe_options, layers=layers, width=width, steps=steps, seed=0,
                         exact_match=s.get("final_val_exact_match"), val_loss=s.get("final_val_loss"),
                         wall_s=round(time.perf_counter() - t0, 1), torch_threads=torch.get_num_threads())  # fmt: skip
                with a.out.open("a") as f:
                    f.write(json.dumps(r) + "\n")
            print(json.dumps(r), flush=True)
            if r["exact_match"] is not None and r["exact_match"] >= a.target and not a.all_rungs:
                break


if __name__ == "__main__":
    main()
