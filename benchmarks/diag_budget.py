"""The gpu-diag budget rule from MEASURED step times (issue 64 items 2-3): per paper, the steps of each task and
how many device windows its runs x seeds take, read from params/gpu-diag.yaml ``windows`` and the step-time
tables that ``benchmarks/diag_step_time.py`` writes. No estimate anywhere: a task without a measured row for the
device and the number of runs at once is refused (one line), never planned.

The rule (fixed before the runs; change its inputs, not the rule):
  a = the task's aggregate steps/s with J runs of it at once on the device (the slowest of its measured encodings)
  t = a run's seconds in a window = steps x J / a
  steps: the paper's budget as written (``steps.<task>: 10000``), or ``rule``: the largest multiple of 50 with
         which the task's R runs (its runs x seeds) fit ONE window, ceil(R / J) after one another in each of its
         J slots: floor(train_s x a / (J x ceil(R / J)) / 50) x 50
  windows = the windows that first-fit (longest runs first) packs every run into, J slots of ``train_s`` each;
         a run with t > train_s fits no window: refused (it would end half-trained).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

#: whose claim each diagnostic task decides (the issue's table)
PAPER_OF_TASK = {"flip_flop": "cope", "selective_copy": "cope", "counting": "cope",
                 "indirect_indexing": "pope", "addition": "tape"}  # fmt: skip
PAPERS = ("cope", "pope", "tape")
#: ``steps: rule`` budgets are a multiple of this
STEP_QUANTUM = 50


class PlanError(ValueError):
    """One line: what is wrong or missing, and what is allowed."""


def _int(where: str, v, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise PlanError(f"params/gpu-diag.yaml {where}: {v!r}: allowed an integer >= {lo}")
    return v


def check_windows(windows, runs: dict) -> dict:
    """``windows`` (the params file's section) checked against ``diagnostics.runs``; the checked dict."""
    if not isinstance(windows, dict):
        raise PlanError(f"params/gpu-diag.yaml windows: {windows!r}: allowed a mapping (jobs, train_s, tables, papers)")
    extra = sorted(set(windows) - {"jobs", "train_s", "tables", "papers"})
    if extra:
        raise PlanError(f"params/gpu-diag.yaml windows.{extra[0]}: unknown; allowed jobs, train_s, tables, papers")
    _int("windows.jobs", windows.get("jobs"))
    t = windows.get("train_s")
    if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t < math.inf:
        raise PlanError(f"params/gpu-diag.yaml windows.train_s: {t!r}: allowed a number of seconds > 0")
    tables = windows.get("tables")
    if not isinstance(tables, list) or not all(isinstance(x, str) and x for x in tables):
        raise PlanError(f"params/gpu-diag.yaml windows.tables: {tables!r}: allowed a list of step-time files")
    papers = windows.get("papers")
    if not isinstance(papers, dict) or not set(papers) <= set(PAPERS):
        raise PlanError(f"params/gpu-diag.yaml windows.papers: {papers!r}: allowed a mapping of {', '.join(PAPERS)}")
    for paper, p in papers.items():
        where = f"windows.papers.{paper}"
        if not isinstance(p, dict) or set(p) - {"steps", "windows", "paper_steps"}:
            raise PlanError(f"params/gpu-diag.yaml {where}: {p!r}: allowed keys steps, windows, paper_steps")
        tasks = {r["task"] for r in runs.values() if PAPER_OF_TASK.get(r["task"]) == paper}
        steps = p.get("steps")
        if not isinstance(steps, dict) or set(steps) != tasks:
            raise PlanError(f"params/gpu-diag.yaml {where}.steps: {steps!r}: allowed one entry per task of its runs "
                            f"({', '.join(sorted(tasks))}), each an integer >= 1 or 'rule'")  # fmt: skip
        for task, s in steps.items():
            if s != "rule":
                _int(f"{where}.steps.{task}", s)
        if p.get("windows") is not None:
            _int(f"{where}.windows", p["windows"])
        for task, s in (p.get("paper_steps") or {}).items():
            _int(f"{where}.paper_steps.{task}", s)
    return windows


def load_rows(tables: list[str], repo: Path) -> list[dict]:
    """Every measured row of the step-time tables (a missing or unreadable table: one line)."""
    rows = []
    for t in tables:
        path = repo / t
        try:
            rows += json.loads(path.read_text(encoding="utf-8"))["rows"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise PlanError(f"params/gpu-diag.yaml windows.tables: {t}: not a readable step-time table ({e})") from None
    return rows


def aggregate(rows: list[dict], task: str, device: str, jobs: int) -> float:
    """The task's measured aggregate steps/s with ``jobs`` runs at once on ``device``: the slowest of its
    measured encodings. None measured: refused (no estimates)."""
    got = [r["aggregate_steps_per_s"] for r in rows if (r["task"], r["device"], r["jobs"]) == (task, device, jobs)]
    if not got:
        raise PlanError(f"no measured step time for {task} on {device} with {jobs} runs at once in the tables of "
                        "params/gpu-diag.yaml windows.tables: measure it first (benchmarks/diag_step_time.py); "
                        "no window is planned from an estimate")  # fmt: skip
    return min(got)


def plan(paper: str, windows: dict, runs: dict, seeds: list[int], rows: list[dict], device: str) -> dict:
    """The plan of ``paper``'s window(s) on ``device``: {steps: {task: n}, windows: n, jobs: [[(run, seed), ...]
    per window], seconds: {task: a run's seconds}, fraction: {task: steps / paper_steps}}."""
    p = windows["papers"].get(paper)
    if p is None:
        raise PlanError(f"params/gpu-diag.yaml windows.papers.{paper}: no plan written; allowed papers "
                        f"{', '.join(windows['papers'])}")  # fmt: skip
    J, W = windows["jobs"], float(windows["train_s"])
    mine = {name: r for name, r in runs.items() if PAPER_OF_TASK.get(r["task"]) == paper}
    steps, secs, fraction = {}, {}, {}
    for task, s in p["steps"].items():
        a = aggregate(rows, task, device, J)
        n_runs = sum(r["task"] == task for r in mine.values()) * len(seeds)
        if s == "rule":
            s = math.floor(W * a / (J * math.ceil(n_runs / J)) / STEP_QUANTUM) * STEP_QUANTUM
            if s < STEP_QUANTUM:
                raise PlanError(f"{paper}: {task}'s {n_runs} runs get {s} steps each in one "
                                f"window at the measured {a:.3g} steps/s: below {STEP_QUANTUM}, nothing worth "
                                "training")  # fmt: skip
        steps[task], secs[task] = s, s * J / a
        if secs[task] > W:
            raise PlanError(f"{paper}: a {task} run of {s} steps takes {secs[task]:.0f} s at the measured {a:.3g} "
                            f"steps/s with {J} at once, more than one window's train_s={W:g}: it would end "
                            "half-trained")  # fmt: skip
        if task in (p.get("paper_steps") or {}):
            fraction[task] = round(s / p["paper_steps"][task], 4)
    jobs = sorted(((n, sd) for n in mine for sd in seeds), key=lambda j: -secs[mine[j[0]]["task"]])
    bins: list[tuple[list[float], list]] = []  # per window: its J slots' loads, its jobs
    for j in jobs:
        t = secs[mine[j[0]]["task"]]
        for loads, members in bins:
            i = min(range(J), key=loads.__getitem__)
            if loads[i] + t <= W:
                loads[i] += t
                members.append(j)
                break
        else:
            bins.append(([t] + [0.0] * (J - 1), [j]))
    return {"steps": steps, "windows": len(bins), "jobs": [m for _, m in bins], "seconds": secs, "fraction": fraction}


def checked_plan(paper: str, windows: dict, runs: dict, seeds: list[int], repo: Path, device: str) -> dict:
    """``plan`` from the tables, and the file's written ``windows`` the same number (else refused: the plan is
    written down before its runs, and must be the rule's)."""
    check_windows(windows, runs)
    got = plan(paper, windows, runs, seeds, load_rows(windows["tables"], repo), device)
    written = windows["papers"][paper].get("windows")
    if written != got["windows"]:
        raise PlanError(f"params/gpu-diag.yaml windows.papers.{paper}.windows: {written!r} written, the rule gives "
                        f"{got['windows']} on {device} from the measured tables: write {got['windows']} before "
                        "its runs")  # fmt: skip
    return got
