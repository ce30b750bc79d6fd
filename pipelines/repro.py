"""`dvc repro` on several cores: ``python pipelines/repro.py --jobs N`` (``make leaderboard JOBS=N``).

DVC runs one stage at a time (iterative/dvc#755). peeval's stages are many small independent jobs
(one model per encoding, per diagnostic run and seed, per evaluation suite), and on a few cores
N single-thread processes side by side finish them sooner than one multi-thread process after the
other (docs/leaderboard.md: the measurement). This runner walks DVC's own stage graph, starts each
changed stage once every stage it depends on is done, as DVC would run it (its ``cmd`` from the
repository root, outputs removed first, ``DVC_ROOT`` / ``DVC_STAGE`` set), and records each finished
stage in dvc.lock and the cache exactly as ``dvc repro`` does (DVC's ``Stage.save`` / ``commit``).
A final plain ``dvc repro`` then finds every stage up to date (or runs what is left), so dvc.lock
stays DVC's single record of what ran.

Each process gets ``OMP_NUM_THREADS = max(1, cores // N)`` (a value already in the environment
wins): the weights depend on the thread count, which every run records (runs.params.torch_threads),
so compare stores made with the same ``--jobs`` on the same machine. ``--jobs 1`` is plain
``dvc repro``. Each stage's output goes to ``logs/stages/<stage>.log``; a failed stage prints the
end of its log, no new stage starts, and the runner exits non-zero after the running ones finish.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

LOGS = Path("logs/stages")


def _threads(jobs: int) -> str:
    return os.environ.get("OMP_NUM_THREADS") or str(max(1, (os.cpu_count() or 1) // jobs))


def _log_path(stage) -> Path:
    return LOGS / (stage.addressing.replace("/", "_").replace(":", "_") + ".log")


def _tail(path: Path, n: int = 25) -> str:
    try:  # progress bars rewrite one line with \r: each redraw counts as a line
        lines = path.read_text(errors="replace").replace("\r", "\n").splitlines()
    except OSError:
        return ""
    return "\n".join(line for line in lines[-n:] if line.strip())[-4000:]


def _say(msg: str, err: bool = False) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr if err else sys.stdout, flush=True)


def _selected(graph, stages: list, targets: list[str]) -> list:
    """The stages named by ``targets`` (exact name, or group name before '@') and every stage upstream."""
    import networkx as nx

    named = [s for s in stages if any(s.addressing == t or s.addressing.startswith(t + "@") for t in targets)]
    keep = set(named)
    for s in named:
        keep |= nx.descendants(graph, s)  # edges point from a stage to the stages it depends on
    return [s for s in stages if s in keep]


def run_parallel(jobs: int, targets: list[str] | None = None) -> int:
    """Run every changed stage (only ``targets`` and upstream, if given), ``jobs`` at once; 0 when all succeeded."""
    from dvc.repo import Repo

    threads = _threads(jobs)
    failed: list[str] = []
    with Repo(".") as repo, repo.lock:
        graph = repo.index.graph  # edges: stage -> the stages it depends on
        stages = [s for s in graph.nodes if s.cmd and not s.frozen]
        if targets:
            names = {s.addressing.split("@")[0] for s in stages} | {s.addressing for s in stages}
            unknown = [t for t in targets if t not in names]
            if unknown:
                allowed = ", ".join(sorted(n for n in names if "@" not in n))
                print(f"repro: target {unknown[0]!r}: not a stage of dvc.yaml (allowed: {allowed})", file=sys.stderr)
                return 2
            stages = _selected(graph, stages, targets)
        pending = set(stages)
        done: set = {s for s in graph.nodes if s not in pending}
        running: dict = {}  # stage -> (Popen, log file, start time)
        order = {s: i for i, s in enumerate(repo.index.stages)}  # dvc.yaml order among the ready ones
        started = 0

        def finish(stage, rc: int) -> None:
            proc, log, t0 = running.pop(stage)
            log.close()
            secs = time.time() - t0
            if rc == 0:
                stage.save()  # hashes deps and outs, fills the run cache, as `dvc repro` does
                stage.commit()
                stage.dvcfile.dump_stages([stage], update_pipeline=False)
                _say(f"done    '{stage.addressing}' in {secs:.0f} s")
                done.add(stage)
            else:
                failed.append(stage.addressing)
                _say(f"FAILED  '{stage.addressing}' (exit {rc}) after {secs:.0f} s; "
                     f"end of {_log_path(stage)}:\n{_tail(_log_path(stage))}", err=True)  # fmt: skip

        try:
            while pending or running:
                ready = sorted((s for s in pending if all(u in done for u in graph.successors(s))), key=order.get)
                for stage in ready:
                    if failed or len(running) >= jobs:
                        break
                    pending.discard(stage)
                    if not stage.changed():
                        done.add(stage)
                        continue
                    stage.remove_outs(ignore_remove=False, force=False)
                    LOGS.mkdir(parents=True, exist_ok=True)
                    log = open(_log_path(stage), "w")  # noqa: SIM115 (closed in finish())
                    cmds = stage.cmd if isinstance(stage.cmd, list) else [stage.cmd]
                    env = {**os.environ, "OMP_NUM_THREADS": threads, "DVC_ROOT": repo.root_dir,
                           "DVC_STAGE": stage.addressing}  # fmt: skip
                    proc = subprocess.Popen(" && ".join(cmds), shell=True, cwd=stage.wdir, env=env,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
                    started += 1
                    running[stage] = (proc, log, time.time())
                    _say(
                        f"running '{stage.addressing}' ({started} started, {len(pending)} to check; {_log_path(stage)})"
                    )
                if failed and not running:
                    break
                if not running:
                    if pending and not any(all(u in done for u in graph.successors(s)) for s in pending):
                        break  # only stages below a failure are left
                    continue
                time.sleep(0.5)
                for stage, (proc, _, _) in list(running.items()):
                    if proc.poll() is not None:
                        finish(stage, proc.returncode)
        except KeyboardInterrupt:
            for proc, _, _ in running.values():
                os.killpg(proc.pid, signal.SIGTERM)  # training stages resume from .resume/ next time
            print("interrupted: running stages stopped (training resumes on the next run)", file=sys.stderr)
            return 130
    if failed:
        print(f"ERROR: failed to reproduce {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", "-j", default="1", help="stages at once (1: plain `dvc repro`)")
    ap.add_argument(
        "targets", nargs="*", help="stages or stage groups to reproduce with what they depend on (default: all)"
    )
    args = ap.parse_args(argv)
    if not args.jobs.strip().isdigit() or int(args.jobs) < 1:  # `make leaderboard JOBS=…` lands here
        print(f"repro: --jobs {args.jobs}: allowed an integer >= 1", file=sys.stderr)
        return 2
    args.jobs = int(args.jobs)
    if args.jobs > 1:
        rc = run_parallel(args.jobs, args.targets)
        if rc:
            return rc
    return subprocess.call(["dvc", "repro", *args.targets])  # checks every stage is up to date; runs anything left


if __name__ == "__main__":
    sys.exit(main())
