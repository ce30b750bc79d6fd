"""Task names, metric-cell grammar and lm-eval's result keys: the strings a task writes and ingest parses.

Changes when a task family's naming changes (a new family, a new cell kind), never when a statistic or a label
does. Rule: nothing parses a metric name or task name that is not defined here.
"""

from __future__ import annotations

import re

from peeval.registry import DIAG_TASKS, GEN_PROFILES

# ----------------------------------------------------------------------------- task names
PPL_PREFIX = "peeval_ppl_"
PASSKEY_TASK = "peeval_passkey"
DIAG_PREFIX = "peeval_diag_"
SHIFT_TASK = "peeval_shift_stability"


def ppl_task(corpus: str) -> str:
    """``pg19`` -> ``peeval_ppl_pg19``."""
    return PPL_PREFIX + corpus


def ppl_corpus(task: str) -> str | None:
    """``peeval_ppl_pg19`` -> ``pg19``; None for another task."""
    return task[len(PPL_PREFIX) :] if task.startswith(PPL_PREFIX) else None


def diag_task(name: str, split: str) -> str:
    """(``flip_flop``, ``ood_dense``) -> ``peeval_diag_flip_flop_ood_dense``."""
    return f"{DIAG_PREFIX}{name}_{split}"


def split_diag_task(task: str) -> tuple[str, str] | None:
    """``peeval_diag_<task>_<split>`` -> (task, split): the longest known generator name wins (task
    names hold underscores); an unknown one splits at the last underscore, no underscore -> split "test"."""
    if not task.startswith(DIAG_PREFIX):
        return None
    rest = task[len(DIAG_PREFIX) :]
    for name in sorted(DIAG_TASKS, key=len, reverse=True):
        if rest.startswith(name + "_"):
            return name, rest[len(name) + 1 :]
    head, _, split = rest.rpartition("_")
    return (head, split) if head else (rest, "test")


# ----------------------------------------------------------------------------- metric cells
PPL_BASES = ("ppl", "bpb", "tokens", "windows")
#: peeval's SCROLLS tasks (their scores are percentages)
SCROLLS_PREFIX = "peeval_scrolls_"
SHIFTS = ("add_tokens", "shift_ids")
SHIFT_BASES = ("attn_diff", "pe_dot_diff")
FLIP_FLOP_METRICS = ("read_acc", "seq_acc")
#: diagnostic_cells.cell of a task's overall accuracy
ALL_CELL = "all"


def metric_base(metric: str) -> str:
    """``ppl@512`` -> ``ppl``; a plain metric is its own base."""
    return metric.partition("@")[0]


def is_cell(metric: str) -> bool:
    """True for a per-cell metric (``base@...``)."""
    return "@" in metric


def ppl_metric(base: str, length: int) -> str:
    """``ppl@<L>`` (also ``bpb``, ``tokens``, ``windows``)."""
    if base not in PPL_BASES:
        raise ValueError(f"ppl metric base {base!r}: must be one of {list(PPL_BASES)}")
    return f"{base}@{length}"


#: the loss by position inside the longest perplexity windows: ``nll_pos@<first context size of the bucket>``
POSITION_BASE = "nll_pos"


def position_metric(position: int) -> str:
    """``nll_pos@<P>``: mean NLL of the targets predicted from P.. tokens of context (one position bucket)."""
    return f"{POSITION_BASE}@{position}"


def parse_position_metric(metric: str) -> int | None:
    """``nll_pos@128`` -> 128; None for anything else."""
    base, _, cell = metric.partition("@")
    return int(cell) if base == POSITION_BASE and cell.isdigit() else None


def parse_ppl_metric(metric: str) -> tuple[str, int] | None:
    """``ppl@512`` -> (``ppl``, 512); None unless base in PPL_BASES and L all digits."""
    base, _, cell = metric.partition("@")
    if base in PPL_BASES and cell.isdigit():
        return base, int(cell)
    return None


def passkey_metric(length: int, depth: float) -> str:
    """``acc@<length>@<depth>``, the depth as Python prints the float (``0.0``, ``0.25``)."""
    return f"acc@{length}@{depth}"


def parse_passkey_metric(metric: str) -> tuple[str, str] | None:
    """``acc@512@0.5`` -> (``"512"``, ``"0.5"``): the texts, so the caller's range check names them."""
    base, _, cell = metric.partition("@")
    if base != "acc" or cell.count("@") != 1:
        return None
    length, depth = cell.split("@")
    return length, depth


