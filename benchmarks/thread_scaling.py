"""One process on all threads vs two single-thread processes side by side: the measurement behind
`make leaderboard JOBS=2` (docs/design.md "Several stages at once"). Run it alone on the machine:

    python benchmarks/thread_scaling.py --tokenizer checkpoints/tokenizer

prints the wall time of a flip-flop run (2 x 64, 300 steps) and of 40 cpu pretraining steps, each on
1 process x 2 threads, 1 process x 1 thread, and 2 processes x 1 thread at once, and the throughput
gain of the last over the first.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time


def one(kind: str, tokenizer: str | None) -> None:
    from peeval.training.pretrain import run_train

    with tempfile.TemporaryDirectory() as d:
        if kind == "diag":
            diag = {"steps": 300, "train_examples": 9600, "eval_every": 300, "save_every": 300}
            run_train(d + "/o", "rope", None, task="flip_flop", profile="cpu", seed=0, settings=diag)
        else:
            run_train(d + "/o", "rope", None, profile="cpu", seed=0, tokenizer=tokenizer,
                      settings={"steps": 40, "eval_every": 40, "save_every": 40})  # fmt: skip


def timed(kind: str, threads: int, copies: int, tokenizer: str | None) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    argv = [sys.executable, __file__, "--one", kind] + (["--tokenizer", tokenizer] if tokenizer else [])
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(copies)
    ]
    if any(p.wait() for p in procs):
        sys.exit(f"thread_scaling: a {kind} run failed")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", help="a tokenizer folder (pretraining; default: the profile's)")
    ap.add_argument("--one", choices=["diag", "pretrain"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.tokenizer and not os.path.isdir(args.tokenizer):
        print(
            f"thread_scaling: --tokenizer {args.tokenizer}: not a folder; allowed a tokenizer folder", file=sys.stderr
        )
        sys.exit(2)
    if args.one:
        one(args.one, args.tokenizer)
        return
    print("| job | 1 x 2 threads | 1 x 1 thread | 2 x 1 thread (both) | throughput gain |")
    print("|---|---|---|---|---|")
    for kind in ("diag", "pretrain"):
        two = timed(kind, 2, 1, args.tokenizer)
        single = timed(kind, 1, 1, args.tokenizer)
        pair = timed(kind, 1, 2, args.tokenizer)
        print(f"| {kind} | {two:.1f} s | {single:.1f} s | {pair:.1f} s | {2 * two / pair:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
