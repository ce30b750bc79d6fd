"""Issue 65's table in one GPU window: `peeval bench --train --profile gpu` for all 13 encodings at 64 × 512 and
16 × 2,048 (median of 5 steps, compiled), their default back-ends and the fused options (the Triton bias kernel of
t5 / kerple / fire / alibi, CoPE's `recompute`, the loss without the logits: `--linear_loss liger|chunked`).

    OUT=/some/dir python benchmarks/gpu_window_kernels.py            # on the GPU machine, one command, < 10 min
    python benchmarks/gpu_window_kernels.py --dry-run --out /tmp/w   # the same runs on the CPU, tiny sizes

Each group is one `peeval bench` process with its own time-out, in order of importance, under one deadline
(``--budget_s``, default 570 s): a group cut short keeps the rows it wrote (bench writes after every entry), a
group not reached is listed as such, and ``--groups`` reruns only the missing ones in a later window. Written
under ``--out`` (default $OUT): ``<group>.json`` / ``.md`` (bench's raw rows), ``window.log`` (everything printed)
and ``summary.json``: each group's command, exit code, wall time and status, and every row with its step time and
peak memory as ratios to the default rope of the same length (``logits`` loss), the issue's targets' terms.
``liger`` needs liger-kernel (``pip install 'peeval[cuda]'``, docs/gpu.md says how to carry the wheel); without it
its groups are rows of their one-line refusal. The dry run skips them (CUDA only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ENCODINGS = ("nope", "learned", "sinusoidal", "rope", "xpos", "randpe", "pope", "tape", "alibi", "t5", "kerple",
             "fire", "cope")  # fmt: skip
FUSED = ("t5@triton", "kerple@triton", "fire@triton", "alibi@triton", "cope@recompute")
LENGTHS = {"512": (64, 512), "2048": (16, 2048)}
#: (group, length, linear_loss, entries, share of the budget): most important first
GROUPS = [
    ("default_512", "512", "logits", ENCODINGS, 0.22),
    ("fused_512", "512", "logits", FUSED, 0.12),
    ("default_2048", "2048", "logits", ENCODINGS, 0.24),
    ("fused_2048", "2048", "logits", FUSED, 0.12),
    ("liger_512", "512", "liger", ("rope",), 0.075),
    ("chunked_512", "512", "chunked", ("rope",), 0.075),
    ("liger_2048", "2048", "liger", ("rope",), 0.075),
    ("chunked_2048", "2048", "chunked", ("rope",), 0.075),
]


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT"), help="output folder (default: $OUT)")
    p.add_argument("--dry-run", action="store_true", help="CPU, the smoke profile at 2 x 32 tokens, 1 step, eager")
    p.add_argument("--budget_s", type=float, default=570.0, help="deadline of all groups together (seconds)")
    p.add_argument("--steps", type=int, default=5, help="timed steps per entry (the median)")
    p.add_argument("--groups", nargs="*", default=None, help=f"only these ({', '.join(g[0] for g in GROUPS)})")
    a = p.parse_args(argv)
    known = [g[0] for g in GROUPS]
    if not a.out:
        p.error("--out: allowed a folder (or set $OUT)")
    if a.budget_s <= 0 or a.steps < 1:
        p.error("--budget_s: allowed a number > 0; --steps: an integer >= 1")
    if a.groups is not None and not a.groups or any(g not in known for g in a.groups or []):
        p.error(f"--groups: allowed one or more of {', '.join(known)}")
    out = Path(a.out)
    if out.exists() and any(out.iterdir()) and not (out / "summary.json").exists():
        p.error(f"--out {out}: allowed an empty folder or one this script wrote (it has no summary.json)")
    return a


def command(group: str, length: str, loss: str, entries, a: argparse.Namespace) -> list[str]:
    batch, seq_len = (2, 32) if a.dry_run else LENGTHS[length]
    out = Path(a.out)
    cmd = [sys.executable, "-m", "peeval", "bench", "--train", "--profile", "smoke" if a.dry_run else "gpu",
           "--batch_size", str(batch), "--seq_len", str(seq_len), "--pe", *entries, "--linear_loss", loss,
           "--steps", str(1 if a.dry_run else a.steps), "--warmup", "1", "--entry_seconds", "120",
           "--json", str(out / f"{group}.json"), "--md", str(out / f"{group}.md")]  # fmt: skip
    if a.dry_run:
        cmd += ["--device", "cpu", "--compile", "off"]
    return cmd


def run_groups(a: argparse.Namespace, log) -> list[dict]:
    start = time.monotonic()
    chosen = [g for g in GROUPS if a.groups is None or g[0] in a.groups]
    done = []
    for i, (group, length, loss, entries, share) in enumerate(chosen):
        cmd = command(group, length, loss, entries, a)
        g = {"group": group, "tokens": list(LENGTHS[length]), "linear_loss": loss, "command": cmd[1:]}
        left = a.budget_s - (time.monotonic() - start)
        if a.dry_run and loss == "liger":
            g["status"] = "skipped: liger runs on CUDA only"
        elif left < 10:
            g["status"] = "not reached: the deadline"
        else:
            # its share of the budget, or more when earlier groups finished early (never past the deadline)
            later = sum(c[-1] for c in chosen[i + 1 :]) * a.budget_s
            timeout = min(left, max(share * a.budget_s, left - later))
            t0 = time.monotonic()
            print(f"=== {group} ({timeout:.0f} s at most): {' '.join(cmd[1:])}", file=log, flush=True)
            try:
                r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
                g["rc"], g["status"] = r.returncode, "ok" if r.returncode == 0 else f"failed: exit {r.returncode}"
            except subprocess.TimeoutExpired:
                g["rc"], g["status"] = None, f"timed out after {timeout:.0f} s (rows so far kept)"
            g["wall_s"] = round(time.monotonic() - t0, 1)
        print(f"=== {group}: {g['status']}", file=log, flush=True)
        done.append(g)
    return done


def summarise(groups: list[dict], out: Path) -> list[dict]:
    """Every row, with step time and peak memory against the default rope of its length (the logits loss)."""
    rows = []
    for g in groups:
        f = out / f"{g['group']}.json"
        if f.exists():
            for r in json.loads(f.read_text())["rows"]:
                rows.append({"group": g["group"], "tokens": g["tokens"], "linear_loss": g["linear_loss"], **r})
    for r in rows:
        base = next((b for b in rows if b["tokens"] == r["tokens"] and b["entry"] == "rope"
                     and b["linear_loss"] == "logits" and "step_s" in b), None)  # fmt: skip
        if base and "step_s" in r:
            r["step_vs_rope_logits"] = r["step_s"] / base["step_s"]
            if r.get("peak_mib") and base.get("peak_mib"):
                r["memory_vs_rope_logits"] = r["peak_mib"] / base["peak_mib"]
    return rows


def main(argv=None) -> int:
    a = parse(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    env_note = {"dry_run": a.dry_run, "budget_s": a.budget_s, "steps": a.steps, "python": sys.version.split()[0]}
    with open(out / "window.log", "a") as log:
        groups = run_groups(a, log)
    summary = {"window": env_note, "groups": groups, "rows": summarise(groups, out)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    for g in groups:
        print(f"{g['group']}: {g['status']}")
    return 0 if all(g["status"] == "ok" or g["status"].startswith("skipped") for g in groups) else 1


if __name__ == "__main__":
    sys.exit(main())
