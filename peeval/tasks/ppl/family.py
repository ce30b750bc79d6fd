"""The perplexity family: ``peeval_ppl_<corpus>`` reports ``ppl@L`` / ``bpb@L`` / ``tokens@L`` / ``windows@L`` per
context length L and the loss by position ``nll_pos@P`` (the grammar: ``peeval.records.names``)."""

from __future__ import annotations

import re

from peeval.records.names import (
    POSITION_BASE,
    PPL_BASES,
    PPL_PREFIX,
    metric_base,
    parse_position_metric,
    parse_ppl_metric,
    ppl_metric,
)
from peeval.tasks.family import Family, SitePage


def _reports(task: str) -> str:
    *first, last = (f"{b}@L" for b in PPL_BASES)
    return f"{', '.join(first)}, {last} (L a length, {{max}} or {{train}}) or {POSITION_BASE}@P"


def _is_metric(task: str, metric: str) -> bool:
    return parse_ppl_metric(metric) is not None or parse_position_metric(metric) is not None


def _check_cell(metric: str, where: str) -> None:
    if metric_base(metric) in PPL_BASES:
        pm = parse_ppl_metric(metric)
        if pm is None or pm[1] < 2:  # a window of L tokens scores L-1: ppl@0, ppl@1, ppl@-3 are no lengths
            raise ValueError(f"{where}: the length must be a whole number >= 2")


FAMILY = Family(
    name="ppl",
    prefix=PPL_PREFIX.rstrip("_"),
    metadata_keys=(
        "protocol",
        "lengths",
        "targets",
        "skip",
        "targets_seed",
        "position_buckets",
        "stride",
        "max_windows",
        "max_docs",
        "ppl_protocol",
        "hub_copy",
    ),  # fmt: skip
    reports=_reports,
    is_metric=_is_metric,
    parse_cell=parse_ppl_metric,
    format_cell=ppl_metric,
    check_cell=_check_cell,
    infinite_cells=True,
    tier=0,
    sql_names=(
        ("PPL_PREFIX", PPL_PREFIX),
        ("PPL_BASES", "|".join(map(re.escape, PPL_BASES))),
        ("POSITION_BASE", POSITION_BASE),
    ),
    views=("ppl_by_length", "loss_by_position"),
    page=SitePage("ppl.html", "Perplexity", module="ppl"),
    length_cells=True,
    cell_length=lambda metric: pm[1] if (pm := parse_ppl_metric(metric)) else None,
)
