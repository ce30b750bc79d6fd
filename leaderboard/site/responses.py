"""A sample's response in words. lm-eval records a log-likelihood request's answer as a raw list,
``[-0.43, true]`` (the target's log-likelihood, whether it is the greedy continuation), or a list of them (one per
choice or position); the run and compare pages printed those lists as they are (issue 68 item 11)."""

from __future__ import annotations

import ast
import json
import math
from typing import Any

#: log-likelihoods written out for a list of them; the rest is counted
SHOWN = 6


def _pair(x: Any) -> bool:
    return (isinstance(x, (list, tuple)) and len(x) == 2 and isinstance(x[1], bool)
            and isinstance(x[0], (int, float)) and not isinstance(x[0], bool))  # fmt: skip


def _parse(text: str) -> Any:
    for read in (json.loads, ast.literal_eval):
        try:
            return read(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return None


def response_words(text: str | None) -> str | None:
    """``text`` as words when it is a log-likelihood answer (one pair or a list of pairs), else as it is."""
    if not text or text.lstrip()[:1] != "[":
        return text
    got = _parse(text)
    if _pair(got):
        ll, greedy = got
        return f"log-likelihood {ll:.3g}; {'the' if greedy else 'not the'} greedy continuation"
    if isinstance(got, (list, tuple)) and got and all(_pair(x) for x in got):
        lls = [float(x[0]) for x in got]
        more = f", … ({len(lls) - SHOWN} more)" if len(lls) > SHOWN else ""
        shown = ", ".join(f"{v:.3g}" for v in lls[:SHOWN]) + more
        total = math.fsum(lls)
        return (
            f"{len(lls)} log-likelihoods (sum {total:.3g}): {shown}; greedy continuation in "
            f"{sum(1 for x in got if x[1])} of {len(lls)}"
        )
    return text
