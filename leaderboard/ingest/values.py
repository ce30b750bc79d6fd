"""The checks every parser shares: a JSON file read, a number, a count, a metric value, a cell, a direction.

Each check says what a value must be and raises naming where it was found; the parsers add the file.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from peeval.records import (
    clip_text,
    is_cell,
    metric_base,
    metric_kind,
    metric_spec,
    parse_result_key,
    stderr_key,
)
from peeval.tasks.family import family_of

TEXT_LIMIT = 3000  # samples: longer texts keep their head and tail
#: DuckDB's BIGINT: a count beyond it cannot be stored as the number it is
BIGINT_MAX = 2**63 - 1
#: a checkpoint's or a dataset's sha256 as peeval records it
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class IngestError(ValueError):
    """A malformed, partial or unreadable input file (the message names it)."""


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise IngestError(f"{path}: not a readable JSON file ({e})") from e
    except RecursionError:  # `[` x 50,000: Python's parser recurses per level
        raise IngestError(f"{path}: JSON nested too deeply to be a peeval or lm-eval file") from None


def summary(path: Path) -> dict:
    """A ``*_summary.json`` (or SOURCE.json): a JSON object, else IngestError naming the file."""
    s = read_json(path)
    if not isinstance(s, dict):
        raise IngestError(f"{path}: not a JSON object")
    return s


def obj(d: dict, key: str, where: str) -> dict:
    """``d[key]`` as a dict ({} when absent or null), else ValueError naming ``where``."""
    v = d.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"{f'{where}.' if where else ''}{key} must be an object, not {v!r}")
    return v


def number(value: Any, where: str) -> float | None:
    """A metric value: a number, None or lm-eval's 'N/A' (range checks: :func:`check_metric`). A boolean is
    refused: JSON's true/false is no measurement, and stored as 1.0/0.0 it was shown as a perplexity."""
    if value is None or value == "N/A":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{where}: expected a number, got {str(value).lower()} (a boolean is not a measurement)")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.lower() in ("inf", "infinity", "-inf", "nan"):
        return float(value)
    raise ValueError(f"{where}: expected a number, got {value!r}")


def whole(value: Any, where: str = "value", minimum: int | None = 0) -> int | None:
    """A count or id: None/'' stay None; anything else must be a whole number (>= ``minimum``,
    within DuckDB's BIGINT)."""
    if value is None or value == "":
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a whole number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(f) or f != int(f):
        raise ValueError(f"{where}: expected a whole number, got {value!r}")
    if minimum is not None and f < minimum:
        raise ValueError(f"{where}: {value!r} is below {minimum}")
    if abs(f) > BIGINT_MAX:
        raise ValueError(f"{where}: {value!r} does not fit a 64-bit integer")
    return int(f)


def real(value: Any, where: str, lo: float = 0.0, hi: float = math.inf) -> float | None:
    """A finite number in [lo, hi] (None/'' stay None): losses, rates, times."""
    if value is None or value == "":
        return None
    try:
        v = float(value)
        if isinstance(value, bool):
            raise TypeError
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a number, got {value!r}") from None
    if not (math.isfinite(v) and lo <= v <= hi):
        raise ValueError(f"{where}: {value!r} is not a finite number in [{lo:g}, {hi:g}]")
    return v


def clip(text: Any) -> str | None:
    """A sample's text as the store keeps it: at most TEXT_LIMIT characters (``records.clip_text``)."""
    if text is None:
        return None
    return clip_text(text if isinstance(text, str) else json.dumps(text, default=str), TEXT_LIMIT)


def rel(path: str | Path | None, root: Path) -> str | None:
    """A path as stored: relative to ``root`` when inside it, else absolute."""
    if path is None or path == "":
        return None
    p = Path(path)
    full = (root / p).resolve() if not p.is_absolute() else p.resolve()
    try:
        return full.relative_to(root.resolve()).as_posix()
    except ValueError:
        return full.as_posix()


# ----------------------------------------------------------------------------- metrics

#: what each kind of metric (peeval.records.METRICS) can be, and the words an error says it is not
_RANGES = {
    "fraction": (0.0, 1.0, "an accuracy in [0, 1]"),
    "percent": (0.0, 100.0, "a score in [0, 100]"),
    "perplexity": (1.0, math.inf, "a perplexity (>= 1, as exp of a non-negative NLL)"),
    "bits": (0.0, math.inf, "a bits-per-byte value (>= 0)"),
}


