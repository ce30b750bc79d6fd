"""Formats of text and numbers that files and pages share: a sample's clipped text, the train-curve header, the
site's number format. Changes with a file's layout or the site's printing, never with names or statistics."""

from __future__ import annotations

import math
import re
from typing import Any


# ----------------------------------------------------------------------------- sample texts
def clip_text(text: str, limit: int) -> str:
    """``text`` cut to its head and tail around a ``[... N characters ...]`` marker when longer than ``limit``
    (samples files and the store keep long prompts so; the doc hash names the whole). A text this function
    already cut to ``limit`` or less is returned as it is, so cutting again (ingest after publish) changes nothing."""
    half = limit // 2
    if len(text) <= limit or re.fullmatch(rf"(?s).{{{half}}}\[\.\.\. \d+ characters \.\.\.\].{{{half}}}", text):
        return text
    return f"{text[:half]}[... {len(text) - 2 * half} characters ...]{text[-half:]}"


# ----------------------------------------------------------------------------- training curves
#: the header of train_curve.csv, written by training and read by ingest
CURVE_COLUMNS = ("step", "tokens", "lr", "train_loss", "val_loss", "elapsed_s")
#: columns a diagnostic run's ``train_curve.csv`` adds after them (issue 67: its in-distribution exact match at each
#: validation, the convergence gate's unit); optional: older curves have none
CURVE_EXTRA_COLUMNS = ("val_exact_match",)


# ----------------------------------------------------------------------------- number format
def fmt_number(v: Any, digits: int = 4) -> str:
    """A number as the site prints it: ``digits`` significant digits, scientific below 1e-3 or from
    1e6 on, ``nan`` / ``inf`` (the site's table sorter reads those), ``–`` for None."""
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        a = abs(v)
        return f"{v:.{digits - 1}e}" if a and (a >= 1e6 or a < 1e-3) else f"{v:.{digits}g}"
    return str(v)


__all__ = ["clip_text", "CURVE_COLUMNS", "CURVE_EXTRA_COLUMNS", "fmt_number"]
