"""The passkey family: ``peeval_passkey`` reports ``acc`` and ``acc@<length>@<depth>`` per (context length,
needle depth) cell (the grammar: ``peeval.records.names``)."""

from __future__ import annotations

import math
import re

from peeval.records.names import PASSKEY_TASK, parse_passkey_metric, passkey_metric
from peeval.tasks.family import Family, SitePage


def _is_metric(task: str, metric: str) -> bool:
    pk = parse_passkey_metric(metric)
    cell = pk is not None and pk[0].isdigit() and re.fullmatch(r"(0|1)(\.\d+)?", pk[1]) is not None
    return metric == "acc" or cell


def _check_cell(metric: str, where: str) -> None:
    """A passkey cell names a whole length >= 1 and a depth in [0, 1] (ingest calls this; its messages)."""
    if pk := parse_passkey_metric(metric):
        length, depth = _number(pk[0]), _number(pk[1])
        if length is None or length != int(length) or length < 1:
            raise ValueError(f"{where}: the length: expected a whole number >= 1, got {pk[0]!r}")
        if depth is None or not 0.0 <= depth <= 1.0:
            raise ValueError(f"{where}: the depth: {pk[1]!r} is not a finite number in [0, 1]")


def _number(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _cell_length(metric: str) -> int | None:
    if (pk := parse_passkey_metric(metric)) is not None:
        try:
            return int(float(pk[0]))
        except ValueError:
            return None
    return None


FAMILY = Family(
    name="passkey",
    tasks=(PASSKEY_TASK,),
    metadata_keys=("lengths", "depths", "per_cell", "seed", "tokenizer"),
    reports=lambda task: "acc or acc@<length>@<depth>",
    is_metric=_is_metric,
    parse_cell=parse_passkey_metric,
    format_cell=passkey_metric,
    check_cell=_check_cell,
    generated=True,
    tier=1,
    sql_names=(("PASSKEY_TASK", PASSKEY_TASK),),
    views=("passkey_cells",),
    page=SitePage("passkey.html", "Passkey", module="passkey"),
    length_cells=True,
    cell_length=_cell_length,
    tokenizer_key="tokenizer",
)