def check_metric(
    task: str, metric: str, value: float | None, stderr: float | None, where: str, stderr_where: str = "stderr"
) -> None:
    """ValueError naming ``where`` when a metric value cannot be a result of its task (its kind:
    ``peeval.records.metric_kind``).

    NaN never is (a broken run or bad task metadata, not a measurement). +inf is allowed only for
    peeval's ``ppl@L`` / ``bpb@L``: the perplexity task reports it when a model explodes (its
    documented contract, and a real outcome beyond the training length). Perplexity must be >= 1:
    ppl = exp(NLL / tokens) and a log-probability is <= 0, so anything below 1 is a sign error."""
    kind = metric_kind(task, metric)
    fam = family_of(task)
    ppl_cell = fam is not None and fam.infinite_cells and is_cell(metric)
    if value is not None:
        explodes = ppl_cell and kind in ("perplexity", "bits")  # +inf: a model that explodes
        if math.isnan(value) or value == -math.inf or (value == math.inf and not explodes):
            raise ValueError(f"{where}: {value!r} is not a finite number")
        if kind in _RANGES:
            lo, hi, what = _RANGES[kind]
            if not lo <= value <= hi:
                raise ValueError(f"{where}: {value!r} is not {what}")
        if kind == "count" and not (0 <= value <= BIGINT_MAX and value == int(value)):
            raise ValueError(f"{where}: {value!r} is not a count (a whole number >= 0 that fits a 64-bit integer)")
    if stderr is not None and not (math.isfinite(stderr) and stderr >= 0.0):
        raise ValueError(f"{stderr_where}: {stderr!r} is not a finite number >= 0")


def parse_metrics(results: dict, path: Path) -> list[tuple[str, str, str, float | None, float | None]]:
    """(task, metric, filter, value, stderr) for every metric of every task in ``results``, each value
    checked against what its metric can be (:func:`check_metric`)."""
    out = []
    for task, entry in results.items():
        if not isinstance(entry, dict):
            raise IngestError(f"{path}: results[{task!r}] is not an object")
        for key, value in entry.items():
            if (parsed := parse_result_key(key)) is None:
                continue
            metric, filt = parsed
            where = f"results[{task!r}][{key!r}]"
            se_where = f"results[{task!r}][{stderr_key(metric, filt)!r}]"
            try:
                v = number(value, where)
                se = number(entry.get(stderr_key(metric, filt)), se_where)
                check_metric(task, metric, v, se, where, se_where)
            except ValueError as e:
                raise IngestError(f"{path}: {e}") from e
            out.append((task, metric, filt, v, se))
    return out


def check_cell(task: str, metric: str, where: str) -> None:
    """The cells the per-length / per-cell views parse (schema.sql) must be what they say (each family's
    ``check_cell``: a ppl length a whole number >= 2, a passkey length >= 1 and depth in [0, 1], ...);
    ValueError naming ``where`` if not."""
    fam = family_of(task)
    if fam is None or fam.check_cell is None:
        return
    if is_cell(metric) or (fam.parse_cell is not None and fam.parse_cell(metric) is not None):  # "4096": a cell
        fam.check_cell(metric, where)


def directions(doc: dict, path: Path) -> dict[str, dict[str, bool]]:
    """lm-eval's own ``higher_is_better`` of results.json ({task: {metric: bool}}), checked against peeval's
    metric registry (``peeval.records.METRICS``): a metric the registry knows must point the same way
    (IngestError naming the file otherwise); returned: the directions of the metrics it does not know."""
    hib = doc.get("higher_is_better")
    if hib is None:
        return {}
    if not isinstance(hib, dict) or not all(isinstance(v, dict) for v in hib.values()):
        raise IngestError(f"{path}: 'higher_is_better' must map task names to {{metric: true/false}}")
    out: dict[str, dict[str, bool]] = {}
    for task, by_metric in hib.items():
        for metric, up in by_metric.items():
            where = f"{path}: higher_is_better[{task!r}][{metric!r}]"
            if not isinstance(up, bool):
                if up is None:  # lm-eval writes null for a metric of no direction (a group's own aggregate)
                    continue
                raise IngestError(f"{where}: {up!r} is not true or false")
            spec = metric_spec(metric)
            if spec is None:
                out.setdefault(task, {})[metric] = up
            elif spec.higher_is_better is not None and spec.higher_is_better != up:
                said = "higher" if spec.higher_is_better else "lower"
                raise IngestError(f"{where} is {str(up).lower()}, but peeval's metric registry (peeval.records."
                                  f"METRICS) says {metric_base(metric)} is {said}-is-better")  # fmt: skip
    return out
