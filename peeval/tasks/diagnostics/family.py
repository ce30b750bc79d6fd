"""The diagnostics family: ``peeval_diag_<task>_<split>`` reports ``acc`` (flip-flop also ``read_acc`` and
``seq_acc``) and per-cell accuracies ``acc@<cell>`` (addition: ``acc@<a>x<b>``; the grammar:
``peeval.records.names``)."""

from __future__ import annotations

import re

from peeval.records.names import (
    ALL_CELL,
    DIAG_PREFIX,
    DIAG_TASKS,
    FLIP_FLOP_METRICS,
    diag_cell_metric,
    parse_addition_cell,
    parse_diag_cell_metric,
    split_diag_task,
)
from peeval.tasks.family import Family, SitePage


def _extra(task: str) -> list[str]:
    diag = split_diag_task(task)
    return list(FLIP_FLOP_METRICS) if diag and diag[0] == "flip_flop" else []


def _addition(task: str) -> bool:
    diag = split_diag_task(task)
    return bool(diag) and diag[0] == "addition"


def _reports(task: str) -> str:
    extra = _extra(task)
    cells = [ALL_CELL, *extra, *(["<a>x<b>"] if _addition(task) else [])]
    return ", ".join(["acc", *extra, *(diag_cell_metric(c) for c in cells)])


def _is_metric(task: str, metric: str) -> bool:
    extra = _extra(task)
    cell = parse_diag_cell_metric(metric)
    ok = metric in ("acc", *extra) or cell in (ALL_CELL, *extra)
    return ok or (_addition(task) and cell is not None and parse_addition_cell(cell) is not None)


def _generator_keys() -> set[str]:
    from peeval.tasks.diagnostics.generators import DEFAULTS

    return {k for profiles in DEFAULTS.values() for params in profiles.values() for k in params}


FAMILY = Family(
    name="diagnostics",
    prefix=DIAG_PREFIX.rstrip("_"),
    metadata_keys=("diag_task", "diag_split", "n", "seed", "profile"),
    more_keys=_generator_keys,
    reports=_reports,
    is_metric=_is_metric,
    parse_cell=parse_diag_cell_metric,
    format_cell=diag_cell_metric,
    generated=True,
    tier=2,
    sql_names=(
        ("DIAG_PREFIX", DIAG_PREFIX),
        ("DIAG_TASKS", "|".join(re.escape(t) for t in sorted(DIAG_TASKS, key=len, reverse=True))),  # longest first
        ("ALL_CELL", ALL_CELL),
    ),
    views=("diagnostic_cells",),
    page=SitePage("diagnostics.html", "Diagnostics", module="diagnostics"),
)
