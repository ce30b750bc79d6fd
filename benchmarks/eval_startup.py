"""``peeval eval`` start-up vs lm_eval's task index (issue 17 item 5), measured the same way.

Each side runs in a fresh interpreter from process start until a ``TaskManager`` that
holds the named tasks exists (the moment either tool can begin building tasks):

- peeval: ``peeval.cli.build_parser().parse_args(["eval", ...])`` + ``peeval.evaluation.runner.task_manager(tasks)``;
- lm_eval: ``TaskManager()`` (what ``lm_eval --tasks ...`` builds before anything else).

Runs alternate (round robin) and the median of ``--reps`` is reported, wall and CPU
(user + sys of the child): on a shared machine the CPU time is the steadier number.

    OMP_NUM_THREADS=1 python benchmarks/eval_startup.py --tasks peeval_ppl_pg19 --reps 5
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time

PEEVAL = (
    "from peeval import cli; from peeval.evaluation import runner as evaluation; "
    "a = cli.build_parser().parse_args(['eval', '--model', 'peeval', '--tasks', {tasks!r}]); "
    "evaluation.task_manager(a.tasks, None)"
)
LM_EVAL = "from lm_eval.tasks import TaskManager; TaskManager()"


def run_once(code: str) -> tuple[float, float]:
    """(wall s, CPU s) of a fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    # cwd outside any checkout: ``-c`` puts the cwd first on sys.path, PYTHONPATH picks the peeval
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["peeval_ppl_pg19", "peeval_zeroshot"])
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args(argv)
    sides = {"lm_eval TaskManager()": LM_EVAL, **{f"peeval eval {t}": PEEVAL.format(tasks=t) for t in a.tasks}}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    run_once(LM_EVAL)  # warm the page cache for both
    for _ in range(a.reps):
        for k, code in sides.items():
            times[k].append(run_once(code))
    base = [statistics.median(x[i] for x in times["lm_eval TaskManager()"]) for i in (0, 1)]
    print("| start-up | wall s | CPU s | wall / lm_eval | CPU / lm_eval |\n|---|---:|---:|---:|---:|")
    for k, v in times.items():
        wall, cpu = (statistics.median(x[i] for x in v) for i in (0, 1))
        print(f"| {k} | {wall:.2f} | {cpu:.2f} | {wall / base[0]:.2f} | {cpu / base[1]:.2f} |")


if __name__ == "__main__":
    main()