def addition_cell(len_a: int, len_b: int) -> str:
    """The addition grid cell ``<len_a>x<len_b>``."""
    return f"{len_a}x{len_b}"


def parse_addition_cell(cell: str) -> tuple[int, int] | None:
    """``3x5`` -> (3, 5); None for another cell."""
    m = re.fullmatch(r"(\d+)x(\d+)", cell)
    return (int(m[1]), int(m[2])) if m else None


def diag_cell_metric(cell: str) -> str:
    """``acc@<cell>`` (a diagnostic task's per-cell accuracy)."""
    return f"acc@{cell}"


def addition_metric(len_a: int, len_b: int) -> str:
    """``acc@<len_a>x<len_b>``."""
    return diag_cell_metric(addition_cell(len_a, len_b))


def parse_diag_cell_metric(metric: str) -> str | None:
    """``acc@3x5`` -> ``3x5``; None unless an ``acc@<cell>`` metric."""
    base, _, cell = metric.partition("@")
    return cell if base == "acc" and cell else None


def shift_metric(base: str, shift: str, layer: int) -> str:
    """``<base>@<shift>@<layer>``, e.g. ``attn_diff@shift_ids@3`` (layers from 1)."""
    return f"{base}@{shift}@{layer}"


def parse_shift_metric(metric: str) -> tuple[str, str, int] | None:
    """``attn_diff@shift_ids@3`` -> (``attn_diff``, ``shift_ids``, 3); None otherwise."""
    m = re.fullmatch(rf"({'|'.join(SHIFT_BASES)})@({'|'.join(SHIFTS)})@(\d+)", metric)
    return (m[1], m[2], int(m[3])) if m else None


def family_metric(task: str, metric: str) -> tuple[str, bool] | None:
    """(what ``task`` reports, whether ``metric`` is one of those) for shift stability and for a task of a
    registered family that formats its own metric names (``peeval.tasks.family``: ppl, passkey, diagnostics,
    ...); None otherwise."""
    from .families import family_of  # the families read this module's grammar

    if task == SHIFT_TASK:
        bases = " or ".join(f"{b}@<shift>@<layer>" for b in SHIFT_BASES)
        return f"{bases}, shift in {', '.join(SHIFTS)}", parse_shift_metric(metric) is not None
    fam = family_of(task)
    if fam is None or fam.reports is None or fam.is_metric is None:
        return None
    return fam.reports(task), fam.is_metric(task, metric)


def result_key(metric: str, filt: str = "none") -> str:
    """lm-eval's results key ``<metric>,<filter>``."""
    return f"{metric},{filt}"


def stderr_key(metric: str, filt: str = "none") -> str:
    """lm-eval's stderr key ``<metric>_stderr,<filter>``."""
    return f"{metric}_stderr,{filt}"


def parse_result_key(key: str) -> tuple[str, str] | None:
    """``acc,none`` -> (``acc``, ``none``); None for ``alias``-like keys and for stderr keys."""
    if "," not in key or key.split(",")[0].endswith("_stderr"):
        return None
    metric, filt = key.rsplit(",", 1)
    return metric, filt


__all__ = [
    "DIAG_TASKS",
    "GEN_PROFILES",
    "PPL_PREFIX",
    "PASSKEY_TASK",
    "DIAG_PREFIX",
    "SHIFT_TASK",
    "ppl_task",
    "ppl_corpus",
    "diag_task",
    "split_diag_task",
    "PPL_BASES",
    "SCROLLS_PREFIX",
    "SHIFTS",
    "SHIFT_BASES",
    "FLIP_FLOP_METRICS",
    "ALL_CELL",
    "metric_base",
    "is_cell",
    "ppl_metric",
    "POSITION_BASE",
    "position_metric",
    "parse_position_metric",
    "parse_ppl_metric",
    "passkey_metric",
    "parse_passkey_metric",
    "addition_cell",
    "parse_addition_cell",
    "diag_cell_metric",
    "addition_metric",
    "parse_diag_cell_metric",
    "shift_metric",
    "parse_shift_metric",
    "family_metric",
    "result_key",
    "stderr_key",
    "parse_result_key",
]
