"""One diagnostic batch drawn the reference way vs on a torch device, side by side (issue 64 item 1):

    OMP_NUM_THREADS=1 python benchmarks/device_batches.py --profile paper --repeats 5 [--device cuda]

Per task: the reference path (``generators.generate`` + ``diagnostics.encode_examples``, Python on the host)
and ``device_generators.device_batch`` on ``--device``, the same batch size (the paper's, issue 64's table,
unless ``--batch``), alternating so a busy machine slows both alike; the median milliseconds of each and
their ratio, and the two widths (the reference pads to its batch's longest row, the device batch to the
task's longest possible). On CUDA each timed call ends with a synchronize. The load average is printed.
"""

import argparse
import os
import statistics
import time

import torch

from peeval.tasks.diagnostics import generators as gen
from peeval.training.device_generators import device_batch
from peeval.training.diagnostics import encode_examples

#: the papers' batch sizes (issue 64's table; selective copy and counting state none: 64 and 16 as gpu-diag)
PAPER_BATCH = {"flip_flop": 16, "selective_copy": 64, "counting": 16, "indirect_indexing": 64, "addition": 512}


def reference_batch(task: str, n: int, seed: int, profile: str, tok) -> dict:
    return encode_examples(gen.generate(task, "train", n, seed=seed, profile=profile), tok, task)


def timed(on: torch.device, fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    if on.type == "cuda":
        torch.cuda.synchronize(on)
    return (time.perf_counter() - start) * 1e3, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=["cpu", "paper"], default="paper")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=None, help="one batch size for every task (default: the paper's)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tasks", nargs="+", default=list(gen.TASKS), choices=list(gen.TASKS))
    args = ap.parse_args()
    if args.repeats < 1 or (args.batch is not None and args.batch < 1):
        ap.error("--repeats and --batch must be at least 1")
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, {device}, threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.2f}")
    print(f"{'task':18} {'batch':>5} {'reference ms':>13} {'device ms':>10} {'ratio':>7} {'widths':>11}")
    for task in args.tasks:
        n = args.batch or PAPER_BATCH[task]
        tok = gen.tokenizer(task)
        g = torch.Generator(device=device).manual_seed(0)
        ref_ms, dev_ms = [], []
        for seed in range(args.repeats + 1):  # the first of each: warm-up, not counted
            t_ref, ref = timed(device, reference_batch, task, n, seed, args.profile, tok)
            t_dev, dev = timed(device, device_batch, task, n, generator=g, device=device, profile=args.profile)
            if seed:
                ref_ms.append(t_ref)
                dev_ms.append(t_dev)
        r, d = statistics.median(ref_ms), statistics.median(dev_ms)
        widths = f"{ref['input_ids'].shape[1]}/{dev['input_ids'].shape[1]}"
        print(f"{task:18} {n:5d} {r:13.2f} {d:10.2f} {r / d:7.2f} {widths:>11}")


if __name__ == "__main__":
    main()
